import { MessageChannel, type MessagePort, receiveMessageOnPort, type TransferListItem } from 'node:worker_threads';
import type { Store } from '../store/open.js';
import type { Ledger, LedgerOptions } from './ledger.js';
import type { LedgerHandoff, LedgerMessage } from './ledger-view.js';
import { createLedgerWriter } from './ledger-writer.js';
import { createMeter } from './meter.js';
import { openSharedBook } from './shared-book.js';
import { createHeldMemory, createSharedBookMemory } from './shared-book-memory.js';
import { createPendingUsage } from './usage-rows.js';

export interface LedgerHostOptions extends LedgerOptions {
  /** Owners the shared book holds per run; default DEFAULT_MAX_OWNERS (65,536). A new owner beyond it gets 503. */
  maxOwners?: number;
  /** Called with the error of a re-read of stored balances that failed (retried at the next tick), e.g. to log it. */
  onReadError?: (err: unknown) => void;
}

/**
 * The main thread's ledger when workers serve the calls: the one writer, and a `Ledger` itself (its
 * own charges go to the same book). Each worker gets a view (createLedgerView) from `attach()`.
 *
 * Every `flushIntervalMs` it takes the rows every worker shipped, writes them with its own in one
 * transaction (as `createLedger` does), publishes its health to the views, and reads again the stored
 * balances that changed outside the ledger: those of owners a worker added (its read may predate a
 * top-up) and, when another connection committed (`PRAGMA data_version`: the CLI, a worker's
 * management route), every owner's. `reload()` reads again at once.
 */
export interface LedgerHost extends Ledger {
  /**
   * What one worker needs for its view: `handoff` goes in its workerData, `transferList` in the
   * Worker's transferList. Once per worker thread (a restarted one gets a new one). When the worker
   * ends (its port closes), the RU its open reservations held are given back.
   */
  attach(): { handoff: LedgerHandoff; transferList: TransferListItem[] };
  /**
   * Stops the timer, takes every row shipped so far and flushes; false when that flush failed. Call it
   * after the workers closed their views, so that nothing is shipped after it.
   */
  close(): boolean;
}

export function createLedgerHost(store: Store, options: LedgerHostOptions): LedgerHost {
  const memory = createSharedBookMemory(options.maxOwners);
  const book = openSharedBook(memory, store, 0);
  const usage = createPendingUsage();
  const writer = createLedgerWriter(store, usage, book, options);
  const dataVersionOf = store.sql.directory.dataVersion;
  let dataVersion = dataVersionOf.get()!;
  const ports = new Set<MessagePort>();
  let threads = 0;

  function receive(message: LedgerMessage): void {
    switch (message.kind) {
      case 'rows':
        usage.absorbShipment(message.rows);
        if (message.failures.length > 0) usage.absorbFailures(message.failures);
        return;
      case 'reload':
        if (message.reload === null) noticeChanges();
        else reload(message.reload);
        return;
      default:
        message satisfies never;
    }
  }

  /** Takes what was shipped and not yet delivered as an event (a worker may have just ended). */
  function drain(port: MessagePort): void {
    for (let m = receiveMessageOnPort(port); m !== undefined; m = receiveMessageOnPort(port)) receive(m.message as LedgerMessage);
  }

  function flush(): boolean {
    for (const port of ports) drain(port);
    const ok = writer.flush();
    book.publishFlush(writer.healthy(), writer.lastFlushAt());
    return ok;
  }

  function reread(read: () => void): void {
    try {
      read();
    } catch (err) {
      // Read all again at the next tick: data_version values are positive.
      dataVersion = -1;
      options.onReadError?.(err);
    }
  }

  /** Reads every entry again, or only those a worker added when no other connection committed. */
  function noticeChanges(): void {
    reread(() => {
      book.syncAdded();
      if (dataVersionOf.get() !== dataVersion) readAll();
    });
  }

  function readAll(): void {
    // Taken first: a commit made during the re-read is seen at the next tick.
    const v = dataVersionOf.get()!;
    book.reload();
    dataVersion = v;
  }

  function reload(ownerId?: number): void {
    reread(() => (ownerId === undefined ? readAll() : book.reload(ownerId)));
  }

  const timer = setInterval(() => {
    flush();
    noticeChanges();
  }, options.flushIntervalMs);
  timer.unref();

  return {
    ...createMeter(book, usage, options.now ?? Date.now),
    flush,
    healthy: writer.healthy,
    lastFlushAt: writer.lastFlushAt,
    reload,
    pending() {
      for (const port of ports) drain(port);
      return { ru: usage.ru, rows: usage.size };
    },
    attach() {
      const thread = ++threads;
      const held = createHeldMemory(memory);
      const { port1, port2 } = new MessageChannel();
      port1.on('message', receive);
      port1.once('close', () => {
        ports.delete(port1);
        book.release(thread, new Float64Array(held));
      });
      // The workers keep the process alive, not their ports.
      port1.unref();
      ports.add(port1);
      return { handoff: { book: memory, held, thread, port: port2 }, transferList: [port2] };
    },
    close() {
      clearInterval(timer);
      const ok = flush();
      for (const port of ports) port.close();
      return ok;
    },
  };
}
