/**
 * The newHeads feed on a chain of several nodes (docs/consistency.md, the served head): on real anvil blocks,
 * heads above the served head are held and sent in order as it reaches them, none twice and none skipped; heads
 * held when a reorg replaces them are dropped unsent; each live head is told to the chain before it is taken in;
 * nothing is held while no head is served.
 */
import t from 'tap';
import type { NodeAccess } from '../../src/fanout/feeds.js';
import { createHeadFeed } from '../../src/fanout/head-feed.js';
import { minedReceipt } from '../support/dev-chain.js';
import { anvilFor, blockAt, call, DEV_ADDRESS, mine } from './feed-harness.js';

function access(node: number, url: string): NodeAccess {
  return { node, call: (method, params) => call(url, method, params), sleep: () => Promise.resolve() };
}

function collector() {
  const out: Array<Record<string, unknown>> = [];
  return { out, deliver: (r: unknown) => void out.push(r as Record<string, unknown>), numbers: () => out.map((h) => Number(h.number)) };
}

const log = (): void => {};

/** A served head moved by hand, as chain/served-head.ts moves it, telling its watchers. */
function servedHeadAt(initial: number | null) {
  let head = initial;
  const listeners = new Set<(h: number) => void>();
  return {
    now: () => head,
    watch(l: (h: number) => void) {
      listeners.add(l);
      return () => listeners.delete(l);
    },
    move(to: number) {
      head = to;
      for (const l of listeners) l(to);
    },
  };
}

t.test('served head: heads above it are held, then sent in order as it reaches them; none twice, none skipped', async (t) => {
  const node = await anvilFor(t);
  await mine(node.url, 8);
  const servedHead = servedHeadAt(2);
  const heard: number[] = [];
  const feed = createHeadFeed({
    maxBackfillBlocks: 1024,
    log,
    servedHead,
    chain: { followsNewChain: () => true, heard: (_node, head) => void heard.push(head) },
  });
  const { out, deliver, numbers } = collector();
  const via = access(0, node.url);
  servedHead.watch(() => feed.release(deliver));
  for (const n of [1, 2, 3, 4]) await feed.live(await blockAt(node.url, n), via, deliver);
  t.same(heard, [1, 2, 3, 4], 'each live head is told to the chain before the feed takes it');
  t.same(numbers(), [1, 2], 'nothing above the served head');
  t.same(feed.head(), { number: 2, hash: out[1]!.hash }, 'head() is the last head sent');
  servedHead.move(3);
  t.same(numbers(), [1, 2, 3]);
  await feed.live(await blockAt(node.url, 7), via, deliver);
  t.same(numbers(), [1, 2, 3], 'a gap is filled, and held with the head that showed it');
  servedHead.move(6);
  t.same(numbers(), [1, 2, 3, 4, 5, 6]);
  t.equal(feed.release(deliver), true, 'head 7 still held');
  servedHead.move(8);
  t.same(numbers(), [1, 2, 3, 4, 5, 6, 7]);
  t.equal(feed.release(deliver), false, 'nothing held');
  await feed.live(await blockAt(node.url, 8), via, deliver);
  t.same(numbers(), [1, 2, 3, 4, 5, 6, 7, 8], 'at the served head: sent at once');
  t.same(
    out.map((h) => h.hash),
    await Promise.all(numbers().map(async (n) => (await blockAt(node.url, n)).hash)),
    "each the node's block",
  );
});

t.test('served head: heads held when a reorg replaces them are dropped unsent; the new branch follows', async (t) => {
  const node = await anvilFor(t);
  await mine(node.url);
  const snapshot = await call(node.url, 'evm_snapshot');
  await mine(node.url, 3);
  const servedHead = servedHeadAt(2);
  const feed = createHeadFeed({ maxBackfillBlocks: 1024, log, servedHead });
  const { out, deliver, numbers } = collector();
  const via = access(0, node.url);
  for (const n of [1, 2, 3, 4]) await feed.live(await blockAt(node.url, n), via, deliver);
  t.same(numbers(), [1, 2]);
  await call(node.url, 'evm_revert', [snapshot]);
  // Mined before mining on: anvil answers the send before its automine, and mine() could take the transfer.
  const hash = await call(node.url, 'eth_sendTransaction', [
    { from: DEV_ADDRESS, to: '0x000000000000000000000000000000000000dead', value: '0x1' },
  ]);
  await minedReceipt(node.url, hash as string);
  await mine(node.url, 2);
  await feed.live(await blockAt(node.url, 3), via, deliver);
  t.same(numbers(), [1, 2, 2], 'the replaced head 2 sent again; 3 held');
  servedHead.move(4);
  feed.release(deliver);
  t.same(numbers(), [1, 2, 2, 3], 'the old branch 3 and 4 never sent: only the new 3');
  t.same(
    out.slice(2).map((h) => h.hash),
    await Promise.all([2, 3].map(async (n) => (await blockAt(node.url, n)).hash)),
    "the new branch's heads",
  );
});

t.test('served head unknown (a start): nothing is held', async (t) => {
  const node = await anvilFor(t);
  await mine(node.url, 2);
  const feed = createHeadFeed({ maxBackfillBlocks: 1024, log, servedHead: servedHeadAt(null) });
  const { deliver, numbers } = collector();
  for (const n of [1, 2]) await feed.live(await blockAt(node.url, n), access(0, node.url), deliver);
  t.same(numbers(), [1, 2]);
});
