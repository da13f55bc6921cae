import type { ChainConfig } from '../config/schema.js';
import { createFeeds, type Feeds, type FeedsLog } from '../fanout/feeds.js';
import { createHttpUpstream, type HttpUpstream } from './http-client.js';
import { callUpstream } from './rpc-call.js';
import { upstreamLabel } from './upstream-url.js';

/** A configured chain with its live upstream clients. */
export interface ChainRuntime {
  readonly config: ChainConfig;
  readonly upstreams: readonly HttpUpstream[];
  readonly timeoutMs: number;
  /** The chain's upstream subscriptions, or null when no upstream has a ws URL. */
  readonly feeds: Feeds | null;
  /** The upstream for the next call: round-robin over the chain's nodes. */
  pickUpstream(): HttpUpstream;
  close(): void;
}

export interface ChainRuntimeOptions {
  /** Extra CA certificates trusted for https upstreams (tests with self-signed nodes). */
  ca?: string | Buffer;
  /** Where the subscription feeds log (reconnects, backfills). */
  feedsLog?: FeedsLog;
  /** Seconds the chain's subscriptions survive without an upstream (config websocket.max_upstream_outage_s). */
  maxUpstreamOutageS?: number;
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
  const timeoutMs = config.timeout_s * 1000;
  const withWs = config.upstreams.flatMap((u, i) => (u.ws === undefined ? [] : [{ u, http: upstreams[i]! }]));
  const feeds = withWs.length === 0 ? null : createFeeds({
    nodes: withWs.map(({ u, http }) => ({
      wsUrl: u.ws!,
      headers: u.headers,
      label: upstreamLabel(u.ws!),
      call: (method, params) => callUpstream(http, timeoutMs, method, params),
    })),
    maxOutageMs: (opts.maxUpstreamOutageS ?? 60) * 1000,
    ...(opts.ca !== undefined ? { link: { ca: opts.ca } } : {}),
    log: (level, msg, fields) => opts.feedsLog?.(level, msg, { chain: config.slug, ...fields }),
  });
  let next = 0;
  return {
    config,
    upstreams,
    timeoutMs,
    feeds,
    pickUpstream() {
      const u = upstreams[next % upstreams.length]!;
      next = (next + 1) % upstreams.length;
      return u;
    },
    close() {
      feeds?.close();
      for (const u of upstreams) u.close();
    },
  };
}
