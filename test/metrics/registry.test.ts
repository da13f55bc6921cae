import t from 'tap';
import { isPerChain, METRIC_FAMILIES } from '../../src/metrics/catalogue.js';
import { createMetrics } from '../../src/metrics/registry.js';
import { parseExposition } from '../support/exposition.js';

t.test('a chain: requests by their labels, the last minute rate, the open counts, and remove()', async (t) => {
  let now = 1_000_000;
  const m = createMetrics({ defaults: false, now: () => now });
  const c = m.chain('eth');
  c.request('http', 'eth_call', 200, 0.002);
  c.request('http', 'eth_call', 200, 0.004);
  c.request('ws', 'other', 429, 0.001);
  c.wsConnection(1);
  c.wsConnection(1);
  c.wsConnection(-1);
  c.subscription('newHeads', 1);
  c.sseClient(1);
  c.upstream('node-a').call('timeout', 5);
  let x = parseExposition(await m.text());
  t.equal(x.value('chaingate_requests_total', { chain: 'eth', transport: 'http', method: 'eth_call', status: '200' }), 2);
  t.equal(x.value('chaingate_requests_total', { chain: 'eth', transport: 'ws', method: 'other', status: '429' }), 1);
  t.equal(x.value('chaingate_request_duration_seconds_count', { chain: 'eth', transport: 'http' }), 2);
  t.equal(x.value('chaingate_ws_connections', { chain: 'eth' }), 1);
  t.equal(x.value('chaingate_subscriptions', { chain: 'eth', kind: 'newHeads' }), 1);
  t.equal(x.value('chaingate_upstream_requests_total', { chain: 'eth', upstream: 'node-a', outcome: 'timeout' }), 1);
  t.same(c.snapshot(), { wsConnections: 1, sseClients: 1, subscriptions: 1, requestsPerSecond1m: 3 / 60 });

  now += 30_000;
  c.request('http', 'eth_call', 200, 0.001);
  t.equal(c.snapshot().requestsPerSecond1m, 4 / 60, 'within the minute every request counts');
  now += 45_000;
  t.equal(c.snapshot().requestsPerSecond1m, 1 / 60, 'a minute later the first three are gone');
  now += 600_000;
  t.equal(c.snapshot().requestsPerSecond1m, 0, 'and after a long quiet, all');

  c.remove();
  x = parseExposition(await m.text());
  t.same(x.series('chaingate_requests_total'), [], "a removed chain's series are gone");
  t.same(x.series('chaingate_upstream_requests_total'), [], 'its upstreams too');
  m.chain('eth').request('http', 'eth_call', 200, 0.001);
  x = parseExposition(await m.text());
  t.equal(x.value('chaingate_requests_total', { chain: 'eth', transport: 'http', method: 'eth_call', status: '200' }), 1, 'counted anew');
});

t.test("every family labelled by chain loses its series with the chain, and keeps the other chains'", async (t) => {
  const m = createMetrics({ defaults: false });
  for (const slug of ['eth', 'base']) {
    const c = m.chain(slug);
    c.request('http', 'eth_call', 200, 0.002);
    c.ruCharged.inc(3);
    c.cacheHits.inc();
    c.cacheMisses.inc();
    c.cacheBytes.set(100);
    c.sharedCalls.inc();
    c.head.set(7);
    c.finality('finalized').set(3);
    c.finality('safe').set(5);
    c.wsConnection(1);
    c.sseClient(1);
    c.subscription('newHeads', 1);
    c.notifications('newHeads').inc();
    c.sseEvents('head').inc();
    const u = c.upstream('node-a');
    u.call('ok', 0.01);
    u.inRotation.set(1);
    u.head.set(7);
    u.wrongChain.set(0);
    u.checkFailed('block');
    const q = c.consensus('eth_getBalance');
    q.call('agreed');
    q.mismatch('node-a');
  }
  // A histogram's series are read by its _count.
  const rows = Object.values(METRIC_FAMILIES).filter(isPerChain);
  const seriesOf = (x: ReturnType<typeof parseExposition>, row: (typeof rows)[number]) =>
    x.series(row.type === 'histogram' ? `${row.name}_count` : row.name);
  t.ok(rows.length >= 18, `${rows.length} families are per chain`);
  let x = parseExposition(await m.text());
  for (const row of rows)
    t.ok(
      seriesOf(x, row).some((s) => s.labels.chain === 'eth'),
      `${row.name} has a series of the chain (a new per-chain family is counted above too)`,
    );

  m.chain('eth').remove();
  x = parseExposition(await m.text());
  const left = [...x.samples.keys()].filter((series) => series.includes('chain="eth"'));
  t.same(left, [], 'no series of the removed chain is left, in any family');
  for (const row of rows)
    t.ok(
      seriesOf(x, row).some((s) => s.labels.chain === 'base'),
      `${row.name} keeps the other chain's series`,
    );
});

t.test('limit table evictions: every table at 0 from the start, then counted by table', async (t) => {
  const m = createMetrics({ defaults: false });
  let x = parseExposition(await m.text());
  for (const table of ['rate', 'unknown_keys', 'websocket', 'sse'])
    t.equal(x.value('chaingate_limit_table_evictions_total', { table }), 0, table);
  m.limitTableEviction('rate');
  m.limitTableEviction('rate');
  m.limitTableEviction('sse');
  x = parseExposition(await m.text());
  t.equal(x.value('chaingate_limit_table_evictions_total', { table: 'rate' }), 2);
  t.equal(x.value('chaingate_limit_table_evictions_total', { table: 'sse' }), 1);
  t.equal(x.value('chaingate_limit_table_evictions_total', { table: 'unknown_keys' }), 0);
});

t.test('reloads, refusals and slow consumers', async (t) => {
  const m = createMetrics({ defaults: false });
  let x = parseExposition(await m.text());
  t.equal(x.series('chaingate_config_reloads_total').length, 2, 'both results are there from the start');
  m.configReload(true, 1_700_000_000_000);
  m.configReload(false, 1_700_000_100_000);
  m.refusal('invalid_key');
  m.slowConsumer('ws');
  x = parseExposition(await m.text());
  t.equal(x.value('chaingate_config_reloads_total', { result: 'success' }), 1);
  t.equal(x.value('chaingate_config_reloads_total', { result: 'failure' }), 1);
  t.equal(x.value('chaingate_config_last_reload_success_timestamp_seconds'), 1_700_000_000, 'a failure leaves the last success');
  t.equal(x.value('chaingate_refusals_total', { reason: 'invalid_key' }), 1);
  t.equal(x.value('chaingate_slow_consumers_total', { transport: 'ws' }), 1);
});
