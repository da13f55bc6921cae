import type { Config } from '../config/schema.js';
import type { ConnectionCap } from '../limits/connection-cap.js';
import type { Logger } from '../log.js';
import type { Metrics } from '../metrics/registry.js';
import type { RepeatedLog } from '../repeated-log.js';
import type { Tenancy } from './tenancy.js';
import type { ChainRuntime } from '../chain/runtime.js';

/**
 * What every request handler shares: the frozen config, the chains, the log and the stop state. What is
 * kept about one chain (its head, cached answers, calls in flight, filters, subscriptions) is the chain's own
 * (ChainRuntime): nothing here is keyed by a chain.
 */
export interface GatewayContext {
  /** The config in force: a reload replaces it (requests read it when they start). */
  config: Config;
  readonly chains: ReadonlyMap<string, ChainRuntime>;
  readonly log: Logger;
  /** Failed upstream calls, logged when a node starts failing, then summarised, then when it stops. */
  readonly upstreamFailures: RepeatedLog;
  /** 5xx answers the gateway decided, logged as conditions too (one line when they start, then summaries). */
  readonly failedAnswers: RepeatedLog;
  /** The process's cap on client connections: WebSockets and event streams hold a place while open. */
  readonly connections: ConnectionCap;
  readonly tenancy: Tenancy;
  /** Where every measurement goes (GET /metrics on the metrics listener). */
  readonly metrics: Metrics;
  corsOrigin: (origin: string) => string | undefined;
  /** Requests accepted and not yet answered; graceful stop waits for it to reach zero. */
  inFlight: number;
  /** Set once a stop has begun: answers then close their connections. */
  stopping: boolean;
  /** Wall-clock time in ms since the epoch, for a rotated key's end (tests drive a fake clock). */
  readonly now: () => number;
  /** Called whenever inFlight drops, so a stop can notice the last answer. */
  onIdle: (() => void) | null;
}

export function requestDone(ctx: GatewayContext): void {
  ctx.inFlight--;
  if (ctx.inFlight === 0 && ctx.onIdle) ctx.onIdle();
}
