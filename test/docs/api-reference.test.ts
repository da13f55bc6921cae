import t from 'tap';
import { readFileSync } from 'node:fs';
import { beaconCost, DEFAULT_BEACON_RU } from '../../src/beacon/costs.js';
import { BEACON_ROUTES } from '../../src/beacon/paths.js';
import { BEACON_TOPICS } from '../../src/beacon/topics.js';
import { DEFAULTS } from '../../src/config/defaults.js';
import { ERRORS } from '../../src/errors.js';
import { ALLOWED_METHODS, DEFAULT_RU, HEAVY_METHODS, methodRow } from '../../src/jsonrpc/methods.js';
import { ROUTE_VERBS } from '../../src/server/management.js';

/*
 * docs/api.md is written by hand; these checks read the catalogues from the code, so a method, a
 * Beacon path or topic, an error or a management route added, removed or repriced in src/ without the
 * reference following fails here.
 */

const DOC = readFileSync(new URL('../../docs/api.md', import.meta.url), 'utf8');

interface Table {
  header: string[];
  rows: string[][];
}

function cellsOf(line: string): string[] {
  // A `\|` inside a cell is text, not a column border.
  return line
    .trim()
    .replace(/^\|/, '')
    .replace(/\|$/, '')
    .split(/(?<!\\)\|/)
    .map((c) => c.trim());
}

/** Every table of the document: its header cells and its rows' cells. */
function tablesOf(text: string): Table[] {
  const tables: Table[] = [];
  const lines = text.split('\n');
  for (let i = 0; i + 1 < lines.length; i++) {
    if (!lines[i]!.startsWith('|') || !/^\|[\s|:-]+\|$/.test(lines[i + 1]!.trim())) continue;
    const header = cellsOf(lines[i]!);
    const rows: string[][] = [];
    let j = i + 2;
    for (; j < lines.length && lines[j]!.startsWith('|'); j++) rows.push(cellsOf(lines[j]!));
    tables.push({ header, rows });
    i = j - 1;
  }
  return tables;
}

const TABLES = tablesOf(DOC);

/** The one table whose header has all of `columns`, as records keyed by column name. */
function tableWith(...columns: string[]): Array<Record<string, string>> {
  const found = TABLES.filter((table) => columns.every((c) => table.header.includes(c)));
  if (found.length !== 1) throw new Error(`docs/api.md: expected one table with columns ${columns.join(', ')}, found ${found.length}`);
  const { header, rows } = found[0]!;
  return rows.map((cells) => Object.fromEntries(header.map((name, i) => [name, cells[i] ?? ''])));
}

const code = (s: string): string => `\`${s}\``;

t.test('the reading of tables', async (t) => {
  t.same(tablesOf('text\n\n| a | b |\n|---|---|\n| `x` | 1 \\| 2 |\n| y | |\n\nmore\n'), [
    {
      header: ['a', 'b'],
      rows: [
        ['`x`', '1 \\| 2'],
        ['y', ''],
      ],
    },
  ]);
});

t.test('every allowlisted JSON-RPC method has its row, with its built-in RU', async (t) => {
  const rows = tableWith('method', 'parameters', 'RU', 'cached');
  for (const method of ALLOWED_METHODS) {
    const row = rows.find((r) => r.method === code(method));
    if (!t.ok(row, `${method} is in the method table`)) continue;
    t.equal(row!.RU, String(DEFAULT_RU[method] ?? DEFAULTS.ru.default), `${method} costs what the code charges`);
    t.match(row!.cached, /^(?:final|always|no)$/, `${method} says whether it is cached`);
    const cache = methodRow(method)!.cache;
    t.equal(row!.cached, cache === null ? 'no' : cache === 'chain' ? 'always' : 'final', `${method} is cached as its row says`);
    t.equal(/^heavy\b/.test(row!.notes ?? ''), HEAVY_METHODS.includes(method), `${method}: its notes say heavy exactly when it is`);
  }
  for (const row of rows) t.ok(ALLOWED_METHODS.includes(row.method!.replaceAll('`', '')), `${row.method} is served`);
});

t.test('every Beacon path template has its row, with its verbs and built-in RU', async (t) => {
  const rows = tableWith('verbs', 'path', 'RU', 'priced by');
  const templates = new Set(BEACON_ROUTES.map((r) => r.template));
  for (const template of templates) {
    const row = rows.find((r) => r.path === code(template));
    if (!t.ok(row, `${template} is in the Beacon path table`)) continue;
    const verbs = row!.verbs!.split(/,\s*/);
    for (const route of BEACON_ROUTES.filter((r) => r.template === template)) {
      t.ok(verbs.includes(route.method), `${route.method} ${template} is listed`);
    }
    t.equal(Number(row!.RU), beaconCost(template, {}, DEFAULTS.ru.beacon_default), `${template} costs what the code charges`);
    t.equal(
      row!['priced by'],
      Object.hasOwn(DEFAULT_BEACON_RU, template) ? 'built-in' : 'default',
      `${template}: where its price comes from`,
    );
  }
  for (const row of rows) t.ok(templates.has(row.path!.replaceAll('`', '')), `${row.path} is served`);
});

t.test('every Beacon event topic is named', async (t) => {
  for (const topic of BEACON_TOPICS) t.ok(DOC.includes(code(topic)), topic);
});

t.test('every row of the error table, with its HTTP status, JSON-RPC code and message', async (t) => {
  const rows = tableWith('code', 'HTTP', 'JSON-RPC', 'default message', 'when');
  for (const [name, error] of Object.entries(ERRORS)) {
    const row = rows.find((r) => r.code === code(name));
    if (!t.ok(row, `${name} is in the error table`)) continue;
    t.equal(row!.HTTP, String(error.http), `${name}: HTTP status`);
    t.equal(row!['JSON-RPC'], String(error.rpc), `${name}: JSON-RPC code`);
    t.equal(row!['default message'], error.message, `${name}: message`);
    t.not(row!.when, '', `${name}: when it happens`);
  }
  for (const row of rows) t.ok(Object.hasOwn(ERRORS, row.code!.replaceAll('`', '')), `${row.code} is an error of the code`);
});

t.test('every management route and verb has its row', async (t) => {
  const rows = tableWith('operation', 'verb', 'path');
  for (const [path, verbs] of ROUTE_VERBS) {
    for (const verb of verbs.split(', ')) {
      t.ok(
        rows.some((r) => r.path === code(path) && r.verb === verb),
        `${verb} ${path}`,
      );
    }
  }
  for (const row of rows) {
    const path = row.path!.replaceAll('`', '');
    t.ok(ROUTE_VERBS.get(path)?.split(', ').includes(row.verb!), `${row.verb} ${path} is served`);
  }
});

t.test("the gateway's own paths are named", async (t) => {
  for (const path of ['/v1/rpc/public', '/v1/rpc/<API_KEY>', '/healthz', '/readyz', '/eth/v1/events']) {
    t.ok(DOC.includes(code(path)), path);
  }
});

t.test('the limits table gives the default of every connection, body, batch and filter limit', async (t) => {
  const rows = tableWith('limit', 'config key', 'default');
  const limits: Array<[string, unknown]> = [
    ['server.max_body_bytes', DEFAULTS.server.max_body_bytes],
    ['server.max_batch', DEFAULTS.server.max_batch],
    ['cache.max_bytes', DEFAULTS.cache.max_bytes],
    ['chains.<slug>.timeout_s', DEFAULTS.chain.timeout_s],
    ['chains.<slug>.max_logs_block_range', DEFAULTS.chain.max_logs_block_range],
    ['chains.<slug>.max_logs_answer_bytes', DEFAULTS.chain.max_logs_answer_bytes],
  ];
  for (const section of ['public', 'websocket', 'sse', 'filters'] as const) {
    // Numbers only: public.methods (the keyless path's method policy) is a list, documented with the policy.
    for (const [key, value] of Object.entries(DEFAULTS[section])) if (typeof value === 'number') limits.push([`${section}.${key}`, value]);
  }
  for (const [key, value] of limits) {
    const row = rows.find((r) => r['config key'] === code(key));
    if (t.ok(row, `${key} is in the limits table`)) t.equal(row!.default, String(value), `${key} defaults to ${String(value)}`);
  }
});
