/**
 * What each `auto` node of a chain was found to serve (capabilities.ts), as the runtime keeps it and as logs,
 * /healthz and `chaingate status` tell it: `archive: true (auto)`, `methods: auto (not debug_*)`.
 */
import type { ChainConfig, UpstreamConfig } from '../config/schema.js';
import type { HttpUpstream } from '../upstreams/http-client.js';
import { callUpstream } from '../upstreams/rpc-call.js';
import { type Found, watchCapabilities } from './capabilities.js';
import type { ChainRuntimeOptions } from './runtime-options.js';

/** By node index; a hole until the node's first finding. */
export type NodeFindings = Array<Found | undefined>;

/** A finding as log fields. */
export function foundText(found: Found): Record<string, string> {
  const out: Record<string, string> = {};
  if (found.archive !== undefined) out.archive = String(found.archive);
  if (found.deny !== undefined) out.not_served = found.deny.length === 0 ? 'none' : found.deny.join(' ');
  return out;
}

/** A node's `archive` and `methods` as healthz shows them: configured, or found out (auto). */
export function capabilityReport(u: UpstreamConfig, found: Found | undefined): { archive: string; methods: string } {
  const archive = u.archive_auto ? `${found?.archive === undefined ? 'unknown' : String(found.archive)} (auto)` : String(u.archive);
  const deny = u.methods_auto ? found?.deny : u.methods.deny;
  const denied = deny === undefined ? 'unknown' : deny.length === 0 ? 'all' : `all but ${deny.join(' ')}`;
  return { archive, methods: u.methods_auto ? `${denied} (auto)` : denied };
}

/** capabilityReport for a node whose config leaves something to `auto`; undefined for the others (nothing to show). */
export function autoCapabilities(
  u: UpstreamConfig | undefined,
  found: Found | undefined,
): { archive: string; methods: string } | undefined {
  return u !== undefined && (u.archive_auto || u.methods_auto) ? capabilityReport(u, found) : undefined;
}

/** Starts asking the chain's `auto` nodes what they serve (the main thread's or a lone thread's runtime): each
 *  change goes to `onFound`, the log and the worker threads (the relay); returns the stop. */
export function findCapabilities(
  config: ChainConfig,
  upstreams: readonly HttpUpstream[],
  timeoutMs: number,
  head: () => number | null,
  onFound: (index: number, found: Found) => void,
  tell: Pick<ChainRuntimeOptions, 'log' | 'relay'>,
): () => void {
  return watchCapabilities({
    nodes: config.upstreams,
    call: (i, method, params) => callUpstream(upstreams[i]!, timeoutMs, method, params),
    head,
    stateHistoryBlocks: config.kind === 'evm' ? config.state_history_blocks : 0,
    onFound(i, found) {
      const name = config.upstreams[i]!.name;
      onFound(i, found);
      tell.log?.info('upstream capability found', { chain: config.slug, upstream: name, ...foundText(found) });
      tell.relay?.found?.(name, found);
    },
  });
}
