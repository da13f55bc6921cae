import Database from 'better-sqlite3';
import { errorText } from '../log.js';

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

/** What one checkpoint made after a fault did: the WAL emptied, or not yet and why (retried later). */
export type CheckpointResult = { ok: true } | { ok: false; reason: string };

/**
 * Gives the WAL's space back after a store fault. SQLite checkpoints on its own only after a commit
 * that leaves the WAL past 1000 pages (about 4 MB): on a volume that the WAL itself filled, no
 * commit passes any more and every write fails with SQLITE_FULL for good, although a checkpoint
 * would free the room. So a fault other than a lock makes a `PRAGMA wal_checkpoint(TRUNCATE)` due,
 * run by the next `checkpointIfDue` and again at each later call until one completes (it needs
 * room for the pages the database file gains, so it may have to wait for space to be freed).
 */
export interface WalRecovery {
  /** Records a failed store call; a fault other than a lock makes a checkpoint due. */
  noteFault(err: unknown): void;
  /** Runs the due checkpoint, if any, and says how it went. Never throws (`onCheckpoint` hears the outcome too). */
  checkpointIfDue(): 'not_due' | 'done' | 'failed';
}

/** `write` runs the checkpoint under the connection's write lock (Store.write): it waits for writers too. */
export function createWalRecovery(
  db: Database.Database,
  onCheckpoint: ((result: CheckpointResult) => void) | undefined,
  write: <T>(run: () => T) => T,
): WalRecovery {
  let due = false;
  return {
    noteFault(err) {
      if (isStoreError(err) && !isLockFault(err)) due = true;
    },
    checkpointIfDue() {
      if (!due) return 'not_due';
      let result: CheckpointResult;
      try {
        // TRUNCATE waits (up to the busy timeout) for other connections' readers and writer, copies
        // every frame into the database file and cuts the WAL file to zero bytes.
        const row = write(() => db.pragma('wal_checkpoint(TRUNCATE)') as Array<{ busy: number }>)[0];
        result = row?.busy === 0 ? { ok: true } : { ok: false, reason: 'another connection is reading or writing' };
      } catch (err) {
        // E.g. the database file cannot grow yet: still no room. Due again next time.
        result = { ok: false, reason: errorText(err) };
      }
      if (result.ok) due = false;
      onCheckpoint?.(result);
      return result.ok ? 'done' : 'failed';
    },
  };
}
