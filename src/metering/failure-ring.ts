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

/** The endpoints of `failures`, each once: the rings to cut after adding them. */
export function failedEndpoints(failures: readonly PendingFailure[]): Set<string> {
  const ids = new Set<string>();
  for (const f of failures) ids.add(f.endpointId);
  return ids;
}

/** Adds `failures` and cuts each ring they touched to `kept` rows; call inside the usage write's transaction. */
export function writeFailures(sql: Statements['ledger'], failures: readonly PendingFailure[], kept: number): void {
  if (failures.length === 0) return;
  for (const f of failures) sql.addFailure.run(...failureParams(f));
  for (const id of failedEndpoints(failures)) sql.trimFailures.run(id, id, kept);
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
