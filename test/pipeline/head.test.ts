/**
 * A chain's head as the pipeline sees it, over real anvils behind counting proxies (dead and oversized
 * nodes only for the faults): the health tracker's head first, else one eth_blockNumber of the gateway's
 * own at a time and at most once a second; upstreams in turn; and followBlocks delivering every block
 * once and in order, replaced blocks after a reorg, and only the newest after a long silence.
 */
import t, { type Test } from 'tap';
import { chainHead, followBlocks, headOf, type PolledBlock, upstreamsInTurn } from '../../src/pipeline/head.js';
import type { ChainRuntime } from '../../src/chain/runtime.js';
import { countingProxy } from '../support/counting-proxy.js';
import { result } from '../support/dev-chain.js';
import { closedPort, fakeUpstream } from '../support/fake-upstream.js';
import { anvilFor } from '../support/gateway.js';
import { pipelineContext } from '../support/pipeline-context.js';

const hex = (n: number): string => `0x${n.toString(16)}`;
const tick = (ms = 0): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** A chain runtime over `urls`, its health checks not started: no head is known until one is reported. */
function chainOver(t: Test, urls: string[]): ChainRuntime {
  return pipelineContext(t, { chains: { devnet: { chain_id: 31337, timeout_s: 2, upstreams: urls.map((url) => ({ url })) } } }).chain(
    'devnet',
  );
}

/** Takes the upstream at `index` out of rotation, as three failed calls do. */
function failing(chain: ChainRuntime, index: number): void {
  for (let k = 0; k < 3; k++) chain.health.upstreams[index]!.record('failed', 1);
}

async function until(done: () => boolean, what: string, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await tick(10);
  }
}

t.test("the gateway's own head: one poll at a time, shared by concurrent callers, at most once a second", async (t) => {
  const node = await anvilFor(t);
  await result(node.url, 'anvil_mine', ['0xa']);
  const proxy = await countingProxy(t, node.url);
  const chain = chainOver(t, [proxy.url]);
  const head = chainHead(chain);
  t.equal(chainHead(chain), head, 'one tracker per chain');
  t.equal(head.now(), null, 'nothing known at first; now() never waits');
  const fresh = await Promise.all(Array.from({ length: 10 }, () => head.fresh()));
  t.same(fresh, Array(10).fill(10));
  t.equal(proxy.count('eth_blockNumber'), 2, 'the poll now() started, and one more for all who asked after it started');
  t.same(new Set(Array.from({ length: 100 }, () => head.now())), new Set([10]), 'now() tells the polled head');
  t.equal(headOf(chain), 10);
  t.equal(proxy.count('eth_blockNumber'), 2, 'a head polled within the second is used as it is');
  head.note(42);
  t.equal(head.now(), 42, 'a head learned elsewhere');
  t.equal(await head.fresh(), 10, 'fresh() asks the node: its answer is the best known now');
  t.equal(proxy.count('eth_blockNumber'), 3);
});

t.test("the health tracker's head comes first; fresh() gives the higher of it and a node's answer", async (t) => {
  const node = await anvilFor(t);
  await result(node.url, 'anvil_mine', ['0x5']);
  const proxy = await countingProxy(t, node.url);
  const chain = chainOver(t, [proxy.url]);
  chain.health.upstreams[0]!.reportHead(3);
  const head = chainHead(chain);
  t.equal(head.now(), 3);
  await tick(20);
  t.equal(proxy.count('eth_blockNumber'), 0, 'no poll while the tracker knows a head');
  t.equal(await head.fresh(), 5, 'the node is ahead of the tracker');
  chain.health.upstreams[0]!.reportHead(9);
  t.equal(await head.fresh(), 9, 'the tracker is ahead of the node');
});

t.test('a node that cannot answer with a head is passed over; with none, the head stays unknown', async (t) => {
  const node = await anvilFor(t);
  await result(node.url, 'anvil_mine', ['0x7']);
  const dead = `http://127.0.0.1:${await closedPort()}`;
  const huge = await fakeUpstream(t, (socket) => {
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, result: `0x${'1'.repeat(40_000)}` });
    socket.write(`HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`);
  });
  for (const [why, bad] of [
    ['unreachable', dead],
    ['answers megabytes', huge.url],
  ] as const) {
    const chain = chainOver(t, [bad, node.url]);
    failing(chain, 1);
    t.same(
      upstreamsInTurn(chain).map((u) => u.label),
      [chain.upstreams[0]!.label, chain.upstreams[1]!.label],
      `${why}: the chain's pick first, then the rest`,
    );
    t.equal(await chainHead(chain).fresh(), 7, `${why}: the next node answers`);
  }
  const none = chainOver(t, [dead]);
  t.equal(await chainHead(none).fresh(), null, 'never rejects: null when no node answered');
  t.equal(chainHead(none).now(), null);
  const inTurn = chainOver(t, [dead, node.url, huge.url]);
  failing(inTurn, 0);
  failing(inTurn, 2);
  t.same(
    upstreamsInTurn(inTurn).map((u) => u.label),
    [1, 0, 2].map((i) => inTurn.upstreams[i]!.label),
    'the pick, then the others in configured order',
  );
});

/** Follows `chain`'s blocks every 30 ms, collecting what is delivered; stopped at teardown. */
function follow(t: Test, chain: ChainRuntime, from: number | null, stopped?: () => boolean): { blocks: PolledBlock[]; stop(): void } {
  const blocks: PolledBlock[] = [];
  const stop = followBlocks(chain, { from, onBlock: (b) => blocks.push(b), intervalMs: 30, ...(stopped ? { stopped } : {}) });
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
  await until(() => fromZero.blocks.length >= 2 && proxy.count('eth_getBlockByNumber') >= 4, 'the first polls');
  t.same(fromNull.blocks, [], 'from null: the first block seen is the start, not news');
  t.same(
    fromZero.blocks.map((b) => b.number),
    [1, 2],
    'from 0: the blocks mined since',
  );
  await result(node.url, 'anvil_mine', ['0x3']);
  await until(() => fromNull.blocks.length >= 3 && fromZero.blocks.length >= 5, 'the new blocks');
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
  await until(() => fromNull.blocks.length >= 4, 'block 6');
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
  await until(() => f.blocks.length >= 2, 'blocks 3 and 4');
  const before = await hashesOf(node.url, 3, 4);
  await result(node.url, 'evm_revert', [snapshot]);
  await result(node.url, 'evm_increaseTime', [100]);
  await result(node.url, 'anvil_mine', ['0x3']);
  await until(() => f.blocks.length >= 5, 'the new branch');
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
  await until(() => f.blocks.length >= 128, '128 blocks');
  await tick(100);
  t.same(
    f.blocks.map((b) => b.number),
    Array.from({ length: 128 }, (_, i) => 200 - 127 + i),
    'blocks 73 to 200, in order',
  );
  t.ok(proxy.count('eth_getBlockByNumber') < 140, `no older block was asked for (${proxy.count('eth_getBlockByNumber')} calls)`);
});
