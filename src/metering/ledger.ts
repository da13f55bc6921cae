import type { Metrics } from '../metrics/registry.js';
import type { Store } from '../store/open.js';
import { createLocalBook } from './balance-book.js';
import { createLedgerWriter } from './ledger-writer.js';
import { createMeter } from './meter.js';
import { createPendingUsage, type PendingFailure } from './usage-rows.js';

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
  /** The call's time in the gateway, ms, for the row's latency histogram; absent for what is not timed (deliveries). */
  latencyMs?: number;
  /** What went wrong, for the endpoint's recent failures (usage-rows.ts PendingFailure); absent for a success. */
  failure?: FailureDetail;
}

/** A failure's own facts: the rest (endpoint, owner, method, time) comes from the usage it is counted with. */
export type FailureDetail = Pick<PendingFailure, 'httpStatus' | 'code' | 'error' | 'message' | 'upstream'>;

/** One item of a settled batch: its usage key and the RU it costs. */
export interface UsageCharge extends UsageKey {
  ru: number;
}

export interface LedgerOptions {
  /** How often pending debits are written, in ms (config `ledger.flush_interval_ms`). */
  flushIntervalMs: number;
  /** Failures kept per endpoint for the owner's recent failures (config `usage.failures_kept`); default 100. */
  failuresKept?: number;
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
 * throw the SqliteError if that read fails (answer 503). With one thread (`createLedger`) JS runs one
 * callback at a time, so the arithmetic needs no lock: 100 concurrent requests see 100 exact, successive
 * balances. With worker threads the balances are in shared memory, each owner's behind a lock, and
 * the main thread's host (ledger-host.ts) writes what every worker's view (ledger-view.ts) counted.
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
   * A worker's view ships its rows to the host instead and answers the host's health.
   */
  flush(): boolean;
  /** False from a failed flush until the next successful one: answer 503 to requests that need metering. */
  healthy(): boolean;
  /** When the last flush that passed ended (ms since the epoch; one with nothing to write counts), or null. */
  lastFlushAt(): number | null;
  /**
   * Has stored balances (one owner's, or all) read again, e.g. after a CLI top-up: at their next use
   * (createLedger), at once (the host), or by the host when a worker's view asks.
   */
  reload(ownerId?: number): void;
  /** Debits and usage rows waiting for the next flush (a view's: for the next shipment). */
  pending(): { ru: number; rows: number };
  /** Stops the timer and flushes; false when the last flush failed (its debits are lost). */
  close(): boolean;
}

/** The ledger of a daemon with one thread: a Map of balances, and the writer on `store`'s connection. */
export function createLedger(store: Store, options: LedgerOptions): Ledger {
  const book = createLocalBook(store);
  const usage = createPendingUsage();
  const writer = createLedgerWriter(store, usage, book, options);
  const timer = setInterval(writer.flush, options.flushIntervalMs);
  timer.unref();

  return {
    ...createMeter(book, usage, options.now ?? Date.now),
    flush: writer.flush,
    lastFlushAt: writer.lastFlushAt,
    healthy: writer.healthy,
    reload: book.reload,
    pending: () => ({ ru: usage.ru, rows: usage.size }),
    close() {
      clearInterval(timer);
      return writer.flush();
    },
  };
}
