import t from 'tap';
import Database from 'better-sqlite3';
import { existsSync, readdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { NoDatabaseError, openStore, surveyStore } from '../../src/store/open.js';
import { MIGRATIONS, SCHEMA_VERSION } from '../../src/store/migrations.js';
import { addOwner, STORE_TABLES, tempDbPath, tempStore } from './temp-store.js';

t.test('an empty file gets the whole schema, the pragmas and the version', async (t) => {
  const path = join(dirname(tempDbPath(t)), 'nested', 'deeper', 'db.sqlite');
  const store = tempStore(t, path);
  t.ok(existsSync(path), 'the directory and the file are created');
  t.equal(store.path, path);
  const tables = store.db.prepare(`SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`).pluck().all();
  // SQLite's own: the key-change log (PostgreSQL tells instances with NOTIFY) and AUTOINCREMENT's counter.
  t.same(tables, [...STORE_TABLES, 'key_changes', 'sqlite_sequence'].sort());
  t.equal(store.db.pragma('user_version', { simple: true }), SCHEMA_VERSION);
  t.equal(store.db.pragma('journal_mode', { simple: true }), 'wal');
  t.equal(store.db.pragma('synchronous', { simple: true }), 1, 'NORMAL');
  t.equal(store.db.pragma('foreign_keys', { simple: true }), 1);
  t.equal(store.db.pragma('busy_timeout', { simple: true }), 5000);
});

t.test('re-opening keeps the data and migrates nothing twice', async (t) => {
  const path = tempDbPath(t);
  const first = openStore(path);
  const id = addOwner(first.db, 500);
  first.close();
  const again = tempStore(t, path, { busyTimeoutMs: 100 });
  t.equal(again.db.pragma('user_version', { simple: true }), SCHEMA_VERSION);
  t.equal(again.sql.ledger.balance.get(id), 500);
  t.equal(again.db.pragma('busy_timeout', { simple: true }), 100);
  // A second connection on the same file at the same time (the CLI next to the daemon).
  const other = tempStore(t, path);
  t.equal(other.sql.ledger.balance.get(id), 500);
});

t.test('a file from a newer chaingate is refused, not downgraded', async (t) => {
  const path = tempDbPath(t);
  const raw = new Database(path);
  raw.pragma(`user_version = ${SCHEMA_VERSION + 1}`);
  raw.close();
  t.throws(() => openStore(path), /newer than this chaingate/);
  const check = new Database(path);
  t.equal(check.pragma('user_version', { simple: true }), SCHEMA_VERSION + 1);
  t.same(check.prepare(`SELECT name FROM sqlite_master WHERE type = 'table'`).all(), [], 'nothing was created');
  check.close();
});

t.test('a failed migration leaves the file at its old version', async (t) => {
  const path = tempDbPath(t);
  const raw = new Database(path);
  // A table in the way of the first migration: it fails, and must roll back entirely.
  raw.exec('CREATE TABLE usage_day (x INTEGER)');
  raw.close();
  t.throws(() => openStore(path), /already exists/);
  const check = new Database(path);
  t.equal(check.pragma('user_version', { simple: true }), 0);
  t.same(check.prepare(`SELECT name FROM sqlite_master WHERE type = 'table'`).pluck().all(), ['usage_day']);
  check.close();
});

t.test('owners may not be referenced before they exist (foreign keys are on)', async (t) => {
  const store = tempStore(t);
  t.throws(() => store.sql.admin.insertCredit.run(999, 10, 0), /FOREIGN KEY/);
});

t.test('a survey counts live owners per plan and leaves the file as it found it', async (t) => {
  const path = tempDbPath(t);
  t.same(surveyStore(path), { kind: 'absent' });
  t.notOk(existsSync(path), 'an absent file is not created');
  const store = openStore(path);
  for (const plan of ['pro', 'pro', 'pro', 'free']) addOwner(store.db, 0, plan);
  const gone = addOwner(store.db, 0, 'gone');
  store.db.prepare('UPDATE owners SET deleted_at = 1 WHERE id = ?').run(gone);
  store.db.prepare(`UPDATE owners SET suspended = 1 WHERE plan = 'free'`).run();
  store.close();
  t.same(
    surveyStore(path),
    {
      kind: 'current',
      ownersByPlan: new Map([
        ['free', 1],
        ['pro', 3],
      ]),
    },
    'suspended owners count, deleted ones do not',
  );
  t.same(readdirSync(dirname(path)), ['chaingate.db'], 'no -wal or -shm file is left behind');
  // Next to the daemon's open connection, with its uncheckpointed writes in the WAL.
  const daemon = tempStore(t, path);
  addOwner(daemon.db, 0, 'pro');
  t.same(surveyStore(path), {
    kind: 'current',
    ownersByPlan: new Map([
      ['free', 1],
      ['pro', 4],
    ]),
  });
});

t.test('a survey reads without migrating, and names a newer schema where openStore would refuse it', async (t) => {
  const empty = tempDbPath(t);
  writeFileSync(empty, '');
  t.same(surveyStore(empty), { kind: 'current', ownersByPlan: new Map() });
  const check = new Database(empty);
  t.equal(check.pragma('user_version', { simple: true }), 0, 'not migrated');
  check.close();
  const newer = tempDbPath(t);
  const raw = new Database(newer);
  raw.pragma(`user_version = ${SCHEMA_VERSION + 1}`);
  raw.close();
  t.same(surveyStore(newer), {
    kind: 'newer',
    message: `the database schema is version ${SCHEMA_VERSION + 1}, newer than this chaingate (${SCHEMA_VERSION}): upgrade chaingate`,
  });
  const notDb = tempDbPath(t);
  writeFileSync(notDb, 'not a database, just text long enough to fill a header of a hundred bytes or so ........................');
  t.throws(() => surveyStore(notDb), /not a database/);
});

t.test('mustExist: a missing file is refused by its absolute path, and nothing is created', async (t) => {
  const path = join(dirname(tempDbPath(t)), 'data', 'chaingate.db');
  t.throws(() => openStore(path, { mustExist: true }), new NoDatabaseError(path));
  t.throws(() => openStore(path, { mustExist: true }), {
    message: `no database at ${path}: chaingate serve creates it; check storage.path in the config (a relative path is read from the config file's folder)`,
  });
  t.notOk(existsSync(dirname(path)), 'neither the file nor its directory');
  openStore(path).close();
  const again = tempStore(t, path, { mustExist: true });
  t.equal(again.db.pragma('user_version', { simple: true }), SCHEMA_VERSION, 'an existing one opens');
});

t.test('a schema 2 file keeps its usage, its endpoints logged from now on and its minutes keyed by time', async (t) => {
  const path = tempDbPath(t);
  const old = new Database(path);
  for (const sql of MIGRATIONS.slice(0, 2)) old.exec(sql);
  old.pragma('user_version = 2');
  const owner = addOwner(old, 500);
  old
    .prepare(
      `INSERT INTO endpoints (id, owner_id, network, key_hash, key_prefix, created_at) VALUES ('ep_a', ?, 'mainnet', x'00', 'abcdefgh', 1)`,
    )
    .run(owner);
  const insertUsage = old.prepare(`INSERT INTO usage_minute VALUES (?, ?, 'eth_call', ?, 0, 1, 5)`);
  for (const [endpoint, minute] of [
    ['ep_b', 120],
    ['ep_a', 60],
    ['ep_a', 120],
  ] as const)
    insertUsage.run(endpoint, owner, minute);
  old.close();

  const store = tempStore(t, path);
  t.same(
    store.db.prepare(`SELECT endpoint_id, t FROM usage_minute`).raw().all(),
    [
      ['ep_a', 60],
      ['ep_a', 120],
      ['ep_b', 120],
    ],
    'every row kept, read in the order of the new key: time first',
  );
  t.same(store.db.prepare(`SELECT name FROM pragma_index_list('usage_minute') WHERE origin = 'c'`).pluck().all(), [
    'usage_minute_by_owner',
  ]);
  t.same(store.db.prepare(`SELECT count(*) FROM key_changes`).pluck().get(), 0, 'what was there before is not a change');
  store.db.prepare(`UPDATE endpoints SET deleted_at = 2 WHERE id = 'ep_a'`).run();
  t.same(store.db.prepare(`SELECT kind, owner_id, endpoint_id FROM key_changes`).raw().all(), [['endpoint_deleted', owner, 'ep_a']]);
});

t.test('schema 5 comes to a file of schema 4: its endpoints keep their keys, without restrictions', async (t) => {
  const path = tempDbPath(t);
  const raw = new Database(path);
  for (const sql of MIGRATIONS.slice(0, 4)) raw.exec(sql);
  raw.pragma('user_version = 4');
  const owner = addOwner(raw, 10);
  raw
    .prepare('INSERT INTO endpoints (id, owner_id, network, key_hash, key_prefix, created_at) VALUES (?, ?, ?, ?, ?, ?)')
    .run('ep_old', owner, 'devnet', Buffer.alloc(32, 7), 'abcdefgh', 1);
  raw.close();
  const store = tempStore(t, path);
  t.equal(store.db.pragma('user_version', { simple: true }), SCHEMA_VERSION);
  t.same(store.sql.directory.endpointByKeyHash.get(Buffer.alloc(32, 7), Buffer.alloc(32, 7), 0), {
    endpointId: 'ep_old',
    ownerId: owner,
    network: 'devnet',
    plan: 'free',
    suspended: 0,
    fences: null,
    keyExpiresAt: null,
  });
  t.same(store.sql.directory.listEndpoints.get(owner), {
    id: 'ep_old',
    name: null,
    network: 'devnet',
    keyPrefix: 'abcdefgh',
    createdAt: 1,
    fences: null,
    previousKeyPrefix: null,
    previousKeyExpiresAt: null,
  });
});
