import type pg from 'pg';
import type { PgStore } from '../store/pg-open.js';

/** The PostgreSQL channel of the fleet's change feed. */
export const CHANGES_CHANNEL = 'chaingate_changes';

/**
 * A committed write that changes what a key grants, as every instance of the fleet hears of it. Ids only:
 * never a key nor a key's hash (a notification is readable by any session of the database).
 */
export type ChangeEvent =
  /** A new API key works; an instance that remembered it as unknown must forget that. */
  | { kind: 'endpoint_created'; endpointId: string; ownerId: number }
  /** The endpoint's key stopped working: drop it from caches, close its connections. */
  | { kind: 'endpoint_deleted'; endpointId: string; ownerId: number }
  /** The endpoint's restrictions changed or its key was rotated: drop its keys from caches and read them again. */
  | { kind: 'endpoint_changed'; endpointId: string; ownerId: number }
  /** Suspended or unsuspended, plan changed, or deleted with its endpoints and management keys: re-read every key of the owner. */
  | { kind: 'owner_changed'; ownerId: number };

/**
 * What a listener is told: a change, or `resync` after the feed's connection came back. Notifications
 * sent while it was down are lost, so whatever was cached from the store must be read again.
 */
export type ChangeNotice = ChangeEvent | { kind: 'resync' };

/**
 * Queues `event` on the open transaction of `client`: PostgreSQL delivers it to every listener when the
 * transaction commits, and never when it rolls back. Outside a transaction it is sent at once.
 */
export async function notifyChange(client: pg.ClientBase, event: ChangeEvent): Promise<void> {
  await client.query('SELECT pg_notify($1, $2)', [CHANGES_CHANNEL, JSON.stringify(event)]);
}

/**
 * Why a payload of the channel was ignored (the label of chaingate_change_notices_ignored_total):
 * `not_json`, `bad_shape` (not an object with the fields of its kind), `unknown_kind`.
 */
export type IgnoredReason = 'not_json' | 'bad_shape' | 'unknown_kind';

/**
 * A payload of the channel as a change, or why it was ignored. Any role that may connect to the database
 * can `pg_notify` the channel: a notice is a hint to read the store again, never trusted for what it says
 * (fleet-keys.ts re-reads before it revokes anything), and one that does not parse is dropped (counted and
 * logged by the caller), not turned into a resync that would make every instance re-read every key.
 */
export function parseChangeNotice(payload: string | undefined): ChangeEvent | { kind: 'ignored'; reason: IgnoredReason } {
  let e: unknown;
  try {
    e = JSON.parse(payload ?? '');
  } catch {
    return { kind: 'ignored', reason: 'not_json' };
  }
  if (typeof e !== 'object' || e === null) return { kind: 'ignored', reason: 'bad_shape' };
  const { kind, ownerId, endpointId } = e as Record<string, unknown>;
  if (kind !== 'owner_changed' && kind !== 'endpoint_created' && kind !== 'endpoint_deleted' && kind !== 'endpoint_changed')
    return { kind: 'ignored', reason: 'unknown_kind' };
  if (!Number.isSafeInteger(ownerId)) return { kind: 'ignored', reason: 'bad_shape' };
  if (kind === 'owner_changed') return { kind, ownerId: ownerId as number };
  if (typeof endpointId !== 'string' || endpointId.length === 0 || endpointId.length > 200) return { kind: 'ignored', reason: 'bad_shape' };
  return { kind, endpointId, ownerId: ownerId as number };
}

export interface ChangeListenerOptions {
  /** The feed's connection was lost (notifications are missed until `onUp`); default: nothing. */
  onDown?: (err: Error) => void;
  /** Listening again after `onDown`; a `resync` notice follows at once. Default: nothing. */
  onUp?: () => void;
  /** A payload that does not parse was dropped (see parseChangeNotice); default: nothing. */
  onIgnored?: (reason: IgnoredReason) => void;
  /** First wait before reconnecting, in ms, doubled after each failed attempt; default 100. */
  minBackoffMs?: number;
  /** Longest wait between reconnection attempts, in ms; default 5000. */
  maxBackoffMs?: number;
  /**
   * How often the connection is checked with a query, in ms; a check unanswered for as long counts as a
   * lost connection (a peer gone without closing it sends no error). Default 30_000.
   */
  checkIntervalMs?: number;
}

/** The feed of one instance; `close` stops it (before the store's pool is closed: it holds one of its connections). */
export interface ChangeListener {
  close(): Promise<void>;
}

/**
 * Listens to the change feed on one connection of `store`'s pool kept for it, calling `onChange` for each
 * notification (in commit order; `onChange` must not throw). Resolves once listening, and rejects when the
 * first connection fails, as opening the store would. After that, a lost connection is reported with
 * `onDown` and retried with backoff until it comes back (`onUp`, then a `resync` notice) or `close`.
 */
export async function listenForChanges(
  store: PgStore,
  onChange: (notice: ChangeNotice) => void,
  options: ChangeListenerOptions = {},
): Promise<ChangeListener> {
  const minBackoff = options.minBackoffMs ?? 100;
  const maxBackoff = options.maxBackoffMs ?? 5000;
  const checkInterval = options.checkIntervalMs ?? 30_000;
  let closed = false;
  let client: pg.PoolClient | null = null;
  let timer: NodeJS.Timeout | null = null;
  let backoff = minBackoff;

  const after = (ms: number, fn: () => void): void => {
    timer = setTimeout(fn, ms);
    timer.unref();
  };

  const lost = (c: pg.PoolClient, err: Error): void => {
    // Only the connection in use counts: a broken one reports again as it ends, and one being opened fails its own LISTEN.
    if (c !== client || closed) return;
    client = null;
    if (timer !== null) clearTimeout(timer);
    // Never back into the pool: the session still listens, and it may be broken.
    c.release(err);
    options.onDown?.(err);
    after(backoff, reconnect);
  };

  const connect = async (): Promise<pg.PoolClient> => {
    const c = await store.pool.connect();
    c.on('error', (err: Error) => lost(c, err));
    c.on('end', () => lost(c, new Error('the change feed connection ended')));
    c.on('notification', (msg: pg.Notification) => {
      if (msg.channel !== CHANGES_CHANNEL) return;
      const notice = parseChangeNotice(msg.payload);
      if (notice.kind === 'ignored') options.onIgnored?.(notice.reason);
      else onChange(notice);
    });
    try {
      // A connection the pool kept idle may have gone silent too: it must answer as a check does.
      await answerWithin(c, `LISTEN ${CHANGES_CHANNEL}`, checkInterval);
    } catch (err) {
      c.release(err as Error);
      throw err;
    }
    return c;
  };

  const check = (): void => {
    const c = client;
    if (c === null) return;
    answerWithin(c, 'SELECT 1', checkInterval).then(
      () => {
        if (c === client) after(checkInterval, check);
      },
      (err: Error) => lost(c, err),
    );
  };

  const reconnect = (): void => {
    timer = null;
    connect().then(
      (c) => {
        if (closed) return c.release(true);
        client = c;
        backoff = minBackoff;
        after(checkInterval, check);
        options.onUp?.();
        onChange({ kind: 'resync' });
      },
      () => {
        if (closed) return;
        backoff = Math.min(backoff * 2, maxBackoff);
        after(backoff, reconnect);
      },
    );
  };

  client = await connect();
  after(checkInterval, check);

  return {
    async close() {
      if (closed) return;
      closed = true;
      if (timer !== null) clearTimeout(timer);
      const c = client;
      client = null;
      if (c === null) return;
      const ended = new Promise<void>((resolve) => c.once('end', () => resolve()));
      c.release(true);
      await ended;
    },
  };
}

/** Runs `sql` on `c`; rejects when no answer comes within `ms`, as from a connection gone silent. */
function answerWithin(c: pg.PoolClient, sql: string, ms: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the change feed connection did not answer within ${ms} ms`)), ms);
    timer.unref();
    c.query(sql).then(
      () => {
        clearTimeout(timer);
        resolve();
      },
      (err: Error) => {
        clearTimeout(timer);
        reject(err);
      },
    );
  });
}
