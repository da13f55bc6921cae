import type { MessagePort } from 'node:worker_threads';
import type { Store } from '../store/open.js';
import type { Ledger } from './ledger.js';
import { createMeter } from './meter.js';
import { openSharedBook } from './shared-book.js';
import type { SharedBookMemory } from './shared-book-memory.js';
import { createPendingUsage, type PendingFailure, type ShippedRows } from './usage-rows.js';

/**
 * What the main thread's ledger host hands one worker (LedgerHost.attach): put it in the worker's
 * workerData, with the port in the transferList. Plain data: the SharedArrayBuffers are shared.
 */
export interface LedgerHandoff {
  /** The balances every thread reserves from. */
  readonly book: SharedBookMemory;
  /** This worker's open reservations per entry, which the host gives back if the worker dies. */
  readonly held: SharedArrayBuffer;
  /** This worker's number in the book's locks (1, 2, …; 0 is the main thread). */
  readonly thread: number;
  /** Where this worker ships its usage rows to the writer. */
  readonly port: MessagePort;
}

/** What a worker's ledger sends the host: rows counted (their RU are debits already made), or a re-read wanted. */
export type LedgerMessage = { kind: 'rows'; rows: ShippedRows; failures: PendingFailure[] } | { kind: 'reload'; reload: number | null };

export interface LedgerViewOptions {
  /** Clock in ms; default Date.now. Only places usage in its minute. */
  now?: () => number;
}

/**
 * A worker's ledger: the `Ledger` the pipeline already uses, over the shared book, so reserving,
 * settling and charging take no message to the main thread. The rows it counts are shipped to the host
 * at most once per event-loop turn (setImmediate), and the host writes them with its next flush: a kill
 * loses what the flush interval loses, plus one turn. `store` is the worker's own connection, used
 * only to read an owner's balance the first time any thread meets it.
 *
 * `flush()` ships now and answers the writer's health; `reload()` asks the host to read stored
 * balances again; `close()` ships what is left and closes the port (the host then gives back any
 * reservation still open): the view must not be used after it.
 */
export function createLedgerView(handoff: LedgerHandoff, store: Store, options: LedgerViewOptions = {}): Ledger {
  const { port } = handoff;
  const book = openSharedBook(handoff.book, store, handoff.thread, new Float64Array(handoff.held));
  const usage = createPendingUsage();
  let shipment: NodeJS.Immediate | null = null;

  function ship(): void {
    shipment = null;
    if (usage.size === 0) return;
    const message: LedgerMessage = { kind: 'rows', rows: usage.takeShipment(), failures: usage.takeFailures() };
    port.postMessage(message);
  }

  function shipNow(): void {
    if (shipment !== null) clearImmediate(shipment);
    ship();
  }

  return {
    ...createMeter(book, usage, options.now ?? Date.now, () => {
      shipment ??= setImmediate(ship);
    }),
    flush() {
      shipNow();
      return book.healthy();
    },
    healthy: () => book.healthy(),
    lastFlushAt: () => book.lastFlushAt(),
    reload(ownerId) {
      const message: LedgerMessage = { kind: 'reload', reload: ownerId ?? null };
      port.postMessage(message);
    },
    pending: () => ({ ru: usage.ru, rows: usage.size }),
    close() {
      shipNow();
      port.close();
      return book.healthy();
    },
  };
}
