import { performance } from 'node:perf_hooks';
import type { Store } from '../store/open.js';
import type { BalanceBook } from './balance-book.js';
import type { LedgerOptions } from './ledger.js';
import { DEFAULT_FAILURES_KEPT, writeFailures } from './failure-ring.js';
import { type PendingFailure, type PendingRow, type PendingUsage, usageRowParams } from './usage-rows.js';

/** The one writer of debits: what a ledger's `flush`, `healthy` and `lastFlushAt` are. */
export interface LedgerWriter {
  /** Writes the pending rows and their debits in one transaction; false (all kept) when the store fails. */
  flush(): boolean;
  /** False from a failed flush until the next successful one. */
  healthy(): boolean;
  /** When the last flush that passed ended (ms since the epoch), or null. */
  lastFlushAt(): number | null;
}

/**
 * Writes `usage` (whose RU are the debits) to `store` and tells `book` what each owner's stored
 * balance became, so its `available` stays stored − unflushed − reserved.
 */
export function createLedgerWriter(
  store: Store,
  usage: PendingUsage,
  book: BalanceBook,
  options: Pick<LedgerOptions, 'onFlushError' | 'metrics' | 'failuresKept'>,
): LedgerWriter {
  const sql = store.sql.ledger;
  let isHealthy = true;
  let flushedAt: number | null = null;

  const kept = options.failuresKept ?? DEFAULT_FAILURES_KEPT;
  const writeTx = store.writeTransaction((rows: Iterable<PendingRow>, failures: readonly PendingFailure[]) => {
    const debits = new Map<number, number>();
    writeFailures(sql, failures, kept);
    for (const r of rows) {
      sql.addUsage.run(...usageRowParams(r));
      if (r.ru !== 0) debits.set(r.ownerId, (debits.get(r.ownerId) ?? 0) + r.ru);
    }
    const after = new Map<number, { debited: number; balance: number | undefined }>();
    for (const [ownerId, ru] of debits) after.set(ownerId, { debited: ru, balance: sql.debit.get(ru, ownerId) });
    return after;
  });

  function flushOnce(): boolean {
    // After a fault such as a full disk the WAL may hold the very room this write needs.
    const before = store.checkpointIfDue();
    if (usage.size === 0) return true;
    if (writePending()) return true;
    // A write that failed because the WAL filled the disk gets a second chance as soon as a checkpoint
    // frees it; not when one has just failed (each try may wait the busy timeout).
    return before !== 'failed' && store.checkpointIfDue() === 'done' && writePending();
  }

  function writePending(): boolean {
    let after: ReturnType<typeof writeTx>;
    const startedAt = performance.now();
    try {
      after = writeTx(usage.rows(), usage.failures());
      options.metrics?.ledgerFlush.observe((performance.now() - startedAt) / 1000);
    } catch (err) {
      options.metrics?.ledgerFlushFailures.inc();
      // Nothing was applied (the transaction rolled back): keep every row for the next tick.
      isHealthy = false;
      store.noteFault(err);
      options.onFlushError?.(err);
      return false;
    }
    usage.clear();
    // The RETURNING balance includes top-ups committed meanwhile, so it is the freshest figure.
    for (const [ownerId, { debited, balance }] of after) book.written(ownerId, debited, balance);
    isHealthy = true;
    return true;
  }

  return {
    flush() {
      const ok = flushOnce();
      if (ok) flushedAt = Date.now();
      return ok;
    },
    healthy: () => isHealthy,
    lastFlushAt: () => flushedAt,
  };
}
