/**
 * A configured chain's runtime, made once at start from config and stopped once by close(): it owns
 * everything the gateway keeps about the chain (its nodes and their rotation, health and head; its view of
 * the response cache and its calls in flight; its filters; its subscription feeds and hub), so nothing
 * elsewhere is keyed by a chain.
 */
import type { ChainConfig } from '../config/schema.js';
import { DEFAULTS } from '../config/defaults.js';
import type { Feeds, FeedsLog } from '../fanout/feeds.js';
import type { SseHub } from '../fanout/sse-hub.js';
import type { SubscriptionHub } from '../fanout/subscriptions.js';
import { type ChainMetrics, noMetrics } from '../metrics/registry.js';
import { methodRow } from '../jsonrpc/methods.js';
import { type ReadHead, readBeaconHead, readEvmHead } from '../upstreams/head-probe.js';
import type { HttpUpstream } from '../upstreams/http-client.js';
import { readBeaconIdentity, readEvmIdentity } from '../upstreams/identity-probe.js';
import type { Prober, ProberOptions } from '../upstreams/prober.js';
import { callUpstream } from '../upstreams/rpc-call.js';
import type { ChainHealth } from '../upstreams/selection.js';
import { type ChainAnswerChecks, createAnswerChecks } from './answer-checks.js';
import { Attempts, NodeAttempt, RETRY_ONCE, settleCallError } from './attempts.js';
import { type ChainIdentity, createChainIdentity } from './chain-identity.js';
import { upstreamClients, watchNodeHealth } from './chain-nodes.js';
import { ChainFailover } from './failover-policies.js';
import { applyCordons } from './cordons.js';
import type { Found } from './capabilities.js';
import { findCapabilities, type NodeFindings } from './node-findings.js';
import { openChainFeeds, openEventHub, openSubscriptionHub } from './chain-streams.js';
import { createInFlight, type Shared, type SharedFlight, type SharedOutcome } from './dedup.js';
import { type ChainFilters, createChainFilters } from './filters.js';
import { createTxWatch, withTxWatch } from './tx-watch.js';
import { type ChainFinality, createChainFinality, type PolledFinality } from './finality.js';
import { finalityReader } from './finality-reads.js';
import { type ChainHead, createChainHead } from './head.js';
import { type ChainMethodPolicy, createChainMethodPolicy } from './method-policy.js';
import { createNodeRoutes, type NodeRoutes } from './node-routes.js';
import { createServedHead, type ServedHead, type ServedHeadTracker } from './served-head.js';
import { proberOptionsOf, startNodeProbes } from './node-probes.js';
import { type ChainCache, chainCacheView, createResponseCache } from './response-cache.js';
import { createWriteMark, type WriteMark } from './write-mark.js';
import type { ChainRuntimeOptions } from './runtime-options.js';

export type { ChainReplica, ChainRuntimeOptions } from './runtime-options.js';

/**
 * eth_blockNumber is answered from the served head when a node reported it this recently,
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
  /** Each method's failover policy (config chains.<slug>.failover; chain/failover-policies.ts). */
  readonly failover: ChainFailover;
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
  /** The head the chain serves: reached by enough nodes, never going back (served-head.ts). */
  readonly served: ServedHead;
  /** The chain's safe and finalized blocks (finality.ts). */
  readonly finality: ChainFinality;
  /** Checks of nodes' whole answers against the blocks the chain knows (answer-checks.ts); null with consistency.checks false. */
  readonly checks: ChainAnswerChecks | null;
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
  /** What each node whose config leaves it to `auto` was found to serve, by index (capabilities.ts). */
  readonly findings: NodeFindings;
  /** The nodes that may take each call: those serving its method, archive nodes first for old state. */
  readonly routes: NodeRoutes;
  /** The upstream for the next call among those in rotation, never one in `exclude`; null when there is none
   *  (the caller answers 502 at once). */
  pickHealthy(exclude?: ReadonlySet<number>): PickedUpstream | null;
  /** For callers that must send somewhere (the head tracker, the event streams): pickHealthy's choice, or with no
   *  upstream in rotation the next one round-robin, which then fails fast or recovers. */
  pickUpstream(): HttpUpstream;
  /** The served head (served.now()) when a node not failing reported it, or a head above it, within
   *  HEAD_FRESH_MS and more than WRITE_SETTLE_MS after the last write noted with noteWrite(); else null
   *  (eth_blockNumber is then asked of a node, and answered with the served head once its answer is heard). */
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

/** What a chain reads and writes when the gateway gave it no response cache: nothing is kept. */
const NO_CACHE = createResponseCache(0);

export function createChainRuntime(config: ChainConfig, opts: ChainRuntimeOptions = {}): ChainRuntime {
  return new RunningChain(config, opts);
}

/**
 * The runtime's state in fields, set once in the constructor in the order the parts depend on each other (the
 * health before the feeds that read it, the head before the routes and filters); only the cache scope, the
 * prober, the round-robin turn and the close change after.
 */
class RunningChain implements ChainRuntime {
  readonly config: ChainConfig;
  readonly upstreams: readonly HttpUpstream[];
  readonly timeoutMs: number;
  readonly failover: ChainFailover;
  readonly metrics: ChainMetrics;
  readonly health: ChainHealth;
  readonly feeds: Feeds | null;
  readonly subscriptions: SubscriptionHub | null;
  readonly identity: ChainIdentity;
  readonly events: SseHub | null;
  readonly head: ChainHead;
  readonly served: ServedHead;
  readonly finality: PolledFinality;
  readonly checks: ChainAnswerChecks | null;
  readonly routes: NodeRoutes;
  readonly filters: ChainFilters;
  readonly cache: ChainCache;
  readonly inFlight: Shared<SharedOutcome, SharedFlight>;
  readonly policy: ChainMethodPolicy;
  cacheScope: string;
  private readonly opts: ChainRuntimeOptions;
  private readonly readHead: ReadHead;
  private readonly proberOptions: ProberOptions;
  private readonly writes: WriteMark;
  /** The event streams' own clients, by node index (chain-streams.ts makes them). */
  private readonly streamClients: HttpUpstream[] = [];
  /** Times the chain's final blocks were undone: the count in cacheScope. */
  private finalUndone = 0;
  /** The next node in turn when none is in rotation (pickOrNext). */
  private next = 0;
  private prober: Prober | null = null;
  private unfollow: (() => void) | null = null;
  /** Stops following the thread's cordoned nodes (cordons.ts). */
  private readonly uncordon: (() => void) | null;
  /** Stops asking what the `auto` nodes serve (capabilities.ts; the main thread's, or a lone thread's). */
  private stopFinding: (() => void) | null = null;
  /** What each node was found to serve, by index (empty until found; healthz shows it). */
  readonly findings: NodeFindings = [];
  private closed = false;

  constructor(config: ChainConfig, opts: ChainRuntimeOptions) {
    this.config = config;
    this.opts = opts;
    // The clients are made before the health that holds their budgets, and re-send nothing before it is.
    const upstreams = upstreamClients(config, opts, (index, stillOnItsSocket) => this.health.chargeAgain(index, stillOnItsSocket));
    this.upstreams = upstreams;
    const timeoutMs = config.timeout_s * 1000;
    this.timeoutMs = timeoutMs;
    const log: FeedsLog = (level, msg, fields) => opts.feedsLog?.(level, msg, { chain: config.slug, ...fields });
    const metrics = opts.metrics ?? noMetrics().chain(config.slug);
    this.metrics = metrics;
    this.cacheScope = config.slug;
    // The served head is made just after the health it reads, which tells it of every head from its first.
    let served: ServedHeadTracker | null = null;
    const finalUndone = (): void => {
      this.cacheScope = `${config.slug}#${++this.finalUndone}`;
    };
    const health = watchNodeHealth(config, upstreams, metrics, log, opts, finalUndone, () => served?.update());
    this.health = health;
    this.failover = new ChainFailover(config.failover, timeoutMs, config.answer_timeout_s * 1000, health.now);
    const names = config.upstreams.map((u) => u.name);
    this.uncordon = opts.cordons ? applyCordons(opts.cordons, { slug: config.slug, names, upstreams: health.upstreams }) : null;
    served = createServedHead(health, {
      minNodes: config.consistency.min_nodes,
      ...(opts.servedHeadCell ? { shared: opts.servedHeadCell } : {}),
      // The main thread's (or a lone thread's) chain is made anew: a head served by a chain of this slug before a
      // reload says nothing of the chain now configured.
      fresh: opts.replica === undefined,
      gauge: metrics.servedHead,
      // A worker's copy hears the same probes as the main thread's, which logs the head going back once.
      ...(opts.replica === undefined ? { log } : {}),
    });
    this.served = served;
    const txWatch = opts.replica === undefined && config.kind === 'evm' ? createTxWatch(this, opts.transactions, log) : null;
    const own = { finality: () => this.finality, txWatch };
    const feeds = openChainFeeds(config, upstreams, health, served, timeoutMs, log, opts, metrics, own);
    this.feeds = feeds;
    // A resuming subscription's replay reads what the hub's memory lacks from the nodes, as any call does.
    this.subscriptions = openSubscriptionHub(feeds, timeoutMs, metrics, opts, (method, params) => this.call(method, params));
    this.readHead = config.kind === 'beacon' ? readBeaconHead : readEvmHead;
    this.identity = createChainIdentity({
      chainId: config.kind === 'beacon' ? undefined : config.chain_id,
      health,
      upstreams,
      names,
      read: config.kind === 'beacon' ? readBeaconIdentity : readEvmIdentity,
      metrics,
      log: (level, msg, fields) => opts.log?.[level](msg, { chain: config.slug, ...fields }),
      ...(opts.relay !== undefined ? { onVerdict: opts.relay.wrongChain } : {}),
      ...(opts.identityRecheckMs !== undefined ? { recheckMs: opts.identityRecheckMs } : {}),
    });
    this.proberOptions = proberOptionsOf(opts.prober, opts.relay?.probes);
    this.writes = opts.writes ?? createWriteMark();
    this.events = openEventHub(config, timeoutMs, metrics, log, opts, () => this.pickOrNext(), this.streamClients);
    const pickUpstream = (): HttpUpstream => this.pickUpstream();
    const head = createChainHead({ health, feeds, timeoutMs, upstreams, pickUpstream });
    this.head = head;
    this.finality = createChainFinality({
      // Read when a reading is due, by which time the routes (made below) are there; a worker's copy hears them.
      ...(opts.replica === undefined ? { read: finalityReader(config, opts.beacon, this) } : {}),
      ...(opts.relay?.finality !== undefined ? { onChange: opts.relay.finality } : {}),
      scope: () => this.cacheScope,
      gauge: (tag) => metrics.finality(tag),
    });
    const checks = createAnswerChecks(config, {
      feeds,
      meters: health.meters,
      now: health.now,
      ...(opts.log !== undefined ? { log: opts.log } : {}),
    });
    this.checks = checks;
    const routes = createNodeRoutes(config.upstreams, {
      stateHistoryBlocks: config.state_history_blocks,
      head: () => head.now(),
      blockNumberOf(hash) {
        const heard = feeds?.head() ?? null;
        return heard !== null && heard.hash.toLowerCase() === hash.toLowerCase() ? heard.number : null;
      },
      // Read when a call names a tag, so they follow whatever served head and finality the chain has then.
      tags: {
        latest: () => this.served.now(),
        safe: () => this.finality.safe()?.number ?? null,
        finalized: () => this.finality.finalized()?.number ?? null,
      },
      rewriteTags: config.consistency.rewrite_tags ? 'all' : config.beacon !== undefined ? 'final' : null,
    });
    this.routes = routes;
    const filterBounds = opts.filters ?? DEFAULTS.filters;
    const filters =
      opts.replica?.filters ??
      createChainFilters(
        { head, feeds, timeoutMs, upstreams, pickUpstream, routes, health, served, checks },
        {
          maxPerKey: filterBounds.max_per_key,
          idleTimeoutMs: filterBounds.idle_timeout_s * 1000,
          log,
          ...(opts.stopping !== undefined ? { stopping: opts.stopping } : {}),
        },
      );
    this.filters = txWatch === null ? filters : withTxWatch(filters, txWatch);
    this.cache = chainCacheView(opts.responseCache ?? NO_CACHE, () => this.cacheScope, metrics);
    this.inFlight = createInFlight<SharedOutcome, SharedFlight>(
      opts.log === undefined ? undefined : (err, key) => opts.log!.error("a shared answer's delivery failed", { key, error: String(err) }),
    );
    this.policy = createChainMethodPolicy(config);
  }

  /** A node in rotation, else the next one in turn (which then fails fast or recovers). */
  private pickOrNext(): number {
    const picked = this.health.pick();
    if (picked !== null) return picked;
    const count = this.upstreams.length;
    const index = this.next % count;
    this.next = (this.next + 1) % count;
    return index;
  }

  pickHealthy(exclude?: ReadonlySet<number>): PickedUpstream | null {
    const index = this.health.pick(exclude);
    return index === null ? null : { index, upstream: this.upstreams[index]! };
  }

  pickUpstream(): HttpUpstream {
    return this.upstreams[this.pickOrNext()]!;
  }

  freshHead(): number | null {
    const served = this.served.now();
    if (served === null) return null;
    const now = this.health.now();
    const settled = this.writes.at() + WRITE_SETTLE_MS;
    for (const u of this.health.upstreams) {
      const { head, headAt: at } = u;
      if (head !== null && head >= served && !u.failing && !u.wrongChain && at !== null && at > settled && now - at <= HEAD_FRESH_MS)
        return served;
    }
    return null;
  }

  noteWrite(): void {
    this.writes.note();
  }

  async call(method: string, params: unknown[], signal?: AbortSignal): Promise<unknown> {
    const health = this.health;
    const row = methodRow(method);
    const minHead = row === undefined ? null : this.routes.headFor(row, params);
    const tries = new Attempts(health, this.timeoutMs, RETRY_ONCE, this.routes.nodesFor(method, params), minHead);
    let lastError: unknown = new Error('no healthy upstream');
    for (let index = tries.nextNode(); index !== null; index = tries.nextNode()) {
      const attempt = tries.hold(new NodeAttempt(health, index));
      try {
        const result = await callUpstream(this.upstreams[index]!, tries.attemptTimeoutMs(), method, params, signal);
        attempt.settle('ok');
        return result;
      } catch (err) {
        // An aborted call says nothing about the node; an error object is the node's answer.
        if (signal?.aborted) {
          attempt.drop();
          throw err;
        }
        if (settleCallError(attempt, err)) throw err;
        lastError = err;
      }
    }
    throw lastError;
  }

  startHealthChecks(): void {
    if (this.prober !== null || this.unfollow !== null || this.closed) return;
    const names = this.config.upstreams.map((u) => u.name);
    if (this.opts.replica !== undefined) {
      this.unfollow = this.opts.replica.follow(this.health, this.finality, (node, found) => this.noteFound(names.indexOf(node), found));
      return;
    }
    this.finality.start();
    const found = (i: number, f: Found): void => this.noteFound(i, f);
    this.stopFinding = findCapabilities(this.config, this.upstreams, this.timeoutMs, () => this.health.bestHead(), found, this.opts);
    this.prober = startNodeProbes(this.health, this.identity, this.upstreams, this.readHead, this.proberOptions);
  }

  /** Node `index` was found to serve `found`: its routes are made anew. */
  private noteFound(index: number, found: Found): void {
    if (index < 0) return;
    this.findings[index] = found;
    this.routes.update(index, found);
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.stopFinding?.();
    this.filters.close();
    this.finality.close();
    this.checks?.close();
    this.prober?.stop();
    this.prober = null;
    this.identity.close();
    this.unfollow?.();
    this.uncordon?.();
    this.feeds?.close();
    this.events?.close();
    for (const u of this.streamClients) u?.close();
    for (const u of this.upstreams) u.close();
  }
}
