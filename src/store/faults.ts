import Database from 'better-sqlite3';
import { errorText } from '../log.js';
import type { RoomReserve } from './room-reserve.js';

/** The error better-sqlite3 throws for everything SQLite refuses; `code` is SQLite's (e.g. SQLITE_FULL). */
export type SqliteError = InstanceType<typeof Database.SqliteError>;

/**
 * A store fault: SQLite refused a call (busy past the busy timeout, disk full, an I/O error). The
 * daemon answers 503 for it and goes on; any other error is a bug and is not treated as one.
 */
export function isStoreError(err: unknown): err is SqliteError {
  return err instanceof Database.SqliteError;
}

/** A fault that only says another connection holds a lock: it passes when the lock does, nothing to repair. */
function isLockFault(err: SqliteError): boolean {
  return err.code.startsWith('SQLITE_BUSY') || err.code.startsWith('SQLITE_LOCKED');
}

/**
 * What one checkpoint made after a fault did: the WAL emptied (`usedReserve`: only once the room reserve
 * was given up, so the disk is nearly full), or not yet and why (retried later).
 */
export type CheckpointResult = { ok: true; usedReserve: boolean } | { ok: false; reason: string };

/** How often a missing room reserve is looked for, in ms: another thread of the file may have used it. */
const RESERVE_CHECK_MS = 1000;

/**
 * Gives the WAL's space back after a store fault. SQLite checkpoints on its own only after a commit
 * that leaves the WAL past 1000 pages (about 4 MB): on a volume that the WAL itself filled, no
 * commit passes any more and every write fails with SQLITE_FULL for good, although a checkpoint
 * would free the room. So a fault other than a lock makes a `PRAGMA wal_checkpoint(TRUNCATE)` due,
 * run by the next `checkpointIfDue` and again at each later call until one completes. It needs room
 * for the pages the database file gains: one failing for room gives up the room reserve
 * (room-reserve.ts) and tries again; without one it waits for space to be freed.
 */
export interface WalRecovery {
  /** Records a failed store call; a fault other than a lock makes a checkpoint due. */
  noteFault(err: unknown): void;
  /** Runs the due checkpoint, if any, and says how it went. Never throws (`onCheckpoint` hears the outcome too). */
  checkpointIfDue(): 'not_due' | 'done' | 'failed';
}

/** One checkpoint try: done, blocked by another connection, or failed (`full`: for want of room). */
type Attempt = { ok: true } | { ok: false; reason: string; full: boolean };

/**
 * `write` runs the checkpoint under the connection's write lock (Store.write): it waits for writers too.
 * `reserve` is the file's room reserve; this connection writes it now and again (when it keeps one: see
 * createRoomReserve) at most every RESERVE_CHECK_MS by `now`.
 */
export function createWalRecovery(
  db: Database.Database,
  onCheckpoint: ((result: CheckpointResult) => void) | undefined,
  write: <T>(run: () => T) => T,
  reserve: RoomReserve,
  now: () => number = Date.now,
): WalRecovery {
  let due = false;
  // Written (when kept and missing) as the connection opens, before any write can fill the disk.
  reserve.restore();
  let reserveCheckedAt = now();
  const checkpoint = (): Attempt => {
    try {
      // TRUNCATE waits (up to the busy timeout) for other connections' readers and writer, copies
      // every frame into the database file and cuts the WAL file to zero bytes.
      const row = write(() => db.pragma('wal_checkpoint(TRUNCATE)') as Array<{ busy: number }>)[0];
      return row?.busy === 0 ? { ok: true } : { ok: false, reason: 'another connection is reading or writing', full: false };
    } catch (err) {
      // E.g. the database file cannot grow yet: still no room. Due again next time.
      return { ok: false, reason: errorText(err), full: isStoreError(err) && err.code === 'SQLITE_FULL' };
    }
  };
  return {
    noteFault(err) {
      if (isStoreError(err) && !isLockFault(err)) due = true;
    },
    checkpointIfDue() {
      if (!due) {
        const at = now();
        if (at - reserveCheckedAt >= RESERVE_CHECK_MS) {
          reserveCheckedAt = at;
          reserve.restore();
        }
        return 'not_due';
      }
      let attempt = checkpoint();
      const usedReserve = !attempt.ok && attempt.full && reserve.release();
      if (usedReserve) attempt = checkpoint();
      const result: CheckpointResult = attempt.ok ? { ok: true, usedReserve } : { ok: false, reason: attempt.reason };
      if (result.ok) {
        due = false;
        reserveCheckedAt = now();
        reserve.restore();
      }
      onCheckpoint?.(result);
      return result.ok ? 'done' : 'failed';
    },
  };
}
