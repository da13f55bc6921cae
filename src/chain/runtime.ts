/**
 * A configured chain's runtime, made once at start from config and stopped once by close(): it owns
 * everything the gateway keeps about the chain (its nodes and their rotation, health and head; its view of
 * the response cache and its calls in flight; its filters; its subscription feeds and hub), so nothing
 * elsewhere is keyed by a chain.
 */
import type { ChainConfig } from '../config/schema.js';
import { Attempts, failureOutcome, NodeAttempt, RETRY_ONCE } from './attempts.js';
import { type ChainMetrics, noMetrics } from '../metrics/registry.js';
import { DEFAULTS } from '../config/defaults.js';
import { createFeeds, type Feeds, type FeedsLog } from '../fanout/feeds.js';
import { createSseHub, type SseHub, type SseHubOptions } from '../fanout/sse-hub.js';
import { createSubscriptionHub, type HubOptions, type SubscriptionHub } from '../fanout/subscriptions.js';
import type { Logger } from '../log.js';
import { readBeaconHead, readEvmHead } from '../upstreams/head-probe.js';
import { readBeaconIdentity, readEvmIdentity } from '../upstreams/identity-probe.js';
import { type ChainIdentity, createChainIdentity } from './chain-identity.js';
import { createHttpUpstream, type HttpUpstream } from '../upstreams/http-client.js';
import { type ProbeObserver, startProber, type Prober, type ProberOptions } from '../upstreams/prober.js';
import { openSseLink } from '../upstreams/sse-link.js';
import { callUpstream, NodeRpcError } from '../upstreams/rpc-call.js';
import { type ChainHealth, createChainHealth } from '../upstreams/selection.js';
import { createInFlight, type Shared, type SharedFlight, type SharedOutcome } from './dedup.js';
import { type ChainFilters, createChainFilters } from './filters.js';
import { type ChainHead, createChainHead } from './head.js';
import { createWriteMark, type WriteMark } from './write-mark.js';
import { type ChainMethodPolicy, createChainMethodPolicy } from './method-policy.js';
import { createNodeRoutes, type NodeRoutes } from './node-routes.js';
import { type ChainCache, chainCacheView, createResponseCache, type ResponseCache } from './response-cache.js';

/**
 * How the chain's prober runs (see prober.ts): heads of nodes in rotation are polled every second, so lag is
 * judged on heads about a second old, and a node that stops answering while no call reaches it is out after
 * three refused polls (about 3 s) or one poll given up on (within 3.5 s when it hangs: a poll starts within
 * 1 s, is suspected 1 s later and given up 2.5 s after it started); nodes out of rotation are probed every
 * 1.5 s, so one that recovers is back within 1.5 s plus its answer (2.5 + 1.5 s when a probe of it was
 * hanging). The prober keeps two probes of a node intervalMs / 2 apart, which must stay under headIntervalMs
 * or timer jitter skips polls.
 */
const PROBER_DEFAULTS: Required<Omit<ProberOptions, 'timers' | 'observer'>> = {
  intervalMs: 1_500,
  headIntervalMs: 1_000,
  probeTimeoutMs: 2_500,
};

/**
 * A probe's own request timeout sits this far past the prober's deadline, in ms, so the prober gives a hanging
 * probe up first and counts it as a hang. With the two equal the request's timeout won, the hang counted as an
 * ordinary failure, and three were needed: a hanging node stayed in rotation about 9 s.
 */
const PROBE_REQUEST_SLACK_MS = 1_000;

/**
 * eth_blockNumber is answered from the heads the gateway knows when the best one was reported this recently,
 * in ms: a little over the head poll interval, so a chain polled on time is always fresh and one whose polls
 * stall is asked instead.
 */
export const HEAD_FRESH_MS = 1_500;

/**
 * After a transaction goes through the gateway, heads reported within this many ms are not used either, in
 * ms: an automining node (a devnet) mines the block just after answering, so a head read in that moment may
 * already be behind the receipt a client reads next.
 */
export const WRITE_SETTLE_MS = 500;

/** An upstream chosen for a call: its index in the chain's upstreams and health, and its client. */
export interface PickedUpstream {
  index: number;
  upstream: HttpUpstream;
}

/** A configured chain with its live upstream clients and everything kept about it. */
export interface ChainRuntime {
  readonly config: ChainConfig;
  readonly upstreams: readonly HttpUpstream[];
  readonly timeoutMs: number;
  /** The chain's upstream subscriptions, or null when no upstream has a ws URL. */
  readonly feeds: Feeds | null;
  /**
   * The chain's name in the response cache: its slug, and once its best head has gone back more than
   * finality_depth (a reset: blocks once final are gone) the slug with a count of such events ('#' is not in a
   * slug), so answers cached about the old chain are never served for the new one; the LRU evicts them.
   */
  readonly cacheScope: string;
  /**
   * A beacon chain's event streams (null on other chains): one upstream stream per topic shared by every
   * client. The streams go over clients of their own, one per node made when a stream first goes to it, so a
   * stream that never ends does not hold a socket of the pool that serves calls.
   */
  readonly events: SseHub | null;
  /** Each upstream's head, errors and latency (indices match `upstreams`); decides which are in rotation. */
  readonly health: ChainHealth;
  /** The chain's head as the pipeline reads it (the tracker's, the feed's, else a poll of its own). */
  readonly head: ChainHead;
  /** The chain's view of the gateway's response cache (ChainRuntimeOptions.responseCache). */
  readonly cache: ChainCache;
  /** Identical reads on this chain in flight at the same time, sharing one upstream call (pipeline/shared-call.ts). */
  readonly inFlight: Shared<SharedOutcome, SharedFlight>;
  /** The gateway's polling filters on this chain; close() drops them. */
  readonly filters: ChainFilters;
  /** eth_subscribe and eth_unsubscribe over the chain's feeds, or null when no upstream has a ws URL. */
  readonly subscriptions: SubscriptionHub | null;
  /** Where everything about the chain is measured (ChainRuntimeOptions.metrics). */
  readonly metrics: ChainMetrics;
  /** The methods the chain serves and its own RU prices (config chains.<slug>.methods and .ru). */
  readonly policy: ChainMethodPolicy;
  /** The nodes that may take each call: those serving its method, archive nodes first for old state. */
  readonly routes: NodeRoutes;
  /** The upstream for the next call among those in rotation, never one in `exclude`; null when there is none
   *  (the caller answers 502 at once). */
  pickHealthy(exclude?: ReadonlySet<number>): PickedUpstream | null;
  /**
   * For callers that must send somewhere (the head tracker; the event streams use the same choice): the choice of pickHealthy, or, when no
   * upstream is in rotation, the next one round-robin, which then fails fast or recovers.
   */
  pickUpstream(): HttpUpstream;
  /** The best head of the nodes in rotation when it was reported within HEAD_FRESH_MS and more than
   *  WRITE_SETTLE_MS after the last write noted with noteWrite(); else null (eth_blockNumber is then asked). */
  freshHead(): number | null;
  /** A transaction went through the gateway: heads reported before it settled may miss the block it lands
   *  in, so freshHead() waits for a later report. */
  noteWrite(): void;
  /**
   * One JSON-RPC read the gateway makes for itself (e.g. eth_getLogs for its filters) on an upstream in
   * rotation that serves it (routes), moved once to another (RETRY_ONCE, chain/attempts.ts) when the node
   * cannot be reached or does not answer (so never a write: it may reach two nodes): resolves with `result`,
   * rejects with a NodeRpcError for the node's error object, or an Error when no node answered or none is in
   * rotation ('no healthy upstream').
   */
  call(method: string, params: unknown[], signal?: AbortSignal): Promise<unknown>;
  /** Which chain each node serves (nodes on another are out of rotation); judged on the main thread only. */
  readonly identity: ChainIdentity;
  /** Starts probing the chain's nodes (the gateway does it once it listens); close() stops it. */
  startHealthChecks(): void;
  /** Drops the chain's filters, stops its probes and feeds and closes its upstream clients (once, at the stop). */
  close(): void;
}

/** How notifications delivered to the chain's subscribers are priced and paid. */
export type SubscriptionMetering = Pick<HubOptions, 'ruPerMessage' | 'charge'>;

export interface ChainRuntimeOptions {
  /** Extra CA certificates trusted for https upstreams (tests with self-signed nodes). */
  ca?: string | Buffer;
  /** Where the chain logs its subscription feeds (reconnects, backfills) and its heads going back. */
  feedsLog?: FeedsLog;
  /** Seconds the chain's subscriptions survive without an upstream (config websocket.max_upstream_outage_s). */
  maxUpstreamOutageS?: number;
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
  /** True once the gateway is stopping: the filters' block poll stops then, before close() drops them. */
  stopping?: () => boolean;
  /** Prices and pays notifications to subscribers (the gateway's RU and ledger); without it they are free. */
  subscriptionMetering?: SubscriptionMetering;
  /** The chain's metrics (Metrics.chain(slug)); without them nothing is measured. */
  metrics?: ChainMetrics;
  /** Told of each probe, each head a feed hears and each identity verdict (on the main thread of a gateway
   *  with worker threads). */
  relay?: { probes: ProbeObserver; feedHead(index: number, head: number): void; wrongChain(index: number, wrong: boolean): void };
  /** Overrides how often a node in rotation has its chain checked again (chain-identity.ts RECHECK_MS). */
  identityRecheckMs?: number;
  /** How many threads share each upstream's max_connections (each worker's pool gets its part); default 1. */
  poolShare?: number;
  /** When a transaction last went through, shared by every thread (chain/write-mark.ts); one of its own otherwise. */
  writes?: WriteMark;
  /** In a worker thread: what the main thread's runtime of the chain keeps for the whole process. */
  replica?: ChainReplica;
}

/**
 * A worker thread's copy of a chain takes from the main thread what must exist once per process: the probes
 * of its nodes, its filters, and (when given) its upstream subscriptions and event streams. It keeps its own
 * upstream clients, health (the main prober's reports plus its own calls' outcomes), cache and calls in flight.
 */
export interface ChainReplica {
  /** Has the chain's health hear the main thread's probes (instead of probing itself); returns the undo. */
  follow(health: ChainHealth): () => void;
  filters: ChainFilters;
  /** The main thread's upstream subscriptions, relayed. */
  feeds?: Feeds | null;
  /** The first 24 hex digits of a subscription topic's ids, the same in every worker (HubOptions.idPrefix). */
  subscriptionIdPrefix?: (topicKey: string) => string;
  /** Opens a topic's event stream through the main thread's one upstream stream of it. */
  openEventLink?: SseHubOptions['openLink'];
}

const FREE_DELIVERIES: SubscriptionMetering = { ruPerMessage: () => 0, charge: () => true };

/** What a chain reads and writes when the gateway gave it no response cache: nothing is kept. */
const NO_CACHE = createResponseCache(0);

export function createChainRuntime(config: ChainConfig, opts: ChainRuntimeOptions = {}): ChainRuntime {
  const upstreams = config.upstreams.map((u) =>
    createHttpUpstream({
      name: u.name,
      url: u.url,
      headers: u.headers,
      // With worker threads each worker has its own pool: max_connections is the process's, shared out.
      maxConnections: Math.max(1, Math.floor(u.max_connections / (opts.poolShare ?? 1))),
      pipelining: u.pipelining,
      // A node that drips its answer a byte at a time holds a call no longer than this (the event-stream
      // pools below have none: a stream never ends).
      answerTimeoutMs: config.answer_timeout_s * 1000,
      ...(opts.ca !== undefined ? { ca: opts.ca } : {}),
    }),
  );
  const timeoutMs = config.timeout_s * 1000;
  const log: FeedsLog = (level, msg, fields) => opts.feedsLog?.(level, msg, { chain: config.slug, ...fields });
  const metrics = opts.metrics ?? noMetrics().chain(config.slug);
  let cacheScope = config.slug;
  let finalUndone = 0;
  const health = createChainHealth(
    upstreams.map((u) => u.label),
    {
      maxLagBlocks: config.max_lag_blocks,
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
        cacheScope = `${config.slug}#${++finalUndone}`;
        if (opts.replica === undefined)
          log('warn', `chain head went back from ${from} to ${to}, below its final blocks: answers cached before are no longer served`, {
            from,
            to,
          });
      },
    },
  );
  const isInRotation = (index: number): boolean => health.healthyIndices().includes(index);

  const withWs = config.upstreams.flatMap((u, i) => (u.ws === undefined ? [] : [{ u, index: i, http: upstreams[i]! }]));
  // The feeds hold one link at a time, so the prober's polls keep every node's head; a feed reports a head only
  // when it went back below what the feed remembers (followsNewChain).
  const feeds =
    opts.replica?.feeds !== undefined
      ? opts.replica.feeds
      : withWs.length === 0
        ? null
        : createFeeds({
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
            },
            maxOutageMs: (opts.maxUpstreamOutageS ?? 60) * 1000,
            ...(opts.ca !== undefined ? { link: { ca: opts.ca } } : {}),
            log,
          });

  const metering = opts.subscriptionMetering ?? FREE_DELIVERIES;
  const subscriptions =
    feeds === null
      ? null
      : createSubscriptionHub({
          feeds,
          ruPerMessage: metering.ruPerMessage,
          charge(ownerId, endpointId, ru, deliveries) {
            if (!metering.charge(ownerId, endpointId, ru, deliveries)) return false;
            metrics.ruCharged.inc(ru);
            return true;
          },
          liveWaitMs: timeoutMs,
          metrics,
          ...(opts.replica?.subscriptionIdPrefix !== undefined ? { idPrefix: opts.replica.subscriptionIdPrefix } : {}),
        });

  const readHead = config.kind === 'beacon' ? readBeaconHead : readEvmHead;
  const identity = createChainIdentity({
    chainId: config.kind === 'beacon' ? undefined : config.chain_id,
    health,
    upstreams,
    names: config.upstreams.map((u) => u.name),
    read: config.kind === 'beacon' ? readBeaconIdentity : readEvmIdentity,
    metrics,
    log: (level, msg, fields) => opts.log?.[level](msg, { chain: config.slug, ...fields }),
    ...(opts.relay !== undefined ? { onVerdict: opts.relay.wrongChain } : {}),
    ...(opts.identityRecheckMs !== undefined ? { recheckMs: opts.identityRecheckMs } : {}),
  });
  const proberOptions: ProberOptions = {
    ...PROBER_DEFAULTS,
    ...opts.prober,
    ...(opts.relay !== undefined ? { observer: opts.relay.probes } : {}),
  };
  let unfollow: (() => void) | null = null;
  const probeTimeoutMs = proberOptions.probeTimeoutMs ?? PROBER_DEFAULTS.probeTimeoutMs;
  let prober: Prober | null = null;
  let closed = false;
  const writes = opts.writes ?? createWriteMark();
  let next = 0;

  /** A node in rotation, else the next one in turn (which then fails fast or recovers). */
  function pickOrNext(): number {
    const picked = health.pick();
    if (picked !== null) return picked;
    const index = next % upstreams.length;
    next = (next + 1) % upstreams.length;
    return index;
  }

  const streamClients: HttpUpstream[] = [];
  const sse = opts.sse ?? DEFAULTS.sse;
  const events =
    config.kind !== 'beacon'
      ? null
      : createSseHub({
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
                  const index = pickOrNext();
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

  const pickUpstream = (): HttpUpstream => upstreams[pickOrNext()]!;
  const head = createChainHead({ health, feeds, timeoutMs, upstreams, pickUpstream });
  const routes = createNodeRoutes(config.upstreams, {
    stateHistoryBlocks: config.state_history_blocks,
    head: () => head.now(),
    blockNumberOf(hash) {
      const heard = feeds?.head() ?? null;
      return heard !== null && heard.hash.toLowerCase() === hash.toLowerCase() ? heard.number : null;
    },
  });
  const filterBounds = opts.filters ?? DEFAULTS.filters;
  const filters =
    opts.replica?.filters ??
    createChainFilters(
      { head, feeds, timeoutMs, upstreams, pickUpstream, routes, health },
      {
        maxPerKey: filterBounds.max_per_key,
        idleTimeoutMs: filterBounds.idle_timeout_s * 1000,
        log,
        ...(opts.stopping !== undefined ? { stopping: opts.stopping } : {}),
      },
    );
  const cache = chainCacheView(opts.responseCache ?? NO_CACHE, () => cacheScope, metrics);
  const inFlight = createInFlight<SharedOutcome, SharedFlight>(
    opts.log === undefined ? undefined : (err, key) => opts.log!.error("a shared answer's delivery failed", { key, error: String(err) }),
  );

  function pickHealthy(exclude?: ReadonlySet<number>): PickedUpstream | null {
    const index = health.pick(exclude);
    return index === null ? null : { index, upstream: upstreams[index]! };
  }

  async function call(method: string, params: unknown[], signal?: AbortSignal): Promise<unknown> {
    const tries = new Attempts(health, timeoutMs, RETRY_ONCE, routes.nodesFor(method, params));
    let lastError: unknown = new Error('no healthy upstream');
    for (let index = tries.nextNode(); index !== null; index = tries.nextNode()) {
      const attempt = tries.hold(new NodeAttempt(health, index));
      try {
        const result = await callUpstream(upstreams[index]!, tries.attemptTimeoutMs(), method, params, signal);
        attempt.settle('ok');
        return result;
      } catch (err) {
        // An aborted call says nothing about the node; an error object is the node's answer.
        if (signal?.aborted) {
          attempt.drop();
          throw err;
        }
        const answered = err instanceof NodeRpcError;
        attempt.settle(answered ? 'ok' : 'failed', answered ? 'rpc_error' : failureOutcome((err as { kind?: string }).kind ?? ''));
        if (answered) throw err;
        lastError = err;
      }
    }
    throw lastError;
  }

  return {
    config,
    upstreams,
    timeoutMs,
    feeds,
    events,
    get cacheScope() {
      return cacheScope;
    },
    health,
    identity,
    head,
    cache,
    inFlight,
    filters,
    subscriptions,
    metrics,
    policy: createChainMethodPolicy(config),
    routes,
    pickHealthy,
    pickUpstream,
    freshHead() {
      const best = health.bestHead();
      if (best === null) return null;
      const now = health.now();
      const writtenAt = writes.at();
      for (const u of health.upstreams) {
        const at = u.headAt;
        if (u.head === best && !u.failing && !u.wrongChain && at !== null && at > writtenAt + WRITE_SETTLE_MS && now - at <= HEAD_FRESH_MS)
          return best;
      }
      return null;
    },
    noteWrite() {
      writes.note();
    },
    call,
    startHealthChecks() {
      if (prober !== null || unfollow !== null || closed) return;
      if (opts.replica !== undefined) {
        unfollow = opts.replica.follow(health);
        return;
      }
      const requestTimeoutMs = probeTimeoutMs + PROBE_REQUEST_SLACK_MS;
      // What a node serves is checked, when due, beside its head read and under a timeout of its own, so a slow
      // node's check never makes its probe late (chain-identity.ts). A failing node's head restores it only once
      // a check since it failed has answered: one back from failing on another chain is judged first.
      prober = startProber(
        health,
        async (index, signal) => {
          if (identity.due(index)) void identity.check(index);
          const head = await readHead(upstreams[index]!, requestTimeoutMs, signal);
          await identity.admit(index, signal);
          return head;
        },
        proberOptions,
      );
    },
    close() {
      if (closed) return;
      closed = true;
      filters.close();
      prober?.stop();
      prober = null;
      identity.close();
      unfollow?.();
      feeds?.close();
      events?.close();
      for (const u of streamClients) u?.close();
      for (const u of upstreams) u.close();
    },
  };
}
