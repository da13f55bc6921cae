import { performance } from 'node:perf_hooks';
import type { Metrics } from '../metrics/registry.js';
import type { Store } from '../store/open.js';

/** RU set aside for a request between its admission and its settlement. */
export interface Reservation {
  readonly ownerId: number;
  readonly ru: number;
}

/** What a request is counted under in the usage tables. */
export interface UsageKey {
  endpointId: string;
  /** JSON-RPC method (or Beacon route). */
  method: string;
  /** 0 for a success; otherwise the HTTP status of the refusal or failure, or the JSON-RPC error code. */
  status: number;
}

/** One item of a settled batch: its usage key and the RU it costs. */
export interface UsageCharge extends UsageKey {
  ru: number;
}

export interface LedgerOptions {
  /** How often pending debits are written, in ms (config `ledger.flush_interval_ms`). */
  flushIntervalMs: number;
  /** Clock in ms; default Date.now. Only places usage in its minute. */
  now?: () => number;
  /** Called with each failed flush's error (the debits stay pending and are retried), e.g. to log it. */
  onFlushError?: (err: unknown) => void;
  /** Where each write of pending debits is measured: its duration, or a failure. Default: nowhere. */
  metrics?: Pick<Metrics, 'ledgerFlush' | 'ledgerFlushFailures'>;
}

/**
 * The daemon's RU balances. Reservations and debits are kept in memory and written by `flush()`,
 * debits and their usage rows in one transaction, so that for every owner
 * `sum(credits.ru) - sum(usage ru) = owners.ru_balance` holds in the file at every commit; a crash
 * loses at most the debits of one flush interval (in the owner's favour).
 *
 * An owner's stored balance is read on its first use and after `reload`: `available` and `reserve`
 * throw the SqliteError if that read fails (answer 503). JS runs one callback at a time, so the
 * arithmetic needs no lock: 100 concurrent requests see 100 exact, successive balances.
 */
export interface Ledger {
  /** Stored balance − unflushed debits − open reservations; 0 for an unknown owner. */
  available(ownerId: number): number;
  /** Sets `ru` aside when `available(ownerId) >= ru`, else null (answer 402). Never takes a balance below zero. */
  reserve(ownerId: number, ru: number): Reservation | null;
  /**
   * Closes a reservation with what the request really cost, counted as one request under `usage`.
   * `actualRu` may exceed the reservation (a size surcharge known when the answer ends): the only way
   * a balance goes below zero, after which `reserve` refuses until a top-up.
   */
  settle(reservation: Reservation, actualRu: number, usage: UsageKey): void;
  /** Closes a reservation for a batch: one request per charge, the debit is the charges' sum. */
  settleBatch(reservation: Reservation, charges: readonly UsageCharge[]): void;
  /** Closes a reservation at no cost (e.g. the upstream failed). Count it with `recordUsage` if wanted. */
  refund(reservation: Reservation): void;
  /**
   * Debits deliveries made without a request (subscription notifications, Beacon events), counted as
   * `deliveries` under `usage`, when the balance covers `ru`; false (nothing debited) when it does not,
   * and the caller then stops delivering to that owner.
   */
  chargeDeliveries(ownerId: number, ru: number, usage: UsageKey, deliveries: number): boolean;
  /** Counts requests that cost nothing (refused with 402 or 429, failed upstream): 0 RU in the stats. */
  recordUsage(ownerId: number, usage: UsageKey, requests?: number): void;
  /**
   * Writes pending debits and usage in one transaction; false (all kept for the next try) when the
   * store fails. A checkpoint made due by a store fault (see WalRecovery) runs first, and when the
   * write fails in a way a checkpoint may cure (a full disk), the write is tried once more after one.
   */
  flush(): boolean;
  /** False from a failed flush until the next successful one: answer 503 to requests that need metering. */
  healthy(): boolean;
  /** When the last flush that passed ended (ms since the epoch; one with nothing to write counts), or null. */
  lastFlushAt(): number | null;
  /** Forgets stored balances (one owner's, or all) so the next use re-reads them, e.g. after a CLI top-up. */
  reload(ownerId?: number): void;
  /** Debits and usage rows waiting for the next flush. */
  pending(): { ru: number; rows: number };
  /** Stops the timer and flushes; false when the last flush failed (its debits are lost). */
  close(): boolean;
}

interface Balance {
  /** ru_balance as last read from or returned by SQLite; includes every flushed debit. */
  stored: number;
  /** The reload generation `stored` was read in; stale when it differs from the ledger's. */
  generation: number;
  unflushed: number;
  reserved: number;
}

interface OpenReservation extends Reservation {
  readonly balance: Balance;
  open: boolean;
}

interface PendingRow {
  endpointId: string;
  ownerId: number;
  method: string;
  t: number;
  status: number;
  requests: number;
  ru: number;
}

function checkRu(ru: number, what: string): void {
  if (!Number.isSafeInteger(ru) || ru < 0) throw new RangeError(`${what} must be a non-negative integer, got ${ru}`);
}

export function createLedger(store: Store, options: LedgerOptions): Ledger {
  const sql = store.sql.ledger;
  const now = options.now ?? Date.now;
  const balances = new Map<number, Balance>();
  let generation = 0;
  let pendingRows = new Map<string, PendingRow>();
  let pendingRu = 0;
  let isHealthy = true;

  function balanceOf(ownerId: number): Balance {
    let b = balances.get(ownerId);
    if (b === undefined) {
      b = { stored: sql.balance.get(ownerId) ?? 0, generation, unflushed: 0, reserved: 0 };
      balances.set(ownerId, b);
    } else if (b.generation !== generation) {
      b.stored = sql.balance.get(ownerId) ?? 0;
      b.generation = generation;
    }
    return b;
  }

  function count(ownerId: number, usage: UsageKey, requests: number, ru: number): void {
    const t = Math.floor(now() / 60_000) * 60;
    const key = `${usage.endpointId}\u0000${usage.method}\u0000${t}\u0000${usage.status}`;
    const row = pendingRows.get(key);
    if (row === undefined) {
      pendingRows.set(key, { endpointId: usage.endpointId, ownerId, method: usage.method, t, status: usage.status, requests, ru });
    } else {
      row.requests += requests;
      row.ru += ru;
    }
  }

  function close(reservation: Reservation): OpenReservation {
    const r = reservation as OpenReservation;
    if (!r.open) throw new Error('this reservation was already settled or refunded');
    r.open = false;
    r.balance.reserved -= r.ru;
    return r;
  }

  function debit(r: OpenReservation, ru: number): void {
    r.balance.unflushed += ru;
    pendingRu += ru;
  }

  const writeTx = store.db.transaction((rows: Iterable<PendingRow>) => {
    const debits = new Map<number, number>();
    for (const r of rows) {
      sql.addUsage.run(r.endpointId, r.ownerId, r.method, r.t, r.status, r.requests, r.ru);
      if (r.ru !== 0) debits.set(r.ownerId, (debits.get(r.ownerId) ?? 0) + r.ru);
    }
    const after = new Map<number, { debited: number; balance: number | undefined }>();
    for (const [ownerId, ru] of debits) after.set(ownerId, { debited: ru, balance: sql.debit.get(ru, ownerId) });
    return after;
  });

  function flush(): boolean {
    const ok = flushOnce();
    if (ok) flushedAt = Date.now();
    return ok;
  }

  function flushOnce(): boolean {
    // After a fault such as a full disk the WAL may hold the very room this write needs.
    const before = store.checkpointIfDue();
    if (pendingRows.size === 0) return true;
    if (writePending()) return true;
    // A write that failed because the WAL filled the disk gets a second chance as soon as a checkpoint
    // frees it; not when one has just failed (each try may wait the busy timeout).
    return before !== 'failed' && store.checkpointIfDue() === 'done' && writePending();
  }

  function writePending(): boolean {
    let after: ReturnType<typeof writeTx>;
    const startedAt = performance.now();
    try {
      after = writeTx.immediate(pendingRows.values());
      options.metrics?.ledgerFlush.observe((performance.now() - startedAt) / 1000);
    } catch (err) {
      options.metrics?.ledgerFlushFailures.inc();
      // Nothing was applied (the transaction rolled back): keep every row for the next tick.
      isHealthy = false;
      store.noteFault(err);
      options.onFlushError?.(err);
      return false;
    }
    pendingRows = new Map();
    for (const [ownerId, { debited, balance }] of after) {
      pendingRu -= debited;
      const b = balances.get(ownerId);
      if (b === undefined) continue;
      b.unflushed -= debited;
      // The RETURNING balance includes top-ups committed meanwhile, so it is the freshest figure.
      if (balance !== undefined) {
        b.stored = balance;
        b.generation = generation;
      }
    }
    isHealthy = true;
    return true;
  }

  let flushedAt: number | null = null;
  const timer = setInterval(flush, options.flushIntervalMs);
  timer.unref();

  return {
    available(ownerId) {
      const b = balanceOf(ownerId);
      return b.stored - b.unflushed - b.reserved;
    },
    reserve(ownerId, ru) {
      checkRu(ru, 'reserved RU');
      const b = balanceOf(ownerId);
      if (b.stored - b.unflushed - b.reserved < ru) return null;
      b.reserved += ru;
      const r: OpenReservation = { ownerId, ru, balance: b, open: true };
      return r;
    },
    settle(reservation, actualRu, usage) {
      checkRu(actualRu, 'settled RU');
      const r = close(reservation);
      debit(r, actualRu);
      count(r.ownerId, usage, 1, actualRu);
    },
    settleBatch(reservation, charges) {
      for (const c of charges) checkRu(c.ru, `RU of ${c.method}`);
      const r = close(reservation);
      for (const c of charges) {
        debit(r, c.ru);
        count(r.ownerId, c, 1, c.ru);
      }
    },
    refund(reservation) {
      close(reservation);
    },
    chargeDeliveries(ownerId, ru, usage, deliveries) {
      checkRu(ru, 'delivered RU');
      const b = balanceOf(ownerId);
      if (b.stored - b.unflushed - b.reserved < ru) return false;
      b.unflushed += ru;
      pendingRu += ru;
      count(ownerId, usage, deliveries, ru);
      return true;
    },
    recordUsage(ownerId, usage, requests = 1) {
      count(ownerId, usage, requests, 0);
    },
    flush,
    lastFlushAt: () => flushedAt,
    healthy: () => isHealthy,
    reload(ownerId) {
      if (ownerId === undefined) generation++;
      else {
        const b = balances.get(ownerId);
        if (b !== undefined) b.generation = -1;
      }
    },
    pending: () => ({ ru: pendingRu, rows: pendingRows.size }),
    close() {
      clearInterval(timer);
      return flush();
    },
  };
}
