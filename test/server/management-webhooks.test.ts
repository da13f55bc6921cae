import t, { type Test } from 'tap';
import type { AccountStore } from '../../src/accounts/account-store.js';
import { createPostgresAccounts } from '../../src/accounts/postgres-accounts.js';
import { createSqliteAccounts } from '../../src/accounts/sqlite-accounts.js';
import { startAlertWatch } from '../../src/alerts/alert-watch.js';
import { verifyDelivery } from '../../src/alerts/signature.js';
import { type Config, validateConfig } from '../../src/config/schema.js';
import { openPgStore } from '../../src/store/pg-open.js';
import { serveManagement } from '../support/management-api.js';
import { startPostgres } from '../support/servers.js';
import { webhookReceiver } from '../support/webhook-receiver.js';
import { waitFor } from '../support/wait-for.js';
import { tempStore } from '../store/temp-store.js';

function configOf(allowPrivate: boolean, storageUrl?: string): Config {
  const checked = validateConfig({
    ...(storageUrl === undefined ? {} : { storage: { url: storageUrl }, cluster: { redis_url: 'redis://127.0.0.1:1/0' } }),
    server: { public_base_url: 'https://{chain}.rpc.example', default_chain: 'mainnet' },
    management: { rps_per_key: 1000, rps_per_ip: 1000 },
    webhooks: { allow_private: allowPrivate, max_per_owner: 3, retry_for_s: 30, timeout_ms: 2000 },
    chains: { mainnet: { chain_id: 1, upstreams: [{ url: 'http://127.0.0.1:1' }] } },
  });
  if (!checked.ok) throw new Error(checked.errors.join('; '));
  return checked.config;
}

interface Engine {
  accounts: AccountStore;
  url?: string;
  /** Writes a usage row of the current minute, as the ledger's flush would. */
  usage: (ownerId: number, endpointId: string, t: number, status: number, requests: number) => Promise<void>;
}

const ENGINES: Record<string, (t: Test) => Promise<Engine>> = {
  sqlite: async (t) => {
    const store = tempStore(t);
    const insert = store.db.prepare(
      'INSERT INTO usage_minute (endpoint_id, owner_id, method, t, status, requests, ru) VALUES (?, ?, ?, ?, ?, ?, 0)',
    );
    return {
      accounts: createSqliteAccounts(store),
      usage: async (owner, ep, at, status, n) => void insert.run(ep, owner, 'eth_call', at, status, n),
    };
  },
  postgres: async (t) => {
    const server = await startPostgres(t);
    const pg = await openPgStore(server.url, { connectTimeoutMs: 2000 });
    t.teardown(() => (pg.pool.ending ? undefined : pg.close()));
    return {
      accounts: createPostgresAccounts(pg),
      url: server.url,
      usage: async (owner, ep, at, status, n) =>
        void (await pg.pool.query(
          'INSERT INTO usage_minute (endpoint_id, owner_id, method, t, status, requests, ru) VALUES ($1, $2, $3, $4, $5, $6, 0)',
          [ep, owner, 'eth_call', at, status, n],
        )),
    };
  },
};

const SECRET = 'a-secret-of-the-owner-1234';

for (const [engine, open] of Object.entries(ENGINES)) {
  t.test(engine, async (t) => {
    const e = await open(t);
    const { accounts } = e;
    const api = await serveManagement(t, accounts, configOf(false, e.url));
    const lax = await serveManagement(t, accounts, configOf(true, e.url));
    const alice = await accounts.createOwner('alice', 'free', 100);
    const bob = await accounts.createOwner('bob', 'free', 100);
    const viewer = (await accounts.createManagementKey(alice.id, 'viewer'))!;
    const developer = (await accounts.createManagementKey(alice.id, 'developer'))!;

    t.test('roles: the account names the role; a role is refused what it may not do, by name', async (t) => {
      t.equal((await api(alice.managementKey, 'GET', '/api/dashboard/account')).json.data.role, 'admin', 'the first key is an admin');
      t.equal((await api(viewer, 'GET', '/api/dashboard/account')).json.data.role, 'viewer');
      t.equal((await api(developer, 'GET', '/api/dashboard/account')).json.data.role, 'developer');
      const roles = (await accounts.listManagementKeys(alice.id))!.map((k) => k.role).sort();
      t.same(roles, ['admin', 'developer', 'viewer'], 'the key list names each role');
      const made = await api(developer, 'POST', '/api/dashboard/endpoints', { network: 'mainnet' });
      t.equal(made.status, 201, 'a developer creates an endpoint');
      const id = made.json.data.id as string;
      const refused = await api(viewer, 'DELETE', `/api/dashboard/endpoints?id=${id}`);
      t.equal(refused.status, 403);
      t.equal(refused.json.error.code, 'role_refused');
      t.match(refused.json.error.message, /viewer key may not DELETE \/api\/dashboard\/endpoints/);
      t.equal((await api(viewer, 'GET', '/api/dashboard/endpoints')).status, 200, 'a viewer reads');
      t.equal((await api(viewer, 'POST', `/api/dashboard/endpoints/rotate?id=${id}`, {})).status, 403);
      const hook = await api(developer, 'POST', '/api/dashboard/webhooks', { url: 'https://example.com/', events: ['balance_low'] });
      t.equal(hook.status, 403, 'a developer may not change webhooks');
      t.match(hook.json.error.message, /developer key may not POST \/api\/dashboard\/webhooks/);
      t.equal((await api(developer, 'GET', '/api/dashboard/webhooks')).status, 200);
      t.equal((await api(developer, 'DELETE', `/api/dashboard/endpoints?id=${id}`)).status, 200, 'a developer deletes an endpoint');
    });

    t.test('webhooks: every problem named; https to public addresses only without the allowance', async (t) => {
      const bad = await api(alice.managementKey, 'POST', '/api/dashboard/webhooks', {
        url: 'http://example.com/',
        events: ['balance_low', 'nope'],
        secret: 'short',
        colour: 'red',
      });
      t.equal(bad.status, 400);
      t.same(bad.json.error.fields.map((f: { field: string }) => f.field).sort(), [
        'balance_below_ru',
        'colour',
        'events',
        'secret',
        'url',
      ]);
      for (const url of [
        'https://127.0.0.1/',
        'https://[::1]/',
        'https://10.1.2.3/',
        'https://[::ffff:192.168.0.1]/',
        'https://localhost/',
      ]) {
        const r = await api(alice.managementKey, 'POST', '/api/dashboard/webhooks', {
          url,
          events: ['balance_low'],
          secret: SECRET,
          balance_below_ru: 5,
        });
        t.equal(r.status, 400, url);
        t.match(r.json.error.message, /url: .*(loopback|private)/, `${url}: the range is named`);
      }
      const ok = await api(alice.managementKey, 'POST', '/api/dashboard/webhooks', {
        url: 'https://93.184.215.14/hook',
        events: ['balance_low'],
        secret: SECRET,
        balance_below_ru: 5,
      });
      t.equal(ok.status, 201, 'a public address is taken');
      t.notOk('secret' in ok.json.data, 'the secret is never shown');
      t.equal(
        (await api(bob.managementKey, 'GET', `/api/dashboard/webhooks/deliveries?id=${ok.json.data.id}`)).status,
        404,
        "another owner's webhook is unknown",
      );
      t.equal((await api(bob.managementKey, 'DELETE', `/api/dashboard/webhooks?id=${ok.json.data.id}`)).status, 404);
      t.equal((await api(alice.managementKey, 'DELETE', `/api/dashboard/webhooks?id=${ok.json.data.id}`)).status, 200);
      t.same((await api(alice.managementKey, 'GET', '/api/dashboard/webhooks')).json.data, []);
    });

    t.test('alerts: delivered to a local receiver (operator allowance), signed, shown; retried after a failure', async (t) => {
      const r = await webhookReceiver(t, [500]);
      const made = await lax(alice.managementKey, 'POST', '/api/dashboard/webhooks', {
        url: r.url,
        events: ['balance_low', 'key_refused', 'error_rate'],
        secret: SECRET,
        balance_below_ru: 50,
        refused_per_minute: 5,
        error_rate_above: 0.5,
      });
      t.equal(made.status, 201, JSON.stringify(made.json));
      const hookId = made.json.data.id as string;
      let balance = 40;
      const watch = startAlertWatch({
        store: accounts.webhooks,
        balance: () => balance,
        settings: () => ({ allow_private: true, timeout_ms: 2000, retry_for_s: 30, check_interval_s: 3600 }),
        onError: (err) => t.fail(err.message),
      });
      t.teardown(() => watch.close());
      const minute = Math.floor(Date.now() / 60_000) * 60;
      await e.usage(alice.id, 'ep_aaaaaaaaaaaaaaaa', minute, 429, 6);
      await e.usage(alice.id, 'ep_aaaaaaaaaaaaaaaa', minute, 0, 4);
      await watch.check();
      await waitFor(() => r.got.length >= 4, { ms: 10_000, what: 'three alerts, one retried' });
      const events = r.got.map((g) => JSON.parse(g.body).event as string);
      t.same([...new Set(events)].sort(), ['balance_low', 'error_rate', 'key_refused']);
      for (const g of r.got) {
        const ts = g.headers['x-chaingate-timestamp'] as string;
        t.ok(verifyDelivery(SECRET, ts, g.body, g.headers['x-chaingate-signature'] as string), 'the signature verifies');
        t.notOk(verifyDelivery('another-secret-123456', ts, g.body, g.headers['x-chaingate-signature'] as string));
      }
      const refused = r.got.map((g) => JSON.parse(g.body)).find((b) => b.event === 'key_refused');
      t.match(refused.data, { refused_per_minute: 5, endpoints: [{ endpoint_id: 'ep_aaaaaaaaaaaaaaaa', refused: 6 }] });
      await waitFor(
        async () => {
          const d = await lax(alice.managementKey, 'GET', `/api/dashboard/webhooks/deliveries?id=${hookId}`);
          return d.json.data.every((x: { outcome: string }) => x.outcome === 'delivered');
        },
        { ms: 10_000, what: 'every delivery delivered' },
      );
      const shown = (await lax(alice.managementKey, 'GET', `/api/dashboard/webhooks/deliveries?id=${hookId}`)).json.data;
      t.equal(shown.length, 3);
      t.ok(
        shown.some((d: { attempts: number }) => d.attempts === 2),
        'the one answered 500 was tried again',
      );
      // A second check in the same minute sends nothing new: each alert was claimed once.
      await watch.check();
      t.equal(r.got.length, 4);
      // A top-up re-arms balance_low; falling below again alerts again.
      balance = 100;
      await watch.check();
      balance = 10;
      await watch.check();
      await waitFor(() => r.got.length === 5, { ms: 10_000, what: 'balance_low again' });
    });

    t.test('two senders (two instances of a fleet, or a restart) checking at once send each alert once', async (t) => {
      const r = await webhookReceiver(t);
      const carol = await accounts.createOwner('carol', 'free', 100);
      const made = await lax(carol.managementKey, 'POST', '/api/dashboard/webhooks', {
        url: r.url,
        events: ['balance_low', 'key_refused'],
        secret: SECRET,
        balance_below_ru: 50,
        refused_per_minute: 1,
      });
      t.equal(made.status, 201);
      const minute = Math.floor(Date.now() / 60_000) * 60;
      await e.usage(carol.id, 'ep_bbbbbbbbbbbbbbbb', minute, 403, 3);
      const senders = [1, 2].map(() =>
        startAlertWatch({
          store: accounts.webhooks,
          balance: () => 10,
          settings: () => ({ allow_private: true, timeout_ms: 2000, retry_for_s: 30, check_interval_s: 3600 }),
          onError: (err) => t.fail(err.message),
        }),
      );
      t.teardown(() => Promise.all(senders.map((s) => s.close())));
      await Promise.all(senders.map((s) => s.check()));
      await waitFor(() => r.got.length >= 2, { ms: 10_000, what: 'both alerts' });
      await Promise.all(senders.map((s) => s.check()));
      const deliveries = (await lax(carol.managementKey, 'GET', `/api/dashboard/webhooks/deliveries?id=${made.json.data.id}`)).json.data;
      t.equal(deliveries.length, 2, 'one delivery per alert');
      t.same(r.got.map((g) => JSON.parse(g.body).event).sort(), ['balance_low', 'key_refused'], 'each received once');
    });

    t.test('at most webhooks.max_per_owner', async (t) => {
      const r = await webhookReceiver(t);
      const body = { url: r.url, events: ['balance_low'], secret: SECRET, balance_below_ru: 1 };
      const existing = (await lax(bob.managementKey, 'GET', '/api/dashboard/webhooks')).json.data.length as number;
      for (let i = existing; i < 3; i++) t.equal((await lax(bob.managementKey, 'POST', '/api/dashboard/webhooks', body)).status, 201);
      const over = await lax(bob.managementKey, 'POST', '/api/dashboard/webhooks', body);
      t.equal(over.status, 403);
      t.match(over.json.error.message, /webhooks\.max_per_owner/);
    });
  });
}
