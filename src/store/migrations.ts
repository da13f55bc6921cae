import { addLatencyColumns } from './latency-columns.js';

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
 * An owner's webhooks and their last deliveries (issue 36 §3), the same in PostgreSQL but for its types.
 * `secret` is kept as given: it signs each delivery, so it cannot be a hash (it is the owner's, not a key
 * to chaingate, and is never shown again). The claims that make one sender of each alert, whatever the
 * threads and instances: `key_refused_t` and `error_rate_t` the minute last alerted, `balance_low` set while
 * the balance is below (re-armed above).
 */
export const WEBHOOK_TABLES = `
  CREATE TABLE webhooks (
    id TEXT PRIMARY KEY,
    owner_id INTEGER NOT NULL REFERENCES owners(id),
    url TEXT NOT NULL,
    events TEXT NOT NULL,
    secret TEXT NOT NULL,
    balance_below_ru INTEGER,
    refused_per_minute INTEGER,
    error_rate_above REAL,
    created_at INTEGER NOT NULL,
    deleted_at INTEGER,
    balance_low INTEGER NOT NULL DEFAULT 0,
    key_refused_t INTEGER NOT NULL DEFAULT 0,
    error_rate_t INTEGER NOT NULL DEFAULT 0
  );
  CREATE INDEX webhooks_by_owner ON webhooks(owner_id);
  CREATE TABLE webhook_deliveries (
    id INTEGER PRIMARY KEY,
    webhook_id TEXT NOT NULL,
    event TEXT NOT NULL,
    at INTEGER NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    outcome TEXT NOT NULL,
    http_status INTEGER,
    error TEXT,
    last_attempt_at INTEGER
  );
  CREATE INDEX webhook_deliveries_by_webhook ON webhook_deliveries(webhook_id, id);
`;

/**
 * What a delivery needs to be sent again by another sender (issue 36, nothing lost on a stop or a crash),
 * the same in PostgreSQL: `body` the JSON as first sent (the signature is made per attempt, with the
 * webhook's secret, which stays on its row); `claimed_by` the sender that has it and `lease_until` (unix s)
 * until when the others keep off it (alerts/delivery-resume.ts). A row of an older version has no body: it is
 * only marked failed once its retry window has passed. 0 is a lease already ended.
 */
export const DELIVERY_RESUME_COLUMNS = `
  ALTER TABLE webhook_deliveries ADD COLUMN body TEXT;
  ALTER TABLE webhook_deliveries ADD COLUMN claimed_by TEXT;
  ALTER TABLE webhook_deliveries ADD COLUMN lease_until BIGINT NOT NULL DEFAULT 0;
  CREATE INDEX webhook_deliveries_pending ON webhook_deliveries(lease_until, id) WHERE outcome = 'pending';
`;

/**
 * The recent failures (metering/failure-ring.ts): a ring per endpoint, cut to `usage.failures_kept` rows
 * each write. `seq` orders them (the newest row of each endpoint is never deleted, so it only grows); `at`
 * in unix ms; never a call's params nor its key.
 */
const FAILURES_TABLE = `CREATE TABLE call_failures (
    seq INTEGER PRIMARY KEY,
    endpoint_id TEXT NOT NULL,
    owner_id INTEGER NOT NULL,
    at INTEGER NOT NULL,
    method TEXT NOT NULL,
    http_status INTEGER NOT NULL,
    code INTEGER,
    error TEXT,
    message TEXT NOT NULL,
    upstream TEXT
  );
  CREATE INDEX call_failures_by_endpoint ON call_failures(endpoint_id, seq);`;

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
 * - `endpoints.deleted_seq` numbers deletions in order (PostgreSQL's column too, copied by `store copy`);
 * - `key_changes` (schema 3) is the log of what changes a key's grant, written by triggers so that every
 *   writer (the daemon's threads, the CLI, an operator's sqlite3) records it in the transaction that makes
 *   the change: `endpoint_created`, `endpoint_deleted`, `endpoint_changed` (its key, owner or network) and
 *   `owner_changed` (plan, suspension or deletion). A daemon reads it from the last `seq` it saw and forgets
 *   only the keys named, so its cache survives the ledger's writes (balances, usage), which log nothing.
 *   Ids only, never a key's hash. `at` (unix seconds) lets old rows be pruned;
 * - `usage_minute` is keyed by time first (schema 4): the ledger's flush adds a row per endpoint called in
 *   the last second, and keyed by endpoint first those rows fell on pages all over the table, so a flush
 *   read and rewrote (in the WAL) about a page per row once the table held a few hours of many endpoints;
 *   by time first they fall among the current minute's few pages. The hour and day tables, written in bulk
 *   by the roll-up, keep the endpoint first;
 * - an endpoint's restrictions (schema 5) are `fences`, the JSON of its FenceSettings (fences/settings.ts)
 *   as the owner set them, NULL for none; after a rotation with a grace period the key it replaced is
 *   `previous_key_hash` (and its prefix), valid until `previous_key_expires_at` (unix s), then ignored
 *   (never deleted: the next rotation overwrites it). A change of these logs `endpoint_changed` too
 *   (trigger `endpoint_fenced`, once: a rotation, which changes `key_hash` as well, is logged by
 *   `endpoint_changed`), so every cache forgets both keys of the endpoint;
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
  `
  CREATE TABLE key_changes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    owner_id INTEGER NOT NULL,
    endpoint_id TEXT,
    at INTEGER NOT NULL
  );
  CREATE INDEX key_changes_by_at ON key_changes(at);

  CREATE TRIGGER endpoint_created AFTER INSERT ON endpoints WHEN new.deleted_at IS NULL BEGIN
    INSERT INTO key_changes (kind, owner_id, endpoint_id, at)
    VALUES ('endpoint_created', new.owner_id, new.id, CAST(strftime('%s', 'now') AS INTEGER));
  END;
  CREATE TRIGGER endpoint_deleted AFTER UPDATE OF deleted_at ON endpoints
  WHEN old.deleted_at IS NULL AND new.deleted_at IS NOT NULL BEGIN
    INSERT INTO key_changes (kind, owner_id, endpoint_id, at)
    VALUES ('endpoint_deleted', new.owner_id, new.id, CAST(strftime('%s', 'now') AS INTEGER));
  END;
  CREATE TRIGGER endpoint_undeleted AFTER UPDATE OF deleted_at ON endpoints
  WHEN old.deleted_at IS NOT NULL AND new.deleted_at IS NULL BEGIN
    INSERT INTO key_changes (kind, owner_id, endpoint_id, at)
    VALUES ('endpoint_created', new.owner_id, new.id, CAST(strftime('%s', 'now') AS INTEGER));
  END;
  CREATE TRIGGER endpoint_changed AFTER UPDATE OF id, key_hash, owner_id, network ON endpoints
  WHEN old.id IS NOT new.id OR old.key_hash IS NOT new.key_hash OR old.owner_id IS NOT new.owner_id
    OR old.network IS NOT new.network BEGIN
    INSERT INTO key_changes (kind, owner_id, endpoint_id, at)
    VALUES ('endpoint_changed', old.owner_id, old.id, CAST(strftime('%s', 'now') AS INTEGER));
  END;
  CREATE TRIGGER endpoint_removed AFTER DELETE ON endpoints WHEN old.deleted_at IS NULL BEGIN
    INSERT INTO key_changes (kind, owner_id, endpoint_id, at)
    VALUES ('endpoint_deleted', old.owner_id, old.id, CAST(strftime('%s', 'now') AS INTEGER));
  END;
  CREATE TRIGGER owner_changed AFTER UPDATE OF id, plan, suspended, deleted_at ON owners
  WHEN old.id IS NOT new.id OR old.plan IS NOT new.plan OR old.suspended IS NOT new.suspended
    OR old.deleted_at IS NOT new.deleted_at BEGIN
    INSERT INTO key_changes (kind, owner_id, endpoint_id, at)
    VALUES ('owner_changed', old.id, NULL, CAST(strftime('%s', 'now') AS INTEGER));
  END;
  CREATE TRIGGER owner_removed AFTER DELETE ON owners BEGIN
    INSERT INTO key_changes (kind, owner_id, endpoint_id, at)
    VALUES ('owner_changed', old.id, NULL, CAST(strftime('%s', 'now') AS INTEGER));
  END;
  `,
  `
  CREATE TABLE usage_minute_by_time (
    endpoint_id TEXT NOT NULL,
    owner_id INTEGER NOT NULL,
    method TEXT NOT NULL,
    t INTEGER NOT NULL,
    status INTEGER NOT NULL,
    requests INTEGER NOT NULL,
    ru INTEGER NOT NULL,
    PRIMARY KEY (t, endpoint_id, method, status)
  ) WITHOUT ROWID;
  INSERT INTO usage_minute_by_time SELECT endpoint_id, owner_id, method, t, status, requests, ru FROM usage_minute;
  DROP TABLE usage_minute;
  ALTER TABLE usage_minute_by_time RENAME TO usage_minute;
  CREATE INDEX usage_minute_by_owner ON usage_minute(owner_id, t);
  `,
  `
  ALTER TABLE endpoints ADD COLUMN fences TEXT;
  ALTER TABLE endpoints ADD COLUMN previous_key_hash BLOB;
  ALTER TABLE endpoints ADD COLUMN previous_key_prefix TEXT;
  ALTER TABLE endpoints ADD COLUMN previous_key_expires_at INTEGER;
  CREATE UNIQUE INDEX endpoints_by_previous_key ON endpoints(previous_key_hash) WHERE previous_key_hash IS NOT NULL;

  CREATE TRIGGER endpoint_fenced AFTER UPDATE OF fences, previous_key_hash, previous_key_expires_at ON endpoints
  WHEN (old.fences IS NOT new.fences OR old.previous_key_hash IS NOT new.previous_key_hash
    OR old.previous_key_expires_at IS NOT new.previous_key_expires_at)
    AND old.id IS new.id AND old.key_hash IS new.key_hash AND old.owner_id IS new.owner_id AND old.network IS new.network BEGIN
    INSERT INTO key_changes (kind, owner_id, endpoint_id, at)
    VALUES ('endpoint_changed', old.owner_id, old.id, CAST(strftime('%s', 'now') AS INTEGER));
  END;
  `,
  `
  ALTER TABLE management_keys ADD COLUMN role TEXT NOT NULL DEFAULT 'admin';
  `,
  WEBHOOK_TABLES,
  // Issue 36: each usage row's latency histogram, and the recent failures' ring per endpoint.
  `
  ${addLatencyColumns('usage_minute', 'INTEGER')}
  ${addLatencyColumns('usage_hour', 'INTEGER')}
  ${addLatencyColumns('usage_day', 'INTEGER')}
  ${FAILURES_TABLE}
  `,
  DELIVERY_RESUME_COLUMNS,
];

/** The schema version this build writes; a database with a higher `user_version` is refused. */
export const SCHEMA_VERSION = MIGRATIONS.length;
