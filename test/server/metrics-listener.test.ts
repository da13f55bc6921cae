import t from 'tap';
import { evmChain, gatewayFor } from '../support/gateway.js';
import { parseExposition, scrape } from '../support/exposition.js';

const TOKEN = 'a-metrics-token-of-some-length';

t.test('GET /metrics on its own listener: the exposition format, every line parsed, the default metrics beside ours', async (t) => {
  const { gateway } = await gatewayFor(t, { chains: { devnet: evmChain(['http://127.0.0.1:1'], 31337) } });
  t.ok(gateway.metricsPort, 'a metrics listener by default');
  t.not(gateway.metricsPort, gateway.port, 'on a port of its own');
  const res = await fetch(`http://127.0.0.1:${gateway.metricsPort}/metrics`);
  t.equal(res.status, 200);
  t.equal(res.headers.get('content-type'), 'text/plain; version=0.0.4; charset=utf-8');
  const m = parseExposition(await res.text());
  for (const name of [
    'chaingate_requests_total',
    'chaingate_upstream_in_rotation',
    'chaingate_config_reloads_total',
    'process_resident_memory_bytes',
    'nodejs_eventloop_lag_seconds',
  ])
    t.ok(m.types.has(name), `${name} is exported`);
  t.ok(m.value('process_resident_memory_bytes') > 0, 'the process metrics are live');

  const main = await fetch(`http://127.0.0.1:${gateway.port}/metrics`);
  t.equal(main.status, 404, 'the main listener does not serve them to tenants');
  await main.arrayBuffer();
  const other = await fetch(`http://127.0.0.1:${gateway.metricsPort}/other`);
  t.equal(other.status, 404, 'the metrics listener serves /metrics only');
  await other.arrayBuffer();
});

t.test('metrics.token: a scrape without the Bearer token is 401', async (t) => {
  const { gateway } = await gatewayFor(t, { chains: { devnet: evmChain(['http://127.0.0.1:1'], 31337) }, metrics: { token: TOKEN } });
  for (const auth of [undefined, 'Bearer wrong-token-of-some-length', `Basic ${TOKEN}`]) {
    const res = await fetch(`http://127.0.0.1:${gateway.metricsPort}/metrics`, auth ? { headers: { authorization: auth } } : {});
    t.equal(res.status, 401, `${auth ?? 'no header'} is refused`);
    t.equal(res.headers.get('www-authenticate'), 'Bearer realm="chaingate metrics"');
    t.notMatch(await res.text(), TOKEN, 'and the answer does not show the token');
  }
  const m = await scrape(gateway.metricsPort!, TOKEN);
  t.ok(m.types.has('chaingate_requests_total'), 'the right token scrapes');
});

t.test('metrics: { enabled: false } opens no listener', async (t) => {
  const { gateway } = await gatewayFor(t, { chains: { devnet: evmChain(['http://127.0.0.1:1'], 31337) }, metrics: { enabled: false } });
  t.equal(gateway.metricsPort, undefined);
});

t.test('POST /upstreams/cordon and /uncordon: behind the token, refusals name what was refused', async (t) => {
  const { gateway, base } = await gatewayFor(t, {
    chains: { devnet: { chain_id: 31337, upstreams: [{ name: 'a', url: 'http://127.0.0.1:1' }] } },
    metrics: { token: TOKEN },
  });
  const at = (path: string, auth = `Bearer ${TOKEN}`) =>
    fetch(`http://127.0.0.1:${gateway.metricsPort}${path}`, { method: 'POST', headers: { authorization: auth } });
  const refused = await at('/upstreams/cordon?chain=devnet&node=a', 'Bearer wrong-token-of-some-length');
  t.equal(refused.status, 401, 'no token, no cordon');
  await refused.arrayBuffer();
  const cases: Array<[string, number, unknown]> = [
    ['/upstreams/cordon?chain=devnet', 400, { error: 'needs ?chain=SLUG&node=NAME (the upstream name status shows)' }],
    ['/upstreams/cordon?chain=nope&node=a', 404, { error: "no chain 'nope' is configured" }],
    ['/upstreams/cordon?chain=devnet&node=b', 404, { error: "chain 'devnet' has no upstream named 'b'; its upstreams: a" }],
    ['/upstreams/cordon?chain=devnet&node=a', 200, { chain: 'devnet', node: 'a', cordoned: true, changed: true }],
    ['/upstreams/cordon?chain=devnet&node=a', 200, { chain: 'devnet', node: 'a', cordoned: true, changed: false }],
  ];
  for (const [path, status, body] of cases) {
    const res = await at(path);
    t.equal(res.status, status, path);
    t.same(await res.json(), body);
  }
  const health = (await (await fetch(`${base}/healthz`)).json()) as { chains: { devnet: { upstreams: Array<{ reason: string }> } } };
  t.equal(health.chains.devnet.upstreams[0]!.reason, 'cordoned');
  const back = await at('/upstreams/uncordon?chain=devnet&node=a');
  t.same(await back.json(), { chain: 'devnet', node: 'a', cordoned: false, changed: true });
});
