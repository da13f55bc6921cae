import type pg from 'pg';
import { INTERVAL_SECONDS, summarizeUsage } from '../metering/stats.js';
import { LATENCY_COLUMN_LIST, LATENCY_SUMS } from '../store/latency-columns.js';
import { inPgTransaction } from '../store/pg-transaction.js';
import type { FenceOptions } from '../fences/fences.js';
import { NO_FENCES, storedFences } from '../fences/settings.js';
import {
  ENDPOINT_ROW_COLUMNS,
  type EndpointAuthRow,
  type EndpointListDbRow,
  type EndpointRow,
  type StatsRow,
} from '../store/statements.js';
import {
  assertValidGrace,
  type CreateEndpointResult,
  type EndpointRecord,
  type FencePatcher,
  fencesText,
  newEndpointId,
  type OwnerRecord,
  type PatchFencesResult,
  type RotateKeyResult,
  rotatedKey,
  toEndpointAuth,
  toEndpointRecord,
} from '../tenancy/endpoints.js';
import { hashKey, looksLikeKey, newKey } from '../tenancy/keys.js';
import { assertValidName } from '../tenancy/names.js';
import { storedRole } from '../tenancy/roles.js';
import type { AccountStore } from './account-store.js';
import { notifyChange } from './pg-changes.js';
import { lockOwner, ownerColumns } from './pg-owners.js';

/** The key lookups, endpoints and stats: tenancy/endpoints.ts's and metering/stats.ts's, in PostgreSQL. */
export type PgEndpointTable = Pick<
  AccountStore,
  | 'endpointByKey'
  | 'endpointById'
  | 'ownerByManagementKey'
  | 'owner'
  | 'createEndpoint'
  | 'patchEndpointFences'
  | 'rotateEndpointKey'
  | 'listEndpoints'
  | 'listEndpointsPage'
  | 'listAllEndpoints'
  | 'deleteEndpoint'
  | 'stats'
>;

// Ids are ordered byte by byte, as SQLite does, whatever the database's collation.
const ENDPOINT_ORDER = `ORDER BY created_at, id COLLATE "C"`;

/** What a live endpoint of a live owner grants (suspended or not: the grant says so), by SQLite's rules (store/statements.ts). */
const ENDPOINT_AUTH_SELECT = `SELECT e.id AS "endpointId", e.owner_id AS "ownerId", e.network, o.plan, o.suspended, e.fences`;
const ENDPOINT_AUTH_FROM = `FROM endpoints e JOIN owners o ON o.id = e.owner_id WHERE e.deleted_at IS NULL AND o.deleted_at IS NULL`;
/** By key ($1, its hash): the current key, or else a previous key before its end ($2, unix s). */
const ENDPOINT_BY_KEY_SQL = `
  ${ENDPOINT_AUTH_SELECT}, NULL::bigint AS "keyExpiresAt" ${ENDPOINT_AUTH_FROM} AND e.key_hash = $1
  UNION ALL
  ${ENDPOINT_AUTH_SELECT}, e.previous_key_expires_at AS "keyExpiresAt" ${ENDPOINT_AUTH_FROM}
    AND e.previous_key_hash = $1 AND e.previous_key_expires_at > $2
  LIMIT 1`;
/** One live endpoint of an owner ($1 id, $2 owner), its row locked until the transaction ends. */
const LOCK_ENDPOINT_SQL = `SELECT ${ENDPOINT_ROW_COLUMNS} FROM endpoints WHERE id = $1 AND owner_id = $2::bigint AND deleted_at IS NULL FOR UPDATE`;

const STATS_COLUMNS = `t - t % $1 AS bucket, method, status, requests, ru, ${LATENCY_COLUMN_LIST}`;
const STATS_FILTER = `owner_id = $2::bigint AND t >= $3 AND t < $4 AND ($5::text IS NULL OR endpoint_id = $5)
  AND ($6::text IS NULL OR method = $6)`;
/** SQLite's stats query (store/statements.ts), over the same three tables for the same reason. */
const STATS_SQL = `
  SELECT bucket, method, status, sum(requests) AS requests, sum(ru) AS ru, ${LATENCY_SUMS} FROM (
    SELECT ${STATS_COLUMNS} FROM usage_minute WHERE ${STATS_FILTER}
    UNION ALL SELECT ${STATS_COLUMNS} FROM usage_hour WHERE ${STATS_FILTER}
    UNION ALL SELECT ${STATS_COLUMNS} FROM usage_day WHERE ${STATS_FILTER}
  ) u GROUP BY bucket, method, status ORDER BY bucket, method COLLATE "C", status`;

export function createPgEndpointTable(
  pool: pg.Pool,
  seconds: () => number,
  fenceOptions: FenceOptions = { balance: false },
): PgEndpointTable {
  const one = async <R extends pg.QueryResultRow>(sql: string, params: unknown[]): Promise<R | null> =>
    (await pool.query<R>(sql, params)).rows[0] ?? null;
  const records = (rows: EndpointRow[]): EndpointRecord[] => rows.map((row) => toEndpointRecord(row, seconds()));

  return {
    ...createPgEndpointWrites(pool, seconds),

    async endpointByKey(apiKey) {
      if (!looksLikeKey(apiKey, 'api')) return null;
      return toEndpointAuth(await one<EndpointAuthRow>(ENDPOINT_BY_KEY_SQL, [hashKey(apiKey), seconds()]), fenceOptions);
    },

    endpointById: async (endpointId) =>
      toEndpointAuth(
        await one<EndpointAuthRow>(`${ENDPOINT_AUTH_SELECT}, NULL::bigint AS "keyExpiresAt" ${ENDPOINT_AUTH_FROM} AND e.id = $1`, [
          endpointId,
        ]),
        fenceOptions,
      ),

    async ownerByManagementKey(key) {
      if (!looksLikeKey(key, 'management')) return null;
      // A suspended owner's key too: the management API answers it 403, not the 401 of an unknown key.
      const row = await one<OwnerRecord & { role: string }>(
        `SELECT ${ownerColumns('o')}, k.role
        FROM management_keys k JOIN owners o ON o.id = k.owner_id
        WHERE k.key_hash = $1 AND k.revoked_at IS NULL AND o.deleted_at IS NULL`,
        [hashKey(key)],
      );
      return row === null ? null : { ...row, role: storedRole(row.role) };
    },

    owner: (id) => one<OwnerRecord>(`SELECT ${ownerColumns()} FROM owners WHERE id = $1::bigint AND deleted_at IS NULL`, [id]),

    async createEndpoint(ownerId, network, name, maxEndpoints, fences = NO_FENCES) {
      if (name !== undefined) assertValidName(name, 'endpoint name');
      // The owner's row locked first: two writers (instances, the CLI) count and insert in turn.
      return inPgTransaction(pool, async (client): Promise<CreateEndpointResult> => {
        const owner = await lockOwner(client, ownerId);
        if (owner === null || owner.suspended) return { kind: 'refused', error: 'no_owner' };
        const { rows } = await client.query<{ n: number }>(
          'SELECT count(*) AS n FROM endpoints WHERE owner_id = $1 AND deleted_at IS NULL',
          [ownerId],
        );
        if (rows[0]!.n >= maxEndpoints) return { kind: 'refused', error: 'limit' };
        const key = newKey('api');
        const endpoint: EndpointRecord = {
          id: newEndpointId(),
          name: name ?? null,
          network,
          keyPrefix: key.prefix,
          createdAt: seconds(),
          fences,
          previousKeyPrefix: null,
          previousKeyExpiresAt: null,
        };
        await client.query(
          'INSERT INTO endpoints (id, owner_id, network, name, key_hash, key_prefix, created_at, fences) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)',
          [endpoint.id, ownerId, network, endpoint.name, key.hash, key.prefix, endpoint.createdAt, fencesText(fences)],
        );
        await notifyChange(client, { kind: 'endpoint_created', endpointId: endpoint.id, ownerId });
        return { kind: 'created', endpoint, apiKey: key.key };
      });
    },

    async listEndpoints(ownerId) {
      const { rows } = await pool.query<EndpointRow>(
        `SELECT ${ENDPOINT_ROW_COLUMNS} FROM endpoints WHERE owner_id = $1::bigint AND deleted_at IS NULL ${ENDPOINT_ORDER}`,
        [ownerId],
      );
      return records(rows);
    },

    async listEndpointsPage(ownerId, limit, after) {
      const { rows } = await pool.query<EndpointRow>(
        `SELECT ${ENDPOINT_ROW_COLUMNS} FROM endpoints WHERE owner_id = $1::bigint AND deleted_at IS NULL
          AND (created_at > $2 OR (created_at = $2 AND id COLLATE "C" > $3))
        ${ENDPOINT_ORDER} LIMIT $4`,
        [ownerId, after?.createdAt ?? -1, after?.id ?? '', limit],
      );
      return records(rows);
    },

    async listAllEndpoints(ownerId) {
      const { rows } = await pool.query<EndpointListDbRow>(
        `SELECT owner_id AS "ownerId", ${ENDPOINT_ROW_COLUMNS}
        FROM endpoints WHERE deleted_at IS NULL AND ($1::bigint IS NULL OR owner_id = $1::bigint)
        ORDER BY owner_id, created_at, id COLLATE "C"`,
        [ownerId ?? null],
      );
      return rows.map((row) => ({ ownerId: row.ownerId, ...toEndpointRecord(row, seconds()) }));
    },

    deleteEndpoint: (ownerId, endpointId) =>
      inPgTransaction(pool, async (client) => {
        // The sequence numbers deletions for whoever reads them in order, as deleted_seq does in SQLite.
        const { rowCount } = await client.query(
          `UPDATE endpoints SET deleted_at = $1, deleted_seq = nextval('endpoint_deletions')
          WHERE id = $2 AND owner_id = $3::bigint AND deleted_at IS NULL`,
          [seconds(), endpointId, ownerId],
        );
        if (rowCount !== 1) return false;
        await notifyChange(client, { kind: 'endpoint_deleted', endpointId, ownerId });
        return true;
      }),

    async stats(ownerId, query) {
      const { rows } = await pool.query<StatsRow>(STATS_SQL, [
        INTERVAL_SECONDS[query.interval],
        ownerId,
        query.from,
        query.to,
        query.endpointId ?? null,
        query.method ?? null,
      ]);
      return summarizeUsage(rows);
    },
  };
}

/** The writes that change what an endpoint's keys grant: its restrictions and its key, each notifying `endpoint_changed`. */
function createPgEndpointWrites(pool: pg.Pool, seconds: () => number): Pick<PgEndpointTable, 'patchEndpointFences' | 'rotateEndpointKey'> {
  return {
    // The endpoint's row locked (a concurrent PATCH waits): the settings patched are the ones overwritten.
    patchEndpointFences: <P>(ownerId: number, endpointId: string, patch: FencePatcher<P>) =>
      inPgTransaction(pool, async (client): Promise<PatchFencesResult<P>> => {
        const row = (await client.query<EndpointRow>(LOCK_ENDPOINT_SQL, [endpointId, ownerId])).rows[0];
        if (row === undefined) return null;
        const next = patch(storedFences(row.fences));
        if (!next.ok) return next as { ok: false; problems: P };
        const text = fencesText(next.settings);
        if (text !== row.fences) {
          await client.query('UPDATE endpoints SET fences = $1 WHERE id = $2', [text, endpointId]);
          await notifyChange(client, { kind: 'endpoint_changed', endpointId, ownerId });
        }
        return { ok: true, endpoint: toEndpointRecord({ ...row, fences: text }, seconds()) };
      }),

    async rotateEndpointKey(ownerId, endpointId, graceS) {
      assertValidGrace(graceS);
      return inPgTransaction(pool, async (client): Promise<RotateKeyResult> => {
        const row = (await client.query<EndpointRow>(LOCK_ENDPOINT_SQL, [endpointId, ownerId])).rows[0];
        if (row === undefined) return null;
        const key = newKey('api');
        const nowS = seconds();
        const end = graceS === 0 ? null : nowS + graceS;
        // The current key becomes the previous one until `end` (none with no end), replacing an earlier one.
        await client.query(
          `UPDATE endpoints SET
            previous_key_hash = CASE WHEN $1::bigint IS NULL THEN NULL ELSE key_hash END,
            previous_key_prefix = CASE WHEN $1::bigint IS NULL THEN NULL ELSE key_prefix END,
            previous_key_expires_at = $1::bigint, key_hash = $2, key_prefix = $3
          WHERE id = $4`,
          [end, key.hash, key.prefix, endpointId],
        );
        await notifyChange(client, { kind: 'endpoint_changed', endpointId, ownerId });
        return rotatedKey(row, key, end, nowS);
      });
    },
  };
}
