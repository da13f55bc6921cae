/**
 * The newFinalizedHeads feed on a real anvil, with the chain's finality stood in for (the test moves it): nothing
 * of the past at start, then every block from the one after the last sent up to the finalized one, in order,
 * as anvil's headers; a jump wider than the backfill limit skips its oldest blocks (logged); a finalized hash
 * the node's block does not have is not sent until it does.
 */
import t, { type Test } from 'tap';
import type { FinalMark } from '../../src/fanout/final-feed.js';
import { anvilFor, blockAt, feedsFor, headerOf, mine, nodeAt, numbersOf, recorder } from './feed-harness.js';
import { waitFor } from '../support/wait-for.js';

async function setup(t: Test, maxBackfillBlocks?: number) {
  const node = await anvilFor(t);
  const held = { finalized: null as FinalMark | null };
  const mark = async (n: number): Promise<FinalMark> => ({ number: n, hash: String((await blockAt(node.url, n)).hash).toLowerCase() });
  const { feeds, logs } = feedsFor(t, {
    nodes: [nodeAt('a', node.url.replace(/^http/, 'ws'), node.url)],
    maxOutageMs: 60_000,
    finality: { finalized: () => held.finalized, safe: () => null },
    ...(maxBackfillBlocks !== undefined ? { maxBackfillBlocks } : {}),
  });
  return { node, held, mark, feeds, logs };
}

t.test('each block once it is finalized, in order, from the one after the start', async (t) => {
  const { node, held, mark, feeds } = await setup(t);
  await mine(node.url, 12);
  held.finalized = await mark(3);
  const r = recorder();
  const hold = feeds.subscribe('newFinalizedHeads', undefined, r);
  t.equal(await hold.whenLive(5000), null);
  await mine(node.url);
  held.finalized = await mark(9);
  await mine(node.url);
  await waitFor(() => r.texts.length >= 6, { what: 'blocks 4 to 9' });
  t.same(numbersOf(r), [4, 5, 6, 7, 8, 9], 'the start (3) is not sent; 4 to 9 are, in order');
  t.same(r.parsed()[0], headerOf(await blockAt(node.url, 4)), "anvil's header");
  held.finalized = await mark(11);
  await mine(node.url);
  await waitFor(() => r.texts.length >= 8, { what: 'blocks 10 and 11' });
  t.same(numbersOf(r), [4, 5, 6, 7, 8, 9, 10, 11], 'no gap, nothing twice');
});

t.test('a jump past the backfill limit skips its oldest blocks; a hash the node does not have waits', async (t) => {
  const { node, held, mark, feeds, logs } = await setup(t, 4);
  await mine(node.url, 20);
  held.finalized = await mark(2);
  const r = recorder();
  await feeds.subscribe('newFinalizedHeads', undefined, r).whenLive(5000);
  await mine(node.url);
  held.finalized = { number: 12, hash: `0x${'ab'.repeat(32)}` };
  await mine(node.url);
  await mine(node.url);
  t.same(r.texts, [], 'a finalized hash that is not the node block: nothing sent');
  held.finalized = await mark(12);
  await mine(node.url);
  await waitFor(() => r.texts.length >= 4, { what: 'blocks 9 to 12' });
  t.same(numbersOf(r), [9, 10, 11, 12], 'the last four');
  t.ok(
    logs.some((l) => l.includes('finalized block jumped further than the backfill limit')),
    'logged',
  );
});

t.test("a block the node's HTTP does not have yet is asked again, not failed", async (t) => {
  const node = await anvilFor(t);
  const held = { finalized: null as FinalMark | null };
  const mark = async (n: number): Promise<FinalMark> => ({ number: n, hash: String((await blockAt(node.url, n)).hash).toLowerCase() });
  const plain = nodeAt('a', node.url.replace(/^http/, 'ws'), node.url);
  let missed = 0;
  const { feeds, logs } = feedsFor(t, {
    // Its HTTP lags its WebSocket: the first ask for block 6 finds nothing.
    nodes: [
      {
        ...plain,
        call: (method, params) => {
          if (method === 'eth_getBlockByNumber' && (params as unknown[])[0] === '0x6' && missed++ === 0) return Promise.resolve(null);
          return plain.call(method, params);
        },
      },
    ],
    maxOutageMs: 60_000,
    finality: { finalized: () => held.finalized, safe: () => null },
  });
  await mine(node.url, 12);
  held.finalized = await mark(3);
  const r = recorder();
  t.equal(await feeds.subscribe('newFinalizedHeads', undefined, r).whenLive(5000), null);
  await mine(node.url);
  held.finalized = await mark(8);
  await mine(node.url);
  await waitFor(() => r.texts.length >= 5, { what: 'blocks 4 to 8, on the one head' });
  t.same(numbersOf(r), [4, 5, 6, 7, 8]);
  t.ok(missed >= 2, 'block 6 was asked again');
  t.same(
    logs.filter((l) => l.startsWith('warn') || l.startsWith('error')),
    [],
    'no step failed',
  );
});
