import t from 'tap';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, isAbsolute, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/*
 * The repository stands on its own: a clone has no sibling folders and no one's home or work
 * directories, so no document may point there, and every relative link must land on a file (and a
 * heading) the clone has.
 */

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** Folders that hold no document of the repository's own: installed, built, generated or ignored. */
const SKIPPED = new Set(['node_modules', 'dist', '.git', '.tap', 'data', join('bench', 'out')]);

function markdownFiles(dir = ROOT): string[] {
  const found: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (SKIPPED.has(relative(ROOT, path))) continue;
    if (entry.isDirectory()) found.push(...markdownFiles(path));
    else if (entry.isFile() && entry.name.endsWith('.md')) found.push(path);
  }
  return found.sort();
}

/**
 * Directories that exist on one machine only: a document naming one is useless to anyone else. The
 * package's own tree, file:///opt/chaingate/ (the unit's Documentation=), is on every machine it is on.
 */
const MACHINE_PATH =
  /(?:^|[\s`'"(<[=:])((?:\/(?:work|home|tmp|Users|root|mnt|private|var\/folders)\/|file:\/\/(?!\/opt\/chaingate\/)|[A-Za-z]:\\)[^\s`'")>\]]*)/g;
/** A path that climbs out of the folder of the document naming it: `../x`, `../../x`. */
const CLIMBING_PATH = /(?:^|[\s`'"(<[=])((?:\.\.\/)+[^\s`'")>\]]*)/g;
const INLINE_LINK = /\]\(\s*<?([^()\s<>]+)>?(?:\s+"[^"]*")?\s*\)/g;
const REFERENCE_LINK = /^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+"[^"]*")?\s*$/;
const HEADING = /^\s{0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$/;
const FENCE = /^\s{0,3}(```|~~~)/;

/** The anchor GitHub gives a heading: its text lower-cased, without markup or punctuation, spaces as hyphens. */
function slugOf(heading: string): string {
  const text = heading.replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1').replace(/<[^>]+>/g, '');
  return text
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

/** Every anchor a Markdown text defines: its headings' slugs (repeats numbered as GitHub does) and HTML ids. */
function anchorsOf(text: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  let fenced = false;
  for (const line of text.split('\n')) {
    if (FENCE.test(line)) fenced = !fenced;
    if (fenced) continue;
    const heading = HEADING.exec(line);
    if (heading !== null) {
      const slug = slugOf(heading[1]!);
      const n = seen.get(slug) ?? 0;
      seen.set(slug, n + 1);
      anchors.add(n === 0 ? slug : `${slug}-${n}`);
    }
    for (const m of line.matchAll(/\s(?:id|name)="([^"]+)"/g)) anchors.add(m[1]!);
  }
  return anchors;
}

function insideRoot(path: string): boolean {
  const r = relative(ROOT, path);
  return r === '' || (!r.startsWith('..') && !isAbsolute(r));
}

/** What is wrong with the links and paths of one document at `file` (absolute) whose text is `text`. */
function problemsOf(file: string, text: string): string[] {
  const problems: string[] = [];
  const dir = dirname(file);
  const name = relative(ROOT, file);
  let fenced = false;
  text.split('\n').forEach((line, i) => {
    const where = `${name}:${i + 1}`;
    for (const m of line.matchAll(MACHINE_PATH)) problems.push(`${where}: a path of one machine: ${m[1]}`);
    for (const m of line.matchAll(CLIMBING_PATH)) {
      if (!insideRoot(resolve(dir, m[1]!))) problems.push(`${where}: a path outside the repository: ${m[1]}`);
    }
    if (FENCE.test(line)) fenced = !fenced;
    if (fenced) return;
    const prose = line.replace(/`[^`]*`/g, '``');
    const targets = [...prose.matchAll(INLINE_LINK)].map((m) => m[1]!);
    const reference = REFERENCE_LINK.exec(prose);
    if (reference !== null) targets.push(reference[1]!);
    for (const target of targets) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue;
      if (target.startsWith('/')) {
        problems.push(`${where}: an absolute link: ${target}`);
        continue;
      }
      const hash = target.indexOf('#');
      const path = decodeURIComponent(hash === -1 ? target : target.slice(0, hash));
      const anchor = hash === -1 ? '' : decodeURIComponent(target.slice(hash + 1));
      const linked = path === '' ? file : resolve(dir, path);
      if (!insideRoot(linked)) {
        problems.push(`${where}: a link outside the repository: ${target}`);
        continue;
      }
      if (!existsSync(linked)) {
        problems.push(`${where}: a link to a file that does not exist: ${target}`);
        continue;
      }
      if (anchor !== '' && linked.endsWith('.md') && !anchorsOf(readFileSync(linked, 'utf8')).has(anchor)) {
        problems.push(`${where}: a link to a heading that does not exist: ${target}`);
      }
    }
  });
  return problems;
}

t.test('the check itself: what it refuses and what it lets pass', async (t) => {
  const readme = join(ROOT, 'README.md');
  const refused: Array<[string, string, RegExp]> = [
    ['a sibling folder in a code span', 'specified in `../shared/spec/interface.md`;', /outside the repository/],
    ['a notes file on one machine', 'As in `/work/shared/notes/baselines.md`:', /one machine/],
    ['an absolute output path', 'JSON: /work/main/bench/out/latest.json', /one machine/],
    ['a home folder', 'see /home/dev/chaingate/notes.md', /one machine/],
    ['a temporary file', 'logs in (/tmp/chaingate-bench/run.log)', /one machine/],
    ['a link climbing out', '[spec](../shared/spec/interface.md)', /outside the repository/],
    ['an absolute link', '[api](/docs/api.md)', /absolute link/],
    ['a missing file', '[api](docs/nothing-here.md)', /does not exist/],
    ['a missing heading elsewhere', '[bench](bench/README.md#no-such-heading)', /heading that does not exist/],
    ['a missing heading here', '[x](#no-such-heading)', /heading that does not exist/],
    ['a reference definition', '[spec]: ../shared/spec/interface.md', /outside the repository/],
  ];
  for (const [what, line, expected] of refused) {
    const problems = problemsOf(readme, `# chaingate\n\n${line}\n`);
    t.ok(problems.length > 0 && problems.every((p) => expected.test(p)), what, { problems });
  }
  const passed: Array<[string, string]> = [
    ['an install path of the service', 'sudo cp config.example.yaml /etc/chaingate/config.yaml'],
    ['a Beacon path with a dot segment', 'refused: `/eth/v1/node/../../admin`'],
    ['a web link', '[Beacon API](https://ethereum.github.io/beacon-APIs/)'],
    ['a link to a file of the repository', '[example](config.example.yaml)'],
    ['a link to a heading of another document', '[method](bench/README.md#method)'],
    ['a link to a heading here', '[top](#chaingate)'],
  ];
  for (const [what, line] of passed) t.same(problemsOf(readme, `# chaingate\n\n${line}\n`), [], what);
  t.same(problemsOf(join(ROOT, 'docs', 'api.md'), '[README](../README.md#quick-start)\n'), [], 'docs/ may link up to the root');
  t.match(problemsOf(join(ROOT, 'docs', 'api.md'), 'see `../../shared/x.md`\n'), [/outside the repository/], 'but not beyond it');
  const fencedLink = problemsOf(readme, '```\n[x](docs/nothing-here.md)\n```\n');
  t.same(fencedLink, [], 'a link inside a code block is not a link');
  t.match(problemsOf(readme, '```\ncat /work/main/x\n```\n'), [/one machine/], 'a machine path inside a code block is still one');
  t.ok(anchorsOf('## Several upstreams: health, failover, filters, cache\n').has('several-upstreams-health-failover-filters-cache'));
  t.ok(anchorsOf('## `eth_getLogs` range\n## Errors\n## Errors\n').has('errors-1'), 'a repeated heading is numbered');
});

t.test('no document points outside the repository, and every relative link resolves', async (t) => {
  const files = markdownFiles();
  const names = files.map((f) => relative(ROOT, f));
  for (const expected of ['README.md', join('docs', 'api.md'), join('bench', 'README.md'), join('bench', 'RESULTS.md')]) {
    t.ok(names.includes(expected), `${expected} is checked`);
  }
  for (const file of files) t.same(problemsOf(file, readFileSync(file, 'utf8')), [], relative(ROOT, file));
});

t.test("config.example.yaml and the systemd unit name no machine's folders", async (t) => {
  for (const name of ['config.example.yaml', join('systemd', 'chaingate.service')]) {
    const text = readFileSync(join(ROOT, name), 'utf8');
    t.same(
      [...text.matchAll(MACHINE_PATH)].map((m) => m[1]),
      [],
      name,
    );
  }
});
