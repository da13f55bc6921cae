/**
 * `chaingate store copy`: a single machine's SQLite data lands in an empty PostgreSQL fleet store with
 * ids, key hashes, balances, credits and usage intact; a target that already holds owners is refused.
 */
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { copyStore } from '../../src/cli/store-copy.js';
import { createPostgresAccounts } from '../../src/accounts/postgres-accounts.js';
import { applyFencePatch, NO_FENCES } from '../../src/fences/settings.js';
import { openPgStore } from '../../src/store/pg-open.js';
import { createDirectory } from '../../src/tenancy/directory.js';
import { hashKey } from '../../src/tenancy/keys.js';
import { createOwnerAdmin } from '../../src/tenancy/owners.js';
import { startPostgres } from '../support/servers.js';
import { tempDbPath, tempStore } from '../store/temp-store.js';

const main = fileURLToPath(new URL('../../dist/main.js', import.meta.url));
if (!existsSync(main)) throw new Error('dist/main.js is missing: run `npm run build` first (npm test does)');

/** A SQLite store with two owners (one suspended, one deleted endpoint), credits and usage at three levels. */
function seed(path: string) {
  const store = tempStore(t, path);
  const admin = createOwnerAdmin(store, () => 1_700_000_000_000);
  const dir = createDirectory(store, { now: () => 1_700_000_000_000 });
  const a = admin.createOwner('acme ✓', 'free', 1000);
  const b = admin.createOwner('beta', 'pro', 50);
  admin.topUp(a.id, 234);
  admin.createManagementKey(b.id, 'viewer');
  store.db
    .prepare(
      `INSERT INTO webhooks (id, owner_id, url, events, secret, balance_below_ru, created_at, balance_low) VALUES (?, ?, ?, ?, ?, ?, ?, 1)`,
    )
    .run('wh_aaaaaaaaaaaaaaaa', a.id, 'https://hooks.example.com/a', 'balance_low', 'a-secret-of-16-chars', 100, 1_700_000_000);
  const fenced = applyFencePatch(NO_FENCES, { allowed_origins: ['https://app.example.com'], key_in_path: false });
  if (!fenced.ok) throw new Error('bad settings');
  const kept = dir.createEndpoint(a.id, 'devnet', 'main', 10, fenced.settings);
  const gone = dir.createEndpoint(b.id, 'devnet', undefined, 10);
  if (!('apiKey' in kept) || !('apiKey' in gone)) throw new Error('endpoints not made');
  // The key kept is a rotated one: its previous key stays valid for a day after the seed's time.
  const rotated = dir.rotateEndpointKey(a.id, kept.endpoint.id, 86_400);
  if (rotated === null) throw new Error('not rotated');
  dir.deleteEndpoint(b.id, gone.endpoint.id);
  admin.setSuspended(b.id, true);
  const usage = store.db.prepare(
    'INSERT INTO usage_minute (endpoint_id, owner_id, method, t, status, requests, ru, lat_3) VALUES (?, ?, ?, ?, ?, ?, ?, 1)',
  );
  for (let i = 0; i < 2500; i++) usage.run(kept.endpoint.id, a.id, `m${i % 7}`, 1_700_000_000 + i * 60, i % 3 === 0 ? 429 : 0, 2, 3);
  store.db
    .prepare('INSERT INTO usage_hour (endpoint_id, owner_id, method, t, status, requests, ru, lat_3) VALUES (?, ?, ?, ?, ?, ?, ?, 1)')
    .run(kept.endpoint.id, a.id, 'eth_call', 1_699_996_400, 0, 10, 200);
  store.db
    .prepare('INSERT INTO usage_day (endpoint_id, owner_id, method, t, status, requests, ru, lat_3) VALUES (?, ?, ?, ?, ?, ?, ?, 1)')
    .run(gone.endpoint.id, b.id, 'eth_call', 1_699_920_000, 0, 1, 20);
  // Two recent failures of the kept endpoint (their seq is kept, and the target's sequence follows it).
  const failure = store.db.prepare(
    'INSERT INTO call_failures (seq, endpoint_id, owner_id, at, method, http_status, code, error, message, upstream) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
  );
  failure.run(7, kept.endpoint.id, a.id, 1_700_000_000_000, 'eth_call', 502, -32603, 'upstream_error', 'Upstream node error', 'node-a');
  failure.run(9, kept.endpoint.id, a.id, 1_700_000_001_000, 'eth_getLogs', 429, -32005, 'rate_limited', 'Rate limited', null);
  // The ledger's invariant: what the usage cost came off the balances.
  store.db.prepare('UPDATE owners SET ru_balance = ru_balance - ? WHERE id = ?').run(2500 * 3 + 200, a.id);
  store.db.prepare('UPDATE owners SET ru_balance = ru_balance - ? WHERE id = ?').run(20, b.id);
  store.close();
  return { apiKey: rotated.apiKey, previousKey: kept.apiKey, deletedKey: gone.apiKey, ownerA: a.id, ownerB: b.id, fences: fenced.settings };
}

t.test('every table is copied with ids, hashes and balances intact, and new ids follow the copied ones', async (t) => {
  const pg = await startPostgres(t);
  const path = tempDbPath(t);
  const seeded = seed(path);
  const lines: string[] = [];
  const report = await copyStore(path, pg.url, (line) => lines.push(line));
  t.same(report.rows, [
    { table: 'owners', rows: 2 },
    { table: 'management_keys', rows: 3 },
    { table: 'endpoints', rows: 2 },
    { table: 'credits', rows: 3 },
    { table: 'usage_minute', rows: 2500 },
    { table: 'usage_hour', rows: 1 },
    { table: 'usage_day', rows: 1 },
    { table: 'call_failures', rows: 2 },
    { table: 'webhooks', rows: 1 },
  ]);
  t.equal(report.balances, 1000 + 234 - 7700 + 50 - 20);
  t.match(lines, ['owners: 2 rows', 'management_keys: 3 rows', 'endpoints: 2 rows'], 'progress per table');

  const target = await openPgStore(pg.url);
  t.teardown(() => target.close());
  const q = async <R extends object>(sql: string, params: unknown[] = []): Promise<R[]> => (await target.pool.query<R>(sql, params)).rows;
  t.same(
    (await q<{ role: string }>('SELECT role FROM management_keys ORDER BY role')).map((r) => r.role),
    ['admin', 'admin', 'viewer'],
    "the keys' roles",
  );
  t.match(await q('SELECT url, balance_low, balance_below_ru FROM webhooks'), [
    { url: 'https://hooks.example.com/a', balance_low: true, balance_below_ru: '100' },
  ]);
  t.same(await q('SELECT id, name, plan, ru_balance, suspended, deleted_at FROM owners ORDER BY id'), [
    { id: seeded.ownerA, name: 'acme ✓', plan: 'free', ru_balance: 1234 - 7700, suspended: false, deleted_at: null },
    { id: seeded.ownerB, name: 'beta', plan: 'pro', ru_balance: 30, suspended: true, deleted_at: null },
  ]);
  t.same(
    await q('SELECT owner_id, deleted_at IS NOT NULL AS deleted, deleted_seq FROM endpoints WHERE key_hash = $1', [hashKey(seeded.apiKey)]),
    [{ owner_id: seeded.ownerA, deleted: false, deleted_seq: null }],
  );
  // The restrictions and the previous key in its grace, as the fleet's store reads them.
  const copied = createPostgresAccounts(target, { now: () => 1_700_000_000_000 });
  t.same((await copied.endpointByKey(seeded.apiKey))?.fences?.settings, seeded.fences, 'restrictions copied');
  t.equal((await copied.endpointByKey(seeded.previousKey))?.keyExpiresAtMs, (1_700_000_000 + 86_400) * 1000, 'the previous key too');
  t.match(await copied.listAllEndpoints(seeded.ownerA), [{ fences: seeded.fences, previousKeyPrefix: seeded.previousKey.slice(0, 8) }]);
  t.same(await q('SELECT owner_id, deleted_seq FROM endpoints WHERE key_hash = $1', [hashKey(seeded.deletedKey)]), [
    { owner_id: seeded.ownerB, deleted_seq: 1 },
  ]);
  // The ledger invariant holds for every owner in the target: sum(credits) - sum(usage) = balance.
  const gaps = await q<{ id: number; gap: number }>(`
    SELECT o.id, (SELECT coalesce(sum(ru), 0) FROM credits c WHERE c.owner_id = o.id)
      - (SELECT coalesce(sum(ru), 0) FROM (SELECT owner_id, ru FROM usage_minute UNION ALL SELECT owner_id, ru FROM usage_hour
           UNION ALL SELECT owner_id, ru FROM usage_day) u WHERE u.owner_id = o.id) - o.ru_balance AS gap
    FROM owners o ORDER BY o.id`);
  t.same(gaps, [
    { id: seeded.ownerA, gap: 0 },
    { id: seeded.ownerB, gap: 0 },
  ]);
  const [next] = await q<{ id: number }>(
    `INSERT INTO owners (name, plan, ru_balance, created_at) VALUES ('new', 'free', 0, 0) RETURNING id`,
  );
  t.equal(next!.id, seeded.ownerB + 1, 'the next owner id follows the copied ones');
  t.same(
    await q(
      'SELECT sum(lat_3)::int AS n FROM (SELECT lat_3 FROM usage_minute UNION ALL SELECT lat_3 FROM usage_hour UNION ALL SELECT lat_3 FROM usage_day) u',
    ),
    [{ n: 2502 }],
    'the latency histograms copied with their rows',
  );
  t.match(await q('SELECT seq, method, http_status, error, upstream FROM call_failures ORDER BY seq'), [
    { seq: '7', method: 'eth_call', http_status: 502, error: 'upstream_error', upstream: 'node-a' },
    { seq: '9', method: 'eth_getLogs', http_status: 429, error: 'rate_limited', upstream: null },
  ]);
  const [failureSeq] = await q<{ n: string }>(`SELECT nextval('call_failures_seq_seq') AS n`);
  t.equal(Number(failureSeq!.n), 10, 'the next failure follows the copied ones');
  const [seq] = await q<{ n: number }>(`SELECT nextval('endpoint_deletions') AS n`);
  t.equal(seq!.n, 2, 'the next deletion is numbered after the copied one');
});

t.test('the command line: a copy, then a second one refused with nothing written; bad arguments exit 2', async (t) => {
  const pg = await startPostgres(t);
  const path = tempDbPath(t);
  seed(path);
  const run = (...args: string[]) => spawnSync(process.execPath, [main, 'store', ...args], { encoding: 'utf8', timeout: 30_000 });
  const first = run('copy', '--from', path, '--to', pg.url);
  t.equal(first.status, 0, first.stderr);
  t.match(first.stdout, /^owners: 2 rows$/m);
  t.match(first.stdout, /copied 2515 rows; balances add up to -6436 RU on both sides/);
  const again = run('copy', '--from', path, '--to', pg.url);
  t.equal(again.status, 1);
  t.match(again.stderr, /already holds 2 owners: store copy fills an empty fleet store only/);
  t.equal(run('copy', '--from', path).status, 2, 'no --to');
  t.match(run('copy', '--from', path, '--to', '/tmp/x.db').stderr, /--to must be a postgres:\/\/ URL/);
  t.equal(run('move', '--from', path, '--to', pg.url).status, 2, 'unknown subcommand');
  const missing = run('copy', '--from', `${path}.absent`, '--to', pg.url);
  t.equal(missing.status, 1);
  t.match(missing.stderr, /no database at/);
  const down = spawnSync(
    process.execPath,
    [main, 'store', 'copy', '--from', path, '--to', `postgres://chaingate:pw@127.0.0.1:${pg.port + 1}/x`],
    {
      encoding: 'utf8',
      timeout: 30_000,
    },
  );
  t.equal(down.status, 1, 'an unreachable target fails');
  t.notMatch(down.stderr, /:pw@/, 'the password is not shown');
});
