/**
 * `safe` and `finalized` from the consensus layer, end to end: anvil, the devnet's beacon node following it
 * (4-slot epochs, so a few mined blocks finalize), and a gateway whose evm chain names the beacon chain. The
 * gateway's finalized and safe blocks are the execution payloads of the beacon node's finalized and justified
 * checkpoints, shown in /healthz, GET /status and the metrics, advancing as blocks are mined; the response cache
 * keeps answers about blocks at or below the finalized one (finality_depth alone would keep none here). The same
 * with two worker threads (run `npm run build` first: workers run dist/).
 */
import t, { type Test } from 'tap';
import { startBeaconNode } from '../../src/devnet/beacon/beacon-node.js';
import { result } from '../support/dev-chain.js';
import { scrape } from '../support/exposition.js';
import { anvilFor, evmChain, gatewayFor, type TestGateway } from '../support/gateway.js';
import { oneConnection } from '../support/rpc.js';
import { waitFor } from '../support/wait-for.js';

const SLOTS_PER_EPOCH = 4;
/** A reading every 4 s (FINALITY_POLL_MS) and the beacon node's own 50 ms polls: well within this. */
const FOLLOW_MS = 20_000;

interface Finality {
  finalized: { number: number; hash: string };
  safe: { number: number; hash: string };
}

async function stack(t: Test, workers = 1): Promise<{ anvilUrl: string; beaconUrl: string; g: TestGateway }> {
  const anvil = await anvilFor(t);
  const node = await startBeaconNode({ executionUrl: anvil.url, pollMs: 50, slotsPerEpoch: SLOTS_PER_EPOCH });
  t.teardown(() => node.stop());
  const g = await gatewayFor(t, {
    server: { default_chain: 'devnet', workers },
    chains: {
      devnet: evmChain([anvil.url], 31337, { beacon: 'devnet-beacon' }),
      'devnet-beacon': { kind: 'beacon', upstreams: [{ url: node.url }] },
    },
  });
  return { anvilUrl: anvil.url, beaconUrl: node.url, g };
}

/** What the beacon node itself says: its checkpoints' roots, and the execution payload of each root's block. */
async function beaconFinality(beaconUrl: string): Promise<Finality> {
  const get = async (path: string): Promise<{ data: Record<string, unknown> }> => {
    const res = await fetch(`${beaconUrl}${path}`);
    if (res.status !== 200) throw new Error(`${path}: ${res.status}`);
    return (await res.json()) as { data: Record<string, unknown> };
  };
  const cp = (await get('/eth/v1/beacon/states/head/finality_checkpoints')).data as Record<string, { root: string }>;
  const blockOf = async (root: string) => {
    const message = (await get(`/eth/v2/beacon/blocks/${root}`)).data.message as {
      body: { execution_payload: { block_number: string; block_hash: string } };
    };
    const p = message.body.execution_payload;
    return { number: Number(p.block_number), hash: p.block_hash };
  };
  return { finalized: await blockOf(cp.finalized!.root), safe: await blockOf(cp.current_justified!.root) };
}

async function mineTo(anvilUrl: string, beaconUrl: string, height: number): Promise<void> {
  const head = Number(await result<string>(anvilUrl, 'eth_blockNumber'));
  if (height > head) await result(anvilUrl, 'anvil_mine', [`0x${(height - head).toString(16)}`]);
  await waitFor(
    async () => {
      const res = await fetch(`${beaconUrl}/eth/v1/beacon/headers/head`);
      const slot = Number(((await res.json()) as { data: { header: { message: { slot: string } } } }).data.header.message.slot);
      return slot >= height;
    },
    { what: `the beacon node at slot ${height}`, ms: FOLLOW_MS },
  );
}

/** The gateway's finalized and safe blocks as /healthz shows them. */
async function healthzFinality(g: TestGateway): Promise<{ finalized: number | null; safe: number | null }> {
  const body = (await (await fetch(`${g.base}/healthz`)).json()) as {
    chains: Record<string, { finalized_block: number | null; safe_block: number | null }>;
  };
  const c = body.chains.devnet!;
  return { finalized: c.finalized_block, safe: c.safe_block };
}

async function followsBeacon(t: Test, g: TestGateway, beaconUrl: string, anvilUrl: string): Promise<Finality> {
  const want = await beaconFinality(beaconUrl);
  await waitFor(
    async () => {
      const seen = await healthzFinality(g);
      return seen.finalized === want.finalized.number && seen.safe === want.safe.number;
    },
    { what: `finalized ${want.finalized.number} and safe ${want.safe.number} in /healthz`, ms: FOLLOW_MS },
  );
  // The hashes are anvil's blocks at those numbers.
  for (const tag of ['finalized', 'safe'] as const) {
    const b = await result<{ hash: string }>(anvilUrl, 'eth_getBlockByNumber', [`0x${want[tag].number.toString(16)}`, false]);
    t.equal(want[tag].hash, b.hash, `the ${tag} checkpoint's payload is anvil's block ${want[tag].number}`);
  }
  return want;
}

t.test('finalized and safe follow the beacon checkpoints, and advance', async (t) => {
  const { anvilUrl, beaconUrl, g } = await stack(t);
  // Head at slot 12 (epoch 3): finalized is epoch 1's first block (4), justified epoch 2's (8).
  await mineTo(anvilUrl, beaconUrl, 3 * SLOTS_PER_EPOCH);
  const first = await followsBeacon(t, g, beaconUrl, anvilUrl);
  t.same([first.finalized.number, first.safe.number], [4, 8], 'two and one epochs behind the head');
  const runtime = g.gateway.context.chains.get('devnet')!;
  t.same(runtime.finality.finalized(), first.finalized, 'the runtime holds the block number and hash');
  t.same(runtime.finality.safe(), first.safe);

  await mineTo(anvilUrl, beaconUrl, 5 * SLOTS_PER_EPOCH + 1);
  const next = await followsBeacon(t, g, beaconUrl, anvilUrl);
  t.same([next.finalized.number, next.safe.number], [12, 16], 'advanced with the checkpoints');

  const metrics = await scrape(g.gateway.metricsPort!);
  t.equal(metrics.value('chaingate_chain_finalized_block', { chain: 'devnet' }), 12);
  t.equal(metrics.value('chaingate_chain_safe_block', { chain: 'devnet' }), 16);
  t.same(
    metrics.series('chaingate_chain_finalized_block').map((s) => s.labels.chain),
    ['devnet'],
    'no series for the beacon chain',
  );
  const status = (await (await fetch(`http://127.0.0.1:${g.gateway.metricsPort}/status`)).json()) as {
    chains: Record<string, { finalized_block: number | null; safe_block: number | null }>;
  };
  t.same(status.chains.devnet, { ...status.chains.devnet, finalized_block: 12, safe_block: 16 }, 'GET /status shows them');
  t.equal(status.chains['devnet-beacon']!.finalized_block, null, 'a beacon chain has none');
});

/** Whether a second ask of block `n` on one connection was a cache hit (the hit counter moved by one). */
async function cachedTwice(g: TestGateway, conn: ReturnType<typeof oneConnection>, n: number): Promise<boolean> {
  const url = `${g.base}/v1/rpc/public`;
  const hits = async () => (await scrape(g.gateway.metricsPort!)).value('chaingate_cache_hits_total', { chain: 'devnet' });
  const params = [`0x${n.toString(16)}`, false];
  const first = (await conn.rpc(url, 'eth_getBlockByNumber', params)).json as { result: { number: string } };
  if (Number(first.result.number) !== n) throw new Error(`block ${n} answered as ${first.result.number}`);
  const before = await hits();
  await conn.rpc(url, 'eth_getBlockByNumber', params);
  return (await hits()) === before + 1;
}

async function cacheFollowsFinalized(t: Test, g: TestGateway, finalized: number): Promise<void> {
  const conn = oneConnection();
  t.teardown(() => conn.close());
  // A worker reads finality when its calls first want it: its first answers may still go by the fixed depth.
  await waitFor(() => cachedTwice(g, conn, finalized), { what: `block ${finalized} (finalized) kept by the cache`, ms: FOLLOW_MS });
  t.pass(`block ${finalized}, the finalized one, is kept though the head is only a few blocks above it (finality_depth 64)`);
  t.equal(await cachedTwice(g, conn, finalized - 1), true, 'so is a block below it');
  t.equal(await cachedTwice(g, conn, finalized + 1), false, 'a block above it is not');
}

t.test('the cache takes blocks at or below the finalized one as final', async (t) => {
  const { anvilUrl, beaconUrl, g } = await stack(t);
  await mineTo(anvilUrl, beaconUrl, 4 * SLOTS_PER_EPOCH);
  const { finalized } = await followsBeacon(t, g, beaconUrl, anvilUrl);
  await cacheFollowsFinalized(t, g, finalized.number);
});

t.test('with two worker threads: shown by the main thread, followed by each worker’s cache', async (t) => {
  const { anvilUrl, beaconUrl, g } = await stack(t, 2);
  t.equal(g.gateway.workers?.count, 2);
  await mineTo(anvilUrl, beaconUrl, 4 * SLOTS_PER_EPOCH);
  const { finalized } = await followsBeacon(t, g, beaconUrl, anvilUrl);
  await cacheFollowsFinalized(t, g, finalized.number);
});
