import type pg from 'pg';
import { INTERVAL_SECONDS, summarizeUsage } from '../metering/stats.js';
import { inPgTransaction } from '../store/pg-transaction.js';
import type { EndpointListRow, StatsRow } from '../store/statements.js';
import { type CreateEndpointResult, type EndpointRecord, newEndpointId, type OwnerRecord } from '../tenancy/endpoints.js';
import type { EndpointAuth } from '../tenancy/key-cache.js';
import { hashKey, looksLikeKey, newKey } from '../tenancy/keys.js';
import { assertValidName } from '../tenancy/names.js';
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
  | 'listEndpoints'
  | 'listEndpointsPage'
  | 'listAllEndpoints'
  | 'deleteEndpoint'
  | 'stats'
>;

const ENDPOINT_COLUMNS = `id, name, network, key_prefix AS "keyPrefix", created_at AS "createdAt"`;
// Ids are ordered byte by byte, as SQLite does, whatever the database's collation.
const ENDPOINT_ORDER = `ORDER BY created_at, id COLLATE "C"`;

/** What a live endpoint grants, its owner live and not suspended; the caller's condition follows the last AND. */
const ENDPOINT_AUTH_SQL = `SELECT e.id AS "endpointId", e.owner_id AS "ownerId", e.network, o.plan
  FROM endpoints e JOIN owners o ON o.id = e.owner_id
  WHERE e.deleted_at IS NULL AND NOT o.suspended AND o.deleted_at IS NULL AND`;

const STATS_COLUMNS = `t - t % $1 AS bucket, method, status, requests, ru`;
const STATS_FILTER = `owner_id = $2::bigint AND t >= $3 AND t < $4 AND ($5::text IS NULL OR endpoint_id = $5)`;
/** SQLite's stats query (store/statements.ts), over the same three tables for the same reason. */
const STATS_SQL = `
  SELECT bucket, method, status, sum(requests) AS requests, sum(ru) AS ru FROM (
    SELECT ${STATS_COLUMNS} FROM usage_minute WHERE ${STATS_FILTER}
    UNION ALL SELECT ${STATS_COLUMNS} FROM usage_hour WHERE ${STATS_FILTER}
    UNION ALL SELECT ${STATS_COLUMNS} FROM usage_day WHERE ${STATS_FILTER}
  ) u GROUP BY bucket, method, status ORDER BY bucket, method COLLATE "C", status`;

export function createPgEndpointTable(pool: pg.Pool, seconds: () => number): PgEndpointTable {
  const one = async <R extends pg.QueryResultRow>(sql: string, params: unknown[]): Promise<R | null> =>
    (await pool.query<R>(sql, params)).rows[0] ?? null;

  return {
    async endpointByKey(apiKey) {
      if (!looksLikeKey(apiKey, 'api')) return null;
      return one<EndpointAuth>(`${ENDPOINT_AUTH_SQL} e.key_hash = $1`, [hashKey(apiKey)]);
    },

    endpointById: (endpointId) => one<EndpointAuth>(`${ENDPOINT_AUTH_SQL} e.id = $1`, [endpointId]),

    async ownerByManagementKey(key) {
      if (!looksLikeKey(key, 'management')) return null;
      return one<OwnerRecord>(
        `SELECT ${ownerColumns('o')}
        FROM management_keys k JOIN owners o ON o.id = k.owner_id
        WHERE k.key_hash = $1 AND k.revoked_at IS NULL AND NOT o.suspended AND o.deleted_at IS NULL`,
        [hashKey(key)],
      );
    },

    owner: (id) => one<OwnerRecord>(`SELECT ${ownerColumns()} FROM owners WHERE id = $1::bigint AND deleted_at IS NULL`, [id]),

    async createEndpoint(ownerId, network, name, maxEndpoints) {
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
        const endpoint: EndpointRecord = { id: newEndpointId(), name: name ?? null, network, keyPrefix: key.prefix, createdAt: seconds() };
        await client.query(
          'INSERT INTO endpoints (id, owner_id, network, name, key_hash, key_prefix, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)',
          [endpoint.id, ownerId, network, endpoint.name, key.hash, key.prefix, endpoint.createdAt],
        );
        await notifyChange(client, { kind: 'endpoint_created', endpointId: endpoint.id, ownerId });
        return { kind: 'created', endpoint, apiKey: key.key };
      });
    },

    async listEndpoints(ownerId) {
      const { rows } = await pool.query<EndpointRecord>(
        `SELECT ${ENDPOINT_COLUMNS} FROM endpoints WHERE owner_id = $1::bigint AND deleted_at IS NULL ${ENDPOINT_ORDER}`,
        [ownerId],
      );
      return rows;
    },

    async listEndpointsPage(ownerId, limit, after) {
      const { rows } = await pool.query<EndpointRecord>(
        `SELECT ${ENDPOINT_COLUMNS} FROM endpoints WHERE owner_id = $1::bigint AND deleted_at IS NULL
          AND (created_at > $2 OR (created_at = $2 AND id COLLATE "C" > $3))
        ${ENDPOINT_ORDER} LIMIT $4`,
        [ownerId, after?.createdAt ?? -1, after?.id ?? '', limit],
      );
      return rows;
    },

    async listAllEndpoints(ownerId) {
      const { rows } = await pool.query<EndpointListRow>(
        `SELECT id, owner_id AS "ownerId", name, network, key_prefix AS "keyPrefix", created_at AS "createdAt"
        FROM endpoints WHERE deleted_at IS NULL AND ($1::bigint IS NULL OR owner_id = $1::bigint)
        ORDER BY owner_id, created_at, id COLLATE "C"`,
        [ownerId ?? null],
      );
      return rows;
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
      ]);
      return summarizeUsage(rows);
    },
  };
}
