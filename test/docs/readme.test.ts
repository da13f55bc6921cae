import t from 'tap';
import { readdirSync, readFileSync } from 'node:fs';

/*
 * The README is what a newcomer reads first: what chaingate is, how to start it, a first call, the
 * commands and the service, and a map of docs/ for the rest. These checks keep it that short, keep the
 * map whole as documents are added, and keep bench/RESULTS.md opening on the figures that hold today, its
 * history in a file per day under bench/history/.
 */

const ROOT = new URL('../../', import.meta.url);
const read = (path: string): string => readFileSync(new URL(path, ROOT), 'utf8');

/** The text of the `## title` section of a Markdown document, up to the next `## ` heading. */
function sectionOf(text: string, title: string): string | undefined {
  const start = text.indexOf(`\n## ${title}\n`);
  if (start === -1) return undefined;
  const end = text.indexOf('\n## ', start + 1);
  return text.slice(start, end === -1 ? undefined : end);
}

/** The `## ` headings of a document, outside code blocks, in order. */
function h2Of(text: string): string[] {
  let fenced = false;
  const headings: string[] = [];
  for (const line of text.split('\n')) {
    if (/^\s{0,3}(```|~~~)/.test(line)) fenced = !fenced;
    if (!fenced && line.startsWith('## ')) headings.push(line.slice(3).trim());
  }
  return headings;
}

const README = read('README.md');
const RESULTS = read('bench/RESULTS.md');

t.test('the README reads in five minutes: about 200 lines', async (t) => {
  const lines = README.trimEnd().split('\n').length;
  t.ok(lines <= 220, `README.md has ${lines} lines; topic text belongs in docs/`);
});

t.test('the README keeps what a newcomer needs first', async (t) => {
  for (const title of ['Quick start', 'A first call', 'Commands', 'Run it as a service', 'Documentation']) {
    t.ok(sectionOf(README, title), `a "${title}" section`);
  }
  t.match(sectionOf(README, 'Quick start') ?? '', /npm ci && npm start/, 'the two commands');
  t.match(sectionOf(README, 'A first call') ?? '', /curl -s -X POST/, 'a call to make');
  t.match(sectionOf(README, 'Run it as a service') ?? '', /systemctl enable --now chaingate/, 'the install steps');
});

t.test("the README's Documentation map links every document of docs/, each once", async (t) => {
  const map = sectionOf(README, 'Documentation') ?? '';
  const linked = [...map.matchAll(/\]\((docs\/[^)#\s]+\.md)\)/g)].map((m) => m[1]!);
  const documents = readdirSync(new URL('docs/', ROOT))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`);
  t.ok(documents.length > 0, 'docs/ holds documents');
  t.same([...new Set(linked)].sort(), documents.sort(), 'every document and nothing else');
  t.equal(linked.length, new Set(linked).size, 'each named once');
});

t.test('bench/RESULTS.md opens with the current figures and the command that makes them', async (t) => {
  const headings = h2Of(RESULTS);
  t.equal(headings[0], 'Current figures', 'the first section');
  const current = sectionOf(RESULTS, 'Current figures') ?? '';
  // The command as run, its knobs before it (BENCH_BASELINE=..., BENCH_SECTIONS=...).
  t.match(current, /```sh\n(?:BENCH_\w+=\S+ )*BENCH_ROUNDS=\d+ npm run bench\b/, 'the command, as a block to copy');
  t.match(current, /\b20\d\d-\d\d-\d\d\b/, 'the date of the run');
  t.match(current, /\bcommit [0-9a-f]{7,40}\b/, 'the commit it measured');
  t.match(current, /Machine: /, 'the machine');
  // Every section the bench runs today has its tables there, under the title the bench prints.
  const titles = readdirSync(new URL('bench/', ROOT))
    .filter((f) => f.endsWith('.mjs'))
    .flatMap((f) => [...read(`bench/${f}`).matchAll(/^export const title = '([^']+)';$/gm)].map((m) => m[1]!));
  t.ok(titles.length >= 3, "the bench's section titles are found");
  for (const title of titles) {
    const at = current.indexOf(`\n### ${title}\n`);
    const next = current.indexOf('\n### ', at + 1);
    const tables = at === -1 ? '' : current.slice(at, next === -1 ? undefined : next);
    t.match(tables, /\n\| target \|[^\n]*\n\|---[\s\S]*\n\| check \| value \| target \| result \|/, `${title}: its run and check tables`);
  }
});

t.test('bench/RESULTS.md stays short: the current figures, and its history in a file per day', async (t) => {
  const lines = RESULTS.trimEnd().split('\n').length;
  t.ok(lines <= 400, `bench/RESULTS.md has ${lines} lines; a run that is no longer current moves to bench/history/`);
  t.same(
    h2Of(RESULTS).filter((h) => /^\d{4}-\d\d-\d\d/.test(h)),
    [],
    'no dated run left in it',
  );
  const history = sectionOf(RESULTS, 'History') ?? '';
  const linked = [...history.matchAll(/\]\(history\/(\d{4}-\d\d-\d\d)\.md\)/g)].map((m) => m[1]!);
  const files = readdirSync(new URL('bench/history/', ROOT))
    .filter((f) => f.endsWith('.md'))
    .map((f) => f.slice(0, -3));
  t.ok(files.length > 1, 'dated files are kept');
  t.same([...linked].sort(), [...files].sort(), 'its History lists every file of bench/history/, and nothing else');
  t.same(linked, [...linked].sort().reverse(), 'newest day first');
});

t.test('each file of bench/history/ holds the runs of its day', async (t) => {
  for (const file of readdirSync(new URL('bench/history/', ROOT)).filter((f) => f.endsWith('.md'))) {
    const day = file.slice(0, -3);
    t.match(day, /^\d{4}-\d\d-\d\d$/, `${file} is named after its day`);
    const text = read(`bench/history/${file}`);
    t.match(text, /\]\(\.\.\/RESULTS\.md\)/, `${file} says what it is and links the current figures`);
    const runs = h2Of(text);
    t.ok(runs.length > 0, `${file} holds runs`);
    t.same(
      runs.filter((h) => !h.startsWith(day)),
      [],
      `${file}: every run is dated ${day}`,
    );
    const times = runs.map((h) => h.slice(10));
    t.equal(times.length, new Set(times).size, `${file}: each run once`);
  }
});
