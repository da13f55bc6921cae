/**
 * The management API over the fleet's account store: a real PostgreSQL, a real uWS listener on port 0.
 * What the SQLite daemon answers is covered end to end (test/e2e/tenancy.test.ts, store-faults.test.ts);
 * here the same routes run on the asynchronous store of a fleet, and PostgreSQL going away is a 503.
 */
import t from 'tap';
import { createPostgresAccounts } from '../../src/accounts/postgres-accounts.js';
import { validateConfig } from '../../src/config/schema.js';
import { openPgStore } from '../../src/store/pg-open.js';
import { serveManagement } from '../support/management-api.js';
import { startPostgres } from '../support/servers.js';

const server = await startPostgres(t);
const pg = await openPgStore(server.url, { connectTimeoutMs: 1000 });
t.teardown(() => (pg.pool.ending ? undefined : pg.close()));
const accounts = createPostgresAccounts(pg);

const checked = validateConfig({
  storage: { url: server.url },
  cluster: { redis_url: 'redis://127.0.0.1:1/0' },
  chains: { mainnet: { chain_id: 1, upstreams: [{ url: 'http://127.0.0.1:1' }] } },
});
if (!checked.ok) throw new Error(checked.errors.join('; '));

const faults: string[] = [];
const deleted: string[] = [];
const api = await serveManagement(t, accounts, checked.config, {
  // As the fleet's: the shared store's balance, asked asynchronously, less what this instance has not written.
  balance: async (ownerId) =>
    ((await pg.pool.query<{ b: number }>('SELECT ru_balance AS b FROM owners WHERE id = $1', [ownerId])).rows[0]?.b ?? 0) - 7,
  onEndpointDeleted: (id) => void deleted.push(id),
  onStoreFault: (during, err) => void faults.push(`${during}: ${err.message}`),
});

t.test('account, create, list, stats and delete through PostgreSQL', async (t) => {
  const owner = await accounts.createOwner('fleet-owner', 'free', 500);
  const account = await api(owner.managementKey, 'GET', '/api/dashboard/account');
  // The plan's whole view is checked in test/e2e/tenancy.test.ts; here, what the store gives.
  t.match(account, {
    status: 200,
    json: { data: { id: owner.id, name: 'fleet-owner', plan: { name: 'free', rps: 100, ru_per_second: null }, ru_balance: 493 } },
  });

  const made = await api(owner.managementKey, 'POST', '/api/dashboard/endpoints', { network: 'mainnet', name: 'app' });
  t.equal(made.status, 201);
  const ep = (made.json as { data: { id: string; api_key: string } }).data;
  t.ok(await accounts.endpointByKey(ep.api_key), 'the key is in the shared store');

  const listed = await api(owner.managementKey, 'GET', '/api/dashboard/endpoints');
  t.match(listed, { status: 200, json: { data: [{ id: ep.id, name: 'app', network: 'mainnet' }] } });
  const stats = await api(owner.managementKey, 'GET', `/api/dashboard/endpoints/stats?id=${ep.id}`);
  t.match(stats, { status: 200, json: { data: { totals: { requests: 0, ru: 0 } } } });

  const gone = await api(owner.managementKey, 'DELETE', `/api/dashboard/endpoints?id=${ep.id}`);
  t.same({ status: gone.status, json: gone.json }, { status: 200, json: { data: { id: ep.id, deleted: true } } });
  t.same(deleted, [ep.id], 'the deletion is reported, so its sockets close');
  t.equal(await accounts.endpointByKey(ep.api_key), null);
  t.equal((await api(owner.managementKey, 'DELETE', `/api/dashboard/endpoints?id=${ep.id}`)).status, 404);
  t.equal((await api('cg_mgmt_wrong', 'GET', '/api/dashboard/account')).status, 401);
  t.same(faults, []);
});

t.test('PostgreSQL unreachable: 503 store_unavailable, reported, and the listener lives on', async (t) => {
  const owner = await accounts.createOwner('stranded', 'free', 10);
  await server.stop();
  for (const [method, path, body] of [
    ['GET', '/api/dashboard/account', undefined],
    ['POST', '/api/dashboard/endpoints', { network: 'mainnet' }],
  ] as const) {
    const r = await api(owner.managementKey, method, path, body);
    t.equal(r.status, 503, `${method} ${path}`);
    t.match(r.json, { error: { code: 'store_unavailable', message: /unreachable or failing/ } });
  }
  t.equal(faults.length, 2);
  t.match(faults[0], /^GET \/api\/dashboard\/account: /);
  await server.start();
  const back = await api(owner.managementKey, 'GET', '/api/dashboard/account');
  t.equal(back.status, 200, 'answers again once PostgreSQL is back');
});
