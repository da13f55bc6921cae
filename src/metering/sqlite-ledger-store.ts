import type { Store } from '../store/open.js';
import { checkRu, createCallGate, debitsByOwner, type InstanceInfo, type LedgerStore, type UsageBatch } from './ledger-store.js';
import { DEFAULT_FAILURES_KEPT, writeFailures } from './failure-ring.js';
import { usageRowParams } from './usage-rows.js';
import { createUsageRollUp, type RollUpOptions } from './usage.js';

export interface SqliteLedgerStoreOptions extends RollUpOptions {
  /** Clock in ms; default Date.now. Times reservations, heartbeats and batch ids (never usage rows: theirs come with them). */
  now?: () => number;
}

/**
 * The ledger store in the SQLite file, on `store`'s connection: every method runs synchronously in one
 * IMMEDIATE transaction (the write lock taken first, so two connections on the file serialise like two
 * instances on PostgreSQL's row locks) and answers a settled promise. A write that fails is noted for
 * the WAL repair (see WalRecovery), which a later call runs first when due.
 */
export function createSqliteLedgerStore(store: Store, options: SqliteLedgerStoreOptions): LedgerStore {
  const sql = store.sql.fleet;
  const ledger = store.sql.ledger;
  const now = options.now ?? Date.now;
  const usageRollUp = createUsageRollUp(store, options);
  const gate = createCallGate();

  const writeUsageTx = store.writeTransaction((batch: UsageBatch) => {
    const at = now();
    const fresh = sql.recordBatch.run(batch.id, batch.instance, at).changes === 1;
    if (fresh) {
      for (const r of batch.rows) ledger.addUsage.run(...usageRowParams(r));
      writeFailures(ledger, batch.failures ?? [], options.failuresKept ?? DEFAULT_FAILURES_KEPT);
    }
    const balances = new Map<number, number>();
    for (const [owner, ru] of debitsByOwner(batch.rows)) {
      const balance = fresh && ru !== 0 ? ledger.debit.get(ru, owner) : ledger.balance.get(owner);
      if (balance !== undefined) balances.set(owner, balance);
      if (fresh && ru !== 0) sql.spendReservation.run({ instance: batch.instance, owner, ru, now: at, expires: at + batch.ttlS * 1000 });
    }
    return balances;
  });

  const reserveTx = store.writeTransaction((instance: string, owner: number, ru: number, ttlS: number): number => {
    const at = now();
    const balance = ledger.balance.get(owner);
    if (balance === undefined) return 0;
    const granted = Math.max(0, Math.min(ru, balance - sql.liveReserved.get(owner, at)!));
    if (granted > 0) sql.addReservation.run({ instance, owner, ru: granted, now: at, expires: at + ttlS * 1000 });
    return granted;
  });

  const renewTx = store.writeTransaction((instance: string, ttlS: number, info: InstanceInfo | undefined) => {
    const at = now();
    const live = new Map(sql.renew.all(at + ttlS * 1000, instance, at));
    sql.heartbeat.run({ id: instance, now: at, info: info === undefined ? null : JSON.stringify(info) });
    return live;
  });

  const pruneTx = store.writeTransaction((olderThanS: number) => {
    const before = now() - olderThanS * 1000;
    return {
      batches: sql.pruneBatches.run(before).changes,
      instances: sql.pruneInstances.run(before).changes,
      reservations: sql.pruneReservations.run(before).changes,
    };
  });

  /** Runs a write under the gate, noting a store fault for the WAL repair, which runs first when due. */
  function write<T>(fn: () => T): Promise<T> {
    return gate.run(async () => {
      store.checkpointIfDue();
      try {
        return store.write(fn);
      } catch (err) {
        store.noteFault(err);
        throw err;
      }
    });
  }

  return {
    kind: 'sqlite',
    balance: (ownerId) => gate.run(async () => ledger.balance.get(ownerId)),
    writeUsage: (batch) => write(() => writeUsageTx(batch)),
    reserve(instance, ownerId, ru, ttlS) {
      return write(() => {
        checkRu(ru);
        return reserveTx(instance, ownerId, ru, ttlS);
      });
    },
    release(instance, ownerId, ru) {
      return write(() => {
        if (ownerId === undefined) sql.releaseAll.run(instance);
        else if (ru === undefined) sql.releaseOwner.run(instance, ownerId);
        else {
          checkRu(ru);
          sql.releaseSome.run(ru, instance, ownerId, now());
        }
      });
    },
    renew: (instance, ttlS, info) => write(() => renewTx(instance, ttlS, info)),
    instances: () =>
      gate.run(async () =>
        sql.instances.all().map((r) => ({ id: r.id, startedAt: r.startedAt, heartbeatAt: r.heartbeatAt, info: JSON.parse(r.info) })),
      ),
    rollUp: (nowMs) => write(() => usageRollUp.rollUp(nowMs)),
    prune: (olderThanS) => write(() => pruneTx(olderThanS)),
    close: gate.close,
  };
}
