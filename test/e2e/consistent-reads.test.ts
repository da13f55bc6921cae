/**
 * Issue 32 §2 end to end: three anvils on one chain (test/support/same-chain.ts: block n holds a transfer of n wei
 * to RECIPIENT with nonce n - 1, so a nonce is the height a state was read at and a balance tells it too), mined
 * apart while a client makes 1,000 calls through an in-process gateway whose prober polls heads every 50 ms:
 * - default mode: every read at `latest` lands on a node that has reached the served head (the nonce it reads is
 *   at least the eth_blockNumber the client saw last), and a read at an explicit number never answers "not found";
 * - consistency.rewrite_tags: eth_blockNumber, a nonce and a balance at `latest` never go back.
 * And a receipt by hash, asked of nodes of which only one has its block, is never null (retry empty).
 */
import { Agent } from 'node:http';
import t, { type Test } from 'tap';
import { evmChain, gatewayFor } from '../support/gateway.js';
import { post } from '../support/rpc.js';
import { RECIPIENT, SENDER, type SameChain, sameChainAnvils } from '../support/same-chain.js';
import { waitFor } from '../support/wait-for.js';
import { type MiningGate, miningGate } from '../support/mining-gate.js';

const hex = (n: number): string => `0x${n.toString(16)}`;
/**
 * Heads polled every 50 ms: the gateway follows the nodes as they are mined apart. A probe is given up late: a
 * node taken out for a slow probe on a loaded machine would take its head with it.
 */
const FAST_PROBES = { headIntervalMs: 50, intervalMs: 80, probeTimeoutMs: 5_000 };
/** Calls the client makes in each mode. */
const CALLS = 1_000;

/** RECIPIENT's balance after block h: its genesis balance and 1 + 2 + ... + h wei. */
const balanceAt = (genesis: bigint, h: number): bigint => genesis + (BigInt(h) * BigInt(h + 1)) / 2n;

/**
 * A client on one kept-alive connection, or with `spread` a connection of its own for each call (so its calls land
 * on both worker threads); a JSON-RPC error or a refusal fails the test with its text.
 */
function clientOf(t: Test, url: string, spread = false): (method: string, params: unknown[]) => Promise<unknown> {
  const agent = spread ? new Agent({ keepAlive: false }) : new Agent({ keepAlive: true, maxSockets: 1 });
  t.teardown(() => agent.destroy());
  let id = 0;
  return async (method, params) => {
    const answer = await post(url, JSON.stringify({ jsonrpc: '2.0', id: ++id, method, params }), {}, agent);
    const body = answer.json as { result?: unknown; error?: unknown };
    if (answer.status !== 200 || !('result' in body)) throw new Error(`${method}(${JSON.stringify(params)}): ${answer.text}`);
    return body.result;
  };
}

/**
 * Keeps mining the nodes apart until stopped: node 0 leads by a block, node 1 follows two behind it, node 2 three
 * behind, each step a little after the other, so the nodes stand at different heights throughout (all within
 * max_lag_blocks, so all in rotation).
 */
function mineApart(t: Test, chain: SameChain, gates: readonly MiningGate[], from: number): { stop(): Promise<void>; top(): number } {
  let stopped = false;
  let top = from;
  const pause = (): Promise<void> => new Promise((r) => setTimeout(r, 15));
  const done = (async () => {
    while (!stopped) {
      top++;
      await gates[0]!.closedFor(() => chain.mineTo(0, top));
      await pause();
      await gates[1]!.closedFor(() => chain.mineTo(1, top - 2));
      await pause();
      await gates[2]!.closedFor(() => chain.mineTo(2, top - 3));
      await pause();
    }
  })();
  const stop = async (): Promise<void> => {
    stopped = true;
    await done;
  };
  // Stopped before the anvils are, even when a call fails the test first.
  t.teardown(stop);
  return { top: () => top, stop };
}

async function threeNodesApart(t: Test, consistency: Record<string, unknown>) {
  const chain = await sameChainAnvils(t, 3);
  await Promise.all([chain.mineTo(0, 6), chain.mineTo(1, 4), chain.mineTo(2, 3)]);
  // Each node mined while no call reaches it (support/mining-gate.ts): anvil would answer a read at its head with
  // the state of the block it is mining.
  const gates = await Promise.all(chain.nodes.map((n) => miningGate(t, n.url)));
  const g = await gatewayFor(
    t,
    {
      // Two threads, and a connection per call: each thread hears the main thread's probes a moment apart, and
      // the served head every thread answers is one (chain/shared-heads.ts).
      server: { workers: 2 },
      chains: {
        devnet: evmChain(
          gates.map((g) => g.url),
          31337,
          { consistency },
        ),
      },
    },
    { prober: FAST_PROBES },
  );
  const call = clientOf(t, `${g.base}/v1/rpc/public`, true);
  // Two of the three nodes have reached block 4: the served head.
  await waitFor(async () => Number(await call('eth_blockNumber', [])) === 4, { what: 'the gateway to serve the head two nodes have' });
  const genesis = BigInt((await call('eth_getBalance', [RECIPIENT, '0x0'])) as string);
  return { chain, gates, call, genesis };
}

t.test('default mode: reads at latest land on a node at the served head; reads at a number always find it', async (t) => {
  const { chain, gates, call, genesis } = await threeNodesApart(t, {});
  const mining = mineApart(t, chain, gates, 6);
  const problems: string[] = [];
  let seen = 0;
  for (let i = 0; i < CALLS / 4; i++) {
    seen = Number(await call('eth_blockNumber', []));
    const nonce = Number(await call('eth_getTransactionCount', [SENDER, 'latest']));
    if (nonce < seen) problems.push(`call ${i}: nonce at latest ${nonce}, below the block number ${seen} seen before`);
    const balance = BigInt((await call('eth_getBalance', [RECIPIENT, 'latest'])) as string);
    if (balance < balanceAt(genesis, seen)) problems.push(`call ${i}: balance at latest is below block ${seen}'s`);
    if (i % 2 === 0) {
      const block = (await call('eth_getBlockByNumber', [hex(seen), false])) as { number: string } | null;
      if (block === null || Number(block.number) !== seen) problems.push(`call ${i}: block ${seen} not found (${JSON.stringify(block)})`);
    } else {
      const atSeen = BigInt((await call('eth_getBalance', [RECIPIENT, hex(seen)])) as string);
      if (atSeen !== balanceAt(genesis, seen)) problems.push(`call ${i}: balance at block ${seen} is ${atSeen}`);
    }
  }
  await mining.stop();
  t.same(problems, [], 'no read behind the served head, no block not found');
  t.ok(mining.top() > 12, `the nodes moved during the calls (node 0 at ${mining.top()})`);
  t.ok(seen > 6, `the client saw the head move (to ${seen})`);
});

t.test('rewrite_tags: the block number, a nonce and a balance at latest never go back', async (t) => {
  const { chain, gates, call, genesis } = await threeNodesApart(t, { rewrite_tags: true });
  const mining = mineApart(t, chain, gates, 6);
  const problems: string[] = [];
  let last = { block: 0, nonce: 0, balance: 0n };
  for (let i = 0; i < CALLS / 4; i++) {
    const block = Number(await call('eth_blockNumber', []));
    const nonce = Number(await call('eth_getTransactionCount', [SENDER, 'latest']));
    const balance = BigInt((await call('eth_getBalance', [RECIPIENT, 'latest'])) as string);
    // The nonce is the height the state was read at: the balance must be that block's.
    const nonceLater = Number(await call('eth_getTransactionCount', [SENDER]));
    if (block < last.block) problems.push(`call ${i}: eth_blockNumber went back from ${last.block} to ${block}`);
    if (nonce < last.nonce || nonce < block) problems.push(`call ${i}: nonce ${nonce} after ${last.nonce} (block ${block})`);
    if (balance < last.balance || balance < balanceAt(genesis, nonce))
      problems.push(
        `call ${i}: balance ${balance - genesis} after ${last.balance - genesis} (nonce ${nonce}, before ${last.nonce}, block ${block})`,
      );
    if (nonceLater < nonce) problems.push(`call ${i}: nonce with no block argument ${nonceLater} after ${nonce}`);
    last = { block, nonce: nonceLater, balance };
  }
  await mining.stop();
  t.same(problems, [], 'nothing went back');
  t.ok(mining.top() > 12, `the nodes moved during the calls (node 0 at ${mining.top()})`);
  t.ok(last.block > 6, `the client saw the head move (to ${last.block})`);
});

t.test('retry empty: a receipt only the leading node has is never answered null', async (t) => {
  const chain = await sameChainAnvils(t, 3);
  await Promise.all([chain.mineTo(0, 5), chain.mineTo(1, 3), chain.mineTo(2, 3)]);
  const g = await gatewayFor(
    t,
    // One node is enough for a head to be served: the gateway serves block 5 and its receipt, which only the
    // leading node has.
    {
      server: { workers: 1 },
      chains: {
        devnet: evmChain(
          chain.nodes.map((n) => n.url),
          31337,
          { consistency: { min_nodes: 1 } },
        ),
      },
    },
    { prober: FAST_PROBES },
  );
  const call = clientOf(t, `${g.base}/v1/rpc/public`);
  await waitFor(async () => Number(await call('eth_blockNumber', [])) === 5, { what: 'the gateway to know the leading node' });
  const block = (await call('eth_getBlockByNumber', ['0x5', false])) as { transactions: string[] };
  const hash = block.transactions[0]!;
  const receipts = [];
  for (let i = 0; i < 30; i++) receipts.push((await call('eth_getTransactionReceipt', [hash])) as { blockNumber: string } | null);
  t.same(
    receipts.filter((r) => r?.blockNumber !== '0x5'),
    [],
    'every answer is the receipt in block 5',
  );
});
