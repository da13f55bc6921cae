/**
 * Reads which chain a node serves, for the chain's identity check (chain/chain-identity.ts): an execution
 * node's chain id (eth_chainId, as a decimal string), a beacon node's genesis (GET /eth/v1/beacon/genesis:
 * its validators root, fork version and time, which name one network and never change on it).
 *
 * A node that answers without telling (an error object, a field missing: a node or proxy that does not serve
 * the call) resolves null, which is no verdict: only a node that names another chain leaves rotation. A node
 * that cannot be reached, or whose answer carries another call's id, rejects, as a head probe does.
 */
import { fetchSmallJson, probeRpc } from './head-probe.js';
import type { HttpUpstream } from './http-client.js';

/** What a node says it serves, or null when it does not say; rejects when it cannot be asked. */
export type ReadIdentity = (upstream: HttpUpstream, timeoutMs: number, signal: AbortSignal) => Promise<string | null>;

const QUANTITY = /^0x[0-9a-f]{1,16}$/i;
const HEX = /^0x[0-9a-f]{1,64}$/i;
const DECIMAL = /^[0-9]{1,20}$/;

/** eth_chainId, as a decimal string ("31337"). */
export const readEvmIdentity: ReadIdentity = async (upstream, timeoutMs, signal) => {
  const result = await probeRpc(upstream, 'eth_chainId', timeoutMs, signal);
  return typeof result === 'string' && QUANTITY.test(result) ? BigInt(result).toString() : null;
};

/** The genesis as "<validators root> <fork version> <time>", lower case. */
export const readBeaconIdentity: ReadIdentity = async (upstream, timeoutMs, signal) => {
  const answer = await fetchSmallJson(
    upstream,
    { method: 'GET', path: '/eth/v1/beacon/genesis', headers: [['accept', 'application/json']], timeoutMs, exclusive: true },
    signal,
  );
  const data = (answer as { data?: Record<string, unknown> } | null)?.data;
  const root = data?.genesis_validators_root;
  const fork = data?.genesis_fork_version;
  const time = data?.genesis_time;
  if (typeof root !== 'string' || !HEX.test(root) || typeof fork !== 'string' || !HEX.test(fork)) return null;
  if (typeof time !== 'string' || !DECIMAL.test(time)) return null;
  return `${root.toLowerCase()} ${fork.toLowerCase()} ${time}`;
};
