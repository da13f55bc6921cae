/**
 * The Beacon side of the metrics: a Beacon request counted by its route template, an event stream by
 * `sse` with its client gauge, each event delivered by topic, and the node's calls by its name.
 */
import t from 'tap';
import { scrape } from '../support/exposition.js';
import { devnetBeacon } from '../support/devnet-beacon.js';
import { openEventStream } from '../support/event-stream.js';
import { rpc } from '../support/rpc.js';

t.test('Beacon requests, event streams and events move their counters', async (t) => {
  const { anvil, g } = await devnetBeacon(t);
  const port = g.gateway.metricsPort!;
  const base = `${g.base}/devnet-beacon/v1/rpc/public`;
  const before = await scrape(port);

  const header = await fetch(`${base}/eth/v1/beacon/headers/head`);
  t.equal(header.status, 200);
  await header.arrayBuffer();
  const missing = await fetch(`${base}/eth/v1/no/such/path`);
  t.equal(missing.status, 404);
  await missing.arrayBuffer();

  const stream = await openEventStream(`${base}/eth/v1/events?topics=head`);
  t.teardown(() => stream.close());
  t.equal(stream.status, 200);
  let open = await scrape(port);
  t.equal(open.value('chaingate_sse_clients', { chain: 'devnet-beacon' }), 1, 'the open stream is counted');
  const deadline = Date.now() + 10_000;
  while (stream.events.length < 2) {
    if (Date.now() > deadline) throw new Error('no head events within 10 s');
    await rpc(anvil.url, 'evm_mine');
    await new Promise((r) => setTimeout(r, 300));
  }
  const after = await scrape(port);
  const moved = (name: string, labels: Record<string, string>): number => after.value(name, labels) - before.value(name, labels);
  t.equal(
    moved('chaingate_requests_total', {
      chain: 'devnet-beacon',
      transport: 'beacon',
      method: '/eth/v1/beacon/headers/{block_id}',
      status: '200',
    }),
    1,
    'a Beacon request by its route template',
  );
  t.equal(
    moved('chaingate_requests_total', { chain: 'devnet-beacon', transport: 'beacon', method: 'other', status: '404' }),
    1,
    'an unknown path as other',
  );
  t.equal(moved('chaingate_refusals_total', { reason: 'not_found' }), 1);
  t.equal(
    moved('chaingate_requests_total', { chain: 'devnet-beacon', transport: 'sse', method: '/eth/v1/events', status: '200' }),
    1,
    'the stream opened',
  );
  t.ok(
    moved('chaingate_sse_events_total', { chain: 'devnet-beacon', topic: 'head' }) >= stream.events.length,
    `every head event delivered is counted (${stream.events.length} received)`,
  );
  t.ok(
    moved('chaingate_upstream_requests_total', {
      chain: 'devnet-beacon',
      upstream: new URL(g.gateway.context.config.chains['devnet-beacon']!.upstreams[0]!.url).host,
      outcome: 'ok',
    }) >= 1,
  );

  stream.close();
  const deadline2 = Date.now() + 5_000;
  do {
    open = await scrape(port);
    if (open.value('chaingate_sse_clients', { chain: 'devnet-beacon' }) === 0) break;
    await new Promise((r) => setTimeout(r, 100));
  } while (Date.now() < deadline2);
  t.equal(open.value('chaingate_sse_clients', { chain: 'devnet-beacon' }), 0, 'and uncounted once it left');
});
