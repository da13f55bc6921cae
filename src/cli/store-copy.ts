import { LATENCY_COLUMNS } from '../store/latency-columns.js';
import type Database from 'better-sqlite3';
import type pg from 'pg';
import { existsSync } from 'node:fs';
import { openStore } from '../store/open.js';
import { openPgStore, safeUrl } from '../store/pg-open.js';
import { inPgTransaction } from '../store/pg-transaction.js';

/**
 * `chaingate store copy`: a single machine's SQLite data moved into an empty fleet store (PostgreSQL),
 * owners, management keys, endpoints, credits, balances and usage intact, ids kept (a key's hash, an
 * endpoint's id and an owner's id mean the same afterwards). The source is read in one read transaction
 * (a consistent snapshot even while a gateway writes it, though debits made after it are not copied:
 * stop the gateway first), the target written in one transaction (all or nothing), then both are
 * counted again and compared.
 */

/** A table copied, its columns in order, and the SQLite expression of each (booleans become booleans). */
interface TableCopy {
  name: string;
  columns: readonly string[];
  /** SQLite's select list; defaults to the columns. */
  select?: string;
  /** The primary key, for reading in a stable order. */
  order: string;
}

const TABLES: readonly TableCopy[] = [
  {
    name: 'owners',
    columns: ['id', 'name', 'plan', 'ru_balance', 'suspended', 'created_at', 'deleted_at'],
    select: 'id, name, plan, ru_balance, suspended != 0, created_at, deleted_at',
    order: 'id',
  },
  // A key's role: schema 6, PostgreSQL's 3.
  { name: 'management_keys', columns: ['key_hash', 'owner_id', 'key_prefix', 'created_at', 'revoked_at', 'role'], order: 'key_hash' },
  {
    name: 'endpoints',
    columns: [
      'id',
      'owner_id',
      'network',
      'name',
      'key_hash',
      'key_prefix',
      'created_at',
      'deleted_at',
      'deleted_seq',
      // Restrictions as their JSON text, and a rotated-out key in its grace (schema 5; PostgreSQL's 2).
      'fences',
      'previous_key_hash',
      'previous_key_prefix',
      'previous_key_expires_at',
    ],
    order: 'id',
  },
  { name: 'credits', columns: ['id', 'owner_id', 'ru', 'at'], order: 'id' },
  ...['usage_minute', 'usage_hour', 'usage_day'].map((name) => ({
    name,
    // With each row's latency histogram (store/latency-columns.ts), so percentiles survive the move.
    columns: ['endpoint_id', 'owner_id', 'method', 't', 'status', 'requests', 'ru', ...LATENCY_COLUMNS],
    order: 'endpoint_id, method, t, status',
  })),
  // Each endpoint's recent failures, in their order (`seq`, which the target's sequence then follows).
  {
    name: 'call_failures',
    columns: ['seq', 'endpoint_id', 'owner_id', 'at', 'method', 'http_status', 'code', 'error', 'message', 'upstream'],
    order: 'seq',
  },
  // Webhooks (schema 7, PostgreSQL's 4); not their past deliveries, a log of attempts the new store starts afresh.
  {
    name: 'webhooks',
    columns: [
      'id',
      'owner_id',
      'url',
      'events',
      'secret',
      'balance_below_ru',
      'refused_per_minute',
      'error_rate_above',
      'created_at',
      'deleted_at',
      'balance_low',
      'key_refused_t',
      'error_rate_t',
    ],
    select:
      'id, owner_id, url, events, secret, balance_below_ru, refused_per_minute, error_rate_above, created_at, deleted_at, balance_low != 0, key_refused_t, error_rate_t',
    order: 'id',
  },
];

/** Rows per INSERT: PostgreSQL takes at most 65,535 parameters in one statement. */
const ROWS_PER_INSERT = 1000;

export interface CopyReport {
  /** Rows copied per table, in copy order. */
  rows: Array<{ table: string; rows: number }>;
  /** The sum of the owners' balances, equal on both sides. */
  balances: number;
}

/** Why a copy did not happen: the message names what to do. */
export class CopyRefused extends Error {}

/**
 * Copies `from` (a SQLite file) into the PostgreSQL database at `to`, reporting each table as it is done.
 * Throws CopyRefused when the source is missing or the target already holds owners.
 */
export async function copyStore(from: string, to: string, progress: (line: string) => void): Promise<CopyReport> {
  if (!existsSync(from)) throw new CopyRefused(`no database at ${from}`);
  // openStore brings an older file's schema to this version first, as the daemon would.
  const source = openStore(from, { busyTimeoutMs: 5000 });
  try {
    const target = await openPgStore(to);
    try {
      const present = (await target.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM owners')).rows[0]!.n;
      if (present > 0) {
        throw new CopyRefused(`${safeUrl(to)} already holds ${present} owners: store copy fills an empty fleet store only`);
      }
      return await copyTables(source.db, target.pool, progress);
    } finally {
      await target.close();
    }
  } finally {
    source.close();
  }
}

async function copyTables(db: Database.Database, pool: pg.Pool, progress: (line: string) => void): Promise<CopyReport> {
  const rows: CopyReport['rows'] = [];
  // One read transaction: every table from the same snapshot (WAL lets the gateway go on writing).
  db.exec('BEGIN');
  try {
    return await inPgTransaction(pool, async (client) => {
      for (const table of TABLES) {
        const n = await copyTable(db, client, table, (done) => progress(`${table.name}: ${done} rows…`));
        rows.push({ table: table.name, rows: n });
        progress(`${table.name}: ${n} rows`);
      }
      // New owners, credits and deletions are numbered after the copied ones.
      await client.query(`SELECT setval('owners_id_seq', greatest((SELECT max(id) FROM owners), 1), (SELECT count(*) > 0 FROM owners))`);
      await client.query(`SELECT setval('credits_id_seq', greatest((SELECT max(id) FROM credits), 1), (SELECT count(*) > 0 FROM credits))`);
      await client.query(
        `SELECT setval('call_failures_seq_seq', greatest((SELECT max(seq) FROM call_failures), 1), (SELECT count(*) > 0 FROM call_failures))`,
      );
      await client.query(
        `SELECT setval('endpoint_deletions', greatest((SELECT max(deleted_seq) FROM endpoints), 1), (SELECT count(*) > 0 FROM endpoints WHERE deleted_seq IS NOT NULL))`,
      );
      return { rows, balances: await checkCopy(db, client, rows) };
    });
  } finally {
    db.exec('COMMIT');
  }
}

async function copyTable(
  db: Database.Database,
  client: pg.PoolClient,
  table: TableCopy,
  onProgress: (done: number) => void,
): Promise<number> {
  const read = db.prepare(`SELECT ${table.select ?? table.columns.join(', ')} FROM ${table.name} ORDER BY ${table.order}`).raw();
  const width = table.columns.length;
  let batch: unknown[] = [];
  let copied = 0;
  const insert = async (): Promise<void> => {
    const count = batch.length / width;
    const values = Array.from({ length: count }, (_, r) => `(${table.columns.map((_, c) => `$${r * width + c + 1}`).join(', ')})`);
    await client.query(`INSERT INTO ${table.name} (${table.columns.join(', ')}) VALUES ${values.join(', ')}`, batch);
    copied += count;
    batch = [];
    if (copied % 100_000 === 0) onProgress(copied);
  };
  for (const row of read.iterate() as IterableIterator<unknown[]>) {
    batch.push(...row);
    if (batch.length === ROWS_PER_INSERT * width) await insert();
  }
  if (batch.length > 0) await insert();
  return copied;
}

/** Counts both sides again, inside the target's transaction: a difference rolls the copy back. */
async function checkCopy(db: Database.Database, client: pg.PoolClient, rows: CopyReport['rows']): Promise<number> {
  for (const { table, rows: n } of rows) {
    const there = (await client.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table}`)).rows[0]!.n;
    if (there !== n) throw new Error(`${table}: ${n} rows read but ${there} in the target`);
  }
  const here = (db.prepare('SELECT coalesce(sum(ru_balance), 0) FROM owners').pluck().get() as number) ?? 0;
  const there = (await client.query<{ s: number }>('SELECT coalesce(sum(ru_balance), 0) AS s FROM owners')).rows[0]!.s;
  if (here !== there) throw new Error(`the balances add up to ${here} RU in the source but ${there} in the target`);
  return here;
}
