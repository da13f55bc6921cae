import { UNPRINTABLE } from '../tenancy/names.js';

const ESCAPED = new RegExp(`\\\\|${UNPRINTABLE.source}`, 'gu');
const SHORT_ESCAPES: Readonly<Record<string, string>> = { '\\': '\\\\', '\n': '\\n', '\r': '\\r', '\t': '\\t' };

/**
 * `text` with every UNPRINTABLE character written as an escape (`\n`, `\x1b`, `\u202e`) and `\` as
 * `\\`, so a stored value (a name from before names were checked, say) can neither start a new row
 * nor send the terminal an escape sequence, and an escape is never confused with the same characters typed.
 */
export function escapeCell(text: string): string {
  return text.replace(ESCAPED, (c) => {
    const short = SHORT_ESCAPES[c];
    if (short !== undefined) return short;
    const cp = c.codePointAt(0)!;
    if (cp <= 0xff) return `\\x${cp.toString(16).padStart(2, '0')}`;
    return cp <= 0xffff ? `\\u${cp.toString(16).padStart(4, '0')}` : `\\u{${cp.toString(16)}}`;
  });
}

/**
 * Plain-text tables for the command line: a header row, columns padded to their widest cell,
 * two spaces apart, no trailing spaces (so `awk` and `column` read them as they are). Every cell goes
 * through `escapeCell`: one row of data is always one line.
 */
export function formatTable(header: readonly string[], rows: ReadonlyArray<readonly string[]>): string {
  const cells = rows.map((r) => r.map(escapeCell));
  const widths = header.map((h, i) => Math.max(h.length, ...cells.map((r) => (r[i] ?? '').length)));
  const line = (row: readonly string[]): string =>
    row
      .map((c, i) => (i === row.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd();
  return [line(header), ...cells.map(line)].join('\n') + '\n';
}

/** Unix seconds as `YYYY-MM-DD HH:MM:SSZ` (UTC), the form an operator reads and sorts. */
export function formatTime(unixSeconds: number): string {
  return new Date(unixSeconds * 1000)
    .toISOString()
    .replace('T', ' ')
    .replace(/\.\d{3}Z$/, 'Z');
}
