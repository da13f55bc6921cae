import Database from 'better-sqlite3';
import { closeSync, constants, existsSync, mkdirSync, openSync } from 'node:fs';
import { userInfo } from 'node:os';
import { dirname, resolve } from 'node:path';
import { type CheckpointResult, createWalRecovery, isStoreError, type WalRecovery } from './faults.js';
import { MIGRATIONS, SCHEMA_VERSION } from './migrations.js';
import { createRoomReserve } from './room-reserve.js';
import { prepareStatements, type Statements } from './statements.js';
import { createWriteLock, type WriteLock } from './write-lock.js';

/**
 * One open connection to the chaingate database, with its statements prepared, and the repair after
 * faults (`noteFault`, `checkpointIfDue`: see WalRecovery).
 */
export interface Store extends WalRecovery {
  readonly db: Database.Database;
  readonly sql: Statements;
  /** Absolute path of the database file. */
  readonly path: string;
  /**
   * Runs `write` (statements that write, or a transaction) holding the write lock this connection shares
   * with the other threads of its process (see write-lock.ts). Every write of the daemon goes through it.
   */
  write<T>(write: () => T): T;
  /** `body` as an IMMEDIATE transaction (the SQLite write lock taken first) run under `write`. */
  writeTransaction<A extends unknown[], R>(body: (...args: A) => R): (...args: A) => R;
  close(): void;
}

export interface StoreOptions {
  /**
   * How long a write waits for another connection's write lock before failing with SQLITE_BUSY, in ms;
   * default 5000. better-sqlite3 waits synchronously, so the daemon should pass a short time (e.g. 100):
   * its flushes retry on the next tick, while a long wait would stall the event loop.
   */
  busyTimeoutMs?: number;
  /** Called after each checkpoint made because of a fault, e.g. to log it; default: nothing. */
  onCheckpoint?: (result: CheckpointResult) => void;
  /**
   * The write lock shared by the threads of one gateway, each with its own connection; default: a lock of
   * this connection's own (one thread alone, or another process such as the CLI).
   */
  writeLock?: WriteLock;
  /**
   * Refuse a missing file (NoDatabaseError) instead of creating it; default false. Only `serve` (and the
   * devnet) make a database: an operator command given a wrong path must not make an empty one and show it.
   */
  mustExist?: boolean;
  /**
   * The room reserve this connection keeps beside the file, in bytes (room-reserve.ts; the daemon's one
   * writer, from storage.reserve_bytes); default 0: it keeps none, but still gives up one it finds when a
   * checkpoint after a fault lacks room.
   */
  reserveBytes?: number;
}

/** openStore with `mustExist` found no file: the message names the absolute path and who creates it. */
export class NoDatabaseError extends Error {
  constructor(readonly path: string) {
    super(
      `no database at ${path}: chaingate serve creates it; check storage.path in the config (a relative path is read from the config file's folder)`,
    );
  }
}

/**
 * openStore with `mustExist` may not read or write the file, or reach it: the operator ran a command as
 * a user other than the service's. One line, saying whom to run it as.
 */
export class StoreAccessError extends Error {
  constructor(readonly path: string) {
    super(
      `permission denied: user ${userInfo().username} may not read and write the database ${path}; run operator commands as the service's user (sudo -u chaingate chaingate ...)`,
    );
  }
}

/**
 * The database an operator command opens must exist and be readable and writable by this user. A folder
 * the user may not enter hides the file from existsSync, and SQLite's own word for a file it may not
 * open is "unable to open database file": neither says that another user owns it.
 */
function checkExisting(file: string): void {
  try {
    // Opened, not access(2)ed: access checks the real user, SQLite's open the effective one.
    closeSync(openSync(file, constants.O_RDWR));
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EACCES' || code === 'EPERM') throw new StoreAccessError(file);
    if (code === 'ENOENT') throw new NoDatabaseError(file);
    throw err;
  }
}

/**
 * Opens (creating when absent, directory included) the database at `path` and brings its schema to
 * the current version. Works next to another process holding the same file (the daemon and the CLI):
 * WAL lets readers and one writer proceed together, and migrations run under a write lock.
 */
export function openStore(path: string, options: StoreOptions = {}): Store {
  const file = resolve(path);
  if (options.mustExist === true) checkExisting(file);
  if (options.mustExist !== true) mkdirSync(dirname(file), { recursive: true });
  const db = new Database(file, { timeout: options.busyTimeoutMs ?? 5000, fileMustExist: options.mustExist === true });
  try {
    db.pragma('journal_mode = WAL');
    // NORMAL in WAL mode: a committed transaction survives a process crash; only an OS crash or power
    // loss may lose the last transactions, never corrupt the file.
    db.pragma('synchronous = NORMAL');
    db.pragma('foreign_keys = ON');
    migrate(db);
    const close = (): void => {
      if (!db.open) return;
      // SQLite's advice for long-lived connections: refresh the planner's statistics before closing. Advice
      // only: a store fault here (another connection's write lock, a full disk) must not keep the file open.
      try {
        db.pragma('optimize');
      } catch (err) {
        if (!isStoreError(err)) throw err;
      }
      db.close();
    };
    const lock = options.writeLock ?? createWriteLock();
    const write = <T>(run: () => T): T => lock.run(run);
    const recovery = createWalRecovery(db, options.onCheckpoint, write, createRoomReserve(file, options.reserveBytes ?? 0));
    return {
      db,
      sql: prepareStatements(db),
      path: file,
      write,
      writeTransaction<A extends unknown[], R>(body: (...args: A) => R) {
        const tx = db.transaction(body);
        return (...args: A): R => lock.run(() => tx.immediate(...args));
      },
      close,
      noteFault: recovery.noteFault,
      checkpointIfDue: recovery.checkpointIfDue,
    };
  } catch (err) {
    db.close();
    throw err;
  }
}

/** What a look at the database finds: no file yet, a file from a newer chaingate, or its live owners per plan. */
export type StoreSurvey =
  | { kind: 'absent' }
  | { kind: 'newer'; message: string }
  | { kind: 'current'; ownersByPlan: ReadonlyMap<string, number> };

/**
 * Looks into the database at `path` without creating, migrating or writing it (check-config, and serve
 * before it opens the store). Throws when the file exists but cannot be opened or read. It opens read-write
 * on purpose: a read-only connection would leave -wal and -shm files behind, owned by whoever ran the check.
 */
export function surveyStore(path: string): StoreSurvey {
  const file = resolve(path);
  if (!existsSync(file)) return { kind: 'absent' };
  const db = new Database(file, { fileMustExist: true, timeout: 1000 });
  try {
    const version = userVersion(db);
    if (version > SCHEMA_VERSION) return { kind: 'newer', message: newerSchemaMessage(version) };
    const hasOwners = db.prepare(`SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'owners'`).pluck().get() !== undefined;
    // Not among the prepared statements: it runs on a file of any version (the first migration made
    // `owners`), before openStore brings it to the current one. Deleted owners no longer use a plan.
    const rows = hasOwners
      ? db
          .prepare<[], { plan: string; owners: number }>(
            `SELECT plan, count(*) AS owners FROM owners WHERE deleted_at IS NULL GROUP BY plan ORDER BY plan`,
          )
          .all()
      : [];
    return { kind: 'current', ownersByPlan: new Map(rows.map((r) => [r.plan, r.owners])) };
  } finally {
    db.close();
  }
}

function newerSchemaMessage(version: number): string {
  return `the database schema is version ${version}, newer than this chaingate (${SCHEMA_VERSION}): upgrade chaingate`;
}

function userVersion(db: Database.Database): number {
  return db.pragma('user_version', { simple: true }) as number;
}

function migrate(db: Database.Database): void {
  if (userVersion(db) === SCHEMA_VERSION) return;
  // IMMEDIATE takes the write lock first, so two processes opening a new file at once cannot both
  // run the same migration; the version is read again under the lock.
  db.transaction(() => {
    const from = userVersion(db);
    if (from > SCHEMA_VERSION) {
      throw new Error(newerSchemaMessage(from));
    }
    for (let v = from; v < SCHEMA_VERSION; v++) db.exec(MIGRATIONS[v]!);
    db.pragma(`user_version = ${SCHEMA_VERSION}`);
  }).immediate();
}
