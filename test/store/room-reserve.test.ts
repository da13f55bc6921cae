/**
 * The room reserve on a real 2 MB tmpfs: a WAL holding some new pages that filled the volume cannot be
 * checkpointed without room for the database file to grow; with a reserve the checkpoint gives it up,
 * completes, and writes the reserve again. The reserve is written only with room for it twice, and a
 * reserve another connection used is written again within a second.
 */
import t, { type Test } from 'tap';
import Database from 'better-sqlite3';
import { existsSync, readdirSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { type CheckpointResult, createWalRecovery } from '../../src/store/faults.js';
import { openStore, type Store } from '../../src/store/open.js';
import { createRoomReserve, reservePath } from '../../src/store/room-reserve.js';
import { smallVolume } from '../support/small-volume.js';
import { tempDbPath, tempStore } from './temp-store.js';

const RESERVE = 262_144;

/**
 * Commits rows of 100 bytes, one per commit, until SQLite refuses: the WAL holds the filler's last page
 * again and again, as it holds the usage rows of a live daemon, and a few pages the database file lacks.
 */
function fillWithWal(store: Store): unknown {
  store.db.exec('CREATE TABLE IF NOT EXISTS filler (x BLOB)');
  const insert = store.db.prepare('INSERT INTO filler VALUES (randomblob(100))');
  for (let i = 0; i < 100_000; i++) {
    try {
      insert.run();
    } catch (err) {
      return err;
    }
  }
  throw new Error('the volume never filled');
}

/** A store on a fresh 2 MB volume keeping a reserve of `reserveBytes`, its checkpoints' outcomes in `results`. */
function storeOnSmallVolume(t: Test, reserveBytes: number, results: CheckpointResult[]): { store: Store; db: string } {
  const db = join(smallVolume(t, '2m'), 'chaingate.db');
  openStore(db).close();
  return { store: tempStore(t, db, { busyTimeoutMs: 100, reserveBytes, onCheckpoint: (r) => results.push(r) }), db };
}

t.test('without a reserve, a WAL holding new pages that filled the volume stays: the file cannot grow', async (t) => {
  const results: CheckpointResult[] = [];
  const { store, db } = storeOnSmallVolume(t, 0, results);
  t.notOk(existsSync(reservePath(db)), 'no reserve is written with 0');
  const full = fillWithWal(store);
  t.match(full, { code: 'SQLITE_FULL' });
  store.noteFault(full);
  t.equal(store.checkpointIfDue(), 'failed');
  t.match(results, [{ ok: false, reason: /full/ }]);
});

t.test('with a reserve, the checkpoint gives it up, completes, and the reserve is written again', async (t) => {
  const results: CheckpointResult[] = [];
  const { store, db } = storeOnSmallVolume(t, RESERVE, results);
  t.equal(statSync(reservePath(db)).size, RESERVE, 'written at open, at its full size');
  const full = fillWithWal(store);
  t.match(full, { code: 'SQLITE_FULL' });
  t.ok(existsSync(reservePath(db)), 'a write failing for room does not touch the reserve');
  store.noteFault(full);
  t.equal(store.checkpointIfDue(), 'done');
  t.same(results, [{ ok: true, usedReserve: true }]);
  t.equal(statSync(`${db}-wal`).size, 0, 'the WAL is cut to zero bytes');
  t.equal(statSync(reservePath(db)).size, RESERVE, 'the room the WAL gave back holds the reserve again');
  const rows = store.db.prepare('SELECT count(*) FROM filler').pluck().get() as number;
  store.db.prepare('INSERT INTO filler VALUES (randomblob(100))').run();
  t.equal(store.db.prepare('SELECT count(*) FROM filler').pluck().get(), rows + 1, 'writes pass again');
});

t.test('a reserve is written only with room for it twice, never left cut short', async (t) => {
  const volume = smallVolume(t, '2m');
  const db = join(volume, 'chaingate.db');
  const big = createRoomReserve(db, 1_100_000);
  t.notOk(big.restore(), '1.1 MB on a 2 MB volume: refused');
  t.same(readdirSync(volume), [], 'nothing written, no part file');
  const small = createRoomReserve(db, RESERVE);
  t.ok(small.restore());
  t.ok(small.restore(), 'in place already');
  t.ok(big.release(), 'any connection may give it up');
  t.notOk(big.release(), 'nothing left to give up');
  t.ok(createRoomReserve(db, 0).restore(), 'a connection keeping none has nothing to write');
  t.notOk(existsSync(reservePath(db)));
});

t.test('a reserve used by another connection is written again at most a second later', async (t) => {
  const path = tempDbPath(t);
  const db = new Database(path);
  t.teardown(() => db.close());
  let now = 0;
  const recovery = createWalRecovery(
    db,
    undefined,
    (run) => run(),
    createRoomReserve(path, 4096),
    () => now,
  );
  t.equal(recovery.checkpointIfDue(), 'not_due');
  t.equal(statSync(reservePath(path)).size, 4096, 'written as the connection opens');
  rmSync(reservePath(path));
  now = 999;
  recovery.checkpointIfDue();
  t.notOk(existsSync(reservePath(path)), 'not looked for within the second');
  now = 1000;
  recovery.checkpointIfDue();
  t.ok(existsSync(reservePath(path)), 'written again');
});
