/**
 * Methods that act with a node's own keys or administer the node: a shared gateway serves many
 * callers from nodes none of them owns, so these are never forwarded, and the refusal says why rather
 * than claiming the method does not exist. The JSON-RPC code stays -32601, which clients already read
 * as "not supported here" (viem's MethodNotFoundRpcError); the error table's row is `node_local_method`.
 */

const KEYS =
  'a shared gateway never holds keys: sign in the wallet or client, then send the signed transaction with eth_sendRawTransaction';
const ADMINISTRATION = 'a shared gateway never exposes node administration';

/** Exact names, then prefixes (tried in order), with why each is refused. */
const EXACT: ReadonlyMap<string, string> = new Map([
  ['eth_sendTransaction', KEYS],
  ['eth_coinbase', "the coinbase is one node's own setting and a shared gateway has none (a block's fee recipient is its 'miner' field)"],
]);

const PREFIXES: ReadonlyArray<readonly [string, string]> = [
  // eth_sign, eth_signTransaction, eth_signTypedData and its _v1, _v3, _v4.
  ['eth_sign', KEYS],
  ['personal_', KEYS],
  ['admin_', ADMINISTRATION],
  ['miner_', `${ADMINISTRATION} (miner_* sets how a node builds blocks)`],
  ['engine_', "the Engine API belongs to a node's own consensus client, behind its JWT secret, and is never served to callers"],
];

/** Why `method` is refused as node-local (without the method's name), or undefined when it is not such a method. */
export function nodeLocalReason(method: string): string | undefined {
  const exact = EXACT.get(method);
  if (exact !== undefined) return exact;
  for (const [prefix, reason] of PREFIXES) if (method.startsWith(prefix)) return reason;
  return undefined;
}
