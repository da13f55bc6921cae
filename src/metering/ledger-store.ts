import type { RollUpResult } from './usage.js';
import type { PendingFailure, PendingRow } from './usage-rows.js';

/**
 * Where balances, usage and reservations are kept when several instances share them (fleet mode, in
 * PostgreSQL: pg-ledger-store.ts) or one instance keeps them in its file (SQLite: sqlite-ledger-store.ts).
 * One instance spends RU it has reserved from an owner's balance locally and writes what it spent in
 * batches; the store never waits on a call, only on a batch or a reservation.
 *
 * The arithmetic, per owner:
 * - balance shown = `owners.ru_balance` = sum(credits) − RU spent, where spent = the RU of the usage rows
 *   written (`writeUsage` debits and adds the rows in one transaction, so `sum(credits) − sum(usage ru) =
 *   ru_balance` at every commit). RU merely reserved are not in it: the balance lags the calls served by
 *   at most one flush interval of each instance.
 * - available to reserve = balance − the RU of the owner's live reservations (every instance's, the
 *   caller's included). A reservation is RU an instance may spend without asking; spending them and
 *   writing the batch lowers the balance and the reservation by the same RU, so what is available to
 *   the others does not move. `reserve` grants at most what is available, so the live reservations of
 *   all instances never exceed the balance: no overdraft, however many instances ask at once.
 * - a reservation lives until its `expires_at` (now + ttl at its last `reserve`, `writeUsage` or `renew`);
 *   once expired it counts for nothing, and is never renewed again (it may be deleted lazily). An
 *   instance killed with `kill -9` thus gives its unspent RU back at its reservations' expiry. The calls
 *   it served after its last committed batch are never charged: the same loss, in the owner's favour, as a
 *   single daemon's last flush interval when it crashes.
 * - an instance must stop spending a reservation when, by its own clock, the ttl has passed since it
 *   sent the last call that set the expiry (`reserve`, `writeUsage`, `renew`): the store's clock starts the
 *   ttl no earlier than that, so the instance never spends RU that the store has freed for the others.
 *
 * Every method returns a promise and rejects with the engine's error when the store fails (unreachable,
 * a deadlock detected, a full disk); nothing of a failed call is applied. `writeUsage` is safe to retry
 * with the same batch: one whose answer was lost is not applied again.
 */
export interface LedgerStore {
  readonly kind: 'sqlite' | 'postgres';
  /** The owner's stored balance (credits − RU spent), or undefined for an unknown owner. */
  balance(ownerId: number): Promise<number | undefined>;
  /**
   * In one transaction: records `batch.id`, adds the rows to `usage_minute`, debits each owner the RU of
   * its rows (a relative update: top-ups committed meanwhile compose), and lowers `batch.instance`'s live
   * reservation of that owner by the same RU (not below 0), extending its expiry to now + `batch.ttlS`.
   * A batch id already recorded applies nothing. Answers the balance after it of every owner of the rows
   * (an unknown owner is left out), the current ones for a batch already applied.
   */
  writeUsage(batch: UsageBatch): Promise<Map<number, number>>;
  /**
   * Sets aside for `instance` up to `ru` of the owner's available RU (balance − live reservations, never
   * below 0), adding them to its reservation, whose expiry becomes now + `ttlS`. Answers the RU granted:
   * 0..ru (0 for an unknown owner, or when nothing is available, which leaves the reservation as it was).
   * The owner's row is locked meanwhile, so concurrent grants from any instance add up to at most the
   * available RU. `ru` is a non-negative integer (else a RangeError).
   */
  reserve(instance: string, ownerId: number, ru: number, ttlS: number): Promise<number>;
  /**
   * Gives back unspent RU of `instance`'s live reservations: all of them (a clean stop), all of one
   * owner's, or `ru` of one owner's (not below 0).
   */
  release(instance: string, ownerId?: number, ru?: number): Promise<void>;
  /**
   * The heartbeat: extends to now + `ttlS` every live reservation of `instance` and records it in
   * `instances` (first time: its start; `info`, when given, replaces the stored one). Answers the live
   * reservations, owner id → RU: an owner missing from it was expired and is no longer the instance's to
   * spend (reserve again).
   */
  renew(instance: string, ttlS: number, info?: InstanceInfo): Promise<Map<number, number>>;
  /** Every instance that has sent a heartbeat and was not pruned, by id. */
  instances(): Promise<InstanceRow[]>;
  /**
   * Moves old usage minute → hour → day like `UsageRollUp.rollUp` (metering/usage.ts), with the store's
   * retention: whole periods only, each move in one transaction, totals exact; safe while other
   * instances write or roll up the same rows.
   */
  rollUp(nowMs?: number): Promise<RollUpResult>;
  /**
   * Forgets what is older than `olderThanS` seconds: recorded batch ids (so a batch must never be retried
   * after that long: it would be applied again), instances without a heartbeat since, and reservations
   * expired since (an expired one counts for nothing already; waiting keeps the housekeeping off the rows
   * the instances are working on).
   */
  prune(olderThanS: number): Promise<PruneResult>;
  /**
   * Waits for the calls in flight; later calls reject. It does not close the store it was made over
   * (whoever opened that closes it).
   */
  close(): Promise<void>;
}

/**
 * Reservations made call by call, for an owner whose balance is nearly spent (fleet mode only): a block
 * asked for then would strand its remainder on one instance while another cannot pay a call.
 */
export interface CallReservations {
  /**
   * In one transaction under the owner's lock: gives back `giveBack` RU of `instance`'s live reservation
   * (not below 0), then sets aside, for each of `calls` in order, its RU when the owner's available RU
   * (balance − live reservations) still cover it, else nothing for it, and adds what it set aside to the
   * reservation (expiry now + `ttlS`). Given back first, so two instances each holding part of one call's
   * RU do not both ask while holding on to their part. Every amount a non-negative integer (else a RangeError).
   */
  reserveCalls(instance: string, ownerId: number, giveBack: number, calls: readonly number[], ttlS: number): Promise<CallsGrant>;
}

/** What `reserveCalls` answers: how an instance learns that an owner's balance is low, and how low. */
export interface CallsGrant {
  /** The RU set aside for each call asked, in order: the call's RU or 0. */
  granted: number[];
  /** The owner's available RU after it (balance − every live reservation); 0 for an unknown owner. */
  free: number;
  /** RU of the other instances' live reservations of the owner: 0 means `free` is all the owner has left. */
  othersHeld: number;
}

/** Usage counted by one instance since its last batch, written at once by `writeUsage`. */
export interface UsageBatch {
  /** Unique among batches of every instance (e.g. the instance's id and a sequence number); a retry reuses it. */
  readonly id: string;
  /** The writing instance: its reservations are lowered by what the batch debits. */
  readonly instance: string;
  /** Rows to add, their RU the debits; keys (endpoint, method, minute, status) distinct, as PendingUsage makes them. */
  readonly rows: readonly PendingRow[];
  /** Failed calls to keep in their endpoints' rings (failure-ring.ts), written only with a fresh batch. */
  readonly failures?: readonly PendingFailure[];
  /** Seconds the instance's reservations of the debited owners live after this write (config `cluster.reservation_ttl_s`). */
  readonly ttlS: number;
}

/** What an instance says of itself in its heartbeat, shown by `chaingate status` (e.g. version, host, pid). */
export type InstanceInfo = Readonly<Record<string, unknown>>;

/** One instance as `instances()` lists it. */
export interface InstanceRow {
  id: string;
  /** Its first heartbeat, ms since the epoch (the store's clock). */
  startedAt: number;
  /** Its last heartbeat, ms since the epoch (the store's clock). */
  heartbeatAt: number;
  info: InstanceInfo;
}

/** Rows `prune` deleted. */
export interface PruneResult {
  batches: number;
  instances: number;
  reservations: number;
}

/** Throws the RangeError `reserve` and `release` promise for an amount that is not a non-negative integer. */
export function checkRu(ru: number): void {
  if (!Number.isSafeInteger(ru) || ru < 0) throw new RangeError(`RU must be a non-negative integer, got ${ru}`);
}

/** Each owner's RU in `rows`, ascending by owner id (the order owners are locked in); owners at 0 RU included. */
export function debitsByOwner(rows: readonly PendingRow[]): Array<[ownerId: number, ru: number]> {
  const debits = new Map<number, number>();
  for (const r of rows) debits.set(r.ownerId, (debits.get(r.ownerId) ?? 0) + r.ru);
  return [...debits].sort((a, b) => a[0] - b[0]);
}

/**
 * The close() of both implementations: counts calls in flight, rejects calls after close, and lets
 * close wait for the ones running.
 */
export function createCallGate(): { run<T>(call: () => Promise<T>): Promise<T>; close(): Promise<void> } {
  const inFlight = new Set<Promise<unknown>>();
  let closed = false;
  return {
    run(call) {
      if (closed) return Promise.reject(new Error('the ledger store is closed'));
      const p = call();
      inFlight.add(p);
      const forget = (): void => void inFlight.delete(p);
      p.then(forget, forget);
      return p;
    },
    async close() {
      closed = true;
      await Promise.allSettled([...inFlight]);
    },
  };
}
