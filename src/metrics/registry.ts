/**
 * Every metric the daemon exports, on a registry of its own (prom-client), with the library's default
 * process and Node metrics beside them. Each measurement is taken once, where its concern lives; this
 * module only defines them and hands out children already bound to their labels, so a hot path
 * increments a child it holds and never looks a label set up per call.
 *
 * Labels are low-cardinality and never carry a key, an IP or an upstream URL: a chain is its slug, an
 * upstream its configured `name` (default host:port), a method an allowlisted JSON-RPC method or a
 * Beacon route template (anything else `other`).
 */
import { createRequire } from 'node:module';
import type { MetricObjectWithValues, MetricValue } from 'prom-client';
import {
  type CounterChild,
  CounterFamily,
  type GaugeChild,
  GaugeFamily,
  type HistogramChild,
  HistogramFamily,
  type Registrar,
} from './families.js';

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
export type UpstreamOutcome = 'ok' | 'rpc_error' | 'http_error' | 'timeout' | 'transport_error';
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
  | 'limits_unavailable';

/** Seconds: from a cached answer (~50 µs) to a slow trace (tens of seconds). */
const DURATION_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

export interface ChainMetrics {
  /** Counts one answered request; `method` is already an allowlisted name or a route template. */
  request(transport: Transport, method: string, status: number, seconds: number): void;
  readonly ruCharged: CounterChild;
  readonly cacheHits: CounterChild;
  readonly cacheMisses: CounterChild;
  readonly cacheBytes: GaugeChild;
  readonly sharedCalls: CounterChild;
  readonly head: GaugeChild;
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
  /** Drops every series of this chain (a chain removed by a reload); chain(slug) then makes new children. */
  remove(): void;
}

export interface UpstreamMetrics {
  call(outcome: UpstreamOutcome, seconds: number): void;
  readonly inRotation: GaugeChild;
  readonly head: GaugeChild;
  /** 1 while the node serves another chain than its chain's (chain/chain-identity.ts). */
  readonly wrongChain: GaugeChild;
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

/** Children of a labelled metric by one label value, made once and kept: a lookup without the family's joined key. */
function memo<T>(make: (key: string) => T): (key: string) => T {
  const made = new Map<string, T>();
  return (key) => {
    let v = made.get(key);
    if (v === undefined) made.set(key, (v = make(key)));
    return v;
  };
}

/** Seconds over which `chaingate status` reports a chain's request rate. */
const RATE_WINDOW_S = 60;

/**
 * Requests per second over the last RATE_WINDOW_S whole seconds: a ring of per-second counts, so
 * counting one request is an index and an increment.
 */
function createRecentRate(now: () => number): { count(): void; perSecond(): number } {
  const slots = new Float64Array(RATE_WINDOW_S);
  let second = Math.floor(now() / 1000);
  const advance = (): void => {
    const s = Math.floor(now() / 1000);
    for (let k = second + 1; k <= Math.min(s, second + RATE_WINDOW_S); k++) slots[k % RATE_WINDOW_S] = 0;
    if (s > second) second = s;
  };
  return {
    count() {
      advance();
      slots[second % RATE_WINDOW_S]!++;
    },
    perSecond() {
      advance();
      let sum = 0;
      for (const v of slots) sum += v;
      return sum / RATE_WINDOW_S;
    },
  };
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
  const registers = [registry];
  const requests = new CounterFamily({
    name: 'chaingate_requests_total',
    help: 'Requests answered, by chain, transport, method (allowlisted or a Beacon route template, else other) and HTTP status',
    labelNames: ['chain', 'transport', 'method', 'status'],
    registers,
  });
  const requestDuration = new HistogramFamily({
    name: 'chaingate_request_duration_seconds',
    help: 'Time from a request read to its answer sent',
    labelNames: ['chain', 'transport'],
    buckets: DURATION_BUCKETS,
    registers,
  });
  const upstreamRequests = new CounterFamily({
    name: 'chaingate_upstream_requests_total',
    help: 'Calls sent to upstream nodes, by outcome',
    labelNames: ['chain', 'upstream', 'outcome'],
    registers,
  });
  const upstreamDuration = new HistogramFamily({
    name: 'chaingate_upstream_duration_seconds',
    help: 'Time from a call sent to a node to its answer complete',
    labelNames: ['chain', 'upstream'],
    buckets: DURATION_BUCKETS,
    registers,
  });
  const inRotation = new GaugeFamily({
    name: 'chaingate_upstream_in_rotation',
    aggregator: 'max',
    help: '1 while the upstream takes calls, 0 while it is out of rotation',
    labelNames: ['chain', 'upstream'],
    registers,
  });
  const wrongChain = new GaugeFamily({
    name: 'chaingate_upstream_wrong_chain',
    aggregator: 'max',
    help: '1 while the upstream serves another chain (chain id, or beacon genesis) than its chain, 0 otherwise',
    labelNames: ['chain', 'upstream'],
    registers,
  });
  const upstreamHead = new GaugeFamily({
    name: 'chaingate_upstream_head',
    aggregator: 'max',
    help: 'The block (or slot) the upstream last reported',
    labelNames: ['chain', 'upstream'],
    registers,
  });
  const chainHead = new GaugeFamily({
    name: 'chaingate_chain_head',
    help: 'The best head of the chain',
    aggregator: 'max',
    labelNames: ['chain'],
    registers,
  });
  const refusals = new CounterFamily({
    name: 'chaingate_refusals_total',
    help: 'Requests refused by the gateway before reaching a node, by reason',
    labelNames: ['reason'],
    registers,
  });
  const ruCharged = new CounterFamily({
    name: 'chaingate_ru_charged_total',
    help: 'RU charged to owners',
    labelNames: ['chain'],
    registers,
  });
  const wsConnections = new GaugeFamily({
    name: 'chaingate_ws_connections',
    help: 'Open client WebSockets',
    labelNames: ['chain'],
    registers,
  });
  const subscriptions = new GaugeFamily({
    name: 'chaingate_subscriptions',
    help: 'Open client subscriptions (eth_subscribe), by kind',
    labelNames: ['chain', 'kind'],
    registers,
  });
  const notifications = new CounterFamily({
    name: 'chaingate_notifications_total',
    help: 'Subscription notifications sent to clients, by kind',
    labelNames: ['chain', 'kind'],
    registers,
  });
  const slowConsumers = new CounterFamily({
    name: 'chaingate_slow_consumers_total',
    help: 'Clients cut for not reading what was sent to them',
    labelNames: ['transport'],
    registers,
  });
  const sseClients = new GaugeFamily({
    name: 'chaingate_sse_clients',
    help: 'Open Beacon event streams',
    labelNames: ['chain'],
    registers,
  });
  const sseEvents = new CounterFamily({
    name: 'chaingate_sse_events_total',
    help: 'Beacon events sent to clients, by topic',
    labelNames: ['chain', 'topic'],
    registers,
  });
  const cacheHits = new CounterFamily({
    name: 'chaingate_cache_hits_total',
    help: 'Answers served from the cache',
    labelNames: ['chain'],
    registers,
  });
  const cacheMisses = new CounterFamily({
    name: 'chaingate_cache_misses_total',
    help: 'Cacheable calls the cache did not hold',
    labelNames: ['chain'],
    registers,
  });
  const cacheBytes = new GaugeFamily({
    name: 'chaingate_cache_bytes',
    help: 'Bytes held by the response cache',
    labelNames: ['chain'],
    registers,
  });
  const sharedCalls = new CounterFamily({
    name: 'chaingate_shared_calls_total',
    help: "Calls answered by another caller's identical call in flight",
    labelNames: ['chain'],
    registers,
  });
  const ledgerFlush = new HistogramFamily({
    name: 'chaingate_ledger_flush_duration_seconds',
    help: 'Time one flush of the RU ledger to the store took',
    buckets: [0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1],
    registers,
  });
  const ledgerFlushFailures = new CounterFamily({
    name: 'chaingate_ledger_flush_failures_total',
    help: 'Flushes of the RU ledger the store refused (retried at the next tick)',
    registers,
  });
  // Only a fleet sets it: one machine exports the family without a value.
  const redisUp = new GaugeFamily({
    name: 'chaingate_cluster_redis_up',
    help: 'In a fleet: 1 while rate limits are shared through Redis, 0 while Redis is unreachable',
    registers,
  });
  const noticesIgnored = new CounterFamily({
    name: 'chaingate_change_notices_ignored_total',
    help: 'In a fleet: notices on the change channel dropped because they do not parse, by reason',
    labelNames: ['reason'],
    registers,
  });
  const resyncs = new CounterFamily({
    name: 'chaingate_change_resyncs_total',
    help: 'In a fleet: times every known API key was read again (the change feed came back, or a flood of notices)',
    registers,
  });
  const reloads = new CounterFamily({
    name: 'chaingate_config_reloads_total',
    help: 'Config reloads (SIGHUP), by result',
    labelNames: ['result'],
    registers,
  });
  const lastReload = new GaugeFamily({
    name: 'chaingate_config_last_reload_success_timestamp_seconds',
    aggregator: 'max',
    help: 'When the config was last loaded with success (start or reload), in seconds since the epoch',
    registers,
  });
  const workerRestarts = new CounterFamily({
    name: 'chaingate_worker_restarts_total',
    help: 'Worker threads that died and were started again, by worker number',
    labelNames: ['worker'],
    registers,
  });
  const evictions = new CounterFamily({
    name: 'chaingate_limit_table_evictions_total',
    help: 'Entries a full limit table gave to another key while they still counted (the one counting least; its count starts again), by table',
    labelNames: ['table'],
    registers,
  });
  // Every table from the start, so a rate() reads 0, not absent.
  for (const table of LIMIT_TABLES) evictions.labels(table).inc(0);
  const evicted = memo((table) => evictions.labels(table));
  const workerStalls = new CounterFamily({
    name: 'chaingate_worker_stalls_total',
    help: 'Worker threads that went without a heartbeat for server.worker_stall_s and were ended, by worker number',
    labelNames: ['worker'],
    registers,
  });
  const workerUp = new GaugeFamily({
    name: 'chaingate_worker_up',
    help: 'Whether worker N answered this scrape within server.worker_stall_s (1) or not (0: its values are missing)',
    labelNames: ['worker'],
    registers,
  });
  // Both results exist from the start, so a rate() over failures reads 0, not absent.
  const reloadOk = reloads.labels('success');
  const reloadFailed = reloads.labels('failure');
  reloadOk.inc(0);
  reloadFailed.inc(0);
  const connectionsRefused = new CounterFamily({
    name: 'chaingate_connections_refused_total',
    help: 'Client connections refused before any work: max_connections (the cap is full) or file_descriptors (open files near their limit)',
    labelNames: ['reason'],
    registers,
  });
  const connectionsMax = new GaugeFamily({
    name: 'chaingate_connections_max',
    aggregator: 'max',
    help: 'The cap on client connections in force (server.max_connections, resolved at start)',
    labelNames: [],
    registers,
  });
  // Both reasons exist from the start, so a rate() over them reads 0, not absent.
  const refusedFor = {
    max_connections: connectionsRefused.labels('max_connections'),
    file_descriptors: connectionsRefused.labels('file_descriptors'),
  };
  refusedFor.max_connections.inc(0);
  refusedFor.file_descriptors.inc(0);
  const slow = memo((t) => slowConsumers.labels(t));
  const refused = memo((r) => refusals.labels(r));

  /** Every family labelled by chain: what a removed chain's series are dropped from. */
  const perChain = [
    requests,
    requestDuration,
    upstreamRequests,
    upstreamDuration,
    inRotation,
    wrongChain,
    upstreamHead,
    chainHead,
    ruCharged,
    wsConnections,
    subscriptions,
    notifications,
    sseClients,
    sseEvents,
    cacheHits,
    cacheMisses,
    cacheBytes,
    sharedCalls,
  ];
  const chains = new Map<string, ChainMetrics>();
  const forget = (slug: string): boolean => chains.delete(slug);
  const makeChain = (slug: string): ChainMetrics => {
    const byTransport = memo((transport) => requestDuration.labels(slug, transport));
    const kinds = memo((kind) => subscriptions.labels(slug, kind));
    const notified = memo((kind) => notifications.labels(slug, kind));
    const topics = memo((topic) => sseEvents.labels(slug, topic));
    // transport → method → status → child: three lookups and no string built per request.
    const requestChildren = new Map<string, Map<string, Map<number, CounterChild>>>();
    const requestChild = (transport: string, method: string, status: number): CounterChild => {
      let byMethod = requestChildren.get(transport);
      if (byMethod === undefined) requestChildren.set(transport, (byMethod = new Map()));
      let byStatus = byMethod.get(method);
      if (byStatus === undefined) byMethod.set(method, (byStatus = new Map()));
      let child = byStatus.get(status);
      if (child === undefined) byStatus.set(status, (child = requests.labels(slug, transport, method, String(status))));
      return child;
    };
    const upstream = memo((name): UpstreamMetrics => {
      const outcomes = memo((o) => upstreamRequests.labels(slug, name, o));
      const duration = upstreamDuration.labels(slug, name);
      return {
        call(outcome, seconds) {
          outcomes(outcome).inc();
          duration.observe(seconds);
        },
        inRotation: inRotation.labels(slug, name),
        wrongChain: wrongChain.labels(slug, name),
        head: upstreamHead.labels(slug, name),
      };
    });
    const recent = createRecentRate(now);
    const open = { ws: 0, sse: 0, subscriptions: 0 };
    const wsGauge = wsConnections.labels(slug);
    const sseGauge = sseClients.labels(slug);
    return {
      request(transport, method, status, seconds) {
        requestChild(transport, method, status).inc();
        byTransport(transport).observe(seconds);
        recent.count();
      },
      wsConnection(delta) {
        open.ws += delta;
        wsGauge.inc(delta);
      },
      sseClient(delta) {
        open.sse += delta;
        sseGauge.inc(delta);
      },
      subscription(kind, delta) {
        open.subscriptions += delta;
        kinds(kind).inc(delta);
      },
      snapshot: () => ({
        wsConnections: open.ws,
        sseClients: open.sse,
        subscriptions: open.subscriptions,
        requestsPerSecond1m: recent.perSecond(),
      }),
      ruCharged: ruCharged.labels(slug),
      cacheHits: cacheHits.labels(slug),
      cacheMisses: cacheMisses.labels(slug),
      cacheBytes: cacheBytes.labels(slug),
      sharedCalls: sharedCalls.labels(slug),
      head: chainHead.labels(slug),
      notifications: notified,
      sseEvents: topics,
      upstream,
      remove() {
        for (const family of perChain) family.removeWhere('chain', slug);
        forget(slug);
      },
    };
  };

  return {
    chain(slug) {
      let c = chains.get(slug);
      if (c === undefined) chains.set(slug, (c = makeChain(slug)));
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

const NO_UPSTREAM: UpstreamMetrics = { call() {}, inRotation: NOTHING, head: NOTHING, wrongChain: NOTHING };

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
      cacheHits: NOTHING,
      cacheMisses: NOTHING,
      cacheBytes: NOTHING,
      sharedCalls: NOTHING,
      head: NOTHING,
      notifications: () => NOTHING,
      sseEvents: () => NOTHING,
      upstream: () => NO_UPSTREAM,
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
