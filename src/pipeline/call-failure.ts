/**
 * What the owner's recent failures keep of a failed call (metering/failure-ring.ts): the error table's row
 * it was answered with, or for a node's own JSON-RPC error its code. Only fixed texts, so nothing a client
 * sent (params, the key) nor a node's message can reach the store.
 */
import { type ErrorCode, ERRORS } from '../errors.js';
import type { FailureDetail } from '../metering/ledger.js';

/** The error table's row of a failure that names none, by the HTTP status it was answered with. */
const BY_HTTP: Readonly<Record<number, ErrorCode>> = {
  413: 'body_too_large',
  429: 'rate_limited',
  502: 'upstream_error',
  503: 'upstream_budget',
};

/** A node answered a JSON-RPC error (its code is the usage status): the call failed, but the gateway did not decide it. */
export const NODE_ERROR_MESSAGE = 'The node answered this JSON-RPC error';

/**
 * A failed call's detail: `http` the status answered, `usageStatus` what the usage rows keep (a negative
 * JSON-RPC code for a node's error), `code` the error table's row when the caller knows it, `upstream` the
 * node that failed it (absent when none did).
 */
export function callFailure(http: number, usageStatus: number, code?: ErrorCode, upstream?: string): FailureDetail {
  const node = upstream ?? null;
  const error = code ?? (usageStatus < 0 ? undefined : BY_HTTP[usageStatus]);
  if (error !== undefined) {
    const row = ERRORS[error];
    return { httpStatus: http, code: row.rpc, error, message: row.message, upstream: node };
  }
  if (usageStatus < 0) return { httpStatus: http, code: usageStatus, error: null, message: NODE_ERROR_MESSAGE, upstream: node };
  return { httpStatus: http, code: null, error: null, message: `Failed with HTTP ${http}`, upstream: node };
}
