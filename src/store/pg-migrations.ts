import { addLatencyColumns } from './latency-columns.js';
import { DELIVERY_RESUME_COLUMNS } from './migrations.js';

/** The usage tables of the three roll-up levels share one shape; only the period of `t` differs. */
function usageTable(name: string): string {
  return `CREATE TABLE ${name} (
    endpoint_id TEXT NOT NULL,
    owner_id INTEGER NOT NULL,
    method TEXT NOT NULL,
    t BIGINT NOT NULL,
    status INTEGER NOT NULL,
    requests BIGINT NOT NULL,
    ru BIGINT NOT NULL,
    PRIMARY KEY (endpoint_id, method, t, status)
  );
  CREATE INDEX ${name}_by_owner ON ${name}(owner_id, t);`;
}

/**
 * The fleet store's schema in PostgreSQL, as an ordered list of migrations: `PG_MIGRATIONS[i]` takes a
 * database from version i (in `chaingate_schema`) to i + 1. Entries are never edited once released.
 *
 * The tables and their conventions are SQLite's (store/migrations.ts): unix seconds, keys only as SHA-256
 * hashes with an 8-character prefix, soft deletions, `endpoints.deleted_seq` numbering deletions, usage rows
 * without foreign keys, and `sum(credits.ru) - sum(usage ru) = owners.ru_balance` for every owner. Owner
 * ids are INTEGER (the shared book holds ids up to 2^31 - 1); RU amounts BIGINT, read back as numbers
 * (they never pass MAX_RU = 2^53 - 1).
 *
 * An endpoint's restrictions and its previous key (schema 2) are SQLite's schema 5: `fences` the JSON text
 * of its FenceSettings (TEXT, not JSONB: read back and copied as written), `previous_key_*` a rotated-out key
 * valid until its end. There is no key-change log here: the writes that change them notify
 * `endpoint_changed` on commit (accounts/pg-changes.ts).
 *
 * A management key's `role` (schema 3) and webhooks with their deliveries (schema 4) are SQLite's schemas
 * 6 and 7 (store/migrations.ts says what each column means).
 *
 * What only a fleet needs (metering/ledger-store.ts reads and writes them), timed by the database's clock
 * (TIMESTAMPTZ, `now()`), which every instance shares:
 * - `usage_batches`: the id of every usage batch written, so a batch retried after a lost answer is
 *   not applied twice (pruned after a day);
 * - `reservations`: RU an instance has set aside from an owner's balance to spend locally, until
 *   `expires_at` (the database's clock): an instance killed without returning them frees them when
 *   they expire. A reservation is not a debit: the balance shown is what was spent;
 * - `instances`: each instance's last heartbeat, for `chaingate status` and the fallback rate limits.
 */
export const PG_MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE owners (
    id SERIAL PRIMARY KEY,
    name TEXT NOT NULL,
    plan TEXT NOT NULL,
    ru_balance BIGINT NOT NULL,
    suspended BOOLEAN NOT NULL DEFAULT false,
    created_at BIGINT NOT NULL,
    deleted_at BIGINT
  );

  CREATE TABLE management_keys (
    key_hash BYTEA PRIMARY KEY,
    owner_id INTEGER NOT NULL REFERENCES owners(id),
    key_prefix TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    revoked_at BIGINT
  );
  CREATE INDEX management_keys_by_owner ON management_keys(owner_id);

  CREATE TABLE endpoints (
    id TEXT PRIMARY KEY,
    owner_id INTEGER NOT NULL REFERENCES owners(id),
    network TEXT NOT NULL,
    name TEXT,
    key_hash BYTEA NOT NULL UNIQUE,
    key_prefix TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    deleted_at BIGINT,
    deleted_seq BIGINT UNIQUE
  );
  CREATE INDEX endpoints_by_owner ON endpoints(owner_id);
  CREATE SEQUENCE endpoint_deletions;

  CREATE TABLE credits (
    id BIGSERIAL PRIMARY KEY,
    owner_id INTEGER NOT NULL REFERENCES owners(id),
    ru BIGINT NOT NULL,
    at BIGINT NOT NULL
  );
  CREATE INDEX credits_by_owner ON credits(owner_id);

  ${usageTable('usage_minute')}
  CREATE INDEX usage_minute_by_t ON usage_minute(t);
  ${usageTable('usage_hour')}
  CREATE INDEX usage_hour_by_t ON usage_hour(t);
  ${usageTable('usage_day')}

  CREATE TABLE usage_batches (
    id TEXT PRIMARY KEY,
    instance TEXT NOT NULL,
    at TIMESTAMPTZ NOT NULL DEFAULT now()
  );
  CREATE INDEX usage_batches_by_at ON usage_batches(at);

  CREATE TABLE reservations (
    instance TEXT NOT NULL,
    owner_id INTEGER NOT NULL REFERENCES owners(id),
    ru BIGINT NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (instance, owner_id)
  );
  CREATE INDEX reservations_by_owner ON reservations(owner_id, expires_at);

  CREATE TABLE instances (
    id TEXT PRIMARY KEY,
    started_at TIMESTAMPTZ NOT NULL,
    heartbeat_at TIMESTAMPTZ NOT NULL,
    info JSONB NOT NULL DEFAULT '{}'
  );
  `,
  `
  ALTER TABLE endpoints ADD COLUMN fences TEXT;
  ALTER TABLE endpoints ADD COLUMN previous_key_hash BYTEA;
  ALTER TABLE endpoints ADD COLUMN previous_key_prefix TEXT;
  ALTER TABLE endpoints ADD COLUMN previous_key_expires_at BIGINT;
  CREATE UNIQUE INDEX endpoints_by_previous_key ON endpoints(previous_key_hash) WHERE previous_key_hash IS NOT NULL;
  `,
  `
  ALTER TABLE management_keys ADD COLUMN role TEXT NOT NULL DEFAULT 'admin';
  `,
  `
  CREATE TABLE webhooks (
    id TEXT PRIMARY KEY,
    owner_id INTEGER NOT NULL REFERENCES owners(id),
    url TEXT NOT NULL,
    events TEXT NOT NULL,
    secret TEXT NOT NULL,
    balance_below_ru BIGINT,
    refused_per_minute BIGINT,
    error_rate_above DOUBLE PRECISION,
    created_at BIGINT NOT NULL,
    deleted_at BIGINT,
    balance_low BOOLEAN NOT NULL DEFAULT false,
    key_refused_t BIGINT NOT NULL DEFAULT 0,
    error_rate_t BIGINT NOT NULL DEFAULT 0
  );
  CREATE INDEX webhooks_by_owner ON webhooks(owner_id);
  CREATE TABLE webhook_deliveries (
    id BIGSERIAL PRIMARY KEY,
    webhook_id TEXT NOT NULL,
    event TEXT NOT NULL,
    at BIGINT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    outcome TEXT NOT NULL,
    http_status INTEGER,
    error TEXT,
    last_attempt_at BIGINT
  );
  CREATE INDEX webhook_deliveries_by_webhook ON webhook_deliveries(webhook_id, id);
  `,
  // Issue 36: SQLite's latency histograms and recent failures (store/migrations.ts), BIGINT counts.
  `
  ${addLatencyColumns('usage_minute', 'BIGINT')}
  ${addLatencyColumns('usage_hour', 'BIGINT')}
  ${addLatencyColumns('usage_day', 'BIGINT')}
  CREATE TABLE call_failures (
    seq BIGSERIAL PRIMARY KEY,
    endpoint_id TEXT NOT NULL,
    owner_id INTEGER NOT NULL,
    at BIGINT NOT NULL,
    method TEXT NOT NULL,
    http_status INTEGER NOT NULL,
    code INTEGER,
    error TEXT,
    message TEXT NOT NULL,
    upstream TEXT
  );
  CREATE INDEX call_failures_by_endpoint ON call_failures(endpoint_id, seq);
  `,
  // Issue 36: a delivery's body and its sender's claim, so a stopped sender's deliveries are resumed.
  DELIVERY_RESUME_COLUMNS,
];

/** The PostgreSQL schema version this build writes; a database with a higher one is refused. */
export const PG_SCHEMA_VERSION = PG_MIGRATIONS.length;
