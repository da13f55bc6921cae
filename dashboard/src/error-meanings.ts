/**
 * What an error code means, from the gateway's one error table (src/errors.ts, bundled into the page):
 * the recent failures list shows it beside each code, so an owner need not look codes up.
 */
import { ERRORS } from '../../src/errors.js';

/** A node's own JSON-RPC errors (the gateway forwards them as they are): what the common codes say. */
const NODE_CODES: Readonly<Record<number, string>> = {
  [-32000]: 'The node refused the call (e.g. execution reverted, nonce too low, header not found)',
  [-32003]: 'The node refused the transaction',
  [-32015]: 'The node failed to execute the call',
};

/** The meaning of a failure: the error table's row by its code when given, else by its JSON-RPC code. */
export function errorMeaning(error: string | null, code: number | null, httpStatus: number): string {
  if (error !== null && Object.hasOwn(ERRORS, error)) return ERRORS[error as keyof typeof ERRORS].message;
  if (code !== null && NODE_CODES[code] !== undefined) return NODE_CODES[code];
  const row = Object.values(ERRORS).find((r) => (code === null || r.rpc === code) && r.http === httpStatus);
  return row?.message ?? (code !== null ? 'An error the node answered' : `HTTP ${httpStatus}`);
}
