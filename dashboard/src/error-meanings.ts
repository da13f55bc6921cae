/**
 * What an error means, read from the gateway's one error table (src/errors.ts, bundled into the page): beside a
 * usage row's error status (statusMeaning) and beside each recent failure (failureMeaning), so an owner need not
 * look codes up. Codes only nodes give are the JSON-RPC standard's or the common node ones below.
 */
import { ERRORS } from '../../src/errors.js';

/** JSON-RPC codes the gateway has no row for: the standard's, and a node's own common ones (forwarded as they are). */
const NODE_CODES: Readonly<Record<number, string>> = {
  [-32700]: 'Parse error',
  [-32600]: 'Invalid request',
  [-32601]: 'Method not found',
  [-32602]: 'Invalid params',
  [-32603]: 'Internal error',
  [-32000]: 'The node refused the call (e.g. execution reverted, nonce too low, header not found)',
  [-32003]: 'The node refused the transaction',
  [-32005]: 'Limit exceeded at the node',
  [-32015]: 'The node failed to execute the call',
};

/** What a usage row's error status means: an HTTP status names the refusals answered with it, a negative
 *  JSON-RPC code those of the gateway with that code answered with HTTP 200, else the node's. */
export function statusMeaning(status: number): string {
  const rows = Object.values(ERRORS).filter((e) => (status < 0 ? e.rpc === status && e.http === 200 : e.http === status));
  const messages = [...new Set(rows.map((e) => e.message))];
  if (status < 0 && NODE_CODES[status] !== undefined && messages.length === 0) return NODE_CODES[status];
  if (messages.length === 0) return status < 0 ? 'An error the node answered' : 'An HTTP error';
  // A few of the table's rows share a status: the first three say what it covers.
  return messages.length > 3 ? `${messages.slice(0, 3).join('; ')}; …` : messages.join('; ');
}

/** `HTTP 429` or `JSON-RPC -32000`, as a usage row's status is named. */
export function statusName(status: number): string {
  return status < 0 ? `JSON-RPC ${status}` : `HTTP ${status}`;
}

/** The meaning of one failure: the error table's row by its code when given, else by its JSON-RPC code. */
export function failureMeaning(error: string | null, code: number | null, httpStatus: number): string {
  if (error !== null && Object.hasOwn(ERRORS, error)) return ERRORS[error as keyof typeof ERRORS].message;
  if (code !== null && NODE_CODES[code] !== undefined) return NODE_CODES[code];
  const row = Object.values(ERRORS).find((r) => (code === null || r.rpc === code) && r.http === httpStatus);
  return row?.message ?? (code !== null ? 'An error the node answered' : `HTTP ${httpStatus}`);
}
