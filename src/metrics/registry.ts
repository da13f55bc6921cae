/**
 * Every metric the daemon exports (one row each in catalogue.ts), on a registry of its own (prom-client),
 * with the library's default process and Node metrics beside them. Each measurement is taken once, where
 * its concern lives; this module only registers them and hands out children already bound to their
 * labels, so a hot path increments a child it holds and never looks a label set up per call.
 *
 * Labels are low-cardinality and never carry a key, an IP or an upstream URL: a chain is its slug, an
 * upstream its configured `name` (default host:port), a method an allowlisted JSON-RPC method or a
 * Beacon route template (anything else `other`).
 */
import { createRequire } from 'node:module';
import type { MetricObjectWithValues, MetricValue } from 'prom-client';
import { registerFamilies } from './catalogue.js';
import { createChainMetrics } from './chain-metrics.js';
import { type CounterChild, type GaugeChild, type HistogramChild, memo, type Registrar } from './families.js';

type MetricJson = MetricObjectWithValues<MetricValue<string>>;

/**
 * prom-client, loaded where an exposition is written: a worker thread only hands its values to the main
 * thread, and starts without loading the library (100 ms of CPU less per worker start, measured).
 */
const promClient = (): typeof import('prom-client') => createRequire(import.meta.url)('prom-client');

/** A worker thread's families: their values, read as prom-client's Registry reads them. */
function familyList(): Registrar & { getMetricsAsJSON(): Promise<MetricJson[]> } {
  const families: Array<{ get(): MetricJson }> = [];
  return {
    registerMetric(metric: never) {
      families.push(metric);
    },
    getMetricsAsJSON: async () => families.map((f) => f.get()),
  };
}

export type Transport = 'http' | 'ws' | 'beacon' | 'sse';
/** The tables of the per-key and per-IP limits: rate windows (plans, public, management), the unknown-key guard, open connections. */
export type LimitTable = 'rate' | 'unknown_keys' | 'websocket' | 'sse';
const LIMIT_TABLES: readonly LimitTable[] = ['rate', 'unknown_keys', 'websocket', 'sse'];
/** The gateway's checks of nodes' answers, as `chaingate_upstream_check_failures_total{check}` names them (chain/answer-checks.ts). */
export type CheckName = 'block' | 'logs_bloom' | 'receipt_block';
export type UpstreamOutcome = 'ok' | 'rpc_error' | 'http_error' | 'timeout' | 'transport_error';
/** How a call asked of several nodes ended (pipeline/quorum-call.ts): `agreed` (quorum.agree equal answers),
 *  `majority` (served by on_mismatch: majority), `disagreed` (no answer served), `too_few` (fewer nodes in rotation
 *  or answering than quorum.agree), `too_large` (answers over the size compared), `failed` (no node answered). */
export type ConsensusOutcome = 'agreed' | 'majority' | 'disagreed' | 'too_few' | 'too_large' | 'failed';
/** Why a request was refused before reaching a node, as `chaingate_refusals_total{reason}` says it. */
export type RefusalReason =
  | 'invalid_key'
  | 'insufficient_ru'
  | 'rate_limited'
  | 'too_large'
  | 'bad_content_type'
  | 'method_not_allowed'
  | 'invalid_params'
  | 'invalid_request'
  | 'not_found'
  | 'no_upstream'
  | 'too_many_connections'
  | 'shutting_down'
  | 'store_unavailable'
  | 'limits_unavailable'
  /** A key's own restrictions (origins, addresses, methods, contracts, signed token: fences/). */
  | 'fenced'
  | 'owner_suspended';

export interface ChainMetrics {
  /** Counts one answered request; `method` is already an allowlisted name or a route template. */
  request(transport: Transport, method: string, status: number, seconds: number): void;
  readonly ruCharged: CounterChild;
  /** A block's logs fetched for a logs subscription whose node missed them (fanout/log-completeness.ts). */
  readonly logBackfills: CounterChild;
  readonly cacheHits: CounterChild;
  readonly cacheMisses: CounterChild;
  readonly cacheBytes: GaugeChild;
  readonly sharedCalls: CounterChild;
  readonly head: GaugeChild;
  /** The head the chain serves (chain/served-head.ts). */
  readonly servedHead: GaugeChild;
  /** The chain's finalized or safe block number (chain/finality.ts). */
  finality(tag: 'finalized' | 'safe'): GaugeChild;
  /** A client WebSocket opened (+1) or closed (-1). */
  wsConnection(delta: 1 | -1): void;
  /** An event stream opened (+1) or ended (-1). */
  sseClient(delta: 1 | -1): void;
  /** A subscription of `kind` made (+1) or ended (-1). */
  subscription(kind: string, delta: 1 | -1): void;
  /** What `chaingate status` shows of the chain: the gauges' values, and requests per second over the last minute. */
  snapshot(): { wsConnections: number; sseClients: number; subscriptions: number; requestsPerSecond1m: number };
  notifications(kind: string): CounterChild;
  sseEvents(topic: string): CounterChild;
  upstream(name: string): UpstreamMetrics;
  /** The consensus counters of a catalogue method (a bounded label) asked of several nodes. */
  consensus(method: string): ConsensusMetrics;
  /** Drops every series of this chain (a chain removed by a reload); chain(slug) then makes new children. */
  remove(): void;
}

export interface UpstreamMetrics {
  call(outcome: UpstreamOutcome, seconds: number): void;
  /** One of the node's answers failed the gateway's check `check` (chain/answer-checks.ts). */
  checkFailed(check: CheckName): void;
  readonly inRotation: GaugeChild;
  readonly head: GaugeChild;
  /** 1 while the node serves another chain than its chain's (chain/chain-identity.ts). */
  readonly wrongChain: GaugeChild;
  /** The node answered 429 and cools down (upstreams/node-budget.ts): once per cooldown. */
  cooledDown(): void;
}

/** One method's consensus counters on one chain (consistency.quorum). */
export interface ConsensusMetrics {
  /** A call asked of several nodes ended so. */
  call(outcome: ConsensusOutcome): void;
  /** Node `upstream` (its configured name) answered other than the answer served. */
  mismatch(upstream: string): void;
}

export interface Metrics {
  chain(slug: string): ChainMetrics;
  refusal(reason: RefusalReason): void;
  slowConsumer(transport: Transport): void;
  readonly ledgerFlush: HistogramChild;
  readonly ledgerFlushFailures: CounterChild;
  /** In a fleet: whether Redis decides the rate limits now (1) or the instance limits locally or refuses (0). */
  clusterRedisUp(up: boolean): void;
  /** In a fleet: a change notice dropped because it does not parse, by reason (pg-changes.ts IgnoredReason). */
  changeNoticeIgnored(reason: string): void;
  /** In a fleet: every known key read again (the change feed came back, or a flood of notices). */
  changeResync(): void;
  /** A reload (SIGHUP) that applied (`ok`) or was refused; `at` in ms since the epoch. */
  configReload(ok: boolean, at: number): void;
  /** The config loaded at start, `at` in ms since the epoch (the last-success gauge, no reload counted). */
  configLoaded(at: number): void;
  /** A client connection refused by the connection cap (limits/connection-cap.ts), by reason. */
  connectionRefused(reason: 'max_connections' | 'file_descriptors'): void;
  /** The connection cap in force (server.max_connections, resolved at start). */
  connectionsMax(max: number): void;
  /** A worker thread died and was started again. */
  workerRestart(worker: number): void;
  /** A full limit table gave an entry that still counted to another key (its count started again). */
  limitTableEviction(table: LimitTable): void;
  /** A worker thread went silent for server.worker_stall_s and is ended. */
  workerStall(worker: number): void;
  /** The worker threads are started (1 to count). */
  workersStarted(count: number): void;
  /** The exposition text (what GET /metrics answers), the workers' values merged in (MetricsOptions.workers). */
  text(): Promise<string>;
  /** This thread's values, as a worker hands them to the main thread for its exposition. */
  values(): Promise<MetricJson[]>;
}

export interface MetricsOptions {
  /** prom-client's process and Node metrics; default on. */
  defaults?: boolean;
  /** Clock in ms for the status request rate; default performance.now. */
  now?: () => number;
  /**
   * The worker threads' values (Metrics.values() in each), merged into the exposition at each scrape; in
   * worker order, undefined for a worker that did not answer in time (chaingate_worker_up reads 0).
   */
  workers?: () => Promise<Array<MetricJson[] | undefined>>;
  /**
   * False in a worker thread: its values are read by the main thread (values()), which writes the
   * exposition, so prom-client and its default metrics stay out of the thread. Default true.
   */
  exposition?: boolean;
}

export function createMetrics(opts: MetricsOptions = {}): Metrics {
  const now = opts.now ?? (() => performance.now());
  const lib = opts.exposition === false ? null : promClient();
  // prom-client's registry where the exposition is written; a worker thread's plain list elsewhere.
  const exposed = lib === null ? null : new lib.Registry();
  if (lib !== null && exposed !== null && opts.defaults !== false) lib.collectDefaultMetrics({ register: exposed });
  const registry = exposed ?? familyList();
  const { families: f, perChain } = registerFamilies([registry]);
  const { refusals, slowConsumers, ledgerFlush, ledgerFlushFailures, redisUp, noticesIgnored, resyncs, reloads, lastReload } = f;
  const { workerRestarts, evictions, workerStalls, workerUp, connectionsRefused, connectionsMax } = f;
  // Every table from the start, so a rate() reads 0, not absent.
  for (const table of LIMIT_TABLES) evictions.labels(table).inc(0);
  const evicted = memo((table) => evictions.labels(table));
  // Both results exist from the start, so a rate() over failures reads 0, not absent.
  const reloadOk = reloads.labels('success');
  const reloadFailed = reloads.labels('failure');
  reloadOk.inc(0);
  reloadFailed.inc(0);
  // Both reasons exist from the start, so a rate() over them reads 0, not absent.
  const refusedFor = {
    max_connections: connectionsRefused.labels('max_connections'),
    file_descriptors: connectionsRefused.labels('file_descriptors'),
  };
  refusedFor.max_connections.inc(0);
  refusedFor.file_descriptors.inc(0);
  const slow = memo((t) => slowConsumers.labels(t));
  const refused = memo((r) => refusals.labels(r));

  const chains = new Map<string, ChainMetrics>();
  /** Drops every series of a chain a reload removed (every family labelled by chain); chain(slug) then makes new children. */
  const removeChain = (slug: string): void => {
    for (const family of perChain) family.removeWhere('chain', slug);
    chains.delete(slug);
  };

  return {
    chain(slug) {
      let c = chains.get(slug);
      if (c === undefined) chains.set(slug, (c = createChainMetrics(f, slug, now, () => removeChain(slug))));
      return c;
    },
    refusal: (reason) => refused(reason).inc(),
    slowConsumer: (transport) => slow(transport).inc(),
    ledgerFlush: ledgerFlush.labels(),
    ledgerFlushFailures: ledgerFlushFailures.labels(),
    clusterRedisUp: (up) => redisUp.set(up ? 1 : 0),
    changeNoticeIgnored: (reason) => noticesIgnored.labels(reason).inc(),
    changeResync: () => resyncs.labels().inc(),
    configReload(ok, at) {
      (ok ? reloadOk : reloadFailed).inc();
      if (ok) lastReload.set(at / 1000);
    },
    configLoaded(at) {
      lastReload.set(at / 1000);
    },
    connectionRefused: (reason) => refusedFor[reason].inc(),
    connectionsMax: (max) => connectionsMax.labels().set(max),
    workerRestart: (worker) => workerRestarts.labels(String(worker)).inc(),
    limitTableEviction: (table) => evicted(table).inc(),
    workerStall: (worker) => workerStalls.labels(String(worker)).inc(),
    workersStarted(count) {
      // Every worker's series from the start, so a rate() over restarts reads 0, not absent.
      for (let i = 1; i <= count; i++) {
        workerRestarts.labels(String(i)).inc(0);
        workerStalls.labels(String(i)).inc(0);
      }
    },
    text: async () => {
      if (lib === null || exposed === null) throw new Error('a worker thread writes no exposition: the main thread reads its values()');
      if (opts.workers === undefined) return exposed.metrics();
      // Each worker's families beside the main thread's, summed (or the highest, see Aggregator) by prom-client.
      const theirs = await opts.workers();
      for (const [i, values] of theirs.entries()) workerUp.labels(String(i + 1)).set(values === undefined ? 0 : 1);
      const all = [await registry.getMetricsAsJSON(), ...theirs.filter((values) => values !== undefined)];
      return lib.AggregatorRegistry.aggregate(all).metrics();
    },
    values: () => registry.getMetricsAsJSON(),
  };
}

/** A child that records nothing: what every metric of noMetrics() hands out. */
const NOTHING = {
  inc() {},
  dec() {},
  set() {},
  observe() {},
} as unknown as CounterChild & GaugeChild & HistogramChild;

const NO_UPSTREAM: UpstreamMetrics = {
  call() {},
  checkFailed() {},
  cooledDown() {},
  inRotation: NOTHING,
  head: NOTHING,
  wrongChain: NOTHING,
};
const NO_CONSENSUS: ConsensusMetrics = { call() {}, mismatch() {} };

/**
 * Metrics that measure nothing, for `metrics: { enabled: false }` (no listener would read them), so a bench
 * can compare the daemon with and without its measurements. The status snapshot still counts its gauges.
 */
export function noMetrics(): Metrics {
  const makeChain = (): ChainMetrics => {
    const open = { ws: 0, sse: 0, subscriptions: 0 };
    return {
      request() {},
      wsConnection(delta) {
        open.ws += delta;
      },
      sseClient(delta) {
        open.sse += delta;
      },
      subscription(_kind, delta) {
        open.subscriptions += delta;
      },
      snapshot: () => ({ wsConnections: open.ws, sseClients: open.sse, subscriptions: open.subscriptions, requestsPerSecond1m: 0 }),
      ruCharged: NOTHING,
      logBackfills: NOTHING,
      cacheHits: NOTHING,
      cacheMisses: NOTHING,
      cacheBytes: NOTHING,
      sharedCalls: NOTHING,
      head: NOTHING,
      servedHead: NOTHING,
      finality: () => NOTHING,
      notifications: () => NOTHING,
      sseEvents: () => NOTHING,
      upstream: () => NO_UPSTREAM,
      consensus: () => NO_CONSENSUS,
      remove() {},
    };
  };
  const chains = new Map<string, ChainMetrics>();
  return {
    chain(slug) {
      let c = chains.get(slug);
      if (c === undefined) chains.set(slug, (c = makeChain()));
      return c;
    },
    refusal() {},
    slowConsumer() {},
    ledgerFlush: NOTHING,
    ledgerFlushFailures: NOTHING,
    clusterRedisUp() {},
    changeNoticeIgnored() {},
    changeResync() {},
    configReload() {},
    configLoaded() {},
    connectionRefused() {},
    connectionsMax() {},
    workerRestart() {},
    limitTableEviction() {},
    workerStall() {},
    workersStarted() {},
    text: async () => '',
    values: async () => [],
  };
}
