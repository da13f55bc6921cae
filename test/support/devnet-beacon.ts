/** The devnet's Beacon stack for end-to-end tests: anvil, the devnet's beacon node following it, and a gateway in front of both. */
import type { Test } from 'tap';
import type { AnvilNode } from '../../src/devnet/anvil.js';
import { startBeaconNode, type BeaconNode } from '../../src/devnet/beacon/beacon-node.js';
import { anvilFor, evmChain, gatewayFor, type TestGateway } from './gateway.js';

/**
 * anvil (no block time, so the head stays put until a test mines), the beacon node after it and a
 * gateway serving them as `devnet` and `devnet-beacon`; `extra` is merged into the gateway's config.
 * Everything stops at teardown.
 */
export async function devnetBeacon(
  t: Test,
  extra: Record<string, unknown> = {},
): Promise<{ anvil: AnvilNode; node: BeaconNode; g: TestGateway }> {
  const anvil = await anvilFor(t);
  const node = await startBeaconNode({ executionUrl: anvil.url, pollMs: 50 });
  t.teardown(() => node.stop());
  const g = await gatewayFor(t, {
    server: { default_chain: 'devnet' },
    chains: { devnet: evmChain([anvil.url]), 'devnet-beacon': { kind: 'beacon', upstreams: [{ url: node.url }] } },
    ...extra,
  });
  return { anvil, node, g };
}
