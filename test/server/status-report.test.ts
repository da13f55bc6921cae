/**
 * GET /status's fleet section, read from a real PostgreSQL ledger store whose instances sent heartbeats
 * (`renew`), and its absence on one machine.
 */
import t from 'tap';
import { createPgLedgerStore } from '../../src/metering/pg-ledger-store.js';
import { type FleetStatusSource, fleetStatus, statusReport } from '../../src/server/status-report.js';
import { openPgStore } from '../../src/store/pg-open.js';
import { startPostgres } from '../support/servers.js';

const server = await startPostgres(t);
const pg = await openPgStore(server.url, { connectTimeoutMs: 1000 });
t.teardown(() => (pg.pool.ending ? undefined : pg.close()));
const ledgerStore = createPgLedgerStore(pg, { keepMinutesH: 24, keepHoursD: 30 });
t.teardown(() => ledgerStore.close());
const FLUSH = { lastAt: null, lastOk: null, failures: 0 };

t.test('on one machine the report has no fleet section', async (t) => {
  const report = statusReport([], () => ({ wsConnections: 0, sseClients: 0, subscriptions: 0, requestsPerSecond1m: 0 }), FLUSH, 5000);
  t.notOk('fleet' in report);
  t.same(JSON.parse(JSON.stringify(report)), {
    uptime_s: 5,
    chains: {},
    ledger: { last_flush_at: null, last_flush_ok: null, flush_failures: 0 },
  });
});

t.test('every instance with its start and last heartbeat, as the store clocked them', async (t) => {
  await ledgerStore.renew('a:8545', 30, { version: '1.2.0', pid: 41 });
  await ledgerStore.renew('b:8545', 30, { version: '1.2.0', pid: 42 });
  await new Promise((r) => setTimeout(r, 20));
  await ledgerStore.renew('a:8545', 30);
  const rows = await ledgerStore.instances();
  const a = rows.find((r) => r.id === 'a:8545')!;
  t.ok(a.heartbeatAt > a.startedAt, 'the second heartbeat moved the last one, not the start');

  const source: FleetStatusSource = { instance: 'b:8545', instances: () => ledgerStore.instances() };
  const now = a.heartbeatAt + 4_500;
  const fleet = await fleetStatus(source, now);
  t.same(fleet, {
    this_instance: 'b:8545',
    error: null,
    instances: rows.map((r) => ({
      id: r.id,
      started_at: new Date(r.startedAt).toISOString(),
      last_heartbeat_at: new Date(r.heartbeatAt).toISOString(),
      heartbeat_age_s: Math.floor((now - r.heartbeatAt) / 1000),
      info: r.info,
    })),
  });
  t.same(
    fleet.instances.map((i) => [i.id, i.heartbeat_age_s, i.info]),
    [
      ['a:8545', 4, { version: '1.2.0', pid: 41 }],
      ['b:8545', Math.floor((now - rows[1]!.heartbeatAt) / 1000), { version: '1.2.0', pid: 42 }],
    ],
    'a heartbeat without info keeps the info given before',
  );
  const report = statusReport([], () => ({ wsConnections: 0, sseClients: 0, subscriptions: 0, requestsPerSecond1m: 0 }), FLUSH, 0, fleet);
  t.same(report.fleet, fleet);
});

t.test('PostgreSQL down: the section says why rather than failing GET /status', async (t) => {
  await server.stop();
  t.teardown(() => server.start());
  const fleet = await fleetStatus({ instance: 'a:8545', instances: () => ledgerStore.instances() }, Date.now());
  t.equal(fleet.this_instance, 'a:8545');
  t.same(fleet.instances, []);
  t.type(fleet.error, 'string');
  t.not(fleet.error, '');
});
