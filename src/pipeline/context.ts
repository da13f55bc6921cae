import type { Config } from '../config/schema.js';
import type { Logger } from '../log.js';
import type { RepeatedLog } from '../repeated-log.js';
import { createInFlight, type Shared } from './dedup.js';
import type { ChainFilters } from './filter-calls.js';
import { createResponseCache, type ResponseCache } from './response-cache.js';
import type { Flight, SharedOutcome } from './shared-call.js';
import type { Tenancy } from './tenancy.js';
import type { ChainRuntime } from '../chain/runtime.js';

/** What every request handler shares: the frozen config, the chains' upstreams, the log and the stop state. */
export interface GatewayContext {
  readonly config: Config;
  readonly chains: ReadonlyMap<string, ChainRuntime>;
  readonly log: Logger;
  /** Failed upstream calls, logged when a node starts failing, then summarised, then when it stops. */
  readonly upstreamFailures: RepeatedLog;
  readonly tenancy: Tenancy;
  readonly corsOrigin: (origin: string) => string | undefined;
  /** Requests accepted and not yet answered; graceful stop waits for it to reach zero. */
  inFlight: number;
  /** Set once a stop has begun: answers then close their connections. */
  stopping: boolean;
  /** Called whenever inFlight drops, so a stop can notice the last answer. */
  onIdle: (() => void) | null;
}

export function requestDone(ctx: GatewayContext): void {
  ctx.inFlight--;
  if (ctx.inFlight === 0 && ctx.onIdle) ctx.onIdle();
}

/**
 * What the gateway shares between requests beyond the context: the response cache, the table of
 * calls in flight (answers shared by identical concurrent reads) and each chain's filters. Made on
 * first use, so the server that builds the context needs to know nothing of them.
 */
export interface GatewayState {
  readonly cache: ResponseCache;
  readonly inFlight: Shared<SharedOutcome, Flight>;
  /** Each chain's gateway-owned filters, made by filter-calls.ts on the first filter call. */
  readonly filters: Map<ChainRuntime, ChainFilters>;
}

const states = new WeakMap<GatewayContext, GatewayState>();

export function gatewayState(ctx: GatewayContext): GatewayState {
  let state = states.get(ctx);
  if (state === undefined) {
    state = {
      cache: createResponseCache(ctx.config.cache.max_bytes),
      inFlight: createInFlight<SharedOutcome, Flight>((err, key) =>
        ctx.log.error("a shared answer's delivery failed", { key, error: String(err) }),
      ),
      filters: new Map(),
    };
    states.set(ctx, state);
  }
  return state;
}

/** Drops every filter and stops their head subscriptions and polls (at a stop, before the chains close). */
export function releaseGatewayState(ctx: GatewayContext): void {
  const state = states.get(ctx);
  if (state === undefined) return;
  for (const f of state.filters.values()) f.close();
  state.filters.clear();
}
