/**
 * Cordon at runtime (docs/failover.md, issue 33 §3): two anvils on one chain, a newHeads subscriber and a load of
 * calls; the node the subscriptions are on is cordoned through `chaingate upstream cordon` (runUpstream, which asks
 * the metrics listener): the subscriber sees every block once and in order, no call started after the cordon
 * answered reaches that node, status and metrics say so, a reload keeps it, and uncordon brings it back.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { validateConfig } from '../../src/config/schema.js';
import type { Config } from '../../src/config/schema.js';
import { runUpstream } from '../../src/cli/upstream.js';
import { countingProxy } from '../support/counting-proxy.js';
import { gatewayFor, type TestGateway } from '../support/gateway.js';
import { rpc, send } from '../support/rpc.js';
import { sameChainAnvils } from '../support/same-chain.js';
import { openSubscriber } from '../support/subscriber.js';
import { tcpRelay } from '../support/tcp-relay.js';
import { waitFor } from '../support/wait-for.js';
import { wsUrl } from '../support/ws.js';

const TOKEN = 'cordon-test-token';

interface Health {
  chains: Record<string, { upstreams: Array<{ label: string; in_rotation: boolean; reason: string | null }> }>;
}

const healthOf = async (g: TestGateway): Promise<Health> => (await send('GET', `${g.base}/healthz`)).json as Health;

/** The address a load call asks the balance of: its sequence number, so the proxy tells when it was started. */
const addressOf = (seq: number): string => `0x${seq.toString(16).padStart(40, '0')}`;
const seqOf = (address: unknown): number => Number.parseInt(String(address).slice(2), 16);

t.test('a cordoned node leaves rotation under load; its subscribers see no gap; uncordon brings it back', async (t) => {
  const chain = await sameChainAnvils(t, 2, { transfers: false });
  const [a, b] = chain.nodes;
  await chain.mineTo(0, 3);
  await chain.mineTo(1, 3);
  const [pa, pb, ra, rb] = await Promise.all([
    countingProxy(t, a!.url),
    countingProxy(t, b!.url),
    tcpRelay(t, { port: a!.port }),
    tcpRelay(t, { port: b!.port }),
  ]);
  const chains = (maxLag: number) => ({
    devnet: {
      chain_id: 31337,
      max_lag_blocks: maxLag,
      upstreams: [
        { name: 'a', url: pa.url, ws: ra.wsUrl },
        { name: 'b', url: pb.url, ws: rb.wsUrl },
      ],
    },
  });
  const dir = mkdtempSync(join(tmpdir(), 'chaingate-cordon-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const storage = { path: join(dir, 'chaingate.db') };
  const g = await gatewayFor(t, { storage, metrics: { token: TOKEN }, chains: chains(5) }, { prober: { intervalMs: 100 } });
  const cli = { metrics: { host: '127.0.0.1', port: g.gateway.metricsPort!, token: TOKEN } } as unknown as Config;
  const upstream = async (action: 'cordon' | 'uncordon', chain: string, node: string): Promise<{ code: number; out: string }> => {
    let out = '';
    const code = await runUpstream(
      cli,
      'test.yaml',
      { action, chain, node },
      (s) => (out += s),
      (s) => (out += s),
    );
    return { code, out };
  };

  const s = await openSubscriber(t, wsUrl(g.base, '/v1/rpc/public'));
  const id = await s.subscribe('newHeads');
  const numbers = (): number[] => s.resultsOf(id).map((h) => Number(h.number));
  let height = 3;
  const mine = async (): Promise<void> => {
    height++;
    await chain.mineTo(0, height);
    await chain.mineTo(1, height);
  };
  for (let k = 0; k < 50 && numbers().length === 0; k++) await mine();
  await waitFor(() => numbers().length > 0, { what: 'a first head', ms: 5000 });
  t.ok(ra.upgrades.length > 0, 'the subscriptions are on node a (the first)');
  const upgradesOnB = rb.upgrades.length;

  // The load: four callers in turn, each call numbered by when it was started.
  let seq = 0;
  let loading = true;
  let phase = 'before';
  const failures: string[] = [];
  const caller = async (): Promise<void> => {
    while (loading) {
      const r = await rpc(`${g.base}/v1/rpc/public`, 'eth_getBalance', [addressOf(++seq), 'latest']);
      const body = r.json as { result?: string; error?: { message: string } };
      if (body.result === undefined) failures.push(`${phase}: ${JSON.stringify(body)}`);
    }
  };
  const load = Promise.all([caller(), caller(), caller(), caller()]);
  await waitFor(() => pa.count('eth_getBalance') > 5 && pb.count('eth_getBalance') > 5, { what: 'calls reach both nodes' });

  const cordoned = await upstream('cordon', 'devnet', 'a');
  const startedBefore = seq;
  phase = 'cordoned';
  t.equal(cordoned.code, 0, `cordon answered: ${cordoned.out.trim()}`);
  for (let k = 0; k < 5; k++) await mine();
  await waitFor(() => rb.upgrades.length > upgradesOnB, { what: 'the subscriptions move to b', ms: 5000 });
  const target = height + 3;
  while (height < target) await mine();
  await waitFor(() => numbers().includes(target), { what: `block ${target} delivered`, ms: 10_000 });
  const seen = numbers();
  t.same(
    seen,
    Array.from({ length: seen.length }, (_, k) => seen[0]! + k),
    `every block once, in order (${seen.join(', ')})`,
  );
  const late = pa.calls.filter((c) => c.method === 'eth_getBalance' && seqOf(c.params[0]) > startedBefore);
  t.equal(late.length, 0, 'no call started after the cordon answered reached node a');
  t.ok(
    pb.calls.some((c) => c.method === 'eth_getBalance' && seqOf(c.params[0]) > startedBefore),
    'node b took them',
  );
  const health = await healthOf(g);
  t.match(health.chains.devnet!.upstreams[0], { in_rotation: false, reason: 'cordoned' }, 'healthz: a is cordoned');
  const metrics = await send('GET', `http://127.0.0.1:${g.gateway.metricsPort}/metrics`, undefined, { authorization: `Bearer ${TOKEN}` });
  t.match(metrics.text, /chaingate_upstream_in_rotation\{chain="devnet",upstream="a"\} 0/, 'metrics: a out of rotation');

  // A reload that makes the chain's runtime anew keeps a cordoned.
  const next = validateConfig({
    public: { rps_per_ip: 10_000_000, max_batch: 1000 },
    storage,
    server: { host: '127.0.0.1', port: 0, stop_timeout_s: 2 },
    metrics: { port: 0, token: TOKEN },
    management: { rps_per_key: 1_000_000, rps_per_ip: 1_000_000 },
    chains: chains(6),
  });
  if (!next.ok) throw new Error(next.errors.join('\n'));
  phase = 'reload';
  await g.gateway.reload(next.config);
  await waitFor(async () => (await healthOf(g)).chains.devnet!.upstreams[0]!.reason === 'cordoned', { what: 'a still cordoned' });
  const afterReload = seq;
  await waitFor(() => pb.calls.some((c) => c.method === 'eth_getBalance' && seqOf(c.params[0]) > afterReload + 8), {
    what: 'calls after the reload',
  });
  t.equal(
    pa.calls.filter((c) => c.method === 'eth_getBalance' && seqOf(c.params[0]) > startedBefore).length,
    0,
    'after the reload still no call reaches a',
  );

  const refused = await upstream('cordon', 'devnet', 'nope');
  t.equal(refused.code, 1, 'an unknown node is refused');
  t.match(refused.out, /no upstream named 'nope'; its upstreams: a, b/);

  const back = await upstream('uncordon', 'devnet', 'a');
  t.equal(back.code, 0, `uncordon answered: ${back.out.trim()}`);
  const uncordonedAt = seq;
  phase = 'uncordoned';
  await waitFor(() => pa.calls.some((c) => c.method === 'eth_getBalance' && seqOf(c.params[0]) > uncordonedAt), {
    what: 'calls reach a again',
  });
  t.match((await healthOf(g)).chains.devnet!.upstreams[0], { in_rotation: true });
  loading = false;
  await load;
  // A reload replaces the chain's runtime while calls are in flight on it: the old one is closed only once its
  // calls are answered (gateway-thread.ts), so even with a cordoned (no other node to retry on) none fails.
  t.same(failures, [], 'every call of the load was answered, through the cordon, the reload and the uncordon');
});
