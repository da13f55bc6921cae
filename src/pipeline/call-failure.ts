/**
 * What the owner's recent failures keep of a failed call (metering/failure-ring.ts): the error table's row
 * it was answered with, or for a node's own JSON-RPC error its code. Only fixed texts, so nothing a client
 * sent (params, the key) nor a node's message can reach the store.
 */
import { type ErrorCode, ERRORS } from '../errors.js';
import type { FailureDetail } from '../metering/ledger.js';

/** A node answered a JSON-RPC error (its code is the usage status): the call failed, but the gateway did not decide it. */
export const NODE_ERROR_MESSAGE = 'The node answered this JSON-RPC error';

/**
 * A failed call's detail: `http` the status answered, `usageStatus` what the usage rows keep (a negative
 * JSON-RPC code for a node's error), `code` the error table's row the client was answered with, null when its
 * answer is none of the table's (a node's own JSON-RPC error or HTTP status, or a node-like -32000 refusal),
 * `upstream` the node that failed it (absent when none did).
 */
export function callFailure(http: number, usageStatus: number, code: ErrorCode | null, upstream?: string): FailureDetail {
  const node = upstream ?? null;
  if (code !== null) {
    const row = ERRORS[code];
    return { httpStatus: http, code: row.rpc, error: code, message: row.message, upstream: node };
  }
  if (usageStatus < 0) return { httpStatus: http, code: usageStatus, error: null, message: NODE_ERROR_MESSAGE, upstream: node };
  return { httpStatus: http, code: null, error: null, message: `Failed with HTTP ${http}`, upstream: node };
}
