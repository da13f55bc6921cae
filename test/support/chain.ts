/**
 * A chain runtime for the chain's unit tests, made as the gateway makes one but without a listener: its
 * health checks are not started, so every upstream stays in rotation and no head is known until a test
 * reports one. Closed at teardown.
 */
import type { Test } from 'tap';
import { validateConfig } from '../../src/config/schema.js';
import { type ChainRuntime, type ChainRuntimeOptions, createChainRuntime } from '../../src/chain/runtime.js';

/** A chain `slug` (timeout 2 s) over `urls`. */
export function chainOver(t: Test, urls: string[], opts: ChainRuntimeOptions = {}, slug = 'devnet'): ChainRuntime {
  const r = validateConfig({
    storage: { path: '/tmp/unused.db' },
    chains: { [slug]: { chain_id: 31337, timeout_s: 2, upstreams: urls.map((url) => ({ url })) } },
  });
  if (!r.ok) throw new Error(r.errors.join('\n'));
  const chain = createChainRuntime(r.config.chains[slug]!, opts);
  t.teardown(() => chain.close());
  return chain;
}

export const tick = (ms = 0): Promise<void> => new Promise((r) => setTimeout(r, ms));
