/**
 * The requests of a forwarded-call load: eth_getBalance of distinct addresses in turn, at least twice as
 * many as connections. One request repeated would not measure forwarding: chaingate answers
 * eth_blockNumber from the heads it polls, and shares identical reads in flight, so most of them would
 * never reach the upstream.
 */
export function forwardedBodies(connections) {
  return Array.from({ length: Math.max(128, 2 * connections) }, (_, i) =>
    JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_getBalance', params: [`0x${(i + 1).toString(16).padStart(40, '0')}`, 'latest'] }),
  );
}
