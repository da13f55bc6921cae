import type { Store } from '../store/open.js';
import { positional } from '../store/statements.js';
import { randomString } from '../tenancy/keys.js';
import {
  DELIVERIES_KEPT,
  type DeliveryClaim,
  type DeliveryRecord,
  type MinuteClaim,
  type MinuteCount,
  type StalledDelivery,
  storedEvents,
  type WebhookEvent,
  type WebhookRecord,
  type WebhookStore,
} from './webhook-store.js';

/** A new webhook id: `wh_` and 16 base32 characters (80 bits). */
export function newWebhookId(): string {
  return `wh_${randomString(16, 'abcdefghijklmnopqrstuvwxyz234567')}`;
}

/** The columns of a new webhook's row, in the order of webhookValues (both stores insert them). */
export const WEBHOOK_INSERT_COLUMNS =
  'id, owner_id, url, events, secret, balance_below_ru, refused_per_minute, error_rate_above, created_at';

/** A new webhook's values, in the order of WEBHOOK_INSERT_COLUMNS. */
export function webhookValues(
  id: string,
  ownerId: number,
  spec: Parameters<WebhookStore['create']>[1],
  createdAt: number,
): [string, number, string, string, string, number | null, number | null, number | null, number] {
  const { url, events, secret, balanceBelowRu, refusedPerMinute, errorRateAbove } = spec;
  return [id, ownerId, url, events.join(','), secret, balanceBelowRu, refusedPerMinute, errorRateAbove, createdAt];
}

/** A webhook row of `w` as both stores select it (the aliases are the record's names). */
export function webhookColumns(w = 'webhooks'): string {
  return `${w}.id, ${w}.owner_id AS "ownerId", ${w}.url, ${w}.events, ${w}.secret, ${w}.balance_below_ru AS "balanceBelowRu",
  ${w}.refused_per_minute AS "refusedPerMinute", ${w}.error_rate_above AS "errorRateAbove", ${w}.created_at AS "createdAt",
  ${w}.balance_low AS "balanceLow"`;
}
const WEBHOOK_COLUMNS = webhookColumns();

/** A delivery row of `d` as both stores select it (the aliases are the record's names). */
export function deliveryColumns(d = 'webhook_deliveries'): string {
  return `${d}.id, ${d}.webhook_id AS "webhookId", ${d}.event, ${d}.at, ${d}.attempts, ${d}.outcome, ${d}.http_status AS "httpStatus",
  ${d}.error, ${d}.last_attempt_at AS "lastAttemptAt"`;
}

/** The column of each minute claim: the minute last alerted (both stores). */
export const CLAIM_COLUMN: Readonly<Record<MinuteClaim, string>> = { key_refused: 'key_refused_t', error_rate: 'error_rate_t' };

// The statements of a delivery's claim both stores share are in PostgreSQL's `$n` (SQLite's: `positional`).

/** The stalled deliveries, with their webhook's URL and secret (`$1` now, `$2` the limit). */
export const STALLED_SELECT = `SELECT ${deliveryColumns('d')}, d.body, w.url, w.secret, w.deleted_at IS NOT NULL AS "webhookDeleted"
  FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id
  WHERE d.outcome = 'pending' AND d.lease_until < $1 ORDER BY d.lease_until, d.id LIMIT $2`;

export type StalledRow = Omit<StalledDelivery, 'webhookDeleted'> & { webhookDeleted: number | boolean };

/** A stalled delivery as read back: SQLite's booleans arrive as 0 or 1 (PostgreSQL's BIGINTs as numbers: store/pg-open.ts). */
export function toStalled(r: StalledRow): StalledDelivery {
  return { ...r, webhookDeleted: r.webhookDeleted === true || r.webhookDeleted === 1 };
}

/** The take-over of a stalled delivery: its lease still ended when the update runs, so one caller wins. */
export const CLAIM_DELIVERY = `UPDATE webhook_deliveries SET claimed_by = $1, lease_until = $2
  WHERE id = $3 AND outcome = 'pending' AND lease_until < $4`;

/** An attempt's outcome, written only by the sender that holds the delivery. */
export const UPDATE_DELIVERY = `UPDATE webhook_deliveries SET attempts = $1, outcome = $2, http_status = $3, error = $4,
  last_attempt_at = $5, lease_until = $6 WHERE id = $7 AND claimed_by = $8`;

export const RELEASE_DELIVERY = `UPDATE webhook_deliveries SET lease_until = 0 WHERE id = $1 AND claimed_by = $2 AND outcome = 'pending'`;

type WebhookRow = Omit<WebhookRecord, 'events' | 'balanceLow'> & { events: string; balanceLow: number | boolean };

/** A webhook as read back: its events as stored text, SQLite's booleans as 0 or 1 (PostgreSQL's BIGINTs as numbers: store/pg-open.ts). */
export function toWebhookRecord(row: WebhookRow): WebhookRecord {
  return { ...row, events: storedEvents(row.events), balanceLow: row.balanceLow === true || row.balanceLow === 1 };
}

/** The webhooks of the embedded SQLite file, on `store`'s connection; writes take the store's write lock. */
export function createSqliteWebhooks(store: Store, now: () => number = Date.now): WebhookStore {
  const db = store.db;
  const seconds = (): number => Math.floor(now() / 1000);
  const live = db.prepare<[number], WebhookRow>(
    `SELECT ${WEBHOOK_COLUMNS} FROM webhooks WHERE owner_id = ? AND deleted_at IS NULL ORDER BY created_at, id`,
  );
  const count = db.prepare<[number], number>('SELECT count(*) FROM webhooks WHERE owner_id = ? AND deleted_at IS NULL').pluck();
  const insert = db.prepare<ReturnType<typeof webhookValues>>(
    `INSERT INTO webhooks (${WEBHOOK_INSERT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  );
  const byId = db.prepare<[string], WebhookRow>(`SELECT ${WEBHOOK_COLUMNS} FROM webhooks WHERE id = ?`);
  const remove = db.prepare<[number, string, number]>(
    'UPDATE webhooks SET deleted_at = ? WHERE id = ? AND owner_id = ? AND deleted_at IS NULL',
  );
  const mine = db.prepare<[string, number], number>('SELECT 1 FROM webhooks WHERE id = ? AND owner_id = ? AND deleted_at IS NULL').pluck();
  const deliveries = db.prepare<[string, number], DeliveryRecord>(
    `SELECT ${deliveryColumns()} FROM webhook_deliveries WHERE webhook_id = ? ORDER BY id DESC LIMIT ?`,
  );
  const watched = db.prepare<[], WebhookRow>(
    `SELECT ${webhookColumns('w')}
    FROM webhooks w JOIN owners o ON o.id = w.owner_id
    WHERE w.deleted_at IS NULL AND o.deleted_at IS NULL AND o.suspended = 0 ORDER BY w.owner_id, w.id`,
  );
  const claimOf = (c: MinuteClaim) =>
    db.prepare<[number, string, number]>(`UPDATE webhooks SET ${CLAIM_COLUMN[c]} = ? WHERE id = ? AND ${CLAIM_COLUMN[c]} < ?`);
  const claims = { key_refused: claimOf('key_refused'), error_rate: claimOf('error_rate') };
  const setLow = db.prepare<[number, string, number]>('UPDATE webhooks SET balance_low = ? WHERE id = ? AND balance_low != ?');
  const minutes = db.prepare<[number, number], MinuteCount>(
    `SELECT endpoint_id AS endpointId, t, status, sum(requests) AS requests FROM usage_minute
    WHERE owner_id = ? AND t >= ? GROUP BY endpoint_id, t, status`,
  );
  const addDelivery = db.prepare<[string, string, number, string, number]>(
    `INSERT INTO webhook_deliveries (webhook_id, event, at, outcome, claimed_by, lease_until) VALUES (?, ?, ?, 'pending', ?, ?)`,
  );
  const setBody = db.prepare<[string, number]>('UPDATE webhook_deliveries SET body = ? WHERE id = ?');
  const prune = db.prepare<[string, string, number]>(
    `DELETE FROM webhook_deliveries WHERE webhook_id = ? AND id <= (
      SELECT id FROM webhook_deliveries WHERE webhook_id = ? ORDER BY id DESC LIMIT 1 OFFSET ?)`,
  );
  const update = db.prepare<[number, string, number | null, string | null, number | null, number, number, string]>(
    positional(UPDATE_DELIVERY),
  );
  const stalled = db.prepare<[number, number], StalledRow>(positional(STALLED_SELECT));
  const claim = db.prepare<[string, number, number, number]>(positional(CLAIM_DELIVERY));
  const release = db.prepare<[number, string]>(positional(RELEASE_DELIVERY));

  const createTx = store.writeTransaction((ownerId: number, spec: Parameters<WebhookStore['create']>[1], max: number) => {
    if (count.get(ownerId)! >= max) return { kind: 'refused' as const };
    const id = newWebhookId();
    insert.run(...webhookValues(id, ownerId, spec, seconds()));
    return { kind: 'created' as const, webhook: toWebhookRecord(byId.get(id)!) };
  });
  const addTx = store.writeTransaction(
    (webhookId: string, event: WebhookEvent, at: number, c: DeliveryClaim, body: (id: number) => string): number => {
      const id = Number(addDelivery.run(webhookId, event, at, c.by, c.until).lastInsertRowid);
      setBody.run(body(id), id);
      prune.run(webhookId, webhookId, DELIVERIES_KEPT);
      return id;
    },
  );

  return {
    list: async (ownerId) => live.all(ownerId).map(toWebhookRecord),
    create: async (ownerId, spec, max) => createTx(ownerId, spec, max),
    delete: async (ownerId, id) => store.write(() => remove.run(seconds(), id, ownerId)).changes === 1,
    deliveries: async (ownerId, id, limit) => (mine.get(id, ownerId) === undefined ? null : deliveries.all(id, limit)),
    watched: async () => watched.all().map(toWebhookRecord),
    claimMinute: async (id, claim, t) => store.write(() => claims[claim].run(t, id, t)).changes === 1,
    setBalanceLow: async (id, low) => store.write(() => setLow.run(low ? 1 : 0, id, low ? 1 : 0)).changes === 1,
    minuteCounts: async (ownerId, fromT) => minutes.all(ownerId, fromT),
    addDelivery: async (webhookId, event, at, c, body) => addTx(webhookId, event, at, c, body),
    updateDelivery: async (id, by, d) =>
      store.write(() => update.run(d.attempts, d.outcome, d.httpStatus, d.error, d.lastAttemptAt, d.leaseUntil, id, by)).changes === 1,
    stalledDeliveries: async (nowS, limit) => stalled.all(nowS, limit).map(toStalled),
    claimDelivery: async (id, nowS, c) => store.write(() => claim.run(c.by, c.until, id, nowS)).changes === 1,
    releaseDelivery: async (id, by) => void store.write(() => release.run(id, by)),
  };
}
