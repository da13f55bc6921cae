/**
 * The management API of an endpoint's restrictions and key (issue 31): settings at creation, PATCH,
 * the list, rotation with a grace, and a suspended owner's 403. A real uWS listener on port 0 over each
 * account store: a real SQLite file, and a real PostgreSQL (the fleet's).
 */
import t, { type Test } from 'tap';
import type { AccountStore } from '../../src/accounts/account-store.js';
import { createPostgresAccounts } from '../../src/accounts/postgres-accounts.js';
import { createSqliteAccounts } from '../../src/accounts/sqlite-accounts.js';
import { validateConfig } from '../../src/config/schema.js';
import { openPgStore } from '../../src/store/pg-open.js';
import { type ManagementApi, serveManagement } from '../support/management-api.js';
import { startPostgres } from '../support/servers.js';
import { tempStore } from '../store/temp-store.js';

type Api = ManagementApi;

/** A listener serving the management API over `accounts`; the ids of endpoints reported deleted. */
async function serve(t: Test, accounts: AccountStore, storageUrl?: string): Promise<Api> {
  const checked = validateConfig({
    ...(storageUrl === undefined ? {} : { storage: { url: storageUrl }, cluster: { redis_url: 'redis://127.0.0.1:1/0' } }),
    server: { public_base_url: 'https://{chain}.rpc.example', default_chain: 'mainnet' },
    // Many calls in a second here: the management rates are tested in test/e2e/management-limits.test.ts.
    management: { rps_per_key: 1000, rps_per_ip: 1000 },
    chains: {
      mainnet: { chain_id: 1, upstreams: [{ url: 'http://127.0.0.1:1' }] },
      beacon: { kind: 'beacon', upstreams: [{ url: 'http://127.0.0.1:1' }] },
    },
  });
  if (!checked.ok) throw new Error(checked.errors.join('; '));
  return serveManagement(t, accounts, checked.config);
}

const ENGINES: Record<string, (t: Test) => Promise<{ accounts: AccountStore; url?: string }>> = {
  sqlite: async (t) => ({ accounts: createSqliteAccounts(tempStore(t)) }),
  postgres: async (t) => {
    const server = await startPostgres(t);
    const pg = await openPgStore(server.url, { connectTimeoutMs: 2000 });
    t.teardown(() => (pg.pool.ending ? undefined : pg.close()));
    return { accounts: createPostgresAccounts(pg), url: server.url };
  },
};

const ORIGIN = 'https://app.example.com';
const CONTRACT = '0x' + 'AB'.repeat(20);

for (const [engine, open] of Object.entries(ENGINES)) {
  t.test(engine, async (t) => {
    const { accounts, url } = await open(t);
    const api = await serve(t, accounts, url);
    const alice = await accounts.createOwner('alice', 'free', 100);
    const bob = await accounts.createOwner('bob', 'free', 100);

    t.test('POST takes the settings; GET shows them; every problem named at once', async (t) => {
      const made = await api(alice.managementKey, 'POST', '/api/dashboard/endpoints', {
        network: 'mainnet',
        name: 'web',
        allowed_origins: [`${ORIGIN}:443`, '*.example.org'],
        allowed_contracts: [CONTRACT],
        key_in_path: false,
      });
      t.equal(made.status, 201);
      t.match(made.json.data, {
        name: 'web',
        api_key: /^\w{32,}$/,
        https_url: /^https:\/\/mainnet\.rpc\.example\/v1\/rpc\//,
        allowed_origins: [ORIGIN, '*.example.org'],
        allowed_contracts: [CONTRACT.toLowerCase()],
        key_in_path: false,
        allowed_ips: null,
        jwt_max_lifetime_s: 3600,
        previous_key_prefix: null,
        previous_key_expires_at: null,
      });
      const listed = await api(alice.managementKey, 'GET', '/api/dashboard/endpoints');
      t.equal(listed.status, 200);
      const { api_key: _key, https_url: _h, wss_url: _w, ...shown } = made.json.data;
      t.same(listed.json.data, [shown], 'the list shows the endpoint as made, its key aside');
      t.same(Object.keys(listed.json.data[0]).sort(), [
        'allow_no_origin',
        'allowed_contracts',
        'allowed_ips',
        'allowed_methods',
        'allowed_origins',
        'created_at',
        'id',
        'jwt_keys',
        'jwt_max_lifetime_s',
        'key_in_path',
        'key_prefix',
        'name',
        'network',
        'previous_key_expires_at',
        'previous_key_prefix',
      ]);

      const bad = await api(alice.managementKey, 'POST', '/api/dashboard/endpoints', {
        network: 'nowhere',
        allowed_ips: ['10.0.0.0/33'],
        jwt_max_lifetime_s: 0,
        allow_no_origin: 'yes',
      });
      t.equal(bad.status, 400);
      t.equal(bad.json.error.code, 'bad_request');
      t.same(bad.json.error.fields.map((f: { field: string }) => f.field).sort(), ['allow_no_origin', 'jwt_max_lifetime_s', 'network']);
      t.match(bad.json.error.message, /^Unknown network "nowhere"; networks: mainnet, beacon; /);
      t.match(bad.json.error.message, /jwt_max_lifetime_s: /);
      // The shapes are checked first: the CIDR's entry is named once the shapes pass.
      const cidr = await api(alice.managementKey, 'POST', '/api/dashboard/endpoints', { network: 'mainnet', allowed_ips: ['10.0.0.0/33'] });
      t.equal(cidr.status, 400);
      t.match(cidr.json.error, { fields: [{ field: 'allowed_ips[0]' }], message: /^allowed_ips\[0\]: / });
      const missing = await api(alice.managementKey, 'POST', '/api/dashboard/endpoints', { name: 'x' });
      t.same(missing.json, {
        error: { code: 'bad_request', message: "'network' is required", fields: [{ field: 'network', message: 'is required' }] },
      });
      t.equal((await api(alice.managementKey, 'GET', '/api/dashboard/endpoints')).json.data.length, 1, 'nothing made by a refusal');
    });

    t.test('PATCH: a field left out stays, null clears, problems named, other owners get 404', async (t) => {
      const made = await api(alice.managementKey, 'POST', '/api/dashboard/endpoints', {
        network: 'mainnet',
        allowed_origins: [ORIGIN],
        allowed_methods: ['eth_call'],
      });
      const id: string = made.json.data.id;
      const path = `/api/dashboard/endpoints?id=${id}`;
      const patched = await api(alice.managementKey, 'PATCH', path, {
        allowed_ips: ['192.0.2.0/24', '2001:DB8::1'],
        allowed_methods: null,
      });
      t.equal(patched.status, 200);
      t.match(patched.json.data, {
        id,
        allowed_origins: [ORIGIN],
        allowed_ips: ['192.0.2.0/24', '2001:db8::1/128'],
        allowed_methods: null,
      });
      const listed = (await api(alice.managementKey, 'GET', '/api/dashboard/endpoints')).json.data.find((e: { id: string }) => e.id === id);
      t.same(listed, patched.json.data, 'the list shows what PATCH answered');

      const bad = await api(alice.managementKey, 'PATCH', path, {
        allowed_origins: [],
        allowed_contracts: ['0x12'],
        allowed_origin: [ORIGIN],
        jwt_keys: [{ id: 'k1', alg: 'HS256', pem: 'x' }],
      });
      t.equal(bad.status, 400);
      const fields = bad.json.error.fields.map((f: { field: string }) => f.field);
      t.ok(fields.includes('allowed_origin'), 'a misspelt field is refused by name');
      t.ok(fields.includes('allowed_origins'), 'an empty list is refused');
      t.ok(fields.includes('jwt_keys[0].alg'), 'the algorithm is refused');
      t.match(bad.json.error.message, /allowed_origin: is not a setting/);
      const after = (await api(alice.managementKey, 'GET', '/api/dashboard/endpoints')).json.data.find((e: { id: string }) => e.id === id);
      t.same(after, patched.json.data, 'a refused PATCH changes nothing');

      const theirs = await api(bob.managementKey, 'PATCH', path, { allowed_ips: null });
      const unknown = await api(alice.managementKey, 'PATCH', '/api/dashboard/endpoints?id=ep_nope', { allowed_ips: null });
      const deleteAnswer = await api(bob.managementKey, 'DELETE', path);
      t.same(theirs.json, { error: { code: 'not_found', message: `No endpoint ${id}` } });
      t.equal(theirs.status, 404);
      t.same(theirs.json, deleteAnswer.json, "another owner's id: the answer of DELETE for it");
      t.same(unknown, { ...unknown, status: 404, json: { error: { code: 'not_found', message: 'No endpoint ep_nope' } } });
      t.match((await api(alice.managementKey, 'PATCH', '/api/dashboard/endpoints', {})).json, { error: { message: /'id' is required/ } });
      const verbs = await api(alice.managementKey, 'PUT', path, {});
      t.equal(verbs.status, 405);
      t.equal(verbs.headers.get('allow'), 'GET, POST, PATCH, DELETE');
    });

    t.test('rotate: a new key shown once, the old one kept for the grace, or refused at once', async (t) => {
      const made = await api(alice.managementKey, 'POST', '/api/dashboard/endpoints', { network: 'mainnet', name: 'rot' });
      const { id, api_key: first, key_prefix: firstPrefix } = made.json.data as { id: string; api_key: string; key_prefix: string };
      const rotate = (body: unknown, key = alice.managementKey, of = id) =>
        api(key, 'POST', `/api/dashboard/endpoints/rotate?id=${of}`, body);

      const before = Date.now();
      const r1 = await rotate({});
      t.equal(r1.status, 200);
      const second: string = r1.json.data.api_key;
      t.not(second, first);
      t.same(Object.keys(r1.json.data).sort(), ['api_key', 'https_url', 'previous_key_expires_at', 'wss_url']);
      t.equal(r1.json.data.https_url, `https://mainnet.rpc.example/v1/rpc/${second}`);
      t.equal(r1.json.data.wss_url, `wss://mainnet.rpc.example/v1/rpc/${second}`);
      const ends = Date.parse(r1.json.data.previous_key_expires_at);
      t.ok(Math.abs(ends - (before + 86_400_000)) < 5000, 'the default grace is 24 hours');
      t.ok(await accounts.endpointByKey(first), 'the old key works during its grace');
      t.ok(await accounts.endpointByKey(second), 'the new key works');
      const listed = (await api(alice.managementKey, 'GET', '/api/dashboard/endpoints')).json.data.find((e: { id: string }) => e.id === id);
      t.match(listed, {
        key_prefix: second.slice(0, 8),
        previous_key_prefix: firstPrefix,
        previous_key_expires_at: r1.json.data.previous_key_expires_at,
      });
      t.notMatch(JSON.stringify(listed), second, 'the list never shows a key');

      const r2 = await rotate({ grace_s: 0 });
      t.equal(r2.status, 200);
      t.equal(r2.json.data.previous_key_expires_at, null);
      t.equal(await accounts.endpointByKey(second), null, 'grace 0: the old key is refused at once');
      t.equal(await accounts.endpointByKey(first), null, 'and the key in grace from before ends too');
      t.ok(await accounts.endpointByKey(r2.json.data.api_key));
      t.match(
        (await api(alice.managementKey, 'GET', '/api/dashboard/endpoints')).json.data.find((e: { id: string }) => e.id === id),
        {
          previous_key_prefix: null,
          previous_key_expires_at: null,
        },
      );

      for (const grace of [-1, 1.5, '3600', 2_592_001]) {
        const r = await rotate({ grace_s: grace });
        t.equal(r.status, 400, `grace_s ${JSON.stringify(grace)}`);
        t.match(r.json.error, { code: 'bad_request', fields: [{ field: 'grace_s' }], message: /^grace_s: .*2592000 \(30 days\)/ });
      }
      t.same((await rotate({}, bob.managementKey)).json, { error: { code: 'not_found', message: `No endpoint ${id}` } });
      t.equal((await rotate({}, alice.managementKey, 'ep_nope')).status, 404);
      t.equal((await api(alice.managementKey, 'GET', `/api/dashboard/endpoints/rotate?id=${id}`)).headers.get('allow'), 'POST');
      const beacon = await api(alice.managementKey, 'POST', '/api/dashboard/endpoints', { network: 'beacon' });
      const r3 = await rotate({ grace_s: 60 }, alice.managementKey, beacon.json.data.id);
      t.equal(r3.json.data.wss_url, null, 'a Beacon chain has no WebSocket URL');
    });

    t.test("a suspended owner's management key: 403 owner_suspended, not 401", async (t) => {
      const carol = await accounts.createOwner('carol', 'free', 100);
      t.equal((await api(carol.managementKey, 'GET', '/api/dashboard/account')).status, 200);
      await accounts.setSuspended(carol.id, true);
      const r = await api(carol.managementKey, 'GET', '/api/dashboard/account');
      t.equal(r.status, 403);
      t.match(r.json, { error: { code: 'owner_suspended', message: /^Owner suspended/ } });
      t.equal((await api('cg_mgmt_typo', 'GET', '/api/dashboard/account')).status, 401, 'a typo is still 401');
      await accounts.setSuspended(carol.id, false);
      t.equal((await api(carol.managementKey, 'GET', '/api/dashboard/account')).status, 200);
    });
  });
}
