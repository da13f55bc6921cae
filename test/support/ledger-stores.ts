/**
 * Both ledger stores (SQLite and PostgreSQL) as one table of tests drives them: two instances, `a` and `b`,
 * each on its own connection to the same data, and plain SQL for what the tests set up and look at (the
 * owner admin is not the ledger store's).
 */
import type pg from 'pg';
import type { Test } from 'tap';
import type { LedgerStore } from '../../src/metering/ledger-store.js';
import { createPgLedgerStore } from '../../src/metering/pg-ledger-store.js';
import { createSqliteLedgerStore } from '../../src/metering/sqlite-ledger-store.js';
import type { RollUpOptions } from '../../src/metering/usage.js';
import { openPgStore } from '../../src/store/pg-open.js';
import { inPgTransaction } from '../../src/store/pg-transaction.js';
import { addOwner, INVARIANT_GAPS_SQL, tempDbPath, tempStore, topUp } from '../store/temp-store.js';
import type { TestServer } from './servers.js';

export interface LedgerEngine {
  readonly kind: 'sqlite' | 'postgres';
  /** Instance `a`'s store; after each of its calls that writes, the ledger invariant is asserted. */
  readonly a: LedgerStore;
  /** Instance `b`'s store, on another connection, checked the same way. */
  readonly b: LedgerStore;
  /** Inserts an owner with `ru` as its opening credit; its id. */
  addOwner(ru: number): Promise<number>;
  /** Credits `ru` the way the CLI does: the credit and the balance in one transaction. */
  topUp(ownerId: number, ru: number): Promise<void>;
  /** The rows of a query without parameters. */
  rows<R>(sql: string): Promise<R[]>;
  /** Lets the stores' clock move on by `s` seconds: a fake clock's step (SQLite), a wait on the server's clock (PostgreSQL). */
  pass(s: number): Promise<void>;
}

/** The retention both engines' stores roll up with, and the failures they keep per endpoint. */
export const RETENTION: RollUpOptions = { keepMinutesH: 24, keepHoursD: 1, failuresKept: 3 };

/** Where the SQLite engine's fake clock starts, ms. */
export const SQLITE_T0 = Date.UTC(2025, 2, 10, 12, 0, 0);

/** A store whose writes are each followed by the assertion that `sum(credits) − sum(usage ru) = balance` for every owner. */
function checked(t: Test, store: LedgerStore, rows: LedgerEngine['rows']): LedgerStore {
  const after =
    <A extends unknown[], R>(call: (...args: A) => Promise<R>) =>
    async (...args: A): Promise<R> => {
      const result = await call(...args);
      const gaps = await rows<{ id: number; gap: number }>(INVARIANT_GAPS_SQL);
      t.same(
        gaps.filter((g) => g.gap !== 0),
        [],
        'credits − usage = balance, for every owner',
      );
      return result;
    };
  return {
    ...store,
    kind: store.kind,
    writeUsage: after(store.writeUsage),
    reserve: after(store.reserve),
    release: after(store.release),
    renew: after(store.renew),
    rollUp: after(store.rollUp),
    prune: after(store.prune),
  };
}

/** Two SQLite ledger stores on one temp file, with one fake clock. */
export function sqliteEngine(t: Test): LedgerEngine {
  const path = tempDbPath(t);
  const [one, two] = [tempStore(t, path), tempStore(t, path)];
  let clock = SQLITE_T0;
  const options = { ...RETENTION, now: () => clock };
  const rows = async <R>(sql: string): Promise<R[]> => one.db.prepare(sql).all() as R[];
  return {
    kind: 'sqlite',
    a: checked(t, createSqliteLedgerStore(one, options), rows),
    b: checked(t, createSqliteLedgerStore(two, options), rows),
    addOwner: async (ru) => addOwner(one.db, ru),
    topUp: async (owner, ru) => topUp(one.db, owner, ru),
    rows,
    async pass(s) {
      clock += s * 1000;
    },
  };
}

/** Two PostgreSQL ledger stores, each with its own pool, on `server`'s database emptied first. */
export async function pgEngine(t: Test, server: TestServer): Promise<LedgerEngine> {
  const [one, two] = await Promise.all([openPgStore(server.url), openPgStore(server.url)]);
  t.teardown(() => Promise.all([one.close(), two.close()]));
  await one.pool.query(
    'TRUNCATE owners, credits, usage_minute, usage_hour, usage_day, usage_batches, reservations, instances, call_failures RESTART IDENTITY CASCADE',
  );
  const rows = async <R>(sql: string): Promise<R[]> => (await one.pool.query(sql)).rows as R[];
  return {
    kind: 'postgres',
    a: checked(t, createPgLedgerStore(one, RETENTION), rows),
    b: checked(t, createPgLedgerStore(two, RETENTION), rows),
    addOwner: (ru) => addPgOwner(one.pool, ru),
    async topUp(owner, ru) {
      await inPgTransaction(one.pool, async (client) => {
        await client.query('INSERT INTO credits (owner_id, ru, at) VALUES ($1, $2, 0)', [owner, ru]);
        await client.query('UPDATE owners SET ru_balance = ru_balance + $2 WHERE id = $1', [owner, ru]);
      });
    },
    rows,
    async pass(s) {
      const until = (await one.pool.query<{ at: string }>(`SELECT (clock_timestamp() + $1::float8 * interval '1 second')::text AS at`, [s]))
        .rows[0]!.at;
      while (!(await one.pool.query<{ past: boolean }>('SELECT clock_timestamp() > $1::timestamptz AS past', [until])).rows[0]!.past) {
        await new Promise((r) => setTimeout(r, 50));
      }
    },
  };
}

/** Inserts an owner in PostgreSQL with `ru` as its opening credit, the way the CLI does; its id. */
export async function addPgOwner(pool: pg.Pool, ru: number): Promise<number> {
  return inPgTransaction(pool, async (client) => {
    const id = (
      await client.query<{ id: number }>(
        `INSERT INTO owners (name, plan, ru_balance, created_at) VALUES ('acme', 'free', $1, 0) RETURNING id`,
        [ru],
      )
    ).rows[0]!.id;
    if (ru > 0) await client.query('INSERT INTO credits (owner_id, ru, at) VALUES ($1, $2, 0)', [id, ru]);
    return id;
  });
}
