/**
 * What a chain's runtime (runtime.ts) is made with: the gateway's shared parts it reads and writes (the response
 * cache, the metrics, the write mark and served heads every thread shares), its bounds, and in a worker thread
 * the main thread's copy it follows.
 */
import type { FeedsLog, Feeds } from '../fanout/feeds.js';
import type { SseHubOptions } from '../fanout/sse-hub.js';
import type { Logger } from '../log.js';
import type { ChainMetrics } from '../metrics/registry.js';
import type { ProbeObserver, ProberOptions } from '../upstreams/prober.js';
import type { ChainHealth } from '../upstreams/selection.js';
import type { SubscriptionMetering } from './chain-streams.js';
import type { Found } from './capabilities.js';
import type { Cordons } from './cordons.js';
import type { ChainFilters } from './filters.js';
import type { FinalityReading, PolledFinality } from './finality.js';
import type { BeaconChain } from './finality-reads.js';
import type { ResponseCache } from './response-cache.js';
import type { HeadCell } from './shared-heads.js';
import type { WriteMark } from './write-mark.js';

export interface ChainRuntimeOptions {
  /** Extra CA certificates trusted for https upstreams (tests with self-signed nodes). */
  ca?: string | Buffer;
  /** Where the chain logs its subscription feeds (reconnects, backfills) and its heads going back. */
  feedsLog?: FeedsLog;
  /** Seconds the chain's subscriptions survive without an upstream (config websocket.max_upstream_outage_s). */
  maxUpstreamOutageS?: number;
  /** Blocks below the head a subscription's resume point may reach (config subscriptions.replay_blocks, default 128). */
  replayBlocks?: number;
  /** The memory of delivered logs a logs resume retracts from (config subscriptions.retract_*); without it, none. */
  logMemory?: { grace_s: number; max_filters: number; max_bytes: number };
  /** Overrides the prober's intervals (PROBER_DEFAULTS). */
  prober?: ProberOptions;
  /** The event streams' heartbeat and slow-client limit (config sse.heartbeat_s, sse.max_buffered_bytes). */
  sse?: { heartbeat_s: number; max_buffered_bytes: number };
  /** Where a failure to deliver a shared answer is logged (a bug in a caller); without it, it is thrown. */
  log?: Logger;
  /**
   * The gateway's one response cache, shared by every chain (config cache.max_bytes is one budget for the
   * gateway): the chain reads and writes it through its own view (`cache`). Without it, nothing is cached.
   */
  responseCache?: ResponseCache;
  /** The filters' bounds: config filters (DEFAULTS.filters when absent). */
  filters?: { max_per_key: number; idle_timeout_s: number };
  /** The watch of sent transactions' bounds: config transactions (DEFAULTS.transactions when absent). */
  transactions?: { watch_blocks: number; max_watched: number; max_watched_per_key: number };
  /** True once the gateway is stopping: the filters' block poll stops then, before close() drops them. */
  stopping?: () => boolean;
  /** Prices and pays notifications to subscribers (the gateway's RU and ledger); without it they are free. */
  subscriptionMetering?: SubscriptionMetering;
  /** The chain's metrics (Metrics.chain(slug)); without them nothing is measured. */
  metrics?: ChainMetrics;
  /** Told of each probe, each head a feed hears and each identity verdict (on the main thread of a gateway
   *  with worker threads). */
  relay?: {
    probes: ProbeObserver;
    feedHead(index: number, head: number): void;
    wrongChain(index: number, wrong: boolean): void;
    /** The chain's safe and finalized blocks changed (finality.ts). */
    finality?(held: FinalityReading): void;
    /** What node `node` serves was found out anew (capabilities.ts). */
    found?(node: string, found: Found): void;
  };
  /** The nodes the operator cordoned, kept by the gateway thread across reloads: the chain's are out of rotation. */
  cordons?: Cordons;
  /** Overrides how often a node in rotation has its chain checked again (chain-identity.ts RECHECK_MS). */
  identityRecheckMs?: number;
  /** How many threads share each upstream's max_connections (each worker's pool gets its part); default 1. */
  poolShare?: number;
  /** When a transaction last went through, shared by every thread (chain/write-mark.ts); one of its own otherwise. */
  writes?: WriteMark;
  /** The chain's served head as every thread of the process reads it (chain/shared-heads.ts); without it, the
   *  thread's own. */
  servedHeadCell?: HeadCell | null;
  /** In a worker thread: what the main thread's runtime of the chain keeps for the whole process. */
  replica?: ChainReplica;
  /** The thread's runtime of the beacon chain config chains.<slug>.beacon names, looked up at each finality reading
   *  (a reload may make it anew; null while there is none); without it, finality is the nodes' own. */
  beacon?: () => BeaconChain | null;
}

/**
 * A worker thread's copy of a chain takes from the main thread what must exist once per process: the probes
 * of its nodes, its filters, and (when given) its upstream subscriptions and event streams. It keeps its own
 * upstream clients, health (the main prober's reports plus its own calls' outcomes), cache and calls in flight.
 */
export interface ChainReplica {
  /** Has the chain's health hear the main thread's probes (instead of probing itself), and its finality the main
   *  thread's safe and finalized blocks (instead of reading them); returns the undo. */
  follow(health: ChainHealth, finality: Pick<PolledFinality, 'hear'>, found?: (node: string, found: Found) => void): () => void;
  filters: ChainFilters;
  /** The main thread's upstream subscriptions, relayed. */
  feeds?: Feeds | null;
  /** The first 24 hex digits of a subscription topic's ids, the same in every worker (HubOptions.idPrefix). */
  subscriptionIdPrefix?: (topicKey: string) => string;
  /** Opens a topic's event stream through the main thread's one upstream stream of it. */
  openEventLink?: SseHubOptions['openLink'];
}
