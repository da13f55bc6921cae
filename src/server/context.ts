import type { Config } from '../config/schema.js';
import type { Logger } from '../log.js';
import type { Tenancy } from '../pipeline/tenancy.js';
import type { ChainRuntime } from '../upstreams/chain.js';

/** What every request handler shares: the frozen config, the chains' upstreams, the log and the stop state. */
export interface GatewayContext {
  readonly config: Config;
  readonly chains: ReadonlyMap<string, ChainRuntime>;
  readonly log: Logger;
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
