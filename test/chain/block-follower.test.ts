/**
 * followBlocks over real anvils (one behind a counting proxy): every block delivered once and in order,
 * replaced blocks after a reorg, and only the newest after a long silence.
 */
import t, { type Test } from 'tap';
import { followBlocks, type PolledBlock } from '../../src/chain/block-follower.js';
import type { ChainRuntime } from '../../src/chain/runtime.js';
import { chainOver, tick } from '../support/chain.js';
import { countingProxy } from '../support/counting-proxy.js';
import { result } from '../support/dev-chain.js';
import { anvilFor } from '../support/gateway.js';
import { waitFor } from '../support/wait-for.js';

const hex = (n: number): string => `0x${n.toString(16)}`;

/** Follows `chain`'s blocks every 30 ms, collecting what is delivered; stopped at teardown. */
function follow(
  t: Test,
  chain: ChainRuntime,
  from: number | null,
  stopped?: () => boolean,
  followsNewChain?: () => boolean,
): { blocks: PolledBlock[]; stop(): void } {
  const blocks: PolledBlock[] = [];
  const { stop } = followBlocks(chain, {
    from,
    onBlock: (b) => blocks.push(b),
    intervalMs: 30,
    ...(stopped ? { stopped } : {}),
    ...(followsNewChain ? { followsNewChain } : {}),
  });
  t.teardown(stop);
  return { blocks, stop };
}

async function hashesOf(url: string, from: number, to: number): Promise<string[]> {
  const out: string[] = [];
  for (let n = from; n <= to; n++) out.push((await result<{ hash: string }>(url, 'eth_getBlockByNumber', [hex(n), false])).hash);
  return out;
}

t.test('followBlocks: every block after the start once, in order, with its parent', async (t) => {
  const node = await anvilFor(t);
  await result(node.url, 'anvil_mine', ['0x2']);
  const proxy = await countingProxy(t, node.url);
  const chain = chainOver(t, [proxy.url]);
  const fromNull = follow(t, chain, null);
  const fromZero = follow(t, chain, 0);
  await waitFor(() => fromZero.blocks.length >= 2 && proxy.count('eth_getBlockByNumber') >= 4, { what: 'the first polls' });
  t.same(fromNull.blocks, [], 'from null: the first block seen is the start, not news');
  t.same(
    fromZero.blocks.map((b) => b.number),
    [1, 2],
    'from 0: the blocks mined since',
  );
  await result(node.url, 'anvil_mine', ['0x3']);
  await waitFor(() => fromNull.blocks.length >= 3 && fromZero.blocks.length >= 5, { what: 'the new blocks' });
  await tick(100);
  const hashes = await hashesOf(node.url, 1, 5);
  t.same(
    fromZero.blocks.map((b) => [b.number, b.hash]),
    [1, 2, 3, 4, 5].map((n) => [n, hashes[n - 1]]),
    'each once, in order',
  );
  t.same(
    fromNull.blocks.map((b) => b.hash),
    hashes.slice(2),
  );
  for (let i = 1; i < fromZero.blocks.length; i++) t.equal(fromZero.blocks[i]!.parentHash, fromZero.blocks[i - 1]!.hash);

  fromZero.stop();
  let asked = false;
  const halted = follow(t, chain, null, () => {
    asked = true;
    return true;
  });
  await result(node.url, 'anvil_mine', ['0x1']);
  await waitFor(() => fromNull.blocks.length >= 4, { what: 'block 6' });
  await tick(100);
  t.equal(fromZero.blocks.length, 5, 'a stopped follower delivers nothing more');
  t.ok(asked, 'stopped() is asked before a poll');
  t.same(halted.blocks, [], 'and true stops it');
});

t.test('followBlocks: a reorg delivers the replaced blocks again, from the fork', async (t) => {
  const node = await anvilFor(t);
  await result(node.url, 'anvil_mine', ['0x2']);
  const chain = chainOver(t, [node.url]);
  const snapshot = await result<string>(node.url, 'evm_snapshot');
  const f = follow(t, chain, 2);
  await result(node.url, 'anvil_mine', ['0x2']);
  await waitFor(() => f.blocks.length >= 2, { what: 'blocks 3 and 4' });
  const before = await hashesOf(node.url, 3, 4);
  await result(node.url, 'evm_revert', [snapshot]);
  await result(node.url, 'evm_increaseTime', [100]);
  await result(node.url, 'anvil_mine', ['0x3']);
  await waitFor(() => f.blocks.length >= 5, { what: 'the new branch' });
  await tick(100);
  const after = await hashesOf(node.url, 3, 5);
  t.not(after[0], before[0], 'block 3 was replaced');
  t.same(
    f.blocks.map((b) => [b.number, b.hash]),
    [
      [3, before[0]],
      [4, before[1]],
      [3, after[0]],
      [4, after[1]],
      [5, after[2]],
    ],
  );
});

t.test('followBlocks: after a long silence only the newest 128 blocks are fetched', async (t) => {
  const node = await anvilFor(t);
  const proxy = await countingProxy(t, node.url);
  // 200 blocks since the last one known (0), all mined before the first poll.
  await result(node.url, 'anvil_mine', ['0xc8']);
  const f = follow(t, chainOver(t, [proxy.url]), 0);
  await waitFor(() => f.blocks.length >= 128, { what: '128 blocks' });
  await tick(100);
  t.same(
    f.blocks.map((b) => b.number),
    Array.from({ length: 128 }, (_, i) => 200 - 127 + i),
    'blocks 73 to 200, in order',
  );
  t.ok(proxy.count('eth_getBlockByNumber') < 140, `no older block was asked for (${proxy.count('eth_getBlockByNumber')} calls)`);
});

t.test('followBlocks: a head further back than any reorg is a new chain when the chain follows its node, else a node behind', async (t) => {
  const node = await anvilFor(t);
  const chain = chainOver(t, [node.url]);
  const snapshot = await result<string>(node.url, 'evm_snapshot');
  let follows = false;
  let asked = 0;
  const f = follow(t, chain, 0, undefined, () => {
    asked++;
    return follows;
  });
  await result(node.url, 'anvil_mine', ['0xc8']);
  await waitFor(() => f.blocks.at(-1)?.number === 200, { what: 'block 200' });
  const delivered = f.blocks.length;
  await result(node.url, 'evm_revert', [snapshot]);
  await result(node.url, 'anvil_mine', ['0x1']);
  await waitFor(() => asked >= 2, { what: 'the chain asked twice' });
  t.equal(f.blocks.length, delivered, 'a node behind: nothing delivered');
  follows = true;
  await waitFor(() => f.blocks.length > delivered, { what: 'the new chain' });
  t.same(
    f.blocks.slice(delivered).map((b) => [b.number, b.hash]),
    [[1, (await hashesOf(node.url, 1, 1))[0]]],
    "followed from the new chain's head, at once",
  );
  await result(node.url, 'anvil_mine', ['0x1']);
  await waitFor(() => f.blocks.length > delivered + 1, { what: 'the next block' });
  t.same(
    f.blocks.slice(delivered + 1).map((b) => b.number),
    [2],
    'then block after block',
  );
});

t.test('followBlocks: no block above the ceiling (the served head); the rest once it rises', async (t) => {
  const node = await anvilFor(t);
  await result(node.url, 'anvil_mine', ['0x6']);
  const chain = chainOver(t, [node.url]);
  let ceiling = 3;
  const blocks: PolledBlock[] = [];
  const { stop } = followBlocks(chain, { from: 0, onBlock: (b) => blocks.push(b), intervalMs: 30, ceiling: () => ceiling });
  t.teardown(stop);
  await waitFor(() => blocks.length >= 3, { what: 'the blocks up to the ceiling' });
  // Two more polls that must not pass it.
  const polled = blocks.length;
  await tick(100);
  t.equal(blocks.length, polled);
  t.same(
    blocks.map((b) => b.number),
    [1, 2, 3],
  );
  ceiling = 6;
  await waitFor(() => blocks.length >= 6, { what: 'the blocks up to the raised ceiling' });
  t.same(
    blocks.map((b) => b.number),
    [1, 2, 3, 4, 5, 6],
    'each once, in order',
  );
  t.same(
    blocks.map((b) => b.hash),
    await hashesOf(node.url, 1, 6),
  );
});
