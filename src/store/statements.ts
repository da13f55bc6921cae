import type Database from 'better-sqlite3';
import { LATENCY_COLUMN_LIST, LATENCY_COLUMNS, LATENCY_SUMS, latencyAdditions } from './latency-columns.js';

/**
 * Every SQL statement chaingate runs, prepared once when the store opens, grouped by the module that
 * uses it. Hot-path statements take positional parameters (cheaper to bind than named ones).
 */

type Stmt<P extends unknown[], R = unknown> = Database.Statement<P, R>;

/** A row as the daemon's key lookup needs it. */
export interface EndpointAuthRow {
  endpointId: string;
  ownerId: number;
  network: string;
  plan: string;
  /** The owner's suspension: 0 or 1 in SQLite, a boolean in PostgreSQL. */
  suspended: number | boolean;
  /** The stored restrictions (JSON text), null for none. */
  fences: string | null;
  /** For a previous key in its grace: its end, unix s; null for the current key. */
  keyExpiresAt: number | null;
}
export interface OwnerRow {
  id: number;
  name: string;
  plan: string;
  ruBalance: number;
  suspended: number;
}
/** The owner a management key acts as, and the key's role (issue 36 §4: admin, developer or viewer). */
export interface ManagementCallerRow extends OwnerRow {
  role: string;
}
export interface EndpointRow {
  id: string;
  name: string | null;
  network: string;
  keyPrefix: string;
  createdAt: number;
  /** The stored restrictions (JSON text), null for none. */
  fences: string | null;
  previousKeyPrefix: string | null;
  /** Unix s; the previous key is ignored from then on (the row is read as it is: the caller compares). */
  previousKeyExpiresAt: number | null;
}
/** The columns of an EndpointRow, in both stores' SQL (quoted aliases: PostgreSQL folds unquoted ones). */
export const ENDPOINT_ROW_COLUMNS = `id, name, network, key_prefix AS "keyPrefix", created_at AS "createdAt", fences,
  previous_key_prefix AS "previousKeyPrefix", previous_key_expires_at AS "previousKeyExpiresAt"`;
/** Usage of one period, method and status (0 for a success, else the error: see the usage tables). */
export interface StatsRow {
  bucket: number;
  method: string;
  status: number;
  requests: number;
  ru: number;
  /** The latency histogram's sums, `lat_0` … `lat_23` (store/latency-columns.ts). */
  [latencyColumn: `lat_${number}`]: number;
}
/** One kept failure as stored (both stores; metering/failure-ring.ts reads it): what was asked and what went
 *  wrong, never the call's params nor its key. */
export interface FailureDbRow {
  /** When it was answered, unix ms. */
  at: number;
  method: string;
  /** The HTTP status the client was answered with (200 for a JSON-RPC error). */
  httpStatus: number;
  /** The JSON-RPC error code answered, or null when the answer had none (a Beacon route's). */
  code: number | null;
  /** The error table's code (src/errors.ts), null for an error a node answered itself. */
  error: string | null;
  /** The error table's message, or a fixed one for a node's own error: never text a client or node chose. */
  message: string;
  /** The name of the node that failed it, null when none did. */
  upstream: string | null;
}
/** A failure to keep: endpoint_id, owner_id, at (unix ms), method, http_status, code, error, message, upstream. */
export type FailureParams = [string, number, number, string, number, number | null, string | null, string, string | null];
export interface OwnerListRow extends OwnerRow {
  createdAt: number;
  endpoints: number;
}
/** An endpoint of the operator's list, as stored (tenancy/endpoints.ts's EndpointListRow reads its restrictions). */
export interface EndpointListDbRow extends EndpointRow {
  ownerId: number;
}
export interface ManagementKeyRow {
  keyPrefix: string;
  createdAt: number;
  revokedAt: number | null;
  /** admin, developer or viewer (tenancy/roles.ts). */
  role: string;
}
/** One row of the key-change log: seq, kind, owner_id, endpoint_id (null for an owner's change). */
export type KeyChangeRow = [number, KeyChangeKind, number, string | null];
/** What a row of the key-change log says (see migrations.ts, key_changes). */
export type KeyChangeKind = 'endpoint_created' | 'endpoint_deleted' | 'endpoint_changed' | 'owner_changed';
/** One instance's heartbeat row, times in unix ms, `info` JSON text. */
export interface InstanceDbRow {
  id: string;
  startedAt: number;
  heartbeatAt: number;
  info: string;
}
/** One instance's reservation of one owner's RU, live until `expires` (unix ms); `now` tells live from expired. */
export interface ReservationParams {
  instance: string;
  owner: number;
  ru: number;
  now: number;
  expires: number;
}
/** One usage row to add: endpoint_id, owner_id, method, t, status, requests, ru, then the 24 latency counts. */
export type UsageParams = [string, number, string, number, number, number, number, ...number[]];

const ENDPOINT_AUTH_COLUMNS = `e.id AS endpointId, e.owner_id AS ownerId, e.network, o.plan, o.suspended, e.fences`;
const STATS_COLUMNS = `t - t % @step AS bucket, method, status, requests, ru, ${LATENCY_COLUMN_LIST}`;
const STATS_FILTER = `owner_id = @owner AND t >= @from AND t < @to AND (@endpoint IS NULL OR endpoint_id = @endpoint)
  AND (@method IS NULL OR method = @method)`;

function rollUpSql(from: string, into: string, period: number): string {
  // `WHERE` is required before `ON CONFLICT` in an INSERT ... SELECT (SQLite's parser ambiguity).
  // The latency histograms merge as the counts do: bucket by bucket (latency-columns.ts).
  return `INSERT INTO ${into} (endpoint_id, owner_id, method, t, status, requests, ru, ${LATENCY_COLUMN_LIST})
    SELECT endpoint_id, owner_id, method, t - t % ${period} AS period, status, sum(requests), sum(ru), ${LATENCY_SUMS}
    FROM ${from} WHERE t < ? GROUP BY endpoint_id, owner_id, method, period, status
    ON CONFLICT (endpoint_id, method, t, status)
    DO UPDATE SET requests = requests + excluded.requests, ru = ru + excluded.ru, ${latencyAdditions('')}`;
}

const ADD_USAGE_SQL = `
  INSERT INTO usage_minute (endpoint_id, owner_id, method, t, status, requests, ru, ${LATENCY_COLUMN_LIST})
  VALUES (?, ?, ?, ?, ?, ?, ?, ${LATENCY_COLUMNS.map(() => '?').join(', ')})
  ON CONFLICT (endpoint_id, method, t, status)
  DO UPDATE SET requests = requests + excluded.requests, ru = ru + excluded.ru, ${latencyAdditions('')}`;
const ADD_FAILURE_SQL = `
  INSERT INTO call_failures (endpoint_id, owner_id, at, method, http_status, code, error, message, upstream)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`;
/** Every failure of the endpoint but the newest `kept` (the third parameter). */
const TRIM_FAILURES_SQL = `
  DELETE FROM call_failures WHERE endpoint_id = ? AND seq <= (
    SELECT seq FROM call_failures WHERE endpoint_id = ? ORDER BY seq DESC LIMIT 1 OFFSET ?)`;
/**
 * A statement written in PostgreSQL's `$n` (each once, in order) as SQLite's `?`: one text for the statements
 * both stores run.
 */
export const positional = (sql: string): string => sql.replace(/\$\d+/g, '?');

/** Newest first: one endpoint's kept failures, of its owner only (both stores: `positional` for SQLite). */
export const FAILURES_SQL = `
  SELECT at, method, http_status AS "httpStatus", code, error, message, upstream FROM call_failures
  WHERE endpoint_id = $1 AND owner_id = $2 ORDER BY seq DESC LIMIT $3`;

export function prepareStatements(db: Database.Database) {
  const p = <P extends unknown[], R = unknown>(sql: string): Stmt<P, R> => db.prepare<P, R>(sql);
  const named = <P extends object, R = unknown>(sql: string): Stmt<[P], R> => db.prepare<[P], R>(sql);
  return {
    directory: {
      dataVersion: p<[], number>('PRAGMA data_version').pluck(),
      // The current key, or else a previous key before its end (unix s, the third parameter): a live
      // endpoint of a live owner, suspended or not (the grant says so).
      endpointByKeyHash: p<[Buffer, Buffer, number], EndpointAuthRow>(`
        SELECT ${ENDPOINT_AUTH_COLUMNS}, NULL AS keyExpiresAt
        FROM endpoints e JOIN owners o ON o.id = e.owner_id
        WHERE e.key_hash = ? AND e.deleted_at IS NULL AND o.deleted_at IS NULL
        UNION ALL
        SELECT ${ENDPOINT_AUTH_COLUMNS}, e.previous_key_expires_at AS keyExpiresAt
        FROM endpoints e JOIN owners o ON o.id = e.owner_id
        WHERE e.previous_key_hash = ? AND e.previous_key_expires_at > ? AND e.deleted_at IS NULL AND o.deleted_at IS NULL`),
      endpointById: p<[string], EndpointAuthRow>(`
        SELECT ${ENDPOINT_AUTH_COLUMNS}, NULL AS keyExpiresAt
        FROM endpoints e JOIN owners o ON o.id = e.owner_id
        WHERE e.id = ? AND e.deleted_at IS NULL AND o.deleted_at IS NULL`),
      // A suspended owner's key too: the management API answers it 403, not the 401 of an unknown key.
      ownerByManagementKeyHash: p<[Buffer], ManagementCallerRow>(`
        SELECT o.id, o.name, o.plan, o.ru_balance AS ruBalance, o.suspended, k.role
        FROM management_keys k JOIN owners o ON o.id = k.owner_id
        WHERE k.key_hash = ? AND k.revoked_at IS NULL AND o.deleted_at IS NULL`),
      ownerById: p<[number], OwnerRow>(`
        SELECT id, name, plan, ru_balance AS ruBalance, suspended FROM owners WHERE id = ? AND deleted_at IS NULL`),
      countLiveEndpoints: p<[number], number>(`SELECT count(*) FROM endpoints WHERE owner_id = ? AND deleted_at IS NULL`).pluck(),
      insertEndpoint: p<[string, number, string, string | null, Buffer, string, number, string | null]>(`
        INSERT INTO endpoints (id, owner_id, network, name, key_hash, key_prefix, created_at, fences) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`),
      listEndpoints: p<[number], EndpointRow>(`
        SELECT ${ENDPOINT_ROW_COLUMNS} FROM endpoints WHERE owner_id = ? AND deleted_at IS NULL ORDER BY created_at, id`),
      // A page in the same order, after the (created_at, id) of the previous page's last row.
      listEndpointsAfter: p<[number, number, string, number], EndpointRow>(`
        SELECT ${ENDPOINT_ROW_COLUMNS}
        FROM endpoints WHERE owner_id = ? AND deleted_at IS NULL AND (created_at, id) > (?, ?)
        ORDER BY created_at, id LIMIT ?`),
      // One live endpoint of the owner, for a change of its restrictions or its key.
      liveEndpoint: p<[string, number], EndpointRow>(`
        SELECT ${ENDPOINT_ROW_COLUMNS} FROM endpoints WHERE id = ? AND owner_id = ? AND deleted_at IS NULL`),
      setFences: p<[string | null, string]>(`UPDATE endpoints SET fences = ? WHERE id = ?`),
      // The current key becomes the previous one until the end given (none with a null end: refused at once),
      // replacing any earlier previous key. The end is bound thrice: [end, end, end, hash, prefix, id].
      rotateKey: p<[number | null, number | null, number | null, Buffer, string, string]>(`
        UPDATE endpoints SET
          previous_key_hash = CASE WHEN ? IS NULL THEN NULL ELSE key_hash END,
          previous_key_prefix = CASE WHEN ? IS NULL THEN NULL ELSE key_prefix END,
          previous_key_expires_at = ?,
          key_hash = ?, key_prefix = ?
        WHERE id = ?`),
      // The sequence number comes from the same statement, so two writers cannot take the same one.
      deleteEndpoint: p<[number, string, number], number>(`
        UPDATE endpoints SET deleted_at = ?, deleted_seq = (SELECT coalesce(max(deleted_seq), 0) + 1 FROM endpoints)
        WHERE id = ? AND owner_id = ? AND deleted_at IS NULL RETURNING deleted_seq`).pluck(),
      // The key-change log (migrations.ts, key_changes): what changed since the last seq read, in order.
      keyChangesAfter: p<[number], KeyChangeRow>(`
        SELECT seq, kind, owner_id, endpoint_id FROM key_changes WHERE seq > ? ORDER BY seq`).raw(),
      // [first seq kept, last seq written], 0 for none: a reader whose last seq is below the first missed some.
      keyChangesSpan: p<[], [number, number]>(`SELECT coalesce(min(seq), 0), coalesce(max(seq), 0) FROM key_changes`).raw(),
      // Rows older than the cut-off, but never the last one: it carries the sequence on for the readers.
      pruneKeyChanges: p<[number]>(`DELETE FROM key_changes WHERE at < ? AND seq < (SELECT max(seq) FROM key_changes)`),
      ownerSuspended: p<[number], number>(`SELECT suspended != 0 FROM owners WHERE id = ? AND deleted_at IS NULL`).pluck(),
      suspendedOwnerIds: p<[], number>(`SELECT id FROM owners WHERE suspended = 1 AND deleted_at IS NULL`).pluck(),
      failures: p<[string, number, number], FailureDbRow>(positional(FAILURES_SQL)),
      liveEndpointIds: p<[number], string>(`SELECT id FROM endpoints WHERE owner_id = ? AND deleted_at IS NULL`).pluck(),
      stats: named<{ step: number; owner: number; from: number; to: number; endpoint: string | null; method: string | null }, StatsRow>(`
        SELECT bucket, method, status, sum(requests) AS requests, sum(ru) AS ru, ${LATENCY_SUMS} FROM (
          SELECT ${STATS_COLUMNS} FROM usage_minute WHERE ${STATS_FILTER}
          UNION ALL SELECT ${STATS_COLUMNS} FROM usage_hour WHERE ${STATS_FILTER}
          UNION ALL SELECT ${STATS_COLUMNS} FROM usage_day WHERE ${STATS_FILTER}
        ) GROUP BY bucket, method, status ORDER BY bucket, method, status`),
    },
    ledger: {
      balance: p<[number], number>(`SELECT ru_balance FROM owners WHERE id = ?`).pluck(),
      // Every owner's stored balance at once: [id, ru_balance] rows, for a shared book's re-read.
      balances: p<[], [number, number]>(`SELECT id, ru_balance FROM owners`).raw(),
      // Relative, so a top-up committed by the CLI between two flushes composes with the debit.
      debit: p<[number, number], number>(`UPDATE owners SET ru_balance = ru_balance - ? WHERE id = ? RETURNING ru_balance`).pluck(),
      addUsage: p<UsageParams>(ADD_USAGE_SQL),
      // The recent failures' ring (metering/failure-ring.ts): added with the usage, then cut to its size.
      addFailure: p<FailureParams>(ADD_FAILURE_SQL),
      trimFailures: p<[string, string, number]>(TRIM_FAILURES_SQL),
    },
    usage: {
      minutesIntoHours: p<[number]>(rollUpSql('usage_minute', 'usage_hour', 3600)),
      deleteMinutesBefore: p<[number]>(`DELETE FROM usage_minute WHERE t < ?`),
      hoursIntoDays: p<[number]>(rollUpSql('usage_hour', 'usage_day', 86_400)),
      deleteHoursBefore: p<[number]>(`DELETE FROM usage_hour WHERE t < ?`),
    },
    // The ledger store's (metering/sqlite-ledger-store.ts); times in unix ms. A reservation with
    // `expires_at <= now` counts for nothing and is never extended again.
    fleet: {
      recordBatch: p<[string, string, number]>(`INSERT INTO usage_batches (id, instance, at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`),
      liveReserved: p<[number, number], number>(`
        SELECT coalesce(sum(ru), 0) FROM reservations WHERE owner_id = ? AND expires_at > ?`).pluck(),
      // An expired row of the same instance is started afresh: its RU were freed at its expiry.
      addReservation: named<ReservationParams>(`
        INSERT INTO reservations (instance, owner_id, ru, expires_at) VALUES (@instance, @owner, @ru, @expires)
        ON CONFLICT (instance, owner_id) DO UPDATE
        SET ru = CASE WHEN expires_at > @now THEN ru ELSE 0 END + excluded.ru, expires_at = excluded.expires_at`),
      spendReservation: named<ReservationParams>(`
        UPDATE reservations SET ru = max(ru - @ru, 0), expires_at = @expires
        WHERE instance = @instance AND owner_id = @owner AND expires_at > @now`),
      releaseSome: p<[number, string, number, number]>(`
        UPDATE reservations SET ru = max(ru - ?, 0) WHERE instance = ? AND owner_id = ? AND expires_at > ?`),
      releaseOwner: p<[string, number]>(`DELETE FROM reservations WHERE instance = ? AND owner_id = ?`),
      releaseAll: p<[string]>(`DELETE FROM reservations WHERE instance = ?`),
      renew: p<[number, string, number], [number, number]>(`
        UPDATE reservations SET expires_at = ? WHERE instance = ? AND expires_at > ? RETURNING owner_id, ru`).raw(),
      heartbeat: named<{ id: string; now: number; info: string | null }>(`
        INSERT INTO instances (id, started_at, heartbeat_at, info) VALUES (@id, @now, @now, coalesce(@info, '{}'))
        ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at, info = coalesce(@info, info)`),
      instances: p<[], InstanceDbRow>(`
        SELECT id, started_at AS startedAt, heartbeat_at AS heartbeatAt, info FROM instances ORDER BY id`),
      pruneBatches: p<[number]>(`DELETE FROM usage_batches WHERE at < ?`),
      pruneInstances: p<[number]>(`DELETE FROM instances WHERE heartbeat_at < ?`),
      pruneReservations: p<[number]>(`DELETE FROM reservations WHERE expires_at < ?`),
    },
    admin: {
      insertOwner: p<[string, string, number, number]>(`INSERT INTO owners (name, plan, ru_balance, created_at) VALUES (?, ?, ?, ?)`),
      insertCredit: p<[number, number, number]>(`INSERT INTO credits (owner_id, ru, at) VALUES (?, ?, ?)`),
      credit: p<[number, number]>(`UPDATE owners SET ru_balance = ru_balance + ? WHERE id = ? AND deleted_at IS NULL`),
      insertManagementKey: p<[Buffer, number, string, number, string]>(`
        INSERT INTO management_keys (key_hash, owner_id, key_prefix, created_at, role) VALUES (?, ?, ?, ?, ?)`),
      listManagementKeys: p<[number], ManagementKeyRow>(`
        SELECT key_prefix AS keyPrefix, created_at AS createdAt, revoked_at AS revokedAt, role
        FROM management_keys WHERE owner_id = ? ORDER BY created_at, key_prefix`),
      countLiveKeysWithPrefix: p<[number, string], number>(`
        SELECT count(*) FROM management_keys WHERE owner_id = ? AND key_prefix = ? AND revoked_at IS NULL`).pluck(),
      revokeKeysWithPrefix: p<[number, number, string]>(`
        UPDATE management_keys SET revoked_at = ? WHERE owner_id = ? AND key_prefix = ? AND revoked_at IS NULL`),
      revokeAllKeys: p<[number, number]>(`UPDATE management_keys SET revoked_at = ? WHERE owner_id = ? AND revoked_at IS NULL`),
      listOwners: p<[], OwnerListRow>(`
        SELECT o.id, o.name, o.plan, o.ru_balance AS ruBalance, o.suspended, o.created_at AS createdAt,
          (SELECT count(*) FROM endpoints e WHERE e.owner_id = o.id AND e.deleted_at IS NULL) AS endpoints
        FROM owners o WHERE o.deleted_at IS NULL ORDER BY o.id`),
      setPlan: p<[string, number]>(`UPDATE owners SET plan = ? WHERE id = ? AND deleted_at IS NULL`),
      setSuspended: p<[number, number]>(`UPDATE owners SET suspended = ? WHERE id = ? AND deleted_at IS NULL`),
      deleteOwner: p<[number, number]>(`UPDATE owners SET deleted_at = ? WHERE id = ? AND deleted_at IS NULL`),
      listAllEndpoints: p<[number | null, number | null], EndpointListDbRow>(`
        SELECT owner_id AS ownerId, ${ENDPOINT_ROW_COLUMNS}
        FROM endpoints WHERE deleted_at IS NULL AND (? IS NULL OR owner_id = ?) ORDER BY owner_id, created_at, id`),
    },
  };
}

/** The prepared statements of one open store. */
export type Statements = ReturnType<typeof prepareStatements>;
