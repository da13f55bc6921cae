/** The usage tables of the three roll-up levels share one shape; only the period of `t` differs. */
function usageTable(name: string): string {
  return `CREATE TABLE ${name} (
    endpoint_id TEXT NOT NULL,
    owner_id INTEGER NOT NULL,
    method TEXT NOT NULL,
    t INTEGER NOT NULL,
    status INTEGER NOT NULL,
    requests INTEGER NOT NULL,
    ru INTEGER NOT NULL,
    PRIMARY KEY (endpoint_id, method, t, status)
  ) WITHOUT ROWID;
  CREATE INDEX ${name}_by_owner ON ${name}(owner_id, t);`;
}

/**
 * The schema, as an ordered list of migrations: `MIGRATIONS[i]` takes a database from
 * `PRAGMA user_version = i` to `i + 1`. Entries are never edited once released; a change is a new entry.
 *
 * Conventions of the tables:
 * - times are unix seconds (UTC), but for the ledger store's tables (below);
 * - keys are stored only as SHA-256 hashes (`key_hash`), with the first 8 characters (`key_prefix`)
 *   kept so an operator can tell keys apart;
 * - owners and endpoints are deleted softly (`deleted_at`) so usage rows and credits keep their meaning
 *   and the ledger invariant `sum(credits.ru) - sum(usage.ru) = owners.ru_balance` stays checkable;
 * - `endpoints.deleted_seq` numbers deletions in order, so a daemon can learn which endpoints another
 *   process (the CLI) deleted since it last looked, without comparing clocks;
 * - usage rows: `t` is the start of the period (minute, hour or day); `status` is 0 for a success and
 *   otherwise the error: the HTTP status of a refusal or failure (401, 402, 429, 502, 503...) or the
 *   JSON-RPC error code (negative) of an error answered with HTTP 200. The usage tables carry no foreign
 *   keys on purpose: a debit must never fail to be stored because of a reference.
 *
 * The tables of the ledger store (metering/ledger-store.ts), the same as PostgreSQL's in fleet mode, keep
 * their times in unix milliseconds of the ledger store's clock (a reservation may live a second, which
 * seconds would round away): `usage_batches` (the id of every batch written, so a retried one is not
 * applied twice), `reservations` (RU an instance set aside from an owner's balance, until `expires_at`)
 * and `instances` (each one's first and last heartbeat, and what it says of itself as JSON).
 */
export const MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE owners (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    plan TEXT NOT NULL,
    ru_balance INTEGER NOT NULL,
    suspended INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    deleted_at INTEGER
  );

  CREATE TABLE management_keys (
    key_hash BLOB PRIMARY KEY,
    owner_id INTEGER NOT NULL REFERENCES owners(id),
    key_prefix TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    revoked_at INTEGER
  ) WITHOUT ROWID;
  CREATE INDEX management_keys_by_owner ON management_keys(owner_id);

  CREATE TABLE endpoints (
    id TEXT PRIMARY KEY,
    owner_id INTEGER NOT NULL REFERENCES owners(id),
    network TEXT NOT NULL,
    name TEXT,
    key_hash BLOB NOT NULL UNIQUE,
    key_prefix TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    deleted_at INTEGER,
    deleted_seq INTEGER UNIQUE
  );
  CREATE INDEX endpoints_by_owner ON endpoints(owner_id);

  CREATE TABLE credits (
    id INTEGER PRIMARY KEY,
    owner_id INTEGER NOT NULL REFERENCES owners(id),
    ru INTEGER NOT NULL,
    at INTEGER NOT NULL
  );
  CREATE INDEX credits_by_owner ON credits(owner_id);

  ${usageTable('usage_minute')}
  CREATE INDEX usage_minute_by_t ON usage_minute(t);
  ${usageTable('usage_hour')}
  CREATE INDEX usage_hour_by_t ON usage_hour(t);
  ${usageTable('usage_day')}
  `,
  `
  CREATE TABLE usage_batches (
    id TEXT PRIMARY KEY,
    instance TEXT NOT NULL,
    at INTEGER NOT NULL
  ) WITHOUT ROWID;
  CREATE INDEX usage_batches_by_at ON usage_batches(at);

  CREATE TABLE reservations (
    instance TEXT NOT NULL,
    owner_id INTEGER NOT NULL REFERENCES owners(id),
    ru INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (instance, owner_id)
  ) WITHOUT ROWID;
  CREATE INDEX reservations_by_owner ON reservations(owner_id, expires_at);

  CREATE TABLE instances (
    id TEXT PRIMARY KEY,
    started_at INTEGER NOT NULL,
    heartbeat_at INTEGER NOT NULL,
    info TEXT NOT NULL DEFAULT '{}'
  ) WITHOUT ROWID;
  `,
];

/** The schema version this build writes; a database with a higher `user_version` is refused. */
export const SCHEMA_VERSION = MIGRATIONS.length;
