import { LATENCY_COLUMN_LIST, LATENCY_COLUMNS, LATENCY_SUMS, latencyAdditions } from '../store/latency-columns.js';
import { DEFAULT_FAILURES_KEPT, failureParams, newestFailures } from './failure-ring.js';
import type pg from 'pg';
import type { PgStore } from '../store/pg-open.js';
import { inPgTransaction } from '../store/pg-transaction.js';
import {
  type CallReservations,
  type CallsGrant,
  checkRu,
  createCallGate,
  debitsByOwner,
  type InstanceRow,
  type LedgerStore,
  type UsageBatch,
} from './ledger-store.js';
import { type RollUpOptions, rollUpCutoffs } from './usage.js';
import type { PendingFailure, PendingRow } from './usage-rows.js';

/**
 * The rule that keeps reservations from being spent twice: a reservation is made to live longer
 * (granted, extended by a write or a heartbeat) only by a transaction that holds its owner's row lock,
 * and judged live or expired only under that lock, against `clock_timestamp()` read after the lock was
 * taken. Times read that way grow along the lock's queue, so once `reserve` has judged a reservation
 * expired and handed its RU to another instance, no later transaction can find it live again.
 * (`now()`, the transaction's start, may be earlier than a time already used by the lock's previous
 * holder.) Locks are taken in one order: usage rows by key, then owners by id, then reservations.
 */
/** The SQL of an interval of `param` seconds. */
const seconds = (param: string): string => `${param}::float8 * interval '1 second'`;

const SQL = {
  balance: `SELECT ru_balance AS "ruBalance" FROM owners WHERE id = $1`,
  balances: `SELECT id, ru_balance AS "ruBalance" FROM owners WHERE id = ANY($1::int[])`,
  recordBatch: `INSERT INTO usage_batches (id, instance) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING`,
  // Sorted, so two instances adding to the same keys lock them in the same order.
  // The latency counts as 24 more arrays, $8 … $31 (store/latency-columns.ts).
  addUsage: `INSERT INTO usage_minute (endpoint_id, owner_id, method, t, status, requests, ru, ${LATENCY_COLUMN_LIST})
    SELECT * FROM unnest($1::text[], $2::int[], $3::text[], $4::bigint[], $5::int[], $6::bigint[], $7::bigint[],
      ${LATENCY_COLUMNS.map((_, i) => `$${i + 8}::bigint[]`).join(', ')})
    ORDER BY 1, 3, 4, 5
    ON CONFLICT (endpoint_id, method, t, status)
    DO UPDATE SET requests = usage_minute.requests + excluded.requests, ru = usage_minute.ru + excluded.ru,
      ${latencyAdditions('usage_minute.')}`,
  // The recent failures (metering/failure-ring.ts): added, then each touched ring cut to its newest $2.
  addFailures: `INSERT INTO call_failures (endpoint_id, owner_id, at, method, http_status, code, error, message, upstream)
    SELECT * FROM unnest($1::text[], $2::int[], $3::bigint[], $4::text[], $5::int[], $6::int[], $7::text[], $8::text[], $9::text[])`,
  trimFailures: `DELETE FROM call_failures f USING (
      SELECT seq FROM (SELECT seq, row_number() OVER (PARTITION BY endpoint_id ORDER BY seq DESC) AS n
        FROM call_failures WHERE endpoint_id = ANY($1::text[])) ranked WHERE n > $2
    ) old WHERE f.seq = old.seq`,
  lockOwners: `SELECT id FROM owners WHERE id = ANY($1::int[]) ORDER BY id FOR UPDATE`,
  // Only the owners of reservations that may still be live (now() is at or before clock_timestamp()).
  lockOwnersReservedBy: `SELECT id FROM owners
    WHERE id IN (SELECT owner_id FROM reservations WHERE instance = $1 AND expires_at > now()) ORDER BY id FOR UPDATE`,
  debit: `UPDATE owners o SET ru_balance = o.ru_balance - d.ru FROM unnest($1::int[], $2::bigint[]) AS d(id, ru)
    WHERE o.id = d.id RETURNING o.id, o.ru_balance AS "ruBalance"`,
  spendReservations: `UPDATE reservations r SET ru = greatest(r.ru - d.ru, 0), expires_at = clock_timestamp() + ${seconds('$4')}
    FROM unnest($2::int[], $3::bigint[]) AS d(owner_id, ru)
    WHERE r.instance = $1 AND r.owner_id = d.owner_id AND r.expires_at > clock_timestamp()`,
  lockOwner: `SELECT ru_balance AS "ruBalance" FROM owners WHERE id = $1 FOR UPDATE`,
  liveReserved: `SELECT coalesce(sum(ru), 0) AS ru FROM reservations WHERE owner_id = $1 AND expires_at > clock_timestamp()`,
  // Every live reservation of the owner, and the instance's own part of it.
  liveReservedBy: `SELECT coalesce(sum(ru), 0) AS ru, coalesce(sum(ru) FILTER (WHERE instance = $2), 0) AS mine
    FROM reservations WHERE owner_id = $1 AND expires_at > clock_timestamp()`,
  // The instance's own expired row is started afresh: its RU were freed at its expiry.
  addReservation: `INSERT INTO reservations (instance, owner_id, ru, expires_at)
    VALUES ($1, $2, $3, clock_timestamp() + ${seconds('$4')})
    ON CONFLICT (instance, owner_id) DO UPDATE
    SET ru = CASE WHEN reservations.expires_at > clock_timestamp() THEN reservations.ru ELSE 0 END + excluded.ru,
      expires_at = excluded.expires_at`,
  releaseSome: `UPDATE reservations SET ru = greatest(ru - $3, 0) WHERE instance = $1 AND owner_id = $2 AND expires_at > clock_timestamp()`,
  releaseOwner: `DELETE FROM reservations WHERE instance = $1 AND owner_id = $2`,
  releaseAll: `DELETE FROM reservations WHERE instance = $1`,
  renew: `UPDATE reservations SET expires_at = clock_timestamp() + ${seconds('$3')}
    WHERE instance = $1 AND owner_id = ANY($2::int[]) AND expires_at > clock_timestamp() RETURNING owner_id AS "ownerId", ru`,
  heartbeat: `INSERT INTO instances (id, started_at, heartbeat_at, info) VALUES ($1, now(), now(), coalesce($2::jsonb, '{}'))
    ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at, info = coalesce($2::jsonb, instances.info)`,
  instances: `SELECT id, floor(extract(epoch FROM started_at) * 1000)::bigint AS "startedAt",
    floor(extract(epoch FROM heartbeat_at) * 1000)::bigint AS "heartbeatAt", info FROM instances ORDER BY id`,
  pruneBatches: `DELETE FROM usage_batches WHERE at < now() - ${seconds('$1')}`,
  pruneInstances: `DELETE FROM instances WHERE heartbeat_at < now() - ${seconds('$1')}`,
  pruneReservations: `DELETE FROM reservations WHERE expires_at < now() - ${seconds('$1')}`,
  // One roll-up at a time in the fleet: two at once would lock the same coarser rows in different orders.
  rollUpLock: `SELECT pg_advisory_xact_lock(${0x63677275})`,
};

/**
 * Moves the rows of `from` before the cut-off into `into`, summed by `period` seconds. DELETE first, and
 * the sums of what it deleted: a row a late write added to meanwhile is moved with what it holds once
 * that write committed, or not at all, never half.
 */
function moveSql(from: string, into: string, period: number): string {
  return `WITH moved AS (DELETE FROM ${from} WHERE t < $1 RETURNING *),
    summed AS (
      INSERT INTO ${into} (endpoint_id, owner_id, method, t, status, requests, ru, ${LATENCY_COLUMN_LIST})
      SELECT endpoint_id, owner_id, method, t - t % ${period} AS period, status, sum(requests), sum(ru), ${LATENCY_SUMS}
      FROM moved GROUP BY endpoint_id, owner_id, method, period, status ORDER BY 1, 3, 4, 5
      ON CONFLICT (endpoint_id, method, t, status)
      DO UPDATE SET requests = ${into}.requests + excluded.requests, ru = ${into}.ru + excluded.ru,
        ${latencyAdditions(`${into}.`)})
    SELECT count(*)::int AS rows FROM moved`;
}
const MOVE_MINUTES = moveSql('usage_minute', 'usage_hour', 3600);
const MOVE_HOURS = moveSql('usage_hour', 'usage_day', 86_400);

/** Adds usage rows to `usage_minute`, a column array per field (the latency counts last). */
async function addRows(client: pg.ClientBase, rows: readonly PendingRow[]): Promise<void> {
  if (rows.length === 0) return;
  const columns: unknown[][] = (['endpointId', 'ownerId', 'method', 't', 'status', 'requests', 'ru'] as const).map((k) =>
    rows.map((r) => r[k]),
  );
  for (let i = 0; i < LATENCY_COLUMNS.length; i++) columns.push(rows.map((r) => r.latency?.[i] ?? 0));
  await client.query(SQL.addUsage, columns);
}

/** Adds failures to their endpoints' rings and cuts each ring they touched to `kept` (failure-ring.ts). */
async function addFailures(client: pg.ClientBase, failures: readonly PendingFailure[], kept: number): Promise<void> {
  if (failures.length === 0) return;
  const { add, endpoints } = newestFailures(failures, kept);
  const params = add.map(failureParams);
  await client.query(
    SQL.addFailures,
    params[0]!.map((_, i) => params.map((p) => p[i])),
  );
  await client.query(SQL.trimFailures, [[...endpoints], kept]);
}

/**
 * The ledger store in PostgreSQL, shared by every instance of a fleet: each method is one transaction
 * (or one statement) on a connection of `store`'s pool, with parameters bound, never spliced.
 */
export function createPgLedgerStore(store: PgStore, options: RollUpOptions): LedgerStore & CallReservations {
  const pool = store.pool;
  const gate = createCallGate();
  const failuresKept = options.failuresKept ?? DEFAULT_FAILURES_KEPT;

  async function balancesOf(client: pg.ClientBase, owners: number[], into: Map<number, number>): Promise<Map<number, number>> {
    if (owners.length === 0) return into;
    const rows = (await client.query<{ id: number; ruBalance: number }>(SQL.balances, [owners])).rows;
    for (const r of rows) into.set(r.id, r.ruBalance);
    return into;
  }

  async function writeUsage(client: pg.PoolClient, batch: UsageBatch): Promise<Map<number, number>> {
    const owners = debitsByOwner(batch.rows);
    const fresh = (await client.query(SQL.recordBatch, [batch.id, batch.instance])).rowCount === 1;
    if (!fresh)
      return balancesOf(
        client,
        owners.map(([id]) => id),
        new Map(),
      );
    await addRows(client, batch.rows);
    await addFailures(client, batch.failures ?? [], failuresKept);
    const debited = owners.filter(([, ru]) => ru !== 0);
    const ids = debited.map(([id]) => id);
    const amounts = debited.map(([, ru]) => ru);
    const balances = new Map<number, number>();
    if (debited.length > 0) {
      await client.query(SQL.lockOwners, [ids]);
      for (const r of (await client.query<{ id: number; ruBalance: number }>(SQL.debit, [ids, amounts])).rows)
        balances.set(r.id, r.ruBalance);
      await client.query(SQL.spendReservations, [batch.instance, ids, amounts, batch.ttlS]);
    }
    return balancesOf(
      client,
      owners.filter(([, ru]) => ru === 0).map(([id]) => id),
      balances,
    );
  }

  async function reserve(client: pg.PoolClient, instance: string, ownerId: number, ru: number, ttlS: number): Promise<number> {
    const owner = (await client.query<{ ruBalance: number }>(SQL.lockOwner, [ownerId])).rows[0];
    if (owner === undefined) return 0;
    // A statement after the lock: it sees every reservation committed by the lock's previous holders.
    const live = (await client.query<{ ru: number }>(SQL.liveReserved, [ownerId])).rows[0]!.ru;
    const granted = Math.max(0, Math.min(ru, owner.ruBalance - live));
    if (granted > 0) await client.query(SQL.addReservation, [instance, ownerId, granted, ttlS]);
    return granted;
  }

  async function reserveCalls(
    client: pg.PoolClient,
    instance: string,
    ownerId: number,
    giveBack: number,
    calls: readonly number[],
    ttlS: number,
  ): Promise<CallsGrant> {
    const owner = (await client.query<{ ruBalance: number }>(SQL.lockOwner, [ownerId])).rows[0];
    if (owner === undefined) return { granted: calls.map(() => 0), free: 0, othersHeld: 0 };
    if (giveBack > 0) await client.query(SQL.releaseSome, [instance, ownerId, giveBack]);
    const live = (await client.query<{ ru: number; mine: number }>(SQL.liveReservedBy, [ownerId, instance])).rows[0]!;
    let free = Math.max(0, owner.ruBalance - live.ru);
    const granted = calls.map((ru) => {
      if (ru > free) return 0;
      free -= ru;
      return ru;
    });
    const total = granted.reduce((sum, ru) => sum + ru, 0);
    if (total > 0) await client.query(SQL.addReservation, [instance, ownerId, total, ttlS]);
    return { granted, free, othersHeld: live.ru - live.mine };
  }

  async function renew(client: pg.PoolClient, instance: string, ttlS: number, info: string | null): Promise<Map<number, number>> {
    const owners = (await client.query<{ id: number }>(SQL.lockOwnersReservedBy, [instance])).rows.map((r) => r.id);
    const live = new Map<number, number>();
    if (owners.length > 0) {
      for (const r of (await client.query<{ ownerId: number; ru: number }>(SQL.renew, [instance, owners, ttlS])).rows)
        live.set(r.ownerId, r.ru);
    }
    await client.query(SQL.heartbeat, [instance, info]);
    return live;
  }

  async function move(sql: string, cutoff: number): Promise<number> {
    return inPgTransaction(pool, async (client) => {
      await client.query(SQL.rollUpLock);
      return (await client.query<{ rows: number }>(sql, [cutoff])).rows[0]!.rows;
    });
  }

  return {
    kind: 'postgres',
    balance: (ownerId) => gate.run(async () => (await pool.query<{ ruBalance: number }>(SQL.balance, [ownerId])).rows[0]?.ruBalance),
    writeUsage: (batch) => gate.run(() => inPgTransaction(pool, (client) => writeUsage(client, batch))),
    reserve(instance, ownerId, ru, ttlS) {
      return gate.run(async () => {
        checkRu(ru);
        return inPgTransaction(pool, (client) => reserve(client, instance, ownerId, ru, ttlS));
      });
    },
    reserveCalls(instance, ownerId, giveBack, calls, ttlS) {
      return gate.run(async () => {
        checkRu(giveBack);
        for (const ru of calls) checkRu(ru);
        return inPgTransaction(pool, (client) => reserveCalls(client, instance, ownerId, giveBack, calls, ttlS));
      });
    },
    release(instance, ownerId, ru) {
      return gate.run(async () => {
        if (ownerId === undefined) {
          // Under the owners' locks like a heartbeat, so that it never waits on a write of the same instance holding them.
          await inPgTransaction(pool, async (client) => {
            await client.query(SQL.lockOwnersReservedBy, [instance]);
            await client.query(SQL.releaseAll, [instance]);
          });
        } else if (ru === undefined) await pool.query(SQL.releaseOwner, [instance, ownerId]);
        else {
          checkRu(ru);
          await pool.query(SQL.releaseSome, [instance, ownerId, ru]);
        }
      });
    },
    renew: (instance, ttlS, info) =>
      gate.run(() => inPgTransaction(pool, (client) => renew(client, instance, ttlS, info === undefined ? null : JSON.stringify(info)))),
    instances: () => gate.run(async () => (await pool.query<InstanceRow>(SQL.instances)).rows),
    rollUp(nowMs = Date.now()) {
      return gate.run(async () => {
        const cutoffs = rollUpCutoffs(nowMs, options);
        return { minuteRows: await move(MOVE_MINUTES, cutoffs.minutes), hourRows: await move(MOVE_HOURS, cutoffs.hours) };
      });
    },
    prune(olderThanS) {
      return gate.run(async () => ({
        batches: (await pool.query(SQL.pruneBatches, [olderThanS])).rowCount ?? 0,
        instances: (await pool.query(SQL.pruneInstances, [olderThanS])).rowCount ?? 0,
        reservations: (await pool.query(SQL.pruneReservations, [olderThanS])).rowCount ?? 0,
      }));
    },
    close: gate.close,
  };
}
