/**
 * delivered-logs.ts on a fake clock: what a logs feed delivered is remembered per filter and block hash, within
 * `blocks` of the filter's newest; after the filter's feed went it stays `graceMs`, at most `maxFilters` such
 * filters (released first, out first); over `maxBytes` released filters go first, then the lowest blocks.
 */
import t from 'tap';
import {
  DeliveredLogs,
  type DeliveredLogsOptions,
  deliveredSince,
  openFilter,
  releaseFilter,
  rememberLog,
} from '../../src/fanout/delivered-logs.js';

const hex = (n: number): string => `0x${n.toString(16)}`;
const log = (n: number, i = 0, branch = 'a', removed = false): Record<string, unknown> => ({
  address: '0xec40e',
  blockNumber: hex(n),
  blockHash: `0x${branch}${n}`,
  logIndex: hex(i),
  removed,
});

function memory(opts: Partial<DeliveredLogsOptions> = {}) {
  let now = 0;
  const m = new DeliveredLogs({ blocks: 4, graceMs: 1_000, maxFilters: 2, maxBytes: 1 << 20, now: () => now, ...opts });
  const take = (f: ReturnType<typeof openFilter>, l: Record<string, unknown>): void => rememberLog(m, f, l, JSON.stringify(l));
  return { m, take, advance: (ms: number) => (now += ms) };
}

const blocksOf = (m: DeliveredLogs, key: string, from = 0): string[] =>
  deliveredSince(m, key, from).map((b) => `${b.number}:${b.hash}:${b.logs.length}`);

t.test('per block hash, by number, removed ones not kept, within `blocks` of the newest', async (t) => {
  const { m, take } = memory();
  const f = openFilter(m, 'logs:a');
  take(f, log(10, 0));
  take(f, log(10, 1));
  take(f, log(11, 0));
  take(f, log(11, 0, 'a', true)); // a live retraction: the client that was away never got it
  take(f, log(11, 0, 'b')); // the new branch's block 11
  t.same(blocksOf(m, 'logs:a'), ['10:0xa10:2', '11:0xa11:1', '11:0xb11:1']);
  t.same(blocksOf(m, 'logs:a', 11), ['11:0xa11:1', '11:0xb11:1'], 'from a block on');
  t.same(JSON.parse(deliveredSince(m, 'logs:a', 10)[0]!.logs[1]!), log(10, 1), 'the JSON as delivered');
  take(f, log(14, 0));
  t.same(blocksOf(m, 'logs:a'), ['11:0xa11:1', '11:0xb11:1', '14:0xa14:1'], 'block 10 is 4 below 14: gone');
  take(f, log(9, 0));
  t.same(blocksOf(m, 'logs:a'), ['9:0xa9:1'], 'a block far below: a new chain, the old one forgotten');
  t.same(blocksOf(m, 'logs:other'), [], 'another filter: nothing');
});

t.test('a released filter stays for the grace, and comes back to its next feed', async (t) => {
  const { m, take, advance } = memory();
  const f = openFilter(m, 'logs:a');
  take(f, log(10));
  releaseFilter(m, f);
  advance(999);
  t.same(blocksOf(m, 'logs:a'), ['10:0xa10:1'], 'within the grace');
  const again = openFilter(m, 'logs:a');
  t.equal(again, f, 'a new feed of the filter writes to the same memory');
  take(again, log(11));
  advance(5_000);
  t.same(blocksOf(m, 'logs:a'), ['10:0xa10:1', '11:0xa11:1'], 'held by a feed: no grace runs');
  releaseFilter(m, again);
  advance(1_000);
  t.same(blocksOf(m, 'logs:a'), [], 'past the grace: gone');
  take(again, log(12));
  t.equal(m.bytes, 0, 'a dropped memory takes nothing more');
});

t.test('two feeds of one key (a dropped one and its successor): released when both went', async (t) => {
  const { m, take, advance } = memory();
  const old = openFilter(m, 'logs:a');
  const next = openFilter(m, 'logs:a');
  take(next, log(10));
  releaseFilter(m, old);
  advance(10_000);
  t.same(blocksOf(m, 'logs:a'), ['10:0xa10:1'], 'still held');
  releaseFilter(m, next);
  advance(1_000);
  t.same(blocksOf(m, 'logs:a'), []);
});

t.test('at most maxFilters released filters: the one released first goes first', async (t) => {
  const { m, take, advance } = memory({ maxFilters: 2 });
  const held = openFilter(m, 'logs:held');
  take(held, log(10));
  for (const key of ['logs:1', 'logs:2', 'logs:3']) {
    const f = openFilter(m, key);
    take(f, log(10));
    releaseFilter(m, f);
    advance(10);
  }
  t.same(blocksOf(m, 'logs:1'), [], 'the first released: out');
  t.same(blocksOf(m, 'logs:2'), ['10:0xa10:1']);
  t.same(blocksOf(m, 'logs:3'), ['10:0xa10:1']);
  t.same(blocksOf(m, 'logs:held'), ['10:0xa10:1'], 'a filter held by its feed is no released one');
});

t.test('over maxBytes: released filters first, oldest first, then the lowest blocks', async (t) => {
  const size = JSON.stringify(log(10)).length;
  const { m, take } = memory({ maxBytes: size * 4, maxFilters: 10 });
  const released = openFilter(m, 'logs:r');
  take(released, log(10));
  releaseFilter(m, released);
  const a = openFilter(m, 'logs:a');
  const b = openFilter(m, 'logs:b');
  take(a, log(11));
  take(b, log(12));
  take(a, log(13));
  t.same(blocksOf(m, 'logs:r'), ['10:0xa10:1'], 'at the bound: all kept');
  take(b, log(14));
  t.same(blocksOf(m, 'logs:r'), [], 'over it: the released filter first');
  t.same(blocksOf(m, 'logs:a'), ['13:0xa13:1'], 'then the lowest block of any filter, down to 7/8 of the bound');
  t.same(blocksOf(m, 'logs:b'), ['12:0xa12:1', '14:0xa14:1']);
  take(b, log(15));
  t.same(blocksOf(m, 'logs:b'), ['12:0xa12:1', '14:0xa14:1', '15:0xa15:1'], 'at the bound again: nothing dropped');
  take(a, log(16));
  t.same(blocksOf(m, 'logs:a'), ['16:0xa16:1'], 'over it: the lowest blocks, whichever filter holds them');
  t.same(blocksOf(m, 'logs:b'), ['14:0xa14:1', '15:0xa15:1']);
  t.ok(m.bytes <= size * 4, 'within the bound');
});

t.test('maxBytes 0: nothing is remembered', async (t) => {
  const { m, take } = memory({ maxBytes: 0 });
  const f = openFilter(m, 'logs:a');
  take(f, log(10));
  take(f, log(11));
  t.same(blocksOf(m, 'logs:a'), []);
  t.equal(m.bytes, 0);
});
