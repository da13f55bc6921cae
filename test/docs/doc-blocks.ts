/**
 * The fenced code blocks of a document, for the tests that run what a guide prints: a guide's commands
 * and configs are checked as written, with only addresses, ports and file paths swapped for the test's.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));

export interface DocBlock {
  /** The info string after the opening fence (`nginx`, `yaml`, ...), '' when none. */
  lang: string;
  text: string;
  /** 1-based line of the opening fence, for messages. */
  line: number;
}

/** Every fenced block of `doc` (a path from the repository's root). */
export function blocksOf(doc: string): DocBlock[] {
  const blocks: DocBlock[] = [];
  let open: { lang: string; line: number; lines: string[] } | null = null;
  readFileSync(join(ROOT, doc), 'utf8')
    .split('\n')
    .forEach((line, i) => {
      const fence = /^```(\S*)\s*$/.exec(line);
      if (open === null) {
        if (fence !== null) open = { lang: fence[1]!, line: i + 1, lines: [] };
      } else if (fence !== null && fence[1] === '') {
        blocks.push({ lang: open.lang, text: `${open.lines.join('\n')}\n`, line: open.line });
        open = null;
      } else open.lines.push(line);
    });
  return blocks;
}

/** The one block of `doc` in `lang` whose text holds `marker`: a test names what it checks, and fails when it is gone. */
export function blockOf(doc: string, lang: string, marker: string): string {
  const found = blocksOf(doc).filter((b) => b.lang === lang && b.text.includes(marker));
  if (found.length !== 1) throw new Error(`${doc}: ${found.length} \`\`\`${lang} blocks hold "${marker}", expected one`);
  return found[0]!.text;
}

/** `text` with each `[from, to]` replaced everywhere, failing when one is not there (the guide changed). */
export function swapped(text: string, swaps: Array<[string | RegExp, string]>): string {
  let out = text;
  for (const [from, to] of swaps) {
    const hit = typeof from === 'string' ? out.includes(from) : from.test(out);
    if (!hit) throw new Error(`"${String(from)}" is not in the block any more: update the test with the guide`);
    out = typeof from === 'string' ? out.split(from).join(to) : out.replace(new RegExp(from.source, `${from.flags.replace('g', '')}g`), to);
  }
  return out;
}
