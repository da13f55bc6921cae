import { ERRORS } from '../../src/errors.js';

/**
 * What a usage row's error status means (issue 36 §6), read from the gateway's one error table
 * (src/errors.ts): an HTTP status names the refusals answered with it, a negative JSON-RPC code those of the
 * gateway with that code; codes only nodes give are the JSON-RPC standard's.
 */
const STANDARD: Readonly<Record<number, string>> = {
  [-32700]: 'Parse error',
  [-32600]: 'Invalid request',
  [-32601]: 'Method not found',
  [-32602]: 'Invalid params',
  [-32603]: 'Internal error',
  [-32000]: "A node's error (often: execution reverted, or a state it does not have)",
  [-32005]: 'Limit exceeded at the node',
  [-32015]: 'Execution reverted',
};

export function errorMeaning(status: number): string {
  // A negative status is the code of an error answered with HTTP 200 (the table's routing errors share codes).
  const rows = Object.values(ERRORS).filter((e) => (status < 0 ? e.rpc === status && e.http === 200 : e.http === status));
  const messages = [...new Set(rows.map((e) => e.message))];
  if (status < 0 && STANDARD[status] !== undefined && messages.length === 0) return STANDARD[status];
  if (messages.length === 0) return status < 0 ? 'An error the node answered' : 'An HTTP error';
  // A few of the table's rows share a status: the first three say what it covers.
  return messages.length > 3 ? `${messages.slice(0, 3).join('; ')}; …` : messages.join('; ');
}

/** `HTTP 429` or `JSON-RPC -32000`, as a usage row's status is named. */
export function statusName(status: number): string {
  return status < 0 ? `JSON-RPC ${status}` : `HTTP ${status}`;
}
