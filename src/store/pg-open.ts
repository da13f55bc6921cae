import type pg from 'pg';
import { PG_MIGRATIONS, PG_SCHEMA_VERSION } from './pg-migrations.js';
import { inPgTransaction } from './pg-transaction.js';

/** PostgreSQL's type ids of the values chaingate reads back as JS numbers rather than strings. */
const INT8 = 20;
const NUMERIC = 1700;

/**
 * node-postgres reads BIGINT (and sums, which are NUMERIC) as strings, since they may pass 2^53. chaingate's
 * RU amounts and times never do (MAX_RU = 2^53 - 1), so they are read as numbers, for this pool only.
 */
function typesOf(types: typeof pg.types): pg.CustomTypesConfig {
  return {
    getTypeParser(id: number, format?: string) {
      if (id === INT8 || id === NUMERIC) return (value: string) => Number(value);
      return format === undefined ? types.getTypeParser(id) : types.getTypeParser(id, format as 'text');
    },
  } as unknown as pg.CustomTypesConfig;
}

/** The open fleet store: a pool of connections to one PostgreSQL database, its schema current. */
export interface PgStore {
  readonly pool: pg.Pool;
  /** The URL with its password (if any) replaced by `***`: safe to log or show. */
  readonly safeUrl: string;
  close(): Promise<void>;
}

export interface PgStoreOptions {
  /** Connections at most; default 10. */
  maxConnections?: number;
  /** How long a connection attempt may take before it fails, in ms; default 5000. */
  connectTimeoutMs?: number;
  /** How long one statement may run before PostgreSQL cancels it, in ms; default 10_000. */
  statementTimeoutMs?: number;
  /** Called with an error of an idle connection (PostgreSQL restarted, the network cut); default: nothing. */
  onIdleError?: (err: Error) => void;
}

/** `url` with its password hidden, so that a log line or an error never shows it. */
export function safeUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password !== '') u.password = '***';
    return u.toString();
  } catch {
    return '(an invalid URL)';
  }
}

/**
 * Connects to the database at `url` (postgres://user[:password]@host[:port]/database) and brings its
 * schema to the current version. Several instances starting at once take turns: migrations run in one
 * transaction under an advisory lock, and the version is read again under it.
 */
export async function openPgStore(url: string, options: PgStoreOptions = {}): Promise<PgStore> {
  // Loaded by the first store opened: the daemon on one machine (and every CLI command but a fleet's) never
  // talks to PostgreSQL, and node-postgres would otherwise sit in its heap (~3 MB).
  const { default: pg } = await import('pg');
  const pool = new pg.Pool({
    connectionString: url,
    max: options.maxConnections ?? 10,
    connectionTimeoutMillis: options.connectTimeoutMs ?? 5000,
    statement_timeout: options.statementTimeoutMs ?? 10_000,
    types: typesOf(pg.types),
    application_name: 'chaingate',
  });
  // Without a listener an idle connection's error (the server restarting) would crash the process.
  pool.on('error', (err) => options.onIdleError?.(err));
  // The pool listens to its connections only while they are idle. One checked out and between two queries
  // when the server ends it (a restart, a fast shutdown's 57P01) would emit 'error' to no one, an uncaught
  // exception: every connection keeps a listener of its own. Its next query fails, and its holder (a
  // transaction, the change feed) releases it as broken.
  pool.on('connect', (client) => {
    client.on('error', () => {});
  });
  try {
    await migratePg(pool);
  } catch (err) {
    await pool.end();
    throw err;
  }
  return { pool, safeUrl: safeUrl(url), close: () => pool.end() };
}

/** An arbitrary constant naming chaingate's migration lock among the database's advisory locks. */
const MIGRATION_LOCK = 0x63676d31;
/** PostgreSQL's SQLSTATE for a statement the role has no privilege for. */
const INSUFFICIENT_PRIVILEGE = '42501';

async function migratePg(pool: pg.Pool): Promise<void> {
  await inPgTransaction(pool, async (client) => {
    await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
    // A fleet may run on a role that may not create tables (docs/fleet.md: an owner role migrates, the
    // gateway's role only reads and writes rows), and PostgreSQL checks CREATE even for a table that
    // exists: so nothing is created or written here while the schema is current.
    const known = (await client.query<{ t: string | null }>("SELECT to_regclass('chaingate_schema') AS t")).rows[0]?.t ?? null;
    const rows = known === null ? [] : (await client.query<{ version: number }>('SELECT version FROM chaingate_schema')).rows;
    const from = rows[0]?.version ?? 0;
    if (from > PG_SCHEMA_VERSION) {
      throw new Error(`the database schema is version ${from}, newer than this chaingate (${PG_SCHEMA_VERSION}): upgrade chaingate`);
    }
    if (from === PG_SCHEMA_VERSION) return;
    try {
      if (known === null) await client.query('CREATE TABLE chaingate_schema (version INTEGER NOT NULL)');
      for (let v = from; v < PG_SCHEMA_VERSION; v++) await client.query(PG_MIGRATIONS[v]!);
    } catch (err) {
      if ((err as { code?: string }).code !== INSUFFICIENT_PRIVILEGE) throw err;
      throw new Error(
        `the database schema is version ${from} and this chaingate needs ${PG_SCHEMA_VERSION}, which this role may not create: ` +
          'migrate it with the owner role first (docs/fleet.md)',
      );
    }
    if (rows.length === 0) await client.query('INSERT INTO chaingate_schema (version) VALUES ($1)', [PG_SCHEMA_VERSION]);
    else await client.query('UPDATE chaingate_schema SET version = $1', [PG_SCHEMA_VERSION]);
  });
}
