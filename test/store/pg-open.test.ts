/** The fleet store opens on a real PostgreSQL: schema made once, under a lock when instances start together. */
import t from 'tap';
import { openPgStore, safeUrl } from '../../src/store/pg-open.js';
import { PG_SCHEMA_VERSION } from '../../src/store/pg-migrations.js';
import { startPostgres } from '../support/servers.js';
import { waitFor } from '../support/wait-for.js';
import { STORE_TABLES } from './temp-store.js';

t.test('several instances opening a new database at once make the schema once', async (t) => {
  const pg = await startPostgres(t);
  const stores = await Promise.all([0, 1, 2].map(() => openPgStore(pg.url)));
  t.teardown(() => Promise.all(stores.map((s) => s.close())));
  const version = await stores[0]!.pool.query<{ version: number }>('SELECT version FROM chaingate_schema');
  t.same(version.rows, [{ version: PG_SCHEMA_VERSION }], 'one version row');
  const tables = await stores[1]!.pool.query<{ name: string }>(
    `SELECT table_name AS name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY 1`,
  );
  t.same(
    tables.rows.map((r) => r.name),
    ['chaingate_schema', ...STORE_TABLES].sort(),
  );
  // BIGINT and sums come back as numbers.
  const sum = await stores[2]!.pool.query<{ n: number; s: number }>(
    'SELECT 9007199254740991::bigint AS n, sum(x)::numeric AS s FROM (VALUES (1), (2)) v(x)',
  );
  t.same(sum.rows[0], { n: Number.MAX_SAFE_INTEGER, s: 3 });
});

t.test('a database from a newer chaingate is refused, naming both versions', async (t) => {
  const pg = await startPostgres(t);
  const store = await openPgStore(pg.url);
  await store.pool.query('UPDATE chaingate_schema SET version = $1', [PG_SCHEMA_VERSION + 1]);
  await store.close();
  await t.rejects(openPgStore(pg.url), {
    message: `the database schema is version ${PG_SCHEMA_VERSION + 1}, newer than this chaingate (${PG_SCHEMA_VERSION}): upgrade chaingate`,
  });
});

t.test('an unreachable server fails the open within the connect timeout; the password never shows', async (t) => {
  const pg = await startPostgres(t);
  await pg.stop();
  const url = `postgres://chaingate:s3cret@127.0.0.1:${pg.port}/chaingate`;
  const err = await openPgStore(url, { connectTimeoutMs: 1000 }).then(
    () => null,
    (e: Error) => e,
  );
  t.ok(err, 'refused');
  t.notMatch(String(err?.message), /s3cret/);
  t.equal(safeUrl(url), `postgres://chaingate:***@127.0.0.1:${pg.port}/chaingate`);
  t.equal(safeUrl('not a url'), '(an invalid URL)');
});

t.test('a connection checked out and idle when the server ends it: no uncaught error, its next query fails', async (t) => {
  const pg = await startPostgres(t);
  const store = await openPgStore(pg.url);
  t.teardown(() => store.close());
  const held = await store.pool.connect();
  const pid = (await held.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
  // What a fast shutdown or a restart sends each session: FATAL 57P01, while `held` runs no query. Its
  // 'error' event has no listener of this test's: without the store's own, tap would see it uncaught.
  let ended = false;
  held.once('end', () => {
    ended = true;
  });
  await store.pool.query('SELECT pg_terminate_backend($1)', [pid]);
  await waitFor(() => ended, { what: 'the connection ended', ms: 5000 });
  await t.rejects(held.query('SELECT 1'), 'its next query fails');
  held.release(true);
  t.same((await store.pool.query<{ one: number }>('SELECT 1 AS one')).rows, [{ one: 1 }], 'the pool serves on');
});
