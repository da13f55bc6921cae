import t from 'tap';
import Database from 'better-sqlite3';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { openStore } from '../../src/store/open.js';
import { SCHEMA_VERSION } from '../../src/store/migrations.js';
import { addOwner, tempDbPath, tempStore } from './temp-store.js';

const TABLES = ['credits', 'endpoints', 'management_keys', 'owners', 'usage_day', 'usage_hour', 'usage_minute'];

t.test('an empty file gets the whole schema, the pragmas and the version', async (t) => {
  const path = join(dirname(tempDbPath(t)), 'nested', 'deeper', 'db.sqlite');
  const store = tempStore(t, path);
  t.ok(existsSync(path), 'the directory and the file are created');
  t.equal(store.path, path);
  const tables = store.db.prepare(`SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`).pluck().all();
  t.same(tables, TABLES);
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
