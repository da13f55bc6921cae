/**
 * The metrics move when their events happen, against a real anvil: each event is made and its counter read
 * before and after on the metrics listener. And neither the exposition nor the log holds an API key, a
 * management key or an upstream URL.
 */
import t, { type Test } from 'tap';
import { createOwnerAdmin } from '../../src/tenancy/owners.js';
import { scrape } from '../support/exposition.js';
import { anvilFor, gatewayFor, type TestGateway } from '../support/gateway.js';
import { result as direct } from '../support/dev-chain.js';
import { oneConnection, post, rpc, send } from '../support/rpc.js';
import { openSocket, wsUrl } from '../support/ws.js';

const DEAD_URL = 'http://127.0.0.1:1/secret-path-token';
const FINALITY_DEPTH = 2;

async function until(t: Test, what: string, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 15_000;
  while (!(await check()) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  t.ok(await check(), what);
}

async function setup(t: Test): Promise<{ g: TestGateway; nodeUrl: string; apiKey: string; mgmtKey: string; poorKey: string }> {
  // anvil's finalized block (what the cache takes as final) two 1-slot epochs behind its head: FINALITY_DEPTH.
  const node = await anvilFor(t, { chainId: 31337, args: ['--slots-in-an-epoch', String(FINALITY_DEPTH / 2)] });
  await direct(node.url, 'anvil_mine', ['0xa']);
  const g = await gatewayFor(t, {
    public: { rps_per_ip: 4, max_batch: 100 },
    log: { access: true },
    server: { default_chain: 'devnet' },
    ledger: { flush_interval_ms: 50 },
    chains: {
      devnet: {
        chain_id: 31337,
        finality_depth: FINALITY_DEPTH,
        upstreams: [{ name: 'anvil-a', url: node.url, ws: node.url.replace('http', 'ws') }],
      },
      deadnet: { chain_id: 31338, upstreams: [{ name: 'dead-node', url: DEAD_URL }] },
    },
  });
  const admin = createOwnerAdmin(g.gateway.context.tenancy.store!);
  const rich = admin.createOwner('rich', 'growth', 1_000_000);
  const poor = admin.createOwner('poor', 'growth', 0);
  const made = await send('POST', `${g.base}/api/dashboard/endpoints`, JSON.stringify({ network: 'devnet' }), {
    authorization: `Bearer ${rich.managementKey}`,
    'content-type': 'application/json',
  });
  t.equal(made.status, 201, 'an endpoint made through the management API');
  const apiKey = (made.json as { data: { api_key: string } }).data.api_key;
  const poorMade = g.gateway.context.tenancy.directory!.createEndpoint(poor.id, 'devnet', 'poor', 10);
  if (!('apiKey' in poorMade)) throw new Error(poorMade.error);
  return { g, nodeUrl: node.url, apiKey, mgmtKey: rich.managementKey, poorKey: poorMade.apiKey };
}

t.test('each event moves its metric, once; no key or upstream URL is exposed', async (t) => {
  const { g, nodeUrl, apiKey, mgmtKey, poorKey } = await setup(t);
  const port = g.gateway.metricsPort!;
  const url = `${g.base}/v1/rpc/${apiKey}`;
  const req = (labels: Record<string, string>) => ({ chain: 'devnet', transport: 'http', ...labels });
  await until(t, 'the gateway knows the head', async () => g.gateway.context.chains.get('devnet')!.head.now() !== null);
  await until(t, 'and the finalized block', async () => g.gateway.context.chains.get('devnet')!.finality.finalized() !== null);

  // A forwarded call: one request, one upstream call, RU charged.
  let before = await scrape(port);
  const r = await rpc(url, 'eth_gasPrice');
  t.equal(r.status, 200);
  let after = await scrape(port);
  t.equal(
    after.value('chaingate_requests_total', req({ method: 'eth_gasPrice', status: '200' })) -
      before.value('chaingate_requests_total', req({ method: 'eth_gasPrice', status: '200' })),
    1,
    'a forwarded call counts one request',
  );
  t.equal(
    after.value('chaingate_upstream_requests_total', { chain: 'devnet', upstream: 'anvil-a', outcome: 'ok' }) -
      before.value('chaingate_upstream_requests_total', { chain: 'devnet', upstream: 'anvil-a', outcome: 'ok' }),
    1,
    'and one upstream call, ok, labelled by the upstream name',
  );
  t.ok(
    after.value('chaingate_ru_charged_total', { chain: 'devnet' }) > before.value('chaingate_ru_charged_total', { chain: 'devnet' }),
    'RU charged',
  );
  t.ok(after.value('chaingate_request_duration_seconds_count', { chain: 'devnet', transport: 'http' }) >= 1, 'its duration observed');
  t.equal(after.value('chaingate_upstream_in_rotation', { chain: 'devnet', upstream: 'anvil-a' }), 1);
  t.ok(after.value('chaingate_upstream_head', { chain: 'devnet', upstream: 'anvil-a' }) >= 10, 'the upstream head');
  t.ok(after.value('chaingate_chain_head', { chain: 'devnet' }) >= 10, 'the chain head');

  // A node error object is rpc_error; a method not allowlisted is labelled other.
  before = after;
  const conn = oneConnection();
  await conn.rpc(url, 'eth_getBlockByNumber', ['0x5', false]);
  await conn.rpc(url, 'eth_getBlockByNumber', ['0x5', false]);
  conn.close();
  await rpc(url, 'no_suchMethod_xyz');
  after = await scrape(port);
  t.equal(
    after.value('chaingate_cache_misses_total', { chain: 'devnet' }) - before.value('chaingate_cache_misses_total', { chain: 'devnet' }),
    1,
    'a cacheable call first misses',
  );
  t.equal(
    after.value('chaingate_cache_hits_total', { chain: 'devnet' }) - before.value('chaingate_cache_hits_total', { chain: 'devnet' }),
    1,
    'then hits',
  );
  t.ok(after.value('chaingate_cache_bytes', { chain: 'devnet' }) > 0, 'the cache holds bytes');
  t.equal(
    after.value('chaingate_requests_total', req({ method: 'other', status: '200' })) -
      before.value('chaingate_requests_total', req({ method: 'other', status: '200' })),
    1,
    'an unknown method is counted as other',
  );
  t.equal(
    after.value('chaingate_refusals_total', { reason: 'method_not_allowed' }) -
      before.value('chaingate_refusals_total', { reason: 'method_not_allowed' }),
    1,
  );
  t.notOk(
    after.series('chaingate_requests_total').some((s) => s.labels.method === 'no_suchMethod_xyz'),
    'never the client string',
  );

  // Shared: identical reads at once.
  before = after;
  const same = await Promise.all(
    Array.from({ length: 8 }, () => rpc(url, 'eth_getBalance', ['0x70997970C51812dc3A010C7d01b50e0d17dc79C8', 'latest'])),
  );
  t.ok(same.every((a) => a.status === 200));
  after = await scrape(port);
  t.ok(
    after.value('chaingate_shared_calls_total', { chain: 'devnet' }) > before.value('chaingate_shared_calls_total', { chain: 'devnet' }),
    'identical calls in flight are shared',
  );
  t.equal(
    after.value('chaingate_requests_total', req({ method: 'eth_getBalance', status: '200' })) -
      before.value('chaingate_requests_total', req({ method: 'eth_getBalance', status: '200' })),
    8,
    'each shared call answered counts once',
  );

  // Refusals: a bad key (401), no balance (402), over the public rate (429, a batch counts each item).
  before = after;
  t.equal((await rpc(`${g.base}/v1/rpc/notakey0000000000000000000000000`, 'eth_chainId')).status, 401);
  t.equal((await rpc(`${g.base}/v1/rpc/${poorKey}`, 'eth_chainId')).status, 402);
  const batch = JSON.stringify(Array.from({ length: 6 }, (_, i) => ({ jsonrpc: '2.0', id: i, method: 'eth_chainId', params: [] })));
  await post(`${g.base}/v1/rpc/public`, batch);
  after = await scrape(port);
  const moved = (name: string, labels: Record<string, string>) => after.value(name, labels) - before.value(name, labels);
  t.equal(moved('chaingate_refusals_total', { reason: 'invalid_key' }), 1, '401 is invalid_key');
  t.equal(moved('chaingate_requests_total', req({ method: 'other', status: '401' })), 1);
  t.equal(moved('chaingate_refusals_total', { reason: 'insufficient_ru' }), 1, '402 is insufficient_ru');
  t.equal(moved('chaingate_requests_total', req({ method: 'eth_chainId', status: '402' })), 1);
  t.ok(moved('chaingate_refusals_total', { reason: 'rate_limited' }) >= 2, 'the items over the rate are rate_limited');
  t.equal(
    moved('chaingate_requests_total', req({ method: 'eth_chainId', status: '429' })) +
      moved('chaingate_requests_total', req({ method: 'eth_chainId', status: '200' })),
    6,
    'a batch counts each item',
  );

  // An upstream that cannot be reached: transport_error, then out of rotation, logged once.
  // A new second of the public rate.
  await new Promise((r) => setTimeout(r, 1100));
  before = after;
  const dead = await rpc(`${g.base}/deadnet/v1/rpc/public`, 'eth_gasPrice');
  t.equal(dead.status, 502);
  // The call tried the node (a transport_error, counted when the attempt settles, which may come after the
  // 502 is sent), unless the health probe had already taken it out of rotation: then no node was tried.
  const tried = (): number =>
    moved('chaingate_upstream_requests_total', { chain: 'deadnet', upstream: 'dead-node', outcome: 'transport_error' }) +
    moved('chaingate_refusals_total', { reason: 'no_upstream' });
  await until(t, 'the failed attempt, or the refusal for want of a node, is counted', async () => {
    after = await scrape(port);
    return tried() >= 1;
  });
  t.equal(tried(), 1, 'once');
  t.equal(moved('chaingate_requests_total', { chain: 'deadnet', transport: 'http', method: 'eth_gasPrice', status: '502' }), 1);
  await until(t, 'the dead node goes out of rotation', async () => {
    return (await scrape(port)).value('chaingate_upstream_in_rotation', { chain: 'deadnet', upstream: 'dead-node' }) === 0;
  });
  t.equal(g.logLines.filter((l) => l.includes('upstream out of rotation') && l.includes('dead-node')).length, 1, 'logged once');
  t.ok(
    g.logLines.some((l) => l.startsWith('warn requests answered with a 5xx chain=deadnet method=eth_gasPrice status=502 reason=')),
    'a decided 5xx is logged',
  );

  // A WebSocket, a newHeads subscription and a notification.
  before = await scrape(port);
  const sock = await openSocket(t, wsUrl(g.base, `/v1/rpc/${apiKey}`));
  const subscribed = (await sock.call({ jsonrpc: '2.0', id: 1, method: 'eth_subscribe', params: ['newHeads'] })) as { result?: string };
  t.type(subscribed.result, 'string', 'subscribed');
  await direct(nodeUrl, 'anvil_mine', ['0x1']);
  t.match(await sock.next(10_000), /eth_subscription/, 'notified');
  after = await scrape(port);
  t.equal(after.value('chaingate_ws_connections', { chain: 'devnet' }), 1, 'one socket open');
  t.equal(after.value('chaingate_subscriptions', { chain: 'devnet', kind: 'newHeads' }), 1, 'one subscription');
  t.ok(moved('chaingate_notifications_total', { chain: 'devnet', kind: 'newHeads' }) >= 1, 'notifications counted');
  t.equal(moved('chaingate_requests_total', { chain: 'devnet', transport: 'ws', method: 'eth_subscribe', status: '200' }), 1);
  sock.ws.close();
  await until(t, 'the socket is counted closed', async () => {
    const s = await scrape(port);
    return (
      s.value('chaingate_ws_connections', { chain: 'devnet' }) === 0 &&
      s.value('chaingate_subscriptions', { chain: 'devnet', kind: 'newHeads' }) === 0
    );
  });

  // The ledger's flushes are measured.
  await until(t, 'a ledger flush observed', async () => (await scrape(port)).value('chaingate_ledger_flush_duration_seconds_count') >= 1);

  // An access line per request, with the key's prefix only.
  t.ok(
    g.logLines.some((l) => l.includes('request') && l.includes(`key=${apiKey.slice(0, 8)}`)),
    'the access log names the key by its prefix',
  );
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  for (const secret of [apiKey, poorKey, mgmtKey, DEAD_URL, 'secret-path-token', nodeUrl]) {
    t.notOk(text.includes(secret), `the exposition never holds ${secret.slice(0, 6)}…`);
    t.notOk(
      g.logLines.some((l) => l.includes(secret)),
      `the log never holds ${secret.slice(0, 6)}…`,
    );
  }
});

t.test('metrics disabled: the gateway measures nothing and serves no listener', async (t) => {
  const node = await anvilFor(t);
  const g = await gatewayFor(t, {
    metrics: { enabled: false },
    chains: { devnet: { chain_id: 31337, upstreams: [{ url: node.url }] } },
  });
  t.equal(g.gateway.metricsPort, undefined);
  t.equal((await rpc(`${g.base}/v1/rpc/public`, 'eth_chainId')).status, 200);
  t.equal((await g.gateway.context.metrics.text()).trim(), '', 'a no-op registry');
});
