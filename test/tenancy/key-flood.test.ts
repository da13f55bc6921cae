/**
 * A flood of random API keys: each distinct key reaches SQLite at most once while it is remembered,
 * and memory stays bounded however many distinct keys arrive.
 */
import t from 'tap';
import { randomBytes } from 'node:crypto';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { createDirectory } from '../../src/tenancy/directory.js';
import { createOwnerAdmin } from '../../src/tenancy/owners.js';
import { tempStore } from '../store/temp-store.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

function heapAfterGc(): number {
  gc();
  gc();
  return process.memoryUsage().heapUsed;
}

t.test('100k random keys: one query per distinct key, bounded caches and heap', async (t) => {
  const store = tempStore(t);
  const admin = createOwnerAdmin(store);
  const { id: owner } = admin.createOwner('acme', 'free', 100);
  const BOUND = 50_000;
  const dir = createDirectory(store, { maxCached: BOUND, negativeCached: BOUND });
  const created = dir.createEndpoint(owner, 'mainnet', undefined, 10);
  if (created.kind === 'refused') return t.fail('refused');

  const stmt = store.sql.directory.endpointByKeyHash;
  const realGet = stmt.get.bind(stmt);
  let queries = 0;
  stmt.get = ((...args: Parameters<typeof realGet>) => {
    queries++;
    return realGet(...args);
  }) as typeof stmt.get;

  // 32 hex characters: the shape of an API key (hex is a subset of base62), made in bulk for speed.
  const flood = (n: number): string[] => {
    const hex = randomBytes(16 * n).toString('hex');
    return Array.from({ length: n }, (_, i) => hex.slice(32 * i, 32 * i + 32));
  };
  const first = flood(100_000);
  t.equal(first.filter((key) => dir.endpointByKey(key) !== null).length, 0, 'none is found');
  t.equal(queries, 100_000, 'each new key: one query');
  t.same(dir.cacheSizes(), { found: 0, missing: BOUND }, 'misses remembered up to the bound');

  // The most recent BOUND keys are remembered: asking again costs no query.
  for (const key of first.slice(-BOUND)) dir.endpointByKey(key);
  t.equal(queries, 100_000, 'repeated keys within the bound: no query');
  // Older ones were evicted: one query each, again at most once.
  for (const key of first.slice(0, 1000)) dir.endpointByKey(key);
  for (const key of first.slice(0, 1000)) dir.endpointByKey(key);
  t.equal(queries, 101_000);

  // The real key keeps working during the flood.
  t.equal(dir.endpointByKey(created.apiKey)?.endpointId, created.endpoint.id);

  // Memory: after a warm-up (V8's code, the LRU's arrays and Map tables reach their size), 500k more
  // distinct keys must leave the heap where it was. Remembering them all would take tens of MB.
  const floodOnce = (): void => {
    for (const key of flood(100_000)) dir.endpointByKey(key);
  };
  for (let round = 0; round < 3; round++) floodOnce();
  const heapBefore = heapAfterGc();
  const rssBefore = process.memoryUsage().rss;
  for (let round = 0; round < 5; round++) floodOnce();
  const heapAfter = heapAfterGc();
  const rssAfter = process.memoryUsage().rss;
  t.same(dir.cacheSizes(), { found: 1, missing: BOUND });
  t.ok(heapAfter - heapBefore < 8 * 1024 * 1024, `heap grew by ${((heapAfter - heapBefore) / 1048576).toFixed(1)} MB after 500k more keys`);
  t.ok(rssAfter - rssBefore < 64 * 1024 * 1024, `RSS grew by ${((rssAfter - rssBefore) / 1048576).toFixed(1)} MB after 500k more keys`);
  t.equal(queries, 901_001);
});
