/**
 * The recent failures of each endpoint: failed or refused calls counted with the usage (PendingUsage.fail),
 * written with it in the same transaction, and cut to the newest `usage.failures_kept` per endpoint, so the
 * ring stays bounded however many calls fail. SQLite's half; pg-ledger-store.ts writes PostgreSQL's.
 */
import type { FailureAnswer } from '../api-answers.js';
import type { FailureDbRow, FailureParams, Statements } from '../store/statements.js';
import type { PendingFailure } from './usage-rows.js';

/** Failures kept per endpoint when the config does not say (`usage.failures_kept`). */
export const DEFAULT_FAILURES_KEPT = 100;

/** Most failures one read returns (`limit` of the API), whatever the ring's size. */
export const MAX_FAILURES_READ = 1000;

export function failureParams(f: PendingFailure): FailureParams {
  return [f.endpointId, f.ownerId, f.at, f.method, f.httpStatus, f.code, f.error, f.message, f.upstream];
}

/**
 * What a write of `failures` inserts, and the rings it then cuts to `kept` rows: the newest `kept` of each
 * endpoint, oldest first as given, and every endpoint of `failures`. The older ones would be inserted only for
 * the cut to delete them in the same transaction: a flooded endpoint would cost ~900 inserts and as many
 * deletes per write.
 */
export function newestFailures(failures: readonly PendingFailure[], kept: number): { add: PendingFailure[]; endpoints: Set<string> } {
  const seen = new Map<string, number>();
  const add: PendingFailure[] = [];
  for (let i = failures.length - 1; i >= 0; i--) {
    const f = failures[i]!;
    const n = seen.get(f.endpointId) ?? 0;
    seen.set(f.endpointId, n + 1);
    if (n < kept) add.push(f);
  }
  return { add: add.reverse(), endpoints: new Set(seen.keys()) };
}

/** Adds `failures` and cuts each ring they touched to `kept` rows; call inside the usage write's transaction. */
export function writeFailures(sql: Statements['ledger'], failures: readonly PendingFailure[], kept: number): void {
  if (failures.length === 0) return;
  const { add, endpoints } = newestFailures(failures, kept);
  for (const f of add) sql.addFailure.run(...failureParams(f));
  for (const id of endpoints) sql.trimFailures.run(id, id, kept);
}

/** A stored failure as the API answers it. */
export function failureAnswer(row: FailureDbRow): FailureAnswer {
  return {
    time: Math.floor(row.at / 1000),
    method: row.method,
    http_status: row.httpStatus,
    code: row.code,
    error: row.error,
    message: row.message,
    upstream: row.upstream,
  };
}

/** One endpoint's failures, newest first, at most `limit`; empty for another owner's endpoint. */
export function readFailures(sql: Statements, ownerId: number, endpointId: string, limit: number): FailureAnswer[] {
  return sql.directory.failures.all(endpointId, ownerId, limit).map(failureAnswer);
}
