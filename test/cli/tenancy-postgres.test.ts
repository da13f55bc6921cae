/**
 * The operator commands on a fleet's config (storage.url and cluster.redis_url): they work on the shared
 * PostgreSQL alone, and never open a connection to Redis (a listener in its place counts them).
 */
import t from 'tap';
import { createServer, type Socket } from 'node:net';
import { createPostgresAccounts } from '../../src/accounts/postgres-accounts.js';
import { type Config, validateConfig } from '../../src/config/schema.js';
import { createPgLedgerStore } from '../../src/metering/pg-ledger-store.js';
import { openPgStore } from '../../src/store/pg-open.js';
import { freePort, startPostgres } from '../support/servers.js';
import { runTenancy as run } from '../support/tenancy-cli.js';

function fleetConfig(url: string, redisPort: number): Config {
  const r = validateConfig({
    storage: { url },
    cluster: { redis_url: `redis://127.0.0.1:${redisPort}/0` },
    chains: { mainnet: { chain_id: 1, upstreams: [{ url: 'http://127.0.0.1:1' }] } },
  });
  if (!r.ok) throw new Error(r.errors.join('; '));
  return r.config;
}

const server = await startPostgres(t);
// Where Redis would be: anything connecting here is counted, and nothing should.
const redisConnections: Socket[] = [];
const fakeRedis = createServer((socket) => void redisConnections.push(socket.destroy()));
await new Promise<void>((resolve) => fakeRedis.listen(0, '127.0.0.1', resolve));
t.teardown(() => fakeRedis.close());
const config = fleetConfig(server.url, (fakeRedis.address() as { port: number }).port);

t.test('owner create, topup, list and endpoint list on the shared PostgreSQL', async (t) => {
  const created = await run(config, 'owner', 'create', '--name', 'fleet co', '--plan', 'growth', '--ru', '1000', '--json');
  t.equal(created.code, 0, created.err);
  const { id, management_key } = JSON.parse(created.out) as { id: number; management_key: string };
  t.equal(id, 1);

  const pg = await openPgStore(server.url);
  t.teardown(() => pg.close());
  const accounts = createPostgresAccounts(pg);
  t.match(await accounts.ownerByManagementKey(management_key), { id, name: 'fleet co', plan: 'growth', ruBalance: 1000 });

  t.same(await run(config, 'owner', 'topup', String(id), '--ru', '500'), { code: 0, out: 'owner 1: balance 1500 RU\n', err: '' });

  // An instance spends 120 RU and writes them: the list shows the shared store's balance, as the ledger store reads it.
  const ep = await accounts.createEndpoint(id, 'mainnet', 'api', 50);
  if (ep.kind === 'refused') throw new Error(ep.error);
  const ledgerStore = createPgLedgerStore(pg, { keepMinutesH: 24, keepHoursD: 30 });
  t.teardown(() => ledgerStore.close());
  await ledgerStore.writeUsage({
    id: 'cli-test-1',
    instance: 'a:1',
    ttlS: 60,
    rows: [{ endpointId: ep.endpoint.id, ownerId: id, method: 'eth_call', t: 1_700_000_040, status: 0, requests: 12, ru: 120 }],
  });
  t.equal(await ledgerStore.balance(id), 1380);
  const listed = await run(config, 'owner', 'list', '--json');
  t.equal(listed.code, 0, listed.err);
  t.match(JSON.parse(listed.out), [{ id, name: 'fleet co', plan: 'growth', ru_balance: 1380, suspended: false, endpoints: 1 }]);
  t.match((await run(config, 'owner', 'list')).out, /\n1\s+fleet co\s+growth\s+1380\s+no\s+1\s/);

  const endpoints = await run(config, 'endpoint', 'list', '--owner', String(id), '--json');
  t.equal(endpoints.code, 0, endpoints.err);
  t.match(JSON.parse(endpoints.out), [
    { id: ep.endpoint.id, owner_id: id, name: 'api', network: 'mainnet', key_prefix: ep.endpoint.keyPrefix },
  ]);
  t.same(await run(config, 'owner', 'topup', '99', '--ru', '1'), { code: 1, out: '', err: 'chaingate: no owner 99\n' });
  t.equal(redisConnections.length, 0, 'the CLI never connects to Redis');
});

t.test('backup is for the SQLite file: refused on a fleet config, naming storage.url without its password', async (t) => {
  const withPassword = fleetConfig(server.url.replace('chaingate@', 'chaingate:hunter2@'), 1);
  const r = await run(withPassword, 'backup', '--out', '/tmp/never-written.db');
  t.equal(r.code, 1);
  t.match(
    r.err,
    /^chaingate: backup copies the SQLite file at storage\.path, .*storage\.url postgres:\/\/chaingate:\*\*\*@127\.0\.0\.1:\d+\/chaingate\).*pg_dump\n$/,
  );
  t.notMatch(r.err, 'hunter2');
});

t.test('PostgreSQL unreachable: exit 1 naming the database, its password hidden', async (t) => {
  const port = await freePort();
  const r = await run(fleetConfig(`postgres://chaingate:hunter2@127.0.0.1:${port}/chaingate`, 1), 'owner', 'list');
  t.equal(r.code, 1);
  t.match(r.err, `ECONNREFUSED`);
  t.match(r.err, `(database postgres://chaingate:***@127.0.0.1:${port}/chaingate)\n`);
  t.notMatch(r.err, 'hunter2');
  const usage = await run(fleetConfig(`postgres://127.0.0.1:${port}/chaingate`, 1), 'owner', 'set-plan', '1', 'nope');
  t.equal(usage.code, 2, 'a bad argument is named before any connection is tried');
});
