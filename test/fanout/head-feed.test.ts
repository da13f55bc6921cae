/**
 * The newHeads feed's rules, step by step, on real anvil blocks: duplicates dropped, gaps filled
 * from the node's HTTP before the head that showed them, reorgs sent again, numbers kept after a
 * switch to another node, the header shape of fetched blocks.
 */
import t from 'tap';
import type { NodeAccess } from '../../src/fanout/feeds.js';
import { createHeadFeed } from '../../src/fanout/head-feed.js';
import { anvilFor, blockAt, call, headerOf, mine } from './feed-harness.js';

function access(node: number, url: string, methods: string[] = []): NodeAccess {
  return {
    node,
    call: (method, params) => {
      methods.push(`${method}${params.length > 0 ? ` ${String(params[0])}` : ''}`);
      return call(url, method, params);
    },
    sleep: () => Promise.resolve(),
  };
}

function collector() {
  const out: Array<Record<string, unknown>> = [];
  return { out, deliver: (r: unknown) => void out.push(r as Record<string, unknown>), numbers: () => out.map((h) => Number(h.number)) };
}

const logLines: string[] = [];
const log = (level: string, msg: string) => void logLines.push(`${level} ${msg}`);

t.test('the same head again is dropped; a gap is filled from HTTP before the head that showed it', async (t) => {
  const node = await anvilFor(t);
  await mine(node.url, 5);
  const methods: string[] = [];
  const via = access(0, node.url, methods);
  const feed = createHeadFeed({ maxBackfillBlocks: 1024, log });
  const { out, deliver, numbers } = collector();
  await feed.live(await blockAt(node.url, 1), via, deliver);
  await feed.live(await blockAt(node.url, 1), via, deliver);
  t.same(numbers(), [1], 'the repeat is dropped');
  await feed.live(await blockAt(node.url, 4), via, deliver);
  t.same(numbers(), [1, 2, 3, 4], 'the missing numbers come first, in order');
  t.same(methods, ['eth_getBlockByNumber 0x2', 'eth_getBlockByNumber 0x3'], 'fetched by number, only the missing ones');
  for (const head of out) {
    t.same(head, headerOf(await blockAt(node.url, Number(head.number))), `head ${Number(head.number)} is the block's header`);
    t.notOk('transactions' in head || 'uncles' in head || 'size' in head || 'totalDifficulty' in head);
  }
  t.same(feed.head(), { number: 4, hash: out[3]!.hash });
});

t.test('a gap wider than maxBackfillBlocks keeps only the newest, and says so', async (t) => {
  const node = await anvilFor(t);
  await mine(node.url, 6);
  const feed = createHeadFeed({ maxBackfillBlocks: 2, log });
  const { deliver, numbers } = collector();
  const via = access(0, node.url);
  await feed.live(await blockAt(node.url, 1), via, deliver);
  await feed.live(await blockAt(node.url, 6), via, deliver);
  t.same(numbers(), [1, 4, 5, 6]);
  t.ok(logLines.some((l) => l.startsWith('warn head gap wider than the backfill limit')));
});

t.test('a block the node\'s HTTP does not have yet is asked for again, then the step fails', async (t) => {
  const node = await anvilFor(t);
  await mine(node.url, 2);
  const methods: string[] = [];
  const feed = createHeadFeed({ maxBackfillBlocks: 1024, log });
  const { deliver, numbers } = collector();
  const via = access(0, node.url, methods);
  await feed.live(await blockAt(node.url, 1), via, deliver);
  // A head announced over the WebSocket before the HTTP side has block 3: a fault anvil cannot show.
  const ahead = { ...(await blockAt(node.url, 2)), number: '0x4', hash: '0x' + '44'.repeat(32) };
  await t.rejects(feed.live(ahead, via, deliver) as Promise<void>, /block 3 is not available/);
  t.equal(methods.filter((m) => m === 'eth_getBlockByNumber 0x3').length, 4, 'asked four times');
  t.same(numbers(), [1], 'nothing past the hole is sent');
});

t.test('after a switch, numbers already sent stay sent; the new node\'s own reorg passes; resume fills from it', async (t) => {
  const a = await anvilFor(t);
  const b = await anvilFor(t);
  await mine(a.url, 3);
  await mine(b.url, 2);
  const snapshot = await call(b.url, 'evm_snapshot');
  await mine(b.url);
  const feed = createHeadFeed({ maxBackfillBlocks: 1024, log });
  const { out, deliver, numbers } = collector();
  const viaA = access(0, a.url);
  const viaB = access(1, b.url);
  for (const n of [1, 2, 3]) await feed.live(await blockAt(a.url, n), viaA, deliver);
  await feed.live(await blockAt(b.url, 3), viaB, deliver);
  t.same(numbers(), [1, 2, 3], 'b\'s block 3 is not sent: 3 was sent from a');
  await call(b.url, 'evm_revert', [snapshot]);
  await mine(b.url);
  const replaced = await blockAt(b.url, 3);
  await feed.live(replaced, viaB, deliver);
  t.same(numbers(), [1, 2, 3, 3], 'b replacing its own block 3 is a reorg');
  t.equal(out[3]!.hash, replaced.hash);
  await mine(b.url, 3);
  await feed.resume(viaB, deliver);
  t.same(numbers(), [1, 2, 3, 3, 4, 5, 6], 'resume sends what b has past the last head');
  t.equal(out[6]!.hash, (await blockAt(b.url, 6)).hash);
});

t.test('back on the same node, heads a reorg replaced while away are sent again', async (t) => {
  const node = await anvilFor(t);
  await mine(node.url);
  const snapshot = await call(node.url, 'evm_snapshot');
  await mine(node.url, 2);
  const methods: string[] = [];
  const via = access(0, node.url, methods);
  const feed = createHeadFeed({ maxBackfillBlocks: 1024, log });
  const { out, deliver, numbers } = collector();
  for (const n of [1, 2, 3]) await feed.live(await blockAt(node.url, n), via, deliver);
  await call(node.url, 'evm_revert', [snapshot]);
  await mine(node.url, 3);
  methods.length = 0;
  await feed.resume(via, deliver);
  t.same(numbers(), [1, 2, 3, 2, 3, 4], 'from the fork point on');
  t.same(out.slice(3).map((h) => h.hash), await Promise.all([2, 3, 4].map(async (n) => (await blockAt(node.url, n)).hash)));
  t.same(methods.slice(0, 4), ['eth_blockNumber', 'eth_getBlockByNumber 0x3', 'eth_getBlockByNumber 0x2', 'eth_getBlockByNumber 0x1']);

  // Nothing changed while away: one look at the last head, nothing sent.
  const before = out.length;
  methods.length = 0;
  await feed.resume(via, deliver);
  t.equal(out.length, before);
  t.same(methods, ['eth_blockNumber', 'eth_getBlockByNumber 0x4']);
});
