import type { ChainConfig } from '../config/schema.js';
import type { FeedSource } from '../fanout/subscriptions.js';
import { createHttpUpstream, type HttpUpstream } from './http-client.js';

/** A configured chain with its live upstream clients. */
export interface ChainRuntime {
  readonly config: ChainConfig;
  readonly upstreams: readonly HttpUpstream[];
  readonly timeoutMs: number;
  /** The chain's upstream subscriptions, or null when no upstream has a ws URL. */
  readonly feeds: (FeedSource & { close(): void }) | null;
  /** The upstream for the next call: round-robin over the chain's nodes. */
  pickUpstream(): HttpUpstream;
  close(): void;
}

export interface ChainRuntimeOptions {
  /** Extra CA certificates trusted for https upstreams (tests with self-signed nodes). */
  ca?: string | Buffer;
}

export function createChainRuntime(config: ChainConfig, opts: ChainRuntimeOptions = {}): ChainRuntime {
  const upstreams = config.upstreams.map((u) =>
    createHttpUpstream({
      url: u.url,
      headers: u.headers,
      maxConnections: u.max_connections,
      pipelining: u.pipelining,
      ...(opts.ca !== undefined ? { ca: opts.ca } : {}),
    }),
  );
  let next = 0;
  return {
    config,
    upstreams,
    timeoutMs: config.timeout_s * 1000,
    feeds: null,
    pickUpstream() {
      const u = upstreams[next % upstreams.length]!;
      next = (next + 1) % upstreams.length;
      return u;
    },
    close() {
      for (const u of upstreams) u.close();
    },
  };
}
