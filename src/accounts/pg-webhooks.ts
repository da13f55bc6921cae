import type pg from 'pg';
import { inPgTransaction } from '../store/pg-transaction.js';
import { lockOwner } from './pg-owners.js';
import {
  CLAIM_COLUMN,
  CLAIM_DELIVERY,
  deliveryColumns,
  newWebhookId,
  RELEASE_DELIVERY,
  STALLED_SELECT,
  type StalledRow,
  toStalled,
  toWebhookRecord,
  UPDATE_DELIVERY,
  WEBHOOK_INSERT_COLUMNS,
  webhookColumns,
  webhookValues,
} from './sqlite-webhooks.js';
import { DELIVERIES_KEPT, type DeliveryRecord, type MinuteCount, type WebhookStore } from './webhook-store.js';

type Row = Parameters<typeof toWebhookRecord>[0];

/**
 * The webhooks of a fleet, in its PostgreSQL: sqlite-webhooks.ts's, with the owner's row locked where SQLite
 * takes its write lock, so two instances never take an owner past its most webhooks.
 */
export function createPgWebhooks(pool: pg.Pool, seconds: () => number): WebhookStore {
  return {
    async list(ownerId) {
      const { rows } = await pool.query<Row>(
        `SELECT ${webhookColumns()} FROM webhooks WHERE owner_id = $1::bigint AND deleted_at IS NULL ORDER BY created_at, id`,
        [ownerId],
      );
      return rows.map(toWebhookRecord);
    },
    create: (ownerId, spec, max) =>
      inPgTransaction(pool, async (client) => {
        if ((await lockOwner(client, ownerId)) === null) return { kind: 'refused' as const };
        const { rows } = await client.query<{ n: number }>(
          'SELECT count(*) AS n FROM webhooks WHERE owner_id = $1 AND deleted_at IS NULL',
          [ownerId],
        );
        if (rows[0]!.n >= max) return { kind: 'refused' as const };
        const made = await client.query<Row>(
          `INSERT INTO webhooks (${WEBHOOK_INSERT_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING ${webhookColumns()}`,
          webhookValues(newWebhookId(), ownerId, spec, seconds()),
        );
        return { kind: 'created' as const, webhook: toWebhookRecord(made.rows[0]!) };
      }),
    async delete(ownerId, id) {
      const { rowCount } = await pool.query(
        'UPDATE webhooks SET deleted_at = $1 WHERE id = $2 AND owner_id = $3::bigint AND deleted_at IS NULL',
        [seconds(), id, ownerId],
      );
      return rowCount === 1;
    },
    async deliveries(ownerId, id, limit) {
      const mine = await pool.query('SELECT 1 FROM webhooks WHERE id = $1 AND owner_id = $2::bigint AND deleted_at IS NULL', [id, ownerId]);
      if (mine.rowCount !== 1) return null;
      const { rows } = await pool.query<DeliveryRecord>(
        `SELECT ${deliveryColumns()} FROM webhook_deliveries WHERE webhook_id = $1 ORDER BY id DESC LIMIT $2`,
        [id, limit],
      );
      return rows;
    },
    async watched() {
      const { rows } = await pool.query<Row>(
        `SELECT ${webhookColumns('w')} FROM webhooks w JOIN owners o ON o.id = w.owner_id
        WHERE w.deleted_at IS NULL AND o.deleted_at IS NULL AND NOT o.suspended ORDER BY w.owner_id, w.id`,
      );
      return rows.map(toWebhookRecord);
    },
    async claimMinute(id, claim, t) {
      const column = CLAIM_COLUMN[claim];
      const { rowCount } = await pool.query(`UPDATE webhooks SET ${column} = $1 WHERE id = $2 AND ${column} < $1`, [t, id]);
      return rowCount === 1;
    },
    async setBalanceLow(id, low) {
      const { rowCount } = await pool.query('UPDATE webhooks SET balance_low = $1 WHERE id = $2 AND balance_low <> $1', [low, id]);
      return rowCount === 1;
    },
    async minuteCounts(ownerId, fromT) {
      const { rows } = await pool.query<MinuteCount>(
        `SELECT endpoint_id AS "endpointId", t, status, sum(requests) AS requests FROM usage_minute
        WHERE owner_id = $1::bigint AND t >= $2 GROUP BY endpoint_id, t, status`,
        [ownerId, fromT],
      );
      return rows;
    },
    addDelivery: (webhookId, event, at, claim, body) =>
      inPgTransaction(pool, async (client) => {
        const { rows } = await client.query<{ id: number }>(
          `INSERT INTO webhook_deliveries (webhook_id, event, at, outcome, claimed_by, lease_until)
          VALUES ($1, $2, $3, 'pending', $4, $5) RETURNING id`,
          [webhookId, event, at, claim.by, claim.until],
        );
        const id = rows[0]!.id;
        await client.query('UPDATE webhook_deliveries SET body = $1 WHERE id = $2', [body(id), id]);
        await client.query(
          `DELETE FROM webhook_deliveries WHERE webhook_id = $1 AND id <= (
            SELECT id FROM webhook_deliveries WHERE webhook_id = $1 ORDER BY id DESC LIMIT 1 OFFSET $2)`,
          [webhookId, DELIVERIES_KEPT],
        );
        return id;
      }),
    async updateDelivery(id, by, d) {
      const { rowCount } = await pool.query(UPDATE_DELIVERY, [
        d.attempts,
        d.outcome,
        d.httpStatus,
        d.error,
        d.lastAttemptAt,
        d.leaseUntil,
        id,
        by,
      ]);
      return rowCount === 1;
    },
    async stalledDeliveries(nowS, limit) {
      const { rows } = await pool.query<StalledRow>(STALLED_SELECT, [nowS, limit]);
      return rows.map(toStalled);
    },
    async claimDelivery(id, nowS, claim) {
      // READ COMMITTED: a second claimer's update waits for the first's row lock, then sees its lease and skips.
      const { rowCount } = await pool.query(CLAIM_DELIVERY, [claim.by, claim.until, id, nowS]);
      return rowCount === 1;
    },
    async releaseDelivery(id, by) {
      await pool.query(RELEASE_DELIVERY, [id, by]);
    },
  };
}
