/**
 * newFinalizedHeads and newSafeHeads through a gateway of two worker threads (run `npm run build` first: workers run
 * dist/), with ws and viem as clients: each block once it became finalized (or safe), in order, with no gap when
 * finality jumps by an epoch, as anvil has the blocks. Fed by the devnet's beacon node's checkpoints when the chain
 * names its beacon chain, and by polling the node's own `finalized` and `safe` blocks otherwise.
 */
import t, { type Test } from 'tap';
import { createPublicClient, webSocket } from 'viem';
import { anvil } from 'viem/chains';
import { startBeaconNode } from '../../src/devnet/beacon/beacon-node.js';
import { result } from '../support/dev-chain.js';
import { anvilFor, gatewayFor, type TestGateway } from '../support/gateway.js';
import { openSubscriber, type Subscriber } from '../support/subscriber.js';
import { wsUrl } from '../support/ws.js';
import { waitFor } from '../support/wait-for.js';

const SLOTS_PER_EPOCH = 4;
/** A finality reading every 4 s (FINALITY_POLL_MS), the beacon node's 50 ms polls, then the next head: within this. */
const FOLLOW_MS = 30_000;

const hex = (n: number): string => `0x${n.toString(16)}`;

function chainOf(anvilUrl: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { chain_id: 31337, upstreams: [{ url: anvilUrl, ws: anvilUrl.replace(/^http/, 'ws') }], ...extra };
}

async function mine(anvilUrl: string, blocks: number): Promise<void> {
  await result(anvilUrl, 'anvil_mine', [hex(blocks)]);
}

/** The gateway's finalized and safe blocks (the main thread's runtime, which the feeds follow). */
function finality(g: TestGateway): { finalized: number | null; safe: number | null } {
  const f = g.gateway.context.chains.get('devnet')!.finality;
  return { finalized: f.finalized()?.number ?? null, safe: f.safe()?.number ?? null };
}

async function finalityAt(g: TestGateway, finalized: number, safe: number): Promise<void> {
  await waitFor(
    () => {
      const f = finality(g);
      return f.finalized === finalized && f.safe === safe;
    },
    { what: `finalized ${finalized} and safe ${safe}`, ms: FOLLOW_MS },
  );
}

/** The blocks `from`..`to` as anvil has them: number and hash. */
async function anvilBlocks(anvilUrl: string, from: number, to: number): Promise<Array<{ number: string; hash: string }>> {
  const blocks: Array<{ number: string; hash: string }> = [];
  for (let n = from; n <= to; n++) {
    const b = await result<{ number: string; hash: string }>(anvilUrl, 'eth_getBlockByNumber', [hex(n), false]);
    blocks.push({ number: b.number, hash: b.hash });
  }
  return blocks;
}

const marks = (rs: Array<Record<string, unknown>>): Array<{ number: unknown; hash: unknown }> =>
  rs.map((r) => ({ number: r.number, hash: r.hash }));

/** A ws subscriber and a viem client each subscribed to both kinds; what each received so far. */
async function clients(t: Test, g: TestGateway) {
  const url = wsUrl(g.base, '/v1/rpc/public');
  const ws: Subscriber = await openSubscriber(t, url);
  const finalId = await ws.subscribe('newFinalizedHeads');
  const safeId = await ws.subscribe('newSafeHeads');
  const client = createPublicClient({ chain: anvil, transport: webSocket(url) });
  t.teardown(() => client.transport.getRpcClient().then((c) => c.close()));
  const viem = { finalized: [] as Array<Record<string, unknown>>, safe: [] as Array<Record<string, unknown>> };
  for (const [kind, into] of [
    ['newFinalizedHeads', viem.finalized],
    ['newSafeHeads', viem.safe],
  ] as const) {
    const sub = await client.transport.subscribe({
      params: [kind as never],
      onData: (d) => void into.push((d as { result: Record<string, unknown> }).result),
      onError: () => {},
    });
    t.teardown(() => sub.unsubscribe().then(() => {}));
  }
  return { ws: { finalized: () => ws.resultsOf(finalId), safe: () => ws.resultsOf(safeId) }, viem };
}

t.test('beacon checkpoints: every block between two checkpoints, in order, to ws and viem, with two workers', async (t) => {
  const node = await anvilFor(t);
  const beacon = await startBeaconNode({ executionUrl: node.url, pollMs: 50, slotsPerEpoch: SLOTS_PER_EPOCH });
  t.teardown(() => beacon.stop());
  const g = await gatewayFor(t, {
    server: { default_chain: 'devnet', workers: 2 },
    chains: {
      devnet: chainOf(node.url, { beacon: 'devnet-beacon' }),
      'devnet-beacon': { kind: 'beacon', upstreams: [{ url: beacon.url }] },
    },
  });
  t.equal(g.gateway.workers?.count, 2);
  // Head at slot 12 (epoch 3): finalized is epoch 1's first block (4), justified epoch 2's (8).
  await mine(node.url, 3 * SLOTS_PER_EPOCH);
  await finalityAt(g, 4, 8);
  const c = await clients(t, g);
  // Epoch 5: finalized jumps 4 → 12, safe 8 → 16, each by a whole epoch.
  await mine(node.url, 2 * SLOTS_PER_EPOCH + 1);
  await finalityAt(g, 12, 16);
  // A head after the reading: the feeds look at finality on each head.
  await mine(node.url, 1);
  const wantFinal = await anvilBlocks(node.url, 5, 12);
  const wantSafe = await anvilBlocks(node.url, 9, 16);
  await waitFor(() => c.ws.finalized().length >= 8 && c.ws.safe().length >= 8 && c.viem.finalized.length >= 8 && c.viem.safe.length >= 8, {
    what: 'blocks 5..12 finalized and 9..16 safe at both clients',
    ms: FOLLOW_MS,
  });
  t.same(marks(c.ws.finalized()), wantFinal, 'ws: blocks 5 to 12, each once, in order, as anvil has them');
  t.same(marks(c.ws.safe()), wantSafe, 'ws: blocks 9 to 16');
  t.same(marks(c.viem.finalized), wantFinal, 'viem: the same');
  t.same(marks(c.viem.safe), wantSafe);
  t.match(c.ws.finalized()[0], { parentHash: String, stateRoot: String, logsBloom: String }, 'a newHeads-shaped header');
  t.notOk('transactions' in c.ws.finalized()[0]!, 'without the block body');
});

t.test("no beacon chain: the node's own finalized and safe blocks, polled", async (t) => {
  // anvil's finalized block is two epochs behind its head, safe one: 8 and 4 blocks with 4-slot epochs.
  const node = await anvilFor(t, { args: ['--slots-in-an-epoch', String(SLOTS_PER_EPOCH)] });
  const g = await gatewayFor(t, { server: { default_chain: 'devnet', workers: 2 }, chains: { devnet: chainOf(node.url) } });
  await mine(node.url, 20);
  await finalityAt(g, 12, 16);
  const c = await clients(t, g);
  await mine(node.url, 10);
  await finalityAt(g, 22, 26);
  await mine(node.url, 1);
  await waitFor(() => c.ws.finalized().length >= 10 && c.viem.safe.length >= 10, { what: 'ten blocks each', ms: FOLLOW_MS });
  // A further head may have moved finality once more: the first ten are the jump's.
  t.same(marks(c.ws.finalized().slice(0, 10)), await anvilBlocks(node.url, 13, 22), 'finalized: 13 to 22, no gap');
  t.same(marks(c.viem.safe.slice(0, 10)), await anvilBlocks(node.url, 17, 26), 'safe: 17 to 26, no gap');
  const numbers = c.ws.safe().map((r) => Number(r.number));
  t.same(
    numbers,
    [...numbers].sort((a, b) => a - b),
    'never out of order',
  );
  t.equal(new Set(numbers).size, numbers.length, 'never twice');
});
