/**
 * The newHeads feed's rules, step by step, on real anvil blocks: duplicates dropped, gaps filled
 * from the node's HTTP before the head that showed them, reorgs sent again, numbers kept after a
 * switch to another node, the header shape of fetched blocks; a node reset to a fresh chain (anvil_reset)
 * deeper than the feed remembers is followed only when the chain's health says every node agrees.
 */
import t, { type Test } from 'tap';
import type { NodeAccess } from '../../src/fanout/feeds.js';
import { createHeadFeed } from '../../src/fanout/head-feed.js';
import { createChainHealth } from '../../src/upstreams/selection.js';
import { minedReceipt } from '../support/dev-chain.js';
import { anvilFor, blockAt, call, DEV_ADDRESS, headerOf, mine } from './feed-harness.js';

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
/** The fields of each line in logLines. */
const logFields: Array<Record<string, unknown>> = [];
const log = (level: string, msg: string, fields?: Record<string, unknown>) => {
  logLines.push(`${level} ${msg}`);
  logFields.push(fields ?? {});
};

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
  t.same(
    methods,
    ['eth_getBlockByNumber 0x1', 'eth_getBlockByNumber 0x2', 'eth_getBlockByNumber 0x3'],
    'one look at the last head sent (still on the node), then the missing ones by number',
  );
  for (const head of out) {
    t.same(head, headerOf(await blockAt(node.url, Number(head.number))), `head ${Number(head.number)} is the block's header`);
    t.notOk('transactions' in head || 'uncles' in head || 'size' in head || 'totalDifficulty' in head);
  }
  t.same(feed.head(), { number: 4, hash: out[3]!.hash });
});

t.test("a gap whose last head sent the node's HTTP does not have yet is no reorg: nothing is sent twice", async (t) => {
  const node = await anvilFor(t);
  await mine(node.url, 4);
  const real = access(0, node.url);
  let missing = 1;
  // The node's HTTP lags its WebSocket once: block 2 is not there yet when the gap is checked.
  const via: NodeAccess = {
    ...real,
    call: (method, params) =>
      method === 'eth_getBlockByNumber' && params[0] === '0x2' && missing-- > 0 ? Promise.resolve(null) : real.call(method, params),
  };
  const feed = createHeadFeed({ maxBackfillBlocks: 1024, log });
  const { deliver, numbers } = collector();
  for (const n of [1, 2, 4]) await feed.live(await blockAt(node.url, n), via, deliver);
  t.same(numbers(), [1, 2, 3, 4], 'every number once');
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

t.test("a block the node's HTTP does not have yet is asked for again, then the step fails", async (t) => {
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

t.test("after a switch, numbers already sent stay sent; the new node's own reorg passes; resume fills from it", async (t) => {
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
  t.same(numbers(), [1, 2, 3], "b's block 3 is not sent: 3 was sent from a");
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

/** A feed that has sent heads 1 to 3 of a node, and the node reverted to block 1, for a new branch to be mined. */
async function sentThreeThenReverted(t: Test) {
  const node = await anvilFor(t);
  await mine(node.url);
  const snapshot = await call(node.url, 'evm_snapshot');
  await mine(node.url, 2);
  const methods: string[] = [];
  const via = access(0, node.url, methods);
  const feed = createHeadFeed({ maxBackfillBlocks: 1024, log });
  const heads = collector();
  for (const n of [1, 2, 3]) await feed.live(await blockAt(node.url, n), via, heads.deliver);
  await call(node.url, 'evm_revert', [snapshot]);
  return { node, methods, via, feed, ...heads };
}

t.test('back on the same node, heads a reorg replaced while away are sent again', async (t) => {
  const { node, methods, via, feed, out, deliver, numbers } = await sentThreeThenReverted(t);
  await mine(node.url, 3);
  methods.length = 0;
  await feed.resume(via, deliver);
  t.same(numbers(), [1, 2, 3, 2, 3, 4], 'from the fork point on');
  t.same(
    out.slice(3).map((h) => h.hash),
    await Promise.all([2, 3, 4].map(async (n) => (await blockAt(node.url, n)).hash)),
  );
  t.same(methods.slice(0, 4), ['eth_blockNumber', 'eth_getBlockByNumber 0x3', 'eth_getBlockByNumber 0x2', 'eth_getBlockByNumber 0x1']);

  // Nothing changed while away: one look at the last head, nothing sent.
  const before = out.length;
  methods.length = 0;
  await feed.resume(via, deliver);
  t.equal(out.length, before);
  t.same(methods, ['eth_blockNumber', 'eth_getBlockByNumber 0x4']);
});

t.test('a node that sends only its new tip after a reorg: the heads it replaced are sent again first', async (t) => {
  const { node, methods, via, feed, out, deliver, numbers } = await sentThreeThenReverted(t);
  const old3 = out[2]!.hash;
  // The new branch differs from the old: its block 2 holds a transaction.
  const hash = await call(node.url, 'eth_sendTransaction', [
    { from: DEV_ADDRESS, to: '0x000000000000000000000000000000000000dead', value: '0x1' },
  ]);
  await minedReceipt(node.url, hash as string);
  await mine(node.url, 2);
  const before = logLines.length;
  methods.length = 0;
  // Only the new tip, 4, on a branch that replaced 2 and 3.
  await feed.live(await blockAt(node.url, 4), via, deliver);
  t.same(numbers(), [1, 2, 3, 2, 3, 4], 'from the fork point on');
  t.same(
    out.slice(3).map((h) => h.hash),
    await Promise.all([2, 3, 4].map(async (n) => (await blockAt(node.url, n)).hash)),
    "the new branch's heads",
  );
  t.not(out[4]!.hash, old3);
  t.same(methods, ['eth_getBlockByNumber 0x2', 'eth_getBlockByNumber 0x1', 'eth_getBlockByNumber 0x2', 'eth_getBlockByNumber 0x3']);
  t.same(logLines.slice(before), ['info reorg: heads sent again from the fork'], 'logged');
  t.match(logFields.at(-1), { depth: 2, head: 2 }, 'with its depth');

  // A head whose parent is the head sent below it costs no call.
  await mine(node.url);
  methods.length = 0;
  await feed.live(await blockAt(node.url, 5), via, deliver);
  t.same(numbers().slice(6), [5]);
  t.same(methods, [], 'no call');
});

t.test('a new tip at the height of the last head sent, off the branch below it: the fork is sent first', async (t) => {
  const { node, via, feed, out, deliver, numbers } = await sentThreeThenReverted(t);
  const hash = await call(node.url, 'eth_sendTransaction', [
    { from: DEV_ADDRESS, to: '0x000000000000000000000000000000000000dead', value: '0x1' },
  ]);
  await minedReceipt(node.url, hash as string);
  await mine(node.url);
  await feed.live(await blockAt(node.url, 3), via, deliver);
  t.same(numbers(), [1, 2, 3, 2, 3], "the new branch's 2, then its 3");
  t.same(
    out.slice(3).map((h) => h.hash),
    await Promise.all([2, 3].map(async (n) => (await blockAt(node.url, n)).hash)),
  );
});

/** Resets the node to a fresh chain whose block 1 holds a transaction, so its blocks differ from the old ones. */
async function resetToNewChain(url: string): Promise<void> {
  await call(url, 'anvil_reset', []);
  const hash = await call(url, 'eth_sendTransaction', [
    { from: DEV_ADDRESS, to: '0x000000000000000000000000000000000000dead', value: '0x1' },
  ]);
  await minedReceipt(url, hash as string);
}

/** A node mined to 200 and a feed (without a chain to ask) that has sent its heads 199 and 200. */
async function feedAt200(t: Test) {
  const node = await anvilFor(t);
  await call(node.url, 'anvil_mine', ['0xc8']);
  const methods: string[] = [];
  const via = access(0, node.url, methods);
  const feed = createHeadFeed({ maxBackfillBlocks: 1024, log });
  const heads = collector();
  for (const n of [199, 200]) await feed.live(await blockAt(node.url, n), via, heads.deliver);
  return { node, methods, via, feed, ...heads };
}

t.test('a lone node reset deeper than the feed remembers: the feed goes on from its new head, without backfill', async (t) => {
  const { node, methods, via, feed, out, deliver, numbers } = await feedAt200(t);
  await resetToNewChain(node.url);
  const before = logLines.length;
  await feed.live(await blockAt(node.url, 1), via, deliver);
  await mine(node.url);
  await feed.live(await blockAt(node.url, 2), via, deliver);
  t.same(numbers(), [199, 200, 1, 2], "the new chain's heads follow the old chain's last");
  t.equal(out[2]!.hash, (await blockAt(node.url, 1)).hash, "the new chain's block 1");
  t.equal(out[3]!.parentHash, out[2]!.hash);
  t.same(methods, [], 'nothing fetched: no backfill, nothing sent again');
  t.same(logLines.slice(before), ['info newHeads feed resumes on a new chain from head 1'], 'logged once');
  t.same(feed.head(), { number: 2, hash: out[3]!.hash });
});

t.test('a node reset while another is ahead is dropped; once every node is on the lower chain the feed resumes', async (t) => {
  const a = await anvilFor(t);
  const b = await anvilFor(t);
  await Promise.all([call(a.url, 'anvil_mine', ['0xc8']), call(b.url, 'anvil_mine', ['0xc8'])]);
  const lines: string[] = [];
  const chainLog = (level: string, msg: string) => void lines.push(`${level} ${msg}`);
  const health = createChainHealth(['a', 'b'], { maxLagBlocks: 5, log: chainLog });
  for (const u of health.upstreams) u.reportHead(200);
  const feed = createHeadFeed({
    maxBackfillBlocks: 1024,
    log: chainLog,
    chain: { followsNewChain: (node, head) => health.followsNewChain(node, head) },
  });
  const { out, deliver, numbers } = collector();
  const viaA = access(0, a.url);
  await feed.live(await blockAt(a.url, 200), viaA, deliver);

  await resetToNewChain(a.url);
  await feed.live(await blockAt(a.url, 1), viaA, deliver);
  await mine(a.url);
  await feed.live(await blockAt(a.url, 2), viaA, deliver);
  t.same(numbers(), [200], "a's new chain is not sent while b is still at 200");
  t.equal(health.upstreams[0]!.head, 2, "the heads the feed heard are a's heads in health");
  t.same(health.healthyIndices(), [1], 'a lags: out of rotation');
  t.same(
    lines,
    [
      'warn node head went back from 200 to 1, deeper than a reorg: treated as a new chain',
      'warn newHeads feed drops the heads of a node that went back from 200 to 1: the chain is ahead of it',
    ],
    "the node's reset and the feed's choice are each logged once",
  );

  await resetToNewChain(b.url);
  health.upstreams[1]!.reportHead(1); // b's poll
  await mine(a.url);
  await feed.live(await blockAt(a.url, 3), viaA, deliver);
  t.same(numbers(), [200, 3], "every node on the lower chain: the feed resumes from a's head");
  t.equal(out[1]!.hash, (await blockAt(a.url, 3)).hash);
  t.equal(lines.at(-1), 'info newHeads feed resumes on a new chain from head 3');
});

t.test('a node behind the feed that never went back itself is dropped, not followed', async (t) => {
  const a = await anvilFor(t);
  const b = await anvilFor(t);
  await Promise.all([call(a.url, 'anvil_mine', ['0xc8']), call(b.url, 'anvil_mine', ['0x32'])]);
  const health = createChainHealth(['a', 'b'], { maxLagBlocks: 5 });
  health.upstreams[0]!.reportHead(200);
  health.upstreams[1]!.reportHead(50);
  const feed = createHeadFeed({
    maxBackfillBlocks: 1024,
    log,
    chain: { followsNewChain: (node, head) => health.followsNewChain(node, head) },
  });
  const { deliver, numbers } = collector();
  await feed.live(await blockAt(a.url, 200), access(0, a.url), deliver);
  for (let i = 0; i < 3; i++) health.upstreams[0]!.record('failed', 1); // a fails: b, 150 behind, is all the chain has
  await feed.live(await blockAt(b.url, 50), access(1, b.url), deliver);
  t.same(numbers(), [200], 'b lags on the same chain: 50 is not sent again');
});

t.test('a shallow reset is a reorg: the heads it replaced are sent again, and the reorg is logged with its depth', async (t) => {
  const node = await anvilFor(t);
  await call(node.url, 'anvil_mine', ['0xa']);
  const via = access(0, node.url);
  const feed = createHeadFeed({ maxBackfillBlocks: 1024, log });
  const { out, deliver, numbers } = collector();
  for (let n = 1; n <= 10; n++) await feed.live(await blockAt(node.url, n), via, deliver);
  await resetToNewChain(node.url);
  const before = logLines.length;
  await feed.live(await blockAt(node.url, 1), via, deliver);
  t.same(numbers(), [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 1]);
  t.equal(out[10]!.hash, (await blockAt(node.url, 1)).hash);
  t.same(logLines.slice(before), ['info reorg: heads sent again from the fork'], 'logged');
  t.match(logFields.at(-1), { depth: 10, head: 1 }, 'with its depth');
});

t.test(
  'a link resumed on a node reset meanwhile: its head only, no walk back, no backfill; or nothing while the chain is ahead',
  async (t) => {
    const { node, methods, via, feed, deliver, numbers } = await feedAt200(t);
    const ahead = createHeadFeed({ maxBackfillBlocks: 1024, log, chain: { followsNewChain: () => false } });
    const held = collector();
    await ahead.live(await blockAt(node.url, 200), via, held.deliver);
    await resetToNewChain(node.url);
    await mine(node.url, 2);
    methods.length = 0;
    await feed.resume(via, deliver);
    t.same(numbers(), [199, 200, 3], "the new chain's head at the time");
    t.same(methods, ['eth_blockNumber', 'eth_getBlockByNumber 0x3'], "one look at the node's head");
    await ahead.resume(via, held.deliver);
    t.same(held.numbers(), [200], 'the chain is ahead of the node: nothing sent');
  },
);
