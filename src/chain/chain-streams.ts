/**
 * What a chain streams to its clients, made once by its runtime (runtime.ts): its upstream subscription feeds
 * (one link at a time over the nodes with a ws URL), the hub that shares them among eth_subscribe clients, and
 * a beacon chain's event streams over clients of their own.
 */
import type { ChainConfig } from '../config/schema.js';
import { DEFAULTS } from '../config/defaults.js';
import { createFeeds, type Feeds, type FeedsLog, type FeedsOptions } from '../fanout/feeds.js';
import { createSseHub, type SseHub, type SseHubOptions } from '../fanout/sse-hub.js';
import { createSubscriptionHub, type HubOptions, type SubscriptionHub } from '../fanout/subscriptions.js';
import type { ChainMetrics } from '../metrics/registry.js';
import { createHttpUpstream, type HttpUpstream } from '../upstreams/http-client.js';
import { callUpstream } from '../upstreams/rpc-call.js';
import type { ChainHealth } from '../upstreams/selection.js';
import { openSseLink } from '../upstreams/sse-link.js';
import type { ChainFinality } from './finality.js';
import type { ServedHead } from './served-head.js';
import type { TxWatch } from './tx-watch.js';

/** How notifications delivered to the chain's subscribers are priced and paid. */
export type SubscriptionMetering = Pick<HubOptions, 'ruPerMessage' | 'charge'>;

/** What the chain's streams read of its runtime options (ChainRuntimeOptions in runtime.ts says each one). */
export interface StreamOptions {
  ca?: string | Buffer;
  maxUpstreamOutageS?: number;
  replayBlocks?: number;
  logMemory?: { grace_s: number; max_filters: number; max_bytes: number };
  sse?: { heartbeat_s: number; max_buffered_bytes: number };
  subscriptionMetering?: SubscriptionMetering;
  relay?: { feedHead(index: number, head: number): void };
  replica?: {
    feeds?: Feeds | null;
    subscriptionIdPrefix?: (topicKey: string) => string;
    openEventLink?: SseHubOptions['openLink'];
  };
}

const FREE_DELIVERIES: SubscriptionMetering = { ruPerMessage: () => 0, charge: () => true };

/**
 * The chain's upstream subscriptions: the main thread's when relayed to a worker, else null when no node has a ws
 * URL. On a chain of several nodes newHeads follows `served` (a single node's head is the one served, so its
 * heads are never held). `own`: the chain's finality and its watch of sent transactions, which feeds follow too.
 */
export function openChainFeeds(
  config: ChainConfig,
  upstreams: readonly HttpUpstream[],
  health: ChainHealth,
  served: ServedHead,
  timeoutMs: number,
  log: FeedsLog,
  opts: StreamOptions,
  metrics: ChainMetrics,
  own: { finality: () => ChainFinality; txWatch: TxWatch | null },
): Feeds | null {
  if (opts.replica?.feeds !== undefined) return opts.replica.feeds;
  const withWs = config.upstreams.flatMap((u, i) => (u.ws === undefined ? [] : [{ u, index: i, http: upstreams[i]! }]));
  if (withWs.length === 0) return null;
  const isInRotation = (index: number): boolean => health.healthyIndices().includes(index);
  // The feeds hold one link at a time, so the prober's polls keep every node's head; the newHeads feed reports
  // the heads its node sends live (heard), and one that went back below what a feed remembers (followsNewChain).
  return createFeeds({
    nodes: withWs.map(({ u, http }) => ({
      wsUrl: u.ws!,
      headers: u.headers,
      label: u.name,
      call: (method, params) => callUpstream(http, timeoutMs, method, params),
    })),
    isHealthy: (node) => isInRotation(withWs[node]!.index),
    // The feed may hear a node's new chain before the node's next poll does.
    chain: {
      followsNewChain(node, head) {
        const index = withWs[node]!.index;
        opts.relay?.feedHead(index, head);
        return health.followsNewChain(index, head);
      },
      // Before the feed takes the head in: the served head counts it, so the feed never holds a head for want of
      // its own node's report (a worker's copy hears it through the relay, as a head that went back).
      heard(node, head) {
        const index = withWs[node]!.index;
        opts.relay?.feedHead(index, head);
        health.upstreams[index]!.reportHead(head);
      },
    },
    ...(config.upstreams.length > 1 ? { servedHead: served } : {}),
    finality: { finalized: () => own.finality().finalized(), safe: () => own.finality().safe() },
    ...(own.txWatch !== null ? { transactionStatus: own.txWatch.subscribe } : {}),
    // Each head checks the logs feeds against its bloom: a node's logs subscription that went quiet is made up for.
    logChecks: { backfilled: () => metrics.logBackfills.inc() },
    // What each logs feed delivered, so a resumed logs subscription retracts the logs of blocks a reorg replaced.
    ...(opts.logMemory !== undefined ? { logMemory: logMemoryOf(opts.replayBlocks, opts.logMemory) } : {}),
    maxOutageMs: (opts.maxUpstreamOutageS ?? 60) * 1000,
    ...(opts.ca !== undefined ? { link: { ca: opts.ca } } : {}),
    log,
  });
}

function logMemoryOf(replayBlocks: number | undefined, m: NonNullable<StreamOptions['logMemory']>): FeedsOptions['logMemory'] {
  const blocks = replayBlocks ?? DEFAULTS.subscriptions.replay_blocks;
  return { blocks, graceMs: m.grace_s * 1000, maxFilters: m.max_filters, maxBytes: m.max_bytes };
}

/** eth_subscribe and eth_unsubscribe over the chain's feeds, each delivery priced and paid; null without feeds. */
export function openSubscriptionHub(
  feeds: Feeds | null,
  timeoutMs: number,
  metrics: ChainMetrics,
  opts: StreamOptions,
  call: (method: string, params: unknown[]) => Promise<unknown>,
): SubscriptionHub | null {
  if (feeds === null) return null;
  const metering = opts.subscriptionMetering ?? FREE_DELIVERIES;
  return createSubscriptionHub({
    feeds,
    ruPerMessage: metering.ruPerMessage,
    charge(ownerId, endpointId, ru, deliveries) {
      if (!metering.charge(ownerId, endpointId, ru, deliveries)) return false;
      metrics.ruCharged.inc(ru);
      return true;
    },
    liveWaitMs: timeoutMs,
    metrics,
    replay: { maxBlocks: opts.replayBlocks ?? DEFAULTS.subscriptions.replay_blocks, call },
    ...(opts.replica?.subscriptionIdPrefix !== undefined ? { idPrefix: opts.replica.subscriptionIdPrefix } : {}),
  });
}

/**
 * A beacon chain's event streams (null on other chains), each going to the node `pickIndex` names when it
 * (re)connects, over that node's client in `streamClients`, made when a stream first goes to it (the caller
 * closes them).
 */
export function openEventHub(
  config: ChainConfig,
  timeoutMs: number,
  metrics: ChainMetrics,
  log: FeedsLog,
  opts: StreamOptions,
  pickIndex: () => number,
  streamClients: HttpUpstream[],
): SseHub | null {
  if (config.kind !== 'beacon') return null;
  const sse = opts.sse ?? DEFAULTS.sse;
  return createSseHub({
    // Each event written to a client, by its topic (a topic of the allowlist: low cardinality).
    onDelivered: (_client, topic) => metrics.sseEvents(topic).inc(),
    heartbeatMs: sse.heartbeat_s * 1000,
    maxBufferedBytes: sse.max_buffered_bytes,
    openTimeoutMs: timeoutMs,
    openLink:
      opts.replica?.openEventLink ??
      ((topic, onFrame, onStatus) =>
        openSseLink({
          // The node a (re)connecting stream goes to.
          upstream: () => {
            const index = pickIndex();
            const u = config.upstreams[index]!;
            return (streamClients[index] ??= createHttpUpstream({
              name: u.name,
              url: u.url,
              headers: u.headers,
              maxConnections: 64,
              pipelining: 1,
              ...(opts.ca !== undefined ? { ca: opts.ca } : {}),
            }));
          },
          topic,
          onFrame,
          onStatus,
          log: (level, msg, fields) => log(level, msg, { topic, ...fields }),
        })),
  });
}
