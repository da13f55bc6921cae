import { randomBytes } from 'node:crypto';
import type { Ledger, LedgerOptions } from './ledger.js';
import { type BlockBook, createBlockBook } from './block-book.js';
import { createMeter } from './meter.js';
import type { CallReservations, LedgerStore, UsageBatch } from './ledger-store.js';
import { createPendingUsage } from './usage-rows.js';

/** What the fleet ledger needs of the shared store (ledger-store.ts). */
export type FleetLedgerStore = Pick<LedgerStore, 'writeUsage' | 'reserve' | 'release' | 'renew'> & CallReservations;

/** An owner's block unused this long (ms) goes back to the store at the next flush. */
const IDLE_BLOCK_MS = 5000;

export interface FleetLedgerOptions extends LedgerOptions {
  /** This instance's name in the fleet (config `cluster.instance`). */
  instance: string;
  /** How long a reservation lives without a renewal, in s (config `cluster.reservation_ttl_s`). */
  reservationTtlS: number;
  /** RU reserved at once for an owner (config `cluster.reservation_block_ru`). */
  blockRu: number;
  /** What the heartbeat records about this instance (version, listen address…). */
  info?: Record<string, unknown>;
}

/**
 * The ledger of an instance in a fleet: the pipeline's `Ledger` over a block book (block-book.ts), with
 * the store reached only in the background. Every flush interval:
 * - the usage counted since the last batch becomes a batch with an id of its own (`instance:n`) and is
 *   written; a batch that failed (PostgreSQL unreachable, or its answer lost) is sent again as it was,
 *   same id and rows, before any new one: the store applies an id once, so nothing is charged twice
 *   and nothing is lost while the instance lives;
 * - an owner's block unused for IDLE_BLOCK_MS goes back to the store;
 * - the reservations are renewed (the heartbeat). Spending from an owner's stops when the last renewal
 *   or reservation of it that passed is older than the TTL less one flush interval: the store may have
 *   let it expire by then.
 * A clean `stop` writes what is left and gives every unspent RU back at once; a killed instance's come
 * back when its reservations expire, and the calls it served after its last written batch are not
 * charged (as a single machine loses its last flush interval).
 */
export interface FleetLedger extends Ledger {
  /** The asynchronous step before `reserve` (see BlockBook.prepare): null when the RU are here already. */
  prepare(ownerId: number, ru: number): Promise<void> | null;
  /** RU the owner spent on this instance that are not written to the shared store yet. */
  unwritten(ownerId: number): number;
  /** Writes pending usage now (and renews); resolves with whether the store took it. */
  flushNow(): Promise<boolean>;
  /** Stops the timer, writes what is left, gives back every unspent RU; false when the last write failed. */
  stop(): Promise<boolean>;
}

export function createFleetLedger(store: FleetLedgerStore, options: FleetLedgerOptions): FleetLedger {
  const now = options.now ?? Date.now;
  const { instance, reservationTtlS: ttlS } = options;
  // A reservation is known alive until the last renewal or reservation of it that passed (counted from
  // when it was sent) + TTL, less one flush interval of margin. A renewal extends every reservation the
  // store still has live; a reservation extends only its own owner's: the others may have expired while
  // renewals failed, and must not be spent on the strength of another owner's.
  let renewedUntil = -Infinity;
  const reservedUntil = new Map<number, number>();
  const aliveFrom = (sent: number): number => sent + ttlS * 1000 - options.flushIntervalMs;
  /** The store writes (and so extends) a reservation only when it grants something. */
  const extended = (ownerId: number, sent: number, granted: number): void => {
    if (granted > 0) reservedUntil.set(ownerId, Math.max(reservedUntil.get(ownerId) ?? -Infinity, aliveFrom(sent)));
  };
  const book: BlockBook = createBlockBook(
    {
      reserve: (ownerId, ru) => {
        const sent = now();
        return store.reserve(instance, ownerId, ru, ttlS).then((granted) => {
          extended(ownerId, sent, granted);
          return granted;
        });
      },
      reserveCalls: (ownerId, giveBack, calls) => {
        const sent = now();
        return store.reserveCalls(instance, ownerId, giveBack, calls, ttlS).then((answer) => {
          extended(
            ownerId,
            sent,
            answer.granted.reduce((n, ru) => n + ru, 0),
          );
          return answer;
        });
      },
      release: (ownerId, ru) => store.release(instance, ownerId, ru),
    },
    { blockRu: options.blockRu, validUntil: (ownerId) => Math.max(renewedUntil, reservedUntil.get(ownerId) ?? -Infinity), now },
  );
  const usage = createPendingUsage();
  // Batch ids must never repeat, across restarts of an instance of the same name too: the store would skip the batch.
  const run = randomBytes(8).toString('hex');
  let batchNumber = 0;
  /** The batch being written or to be sent again: its rows are out of `usage` but not yet in the store. */
  let unsent: UsageBatch | null = null;
  let healthy = true;
  let lastFlushAt: number | null = null;
  let flushing: Promise<boolean> | null = null;

  async function writeBatch(): Promise<boolean> {
    if (unsent === null && usage.size > 0)
      unsent = { id: `${instance}:${run}:${++batchNumber}`, instance, rows: usage.take(), failures: usage.takeFailures(), ttlS };
    const sent = now();
    const startedAt = performance.now();
    try {
      if (unsent !== null) {
        const batch = unsent;
        await store.writeUsage(batch);
        unsent = null;
        const debits = new Map<number, number>();
        for (const r of batch.rows) if (r.ru !== 0) debits.set(r.ownerId, (debits.get(r.ownerId) ?? 0) + r.ru);
        for (const [ownerId, ru] of debits) book.written(ownerId, ru, undefined);
      }
      const grantsBefore = book.grants();
      const live = await store.renew(instance, ttlS, options.info);
      // An owner's reservation the store let expire (the instance was cut off for longer than the TTL) is
      // no longer this instance's to spend: the next call reserves again. Not one a grant made meanwhile.
      for (const ownerId of book.held().keys()) if (!live.has(ownerId)) book.expired(ownerId, grantsBefore);
      renewedUntil = Math.max(renewedUntil, aliveFrom(sent));
      // A reservation's own mark no later than the renewal's says nothing more.
      for (const [ownerId, until] of reservedUntil) if (until <= renewedUntil) reservedUntil.delete(ownerId);
      giveBackIdle();
      healthy = true;
      lastFlushAt = now();
      options.metrics?.ledgerFlush.observe((performance.now() - startedAt) / 1000);
      return true;
    } catch (err) {
      healthy = false;
      options.metrics?.ledgerFlushFailures.inc();
      options.onFlushError?.(err);
      return false;
    }
  }

  /**
   * Blocks of owners with no call here for IDLE_BLOCK_MS go back to the store, so another instance serving
   * the owner gets them rather than being refused while they idle here. Only an owner with nothing
   * unwritten, open or asked for is forgotten, and only what it held is given back (an amount, not the
   * row: a reservation asked for next may reach the store first).
   */
  function giveBackIdle(): void {
    for (const ownerId of book.idle(now() - IDLE_BLOCK_MS)) {
      const ru = book.drop(ownerId);
      if (ru > 0) store.release(instance, ownerId, ru).catch(() => {});
    }
  }

  /** Starts a write, one at a time: a batch is never sent twice at once. */
  function startWrite(): Promise<boolean> {
    flushing = writeBatch().finally(() => {
      flushing = null;
    });
    return flushing;
  }

  /**
   * A write that includes everything counted until now: after the one under way, if any (it took its rows
   * earlier); a batch that failed is sent again first, then what was counted since, as a batch of its own.
   */
  async function flushNow(): Promise<boolean> {
    while (flushing !== null) await flushing;
    const ok = await startWrite();
    return ok && usage.size > 0 ? startWrite() : ok;
  }

  async function stop(): Promise<boolean> {
    clearInterval(timer);
    const ok = await flushNow();
    // Unspent RU go back now rather than at expiry, unless writes failed (then they expire).
    if (ok) await store.release(instance).catch(() => {});
    return ok;
  }

  // The timer's write joins one under way rather than queueing another behind it.
  const timer = setInterval(() => {
    if (flushing === null) void startWrite();
  }, options.flushIntervalMs);
  timer.unref();

  return {
    ...createMeter(book, usage, now),
    prepare: (ownerId, ru) => book.prepare(ownerId, ru),
    unwritten: (ownerId) => book.unwritten(ownerId),
    flush() {
      void flushNow();
      return healthy;
    },
    flushNow,
    healthy: () => healthy,
    lastFlushAt: () => lastFlushAt,
    reload: (ownerId) => book.reload(ownerId),
    pending: () => ({ ru: usage.ru + (unsent?.rows.reduce((n, r) => n + r.ru, 0) ?? 0), rows: usage.size + (unsent?.rows.length ?? 0) }),
    close() {
      void stop();
      return healthy;
    },
    stop,
  };
}
