/**
 * Issue 36 §5 over each account store, a real SQLite file and a real PostgreSQL: failures written through
 * the store's own ledger store (the ring cut to `failuresKept`) and usage rows with latency histograms, read
 * back through the management API on a real uWS listener: `GET /api/dashboard/endpoints/failures` and the
 * stats' `success_rate`, `latency_ms` and `?method=`.
 */
import t, { type Test } from 'tap';
import type { AccountStore } from '../../src/accounts/account-store.js';
import { createPostgresAccounts } from '../../src/accounts/postgres-accounts.js';
import { createSqliteAccounts } from '../../src/accounts/sqlite-accounts.js';
import { validateConfig } from '../../src/config/schema.js';
import type { LedgerStore } from '../../src/metering/ledger-store.js';
import { createPgLedgerStore } from '../../src/metering/pg-ledger-store.js';
import { createSqliteLedgerStore } from '../../src/metering/sqlite-ledger-store.js';
import type { PendingFailure } from '../../src/metering/usage-rows.js';
import { LATENCY_BUCKET_COUNT } from '../../src/store/latency-columns.js';
import { openPgStore } from '../../src/store/pg-open.js';
import { serveManagement } from '../support/management-api.js';
import { startPostgres } from '../support/servers.js';
import { tempStore } from '../store/temp-store.js';

// biome-ignore lint/suspicious/noExplicitAny: answers are read by their documented shape, and t.match checks it
type Json = any;
type Api = (key: string, path: string) => Promise<{ status: number; json: Json }>;

async function serve(t: Test, accounts: AccountStore, storageUrl?: string): Promise<Api> {
  const checked = validateConfig({
    ...(storageUrl === undefined ? {} : { storage: { url: storageUrl }, cluster: { redis_url: 'redis://127.0.0.1:1/0' } }),
    server: { default_chain: 'mainnet' },
    management: { rps_per_key: 1000, rps_per_ip: 1000 },
    chains: { mainnet: { chain_id: 1, upstreams: [{ url: 'http://127.0.0.1:1' }] } },
  });
  if (!checked.ok) throw new Error(checked.errors.join('; '));
  const api = await serveManagement(t, accounts, checked.config);
  return (key, path) => api(key, 'GET', path);
}

const RETENTION = { keepMinutesH: 48, keepHoursD: 90, failuresKept: 5 };

const ENGINES: Record<string, (t: Test) => Promise<{ accounts: AccountStore; ledger: LedgerStore; url?: string }>> = {
  sqlite: async (t) => {
    const store = tempStore(t);
    return { accounts: createSqliteAccounts(store), ledger: createSqliteLedgerStore(store, RETENTION) };
  },
  postgres: async (t) => {
    const server = await startPostgres(t);
    const pg = await openPgStore(server.url, { connectTimeoutMs: 2000 });
    t.teardown(() => (pg.pool.ending ? undefined : pg.close()));
    return { accounts: createPostgresAccounts(pg), ledger: createPgLedgerStore(pg, RETENTION), url: server.url };
  },
};

const NOW = Math.floor(Date.now() / 1000);
const MINUTE = NOW - (NOW % 60);

for (const [engine, open] of Object.entries(ENGINES)) {
  t.test(engine, async (t) => {
    const { accounts, ledger, url } = await open(t);
    const api = await serve(t, accounts, url);
    const alice = await accounts.createOwner('alice', 'free', 100);
    const bob = await accounts.createOwner('bob', 'free', 100);
    const made = await accounts.createEndpoint(alice.id, 'mainnet', 'web', 10);
    if (made.kind !== 'created') throw new Error('no endpoint');
    const id = made.endpoint.id;
    const failure = (i: number): PendingFailure => ({
      endpointId: id,
      ownerId: alice.id,
      at: MINUTE * 1000 + i * 1000,
      method: i % 2 === 0 ? 'eth_call' : 'eth_getLogs',
      httpStatus: 502,
      code: -32603,
      error: 'upstream_error',
      message: 'Upstream node error',
      upstream: `node-${i}`,
    });
    const latency = (bucket: number, n: number): number[] => Array.from({ length: LATENCY_BUCKET_COUNT }, (_, i) => (i === bucket ? n : 0));
    const row = { endpointId: id, ownerId: alice.id, t: MINUTE, ru: 0 };
    await ledger.writeUsage({
      id: 'w-1',
      instance: 'a',
      ttlS: 60,
      rows: [
        { ...row, method: 'eth_call', status: 0, requests: 4, latency: latency(6, 4) },
        { ...row, method: 'eth_call', status: 502, requests: 4 },
        { ...row, method: 'eth_getLogs', status: 0, requests: 2, latency: latency(13, 2) },
        { ...row, method: 'eth_getLogs', status: 502, requests: 4 },
      ],
      failures: [0, 1, 2, 3, 4, 5, 6, 7].map(failure),
    });

    const list = await api(alice.managementKey, `/api/dashboard/endpoints/failures?id=${id}`);
    t.equal(list.status, 200);
    t.same(
      list.json.data.map((f: Json) => f.upstream),
      ['node-7', 'node-6', 'node-5', 'node-4', 'node-3'],
      'the newest five (failuresKept), newest first',
    );
    t.same(list.json.data[0], {
      time: MINUTE + 7,
      method: 'eth_getLogs',
      http_status: 502,
      code: -32603,
      error: 'upstream_error',
      message: 'Upstream node error',
      upstream: 'node-7',
    });
    t.equal((await api(alice.managementKey, `/api/dashboard/endpoints/failures?id=${id}&limit=2`)).json.data.length, 2);
    for (const [query, status] of [
      ['', 400],
      [`?id=${id}&limit=0`, 400],
      [`?id=${id}&limit=1001`, 400],
      [`?id=${id}&id=${id}`, 400],
      ['?id=ep_aaaaaaaaaaaaaaaa', 404],
    ] as const) {
      t.equal((await api(alice.managementKey, `/api/dashboard/endpoints/failures${query}`)).status, status, `failures${query}`);
    }
    const other = await api(bob.managementKey, `/api/dashboard/endpoints/failures?id=${id}`);
    t.equal(other.status, 404, "another owner's endpoint: as an unknown one");

    const stats = await api(alice.managementKey, `/api/dashboard/endpoints/stats?id=${id}&interval=minute`);
    t.equal(stats.status, 200);
    t.match(stats.json.data.totals, { requests: 14, errors: 8, success_rate: 0.4286 });
    // eth_call: 4 calls in (7, 10] ms; eth_getLogs: 2 in (100, 150] ms; together p50 is in the first bucket.
    t.same(stats.json.data.totals.latency_ms, { p50: 9.25, p95: 142.5, p99: 148.5 });
    const call = await api(alice.managementKey, `/api/dashboard/endpoints/stats?id=${id}&interval=minute&method=eth_call`);
    t.same(
      call.json.data.series,
      [{ t: MINUTE, requests: 8, ru: 0, errors: 4, success_rate: 0.5, latency_ms: { p50: 8.5, p95: 9.85, p99: 9.97 } }],
      "?method=: one method's series",
    );
    t.equal(
      (await api(alice.managementKey, `/api/dashboard/endpoints/stats?method=${'x'.repeat(201)}`)).status,
      400,
      'a method name over 200 characters',
    );
  });
}
