/**
 * A chain's nodes as its runtime (runtime.ts) makes them: a client for each configured upstream, and the health
 * that decides their rotation, each change of which is logged once per process.
 */
import type { ChainConfig, UpstreamConfig } from '../config/schema.js';
import type { FeedsLog } from '../fanout/feeds.js';
import type { Logger } from '../log.js';
import type { ChainMetrics } from '../metrics/registry.js';
import { createHttpUpstream, type HttpUpstream } from '../upstreams/http-client.js';
import type { BudgetLimits } from '../upstreams/node-budget.js';
import { type BreakerPolicy, BUILT_IN_BREAKER } from '../upstreams/health.js';
import { type ChainHealth, createChainHealth } from '../upstreams/selection.js';

/** What the chain's nodes read of its runtime options (ChainRuntimeOptions in runtime.ts says each one). */
export interface NodeOptions {
  ca?: string | Buffer;
  poolShare?: number;
  log?: Logger;
  /** Set in a worker thread, whose copy of the chain logs nothing of rotation (the main thread does). */
  replica?: unknown;
}

/**
 * The chain's upstream clients, one per configured node, each with the thread's share of its connections;
 * `sendAgain(index, stillOnItsSocket)` is node `index`'s UpstreamOptions.sendAgain (ChainHealth.chargeAgain, once
 * the health is made).
 */
export function upstreamClients(
  config: ChainConfig,
  opts: NodeOptions,
  sendAgain: (index: number, stillOnItsSocket: boolean) => boolean,
): HttpUpstream[] {
  return config.upstreams.map((u, index) =>
    createHttpUpstream({
      name: u.name,
      url: u.url,
      headers: u.headers,
      // With worker threads each worker has its own pool: max_connections is the process's, shared out.
      maxConnections: Math.max(1, Math.floor(u.max_connections / (opts.poolShare ?? 1))),
      pipelining: u.pipelining,
      // A node that drips its answer a byte at a time holds a call no longer than this (the event-stream
      // pools, chain-streams.ts, have none: a stream never ends).
      answerTimeoutMs: config.answer_timeout_s * 1000,
      // A second write of a request is one more call to a provider counting them: within the node's budget.
      sendAgain: (stillOnItsSocket) => sendAgain(index, stillOnItsSocket),
      ...(opts.ca !== undefined ? { ca: opts.ca } : {}),
    }),
  );
}

/** The nodes' breaker from config chains.<slug>.failover.breaker (each default the built-in one). */
export function breakerOf(config: Pick<ChainConfig, 'failover'>): BreakerPolicy {
  const b = config.failover?.breaker;
  if (b === undefined) return BUILT_IN_BREAKER;
  return {
    failureStreak: b.failure_streak,
    failureRate: b.failure_rate,
    minCalls: b.min_calls,
    windowMs: b.window_s * 1000,
    openMs: b.open_s === undefined ? null : b.open_s * 1000,
    halfOpenProbes: b.half_open_probes,
  };
}

/**
 * The chain's health over `upstreams`, its rotation changes logged; `finalUndone` runs when the chain's best
 * head went back below its final blocks (the runtime then stops serving answers cached before), which is logged
 * after it; `onHeads` after every head report and rotation change (the served head is worked out there).
 */
export function watchNodeHealth(
  config: ChainConfig,
  upstreams: readonly HttpUpstream[],
  metrics: ChainMetrics,
  log: FeedsLog,
  opts: NodeOptions,
  finalUndone: () => void,
  onHeads: () => void,
): ChainHealth {
  return createChainHealth(
    upstreams.map((u) => u.label),
    {
      maxLagBlocks: config.max_lag_blocks,
      breaker: breakerOf(config),
      log,
      names: config.upstreams.map((u) => u.name),
      metrics,
      onRotation(name, inRotation, reason) {
        // A worker's copy hears the same probes as the main thread's, which logs each change once.
        if (opts.replica !== undefined) return;
        const fields = { chain: config.slug, upstream: name, reason };
        if (inRotation) opts.log?.info('upstream back in rotation', fields);
        else opts.log?.warn('upstream out of rotation', fields);
      },
      finalityDepth: config.finality_depth,
      onFinalUndone(from, to) {
        finalUndone();
        if (opts.replica === undefined)
          log('warn', `chain head went back from ${from} to ${to}, below its final blocks: answers cached before are no longer served`, {
            from,
            to,
          });
      },
      onHeads,
      tiers: config.upstreams.map((u) => u.tier),
      budgets: config.upstreams.map((u) => budgetShare(u, opts.poolShare ?? 1)),
      onCooldown(name, ms) {
        // The thread whose call got the 429 says so, once per cooldown; the other workers hear of it (relay.ts).
        opts.log?.warn('upstream answered 429: no call goes to it until its cooldown ends', {
          chain: config.slug,
          upstream: name,
          cooldown_ms: Math.round(ms),
        });
      },
    },
  );
}

/**
 * This thread's share of a node's budget: with worker threads each worker has its own selection, so `rps` and
 * `max_in_flight` are the process's, shared out as max_connections is (at least 1 each: a limit below the number
 * of workers is then exceeded, which docs/failover.md says).
 */
export function budgetShare(u: UpstreamConfig, share: number): BudgetLimits {
  const part = (limit: number | undefined): number | null => (limit === undefined ? null : Math.max(1, Math.floor(limit / share)));
  return { rps: part(u.rps), maxInFlight: part(u.max_in_flight) };
}
