/**
 * The repair after store faults, on a real 2 MB tmpfs: a WAL that filled the volume is given back
 * by the checkpoint a fault makes due; a lock makes none due; a checkpoint blocked by another
 * connection's reader stays due until it completes.
 */
import t from 'tap';
import Database from 'better-sqlite3';
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { type CheckpointResult, isStoreError } from '../../src/store/faults.js';
import { openStore, type Store } from '../../src/store/open.js';
import { smallVolume } from '../support/small-volume.js';
import { addOwner, tempDbPath, tempStore } from './temp-store.js';

/** One owner, its balance lowered 1 RU per commit: the owners page is appended to the WAL each time. */
function debitOnce(store: Store, owner: number): void {
  store.db.transaction(() => store.sql.ledger.debit.get(1, owner)).immediate();
}

/** Commits until SQLite refuses; the refusal. */
function fillWithWal(store: Store, owner: number): unknown {
  for (let i = 0; i < 100_000; i++) {
    try {
      debitOnce(store, owner);
    } catch (err) {
      return err;
    }
  }
  throw new Error('the volume never filled');
}

t.test('a WAL that filled the volume: the checkpoint after the fault empties it and writes pass again', async (t) => {
  const db = join(smallVolume(t, '2m'), 'chaingate.db');
  const seed = openStore(db);
  const owner = addOwner(seed.db, 1_000_000);
  seed.close();
  const results: CheckpointResult[] = [];
  const store = tempStore(t, db, { busyTimeoutMs: 100, onCheckpoint: (r) => results.push(r) });
  const full = fillWithWal(store, owner);
  t.ok(isStoreError(full));
  t.match(full, { code: 'SQLITE_FULL' });
  t.ok(statSync(`${db}-wal`).size > 1_500_000, 'the WAL holds the room');
  t.throws(() => debitOnce(store, owner), { code: 'SQLITE_FULL' }, 'and keeps it: no write passes');
  t.equal(store.checkpointIfDue(), 'not_due', 'nothing is due before a fault is noted');
  store.noteFault(full);
  t.equal(store.checkpointIfDue(), 'done');
  t.same(results, [{ ok: true, usedReserve: false }]);
  t.equal(statSync(`${db}-wal`).size, 0, 'the WAL is cut to zero bytes');
  const before = store.sql.ledger.balance.get(owner)!;
  debitOnce(store, owner);
  t.equal(store.sql.ledger.balance.get(owner), before - 1, 'writes pass again');
  t.equal(store.checkpointIfDue(), 'not_due', 'one checkpoint per fault');
  t.equal(results.length, 1);
});

t.test('a lock held by another connection makes no checkpoint due; a blocked checkpoint stays due', async (t) => {
  const path = tempDbPath(t);
  const results: CheckpointResult[] = [];
  const store = tempStore(t, path, { busyTimeoutMs: 20, onCheckpoint: (r) => results.push(r) });
  const owner = addOwner(store.db, 100);
  const other = new Database(path);
  t.teardown(() => other.close());
  other.exec('BEGIN IMMEDIATE');
  const busy = (() => {
    try {
      debitOnce(store, owner);
    } catch (err) {
      return err;
    }
    throw new Error("the write passed under another connection's lock");
  })();
  t.match(busy, { code: 'SQLITE_BUSY' });
  store.noteFault(busy);
  t.equal(store.checkpointIfDue(), 'not_due', 'a lock passes by itself: nothing to repair');
  t.same(results, []);
  other.exec('ROLLBACK');

  store.noteFault(new TypeError('not a store error'));
  t.equal(store.checkpointIfDue(), 'not_due', 'only SQLite faults count');
  debitOnce(store, owner);
  // A reader on an older snapshot keeps a TRUNCATE checkpoint from completing.
  other.exec('BEGIN');
  other.prepare('SELECT count(*) FROM owners').get();
  debitOnce(store, owner);
  store.noteFault(new Database.SqliteError('database or disk is full', 'SQLITE_FULL'));
  t.equal(store.checkpointIfDue(), 'failed');
  t.match(results, [{ ok: false, reason: /another connection/ }]);
  other.exec('COMMIT');
  t.equal(store.checkpointIfDue(), 'done', 'still due, and done once the reader is gone');
  t.equal(results.length, 2);
  t.equal(store.checkpointIfDue(), 'not_due');
});
