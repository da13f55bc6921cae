import { createHmac } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { Config } from '../config/schema.js';
import type { Logger } from '../log.js';
import { createForwardingRepeatedLog, createRepeatedLog, type RepeatedLog } from '../repeated-log.js';
import { type ChainRuntimeOptions, createChainRuntime } from '../chain/runtime.js';
import { createSwappableCache } from '../chain/response-cache.js';
import { createChainSet } from './chain-set.js';
import type { GatewayContext } from '../pipeline/context.js';
import { handleHttpRpc } from './http-rpc.js';
import { createWsRoute, notificationRu } from './ws-route.js';
import { handleBeacon, sendBeaconError } from './beacon.js';
import { type BeaconEvents, createBeaconEvents } from './beacon-events.js';
import { createMetrics, type Metrics, noMetrics } from '../metrics/registry.js';
import { serveMetrics } from './metrics-listener.js';
import { type ChainTraffic, type FleetStatusSource, fleetStatus, type StatusReport, statusReport, sumTraffic } from './status-report.js';
import { loadDashboardAssets, routeDashboard } from './dashboard.js';
import { handleManagement, type ManagementDeps, managementVerbs } from './management.js';
import { type ChainHealthEntry, type HealthReply, healthz, readyz } from './health-report.js';
import { createTenancy, type Tenancy } from '../pipeline/tenancy.js';
import { openFleetTenancy } from '../pipeline/fleet-tenancy.js';
import { probeUpstreams } from '../chain/startup-probe.js';
import {
  createCorsPolicy,
  endHead,
  JSON_TYPE,
  type ResponseMeta,
  responseMeta,
  sendPreflight,
  sendRouteError,
  sendWhole,
  writeHead,
} from './respond.js';
import { isBeaconRest, isManagementPath, kindRefusal, resolveRoute, type RouteTable } from './routes.js';
import { chainOfKey } from '../pipeline/caller.js';
import { holdForKey } from './held-request.js';
import { clientLimitAddress } from './peer-address.js';
import { availableParallelism } from 'node:os';
import { createWorkerPool, type WorkerPool, workerCount } from './worker-pool.js';
import { createWorkerLinks } from './worker-links.js';
import { createChainRelayClient, createChainRelayHost } from '../chain/relay.js';
import { createWriteMark } from '../chain/write-mark.js';
import { connectFeedRelay } from '../fanout/remote-feeds.js';
import { connectEventRelay } from '../fanout/event-relay.js';
import type { FeedsLog } from '../fanout/feeds.js';
import type { WorkerSide } from './worker-link.js';
import { createConnectionGate } from './connection-gate.js';
import { closeApp, type HttpRequest, type HttpResponse, type TemplatedApp, type us_listen_socket, uws } from './uws.js';

/** uWS's ListenOptions.LIBUS_LISTEN_EXCLUSIVE_PORT (a const enum in its typings, not importable as a value). */
const LIBUS_LISTEN_EXCLUSIVE_PORT = 1;

export interface Gateway {
  /** The port actually listened on (useful with port 0). */
  readonly port: number;
  /** The management listener's port, when `management` configures one. */
  readonly managementPort: number | undefined;
  /** The metrics listener's port, unless `metrics.enabled` is false. */
  readonly metricsPort: number | undefined;
  readonly context: GatewayContext;
  /**
   * Graceful stop: stop accepting, let in-flight requests finish within `server.stop_timeout_s`, then
   * close upstream sockets. Resolves with the number of requests cut short by the deadline.
   */
  stop(): Promise<number>;
  /** Open sockets and streams, upstream subscriptions and slow-consumer cuts (over every worker), for tests and operators. */
  streamStats(): Promise<StreamStats>;
  /** What this thread saw of each chain's traffic (a worker's part of GET /status). */
  traffic(): Record<string, ChainTraffic>;
  /**
   * Closes every socket at once, without a drain, and ships what this thread's ledger holds: what a worker
   * thread does as it ends abruptly (worker-thread.ts), since a thread ended with sockets open aborts the process.
   */
  abandon(): void;
  /** The worker threads (server.workers above 1), else null. */
  readonly workers: Pick<WorkerPool, 'count' | 'crash'> | null;
  /**
   * Applies a new config, already validated whole and checked by restartOnlyChanges (main.ts does both):
   * chains added, removed and changed, plans, RU costs, limits, the public path, the cache size, CORS, and
   * the TLS certificate files read again (renewals). Resolves with what happened to the chains; rejects,
   * with nothing changed, when the renewed certificate could not be put on the port.
   */
  reload(next: Config): Promise<ReloadOutcome>;
}

export interface ReloadOutcome {
  added: string[];
  removed: string[];
  changed: string[];
}

export interface StreamStats {
  wsConnections: number;
  /** Open WebSocket connections of each worker thread, in worker order (empty without workers). */
  wsConnectionsByWorker: number[];
  subscriptions: number;
  /** Upstream subscriptions open, over every chain. */
  upstreamSubscriptions: number;
  slowConsumers: number;
  sseClients: number;
  sseTopics: number;
  sseSlowClients: number;
}

export interface GatewayOptions extends Pick<ChainRuntimeOptions, 'ca' | 'prober'> {
  log: Logger;
  /** Overrides server.port (the devnet's --port, tests' 0). */
  port?: number;
  /** Overrides management.port when a separate management listener is configured. */
  managementPort?: number;
  /** Overrides metrics.port. */
  metricsPort?: number;
  /** The registry to measure into (one is made otherwise). */
  metrics?: Metrics;
  /** Set in a worker thread (server/worker-thread.ts): what it shares with the main thread. */
  worker?: WorkerSide;
}

function createApp(config: Config): TemplatedApp {
  const u = uws();
  const tls = config.server.tls;
  if (!tls) return u.App();
  return u.SSLApp({
    cert_file_name: tls.cert_file,
    key_file_name: tls.key_file,
    ...(tls.passphrase ? { passphrase: tls.passphrase } : {}),
  });
}

/** What the management API and GET /status read of the store: the one spot that differs in a fleet. */
interface StoreViews {
  management: Pick<ManagementDeps, 'accounts' | 'balance'>;
  /** The fleet's instances for GET /status; undefined on one machine (the report has no fleet section). */
  fleet: FleetStatusSource | undefined;
}

/**
 * On one machine: the ledger's live balance, and no fleet. In a fleet: the balance as written to the shared
 * store less what this instance spent and has not written (the other instances' within one flush interval;
 * never what any merely reserved), and the instances' heartbeats.
 */
function storeViews(tenancy: Tenancy): StoreViews {
  const fleet = tenancy.fleet;
  if (fleet === null)
    return { management: { accounts: tenancy.accounts, balance: (ownerId) => tenancy.ledger.available(ownerId) }, fleet: undefined };
  return {
    management: {
      accounts: tenancy.accounts,
      balance: async (ownerId) => ((await fleet.ledgerStore.balance(ownerId)) ?? 0) - fleet.ledger.unwritten(ownerId),
    },
    fleet: { instance: fleet.instance, instances: () => fleet.ledgerStore.instances() },
  };
}

/** A management request on whichever listener serves it: CORS preflight, or the REST operation. */
function serveManagement(
  deps: ManagementDeps,
  res: HttpResponse,
  req: HttpRequest,
  method: string,
  path: string,
  meta: ResponseMeta,
): void {
  if (method !== 'options') {
    handleManagement(deps, res, req, method, path, meta);
    return;
  }
  const verbs = managementVerbs(path);
  if (verbs === undefined) sendRouteError(res, meta, 'not_found', `No route for ${path}`);
  else sendPreflight(res, meta, req.getHeader('access-control-request-headers'), `${verbs}, OPTIONS`);
}

function routeRequest(
  ctx: GatewayContext,
  management: ManagementDeps | null,
  events: BeaconEvents,
  table: RouteTable,
  res: HttpResponse,
  req: HttpRequest,
): void {
  const method = req.getMethod();
  const url = req.getUrl();
  const meta = responseMeta(req, ctx.corsOrigin(req.getHeader('origin')));
  const route = resolveRoute(method, url, req.getHeader('host'), table);
  if (route.kind === 'preflight') {
    sendPreflight(res, meta, req.getHeader('access-control-request-headers'), route.methods);
    return;
  }
  if (route.kind === 'management') {
    if (management === null) sendRouteError(res, meta, 'not_found', 'The management API is served on its own listener (management.port)');
    else serveManagement(management, res, req, method, route.path, meta);
    return;
  }
  if (route.kind === 'error') {
    sendRouteError(res, meta, route.code, route.message, route.allow);
    return;
  }
  // Only a fleet can meet a key it does not know yet: one machine's road reads SQLite itself.
  if (ctx.tenancy.fleet !== null && route.key !== null && ctx.tenancy.keys.cached(route.key) === undefined) {
    holdForKey(
      ctx,
      res,
      req,
      route.key,
      method !== 'get' && method !== 'head',
      (r, q) => routeRequest(ctx, management, events, table, r, q),
      { chain: route.chain.slug, transport: isBeaconRest(route.rest) ? 'beacon' : 'http', meta },
    );
    return;
  }
  let chain = ctx.chains.get(route.chain.slug)!;
  if (route.key !== null && !route.named) {
    const own = chainOfKey(ctx, route.key);
    if (own === undefined) {
      // A key that does not exist has no network whose kind could refuse the path: it is 401 whatever the
      // path, in the Beacon shape for a Beacon path and JSON-RPC's otherwise, by the handlers' own road.
      if (isBeaconRest(route.rest)) handleBeacon(ctx, res, req, chain, route.key, false, route.rest, meta, events.serve);
      else handleHttpRpc(ctx, res, req, chain, route.key, false, meta);
      return;
    }
    chain = own;
    const refusal = kindRefusal(chain.config, method, route.rest, url);
    if (refusal !== null) {
      sendRouteError(res, meta, refusal.code, refusal.message, refusal.allow);
      return;
    }
  }
  if (chain.config.kind === 'beacon') {
    if (!isBeaconRest(route.rest)) {
      sendBeaconError(
        res,
        meta,
        'not_found',
        `Chain '${chain.config.slug}' is a beacon chain: it serves the Beacon REST API under /v1/rpc/<key>/eth/..., not JSON-RPC`,
      );
    } else {
      handleBeacon(ctx, res, req, chain, route.key, route.named, route.rest, meta, events.serve);
    }
    return;
  }
  handleHttpRpc(ctx, res, req, chain, route.key, route.named, meta);
}

const NO_STORE: ReadonlyArray<readonly [string, string]> = [['cache-control', 'no-store']];

/**
 * GET (or HEAD, which some load balancers send) /healthz and /readyz: for load balancers and systemd, so
 * outside every key and limit, never cached. A stopping gateway is not ready: it finishes what it has and
 * takes nothing new.
 */
function serveHealth(
  res: HttpResponse,
  req: HttpRequest,
  reply: () => HealthReply,
  stopping: boolean,
  isReadiness: boolean,
  headOnly: boolean,
): void {
  const r = isReadiness && stopping ? { status: 503, body: '{"status":"stopping"}' } : reply();
  const meta = responseMeta(req, undefined);
  if (!headOnly) {
    sendWhole(res, r.status, meta, JSON_TYPE, r.body, NO_STORE, stopping);
    return;
  }
  res.cork(() => {
    writeHead(res, r.status, meta, JSON_TYPE);
    res.writeHeader(NO_STORE[0]![0], NO_STORE[0]![1]);
    endHead(res, meta, stopping);
  });
}

/**
 * The worker threads' script: the compiled one, also when this module runs from its TypeScript source (the
 * tests), as a worker compiling the gateway's sources again would take seconds to start.
 */
const WORKER_SCRIPT = new URL(
  import.meta.url.endsWith('.ts') ? '../../dist/server/worker-thread.js' : './worker-thread.js',
  import.meta.url,
);

/** How long a worker may take to stop beyond server.stop_timeout_s before it is terminated, in ms. */
const WORKER_STOP_GRACE_MS = 5_000;

/**
 * How long a scrape (/metrics, /status, stream stats) waits for a worker's values at most, in ms: below
 * `chaingate status`'s own patience (5 s), so a stalled worker leaves a report without its part, not none.
 */
const WORKER_ANSWER_MS = 2_000;

/** After a stop has released everything, open sockets are closed this much later, in ms. */
const CLOSE_SOCKETS_AFTER_MS = 100;

/** Builds the chains' upstream clients, starts listening, and returns the running gateway. */
export async function startGateway(config: Config, opts: GatewayOptions): Promise<Gateway> {
  // The main thread of a gateway with worker threads serves no client itself: its workers do (worker-pool.ts).
  // An instance of a fleet runs one thread (config checks refuse more): its limits and RU are shared through Redis and PostgreSQL.
  const workers = opts.worker === undefined && config.cluster === undefined ? workerCount(config.server.workers) : 1;
  const core = workers > 1;
  let pool: WorkerPool | null = null;
  const answerMs = Math.min(WORKER_ANSWER_MS, config.server.worker_stall_s * 1000);
  const metrics =
    opts.metrics ??
    (!config.metrics
      ? noMetrics()
      : opts.worker !== undefined
        ? createMetrics({ exposition: false })
        : createMetrics(core ? { workers: async () => (await pool!.ask({ type: 'metrics' }, answerMs)).values as never } : {}));
  const tenancy =
    config.storage.url !== undefined
      ? await openFleetTenancy(config, opts.log, metrics)
      : createTenancy(
          config,
          opts.log,
          metrics,
          opts.worker !== undefined ? { role: 'worker', shared: opts.worker.tenancy } : { role: core ? 'main' : 'alone' },
        );
  // One store for the gateway, as cache.max_bytes is one budget: each chain reads it through its own view. With
  // workers, each worker keeps its own store (a shared one would cost a copy and a lock per hit) with an equal
  // share of the budget; the main thread serves no call and keeps none.
  const cacheShare = opts.worker !== undefined ? opts.worker.workers : core ? Number.POSITIVE_INFINITY : 1;
  const cacheBytes = (c: Config): number => Math.floor(c.cache.max_bytes / cacheShare);
  const responseCache = createSwappableCache(cacheBytes(config));
  let inForce = config;
  const feedsLog: FeedsLog = (level, msg, fields) => opts.log[level](msg, fields);
  /** What a chain's runtime is made with, from the config in force when it is made. */
  const chainOpts = (c: Config): ChainRuntimeOptions => ({
    ...(opts.ca !== undefined ? { ca: opts.ca } : {}),
    ...(opts.prober !== undefined ? { prober: opts.prober } : {}),
    log: opts.log,
    maxUpstreamOutageS: c.websocket.max_upstream_outage_s,
    sse: c.sse,
    feedsLog,
    responseCache,
    filters: c.filters,
    stopping: () => ctx.stopping,
    subscriptionMetering: {
      // Read at each delivery, so a reload's price applies to subscriptions already open.
      ruPerMessage: (bytes) => notificationRu(ctx.config.ru.notification_per_250_bytes, bytes),
      charge: (ownerId, endpointId, ru, deliveries) =>
        tenancy.ledger.chargeDeliveries(ownerId, ru, { endpointId, method: 'eth_subscription', status: 0 }, deliveries),
    },
  });
  // With worker threads, the main thread's chains tell the workers' copies of them what they probe and
  // serve them their filters; a worker's chains follow the main thread's (chain/relay.ts).
  const relayHost = core ? createChainRelayHost((slug) => chains.get(slug)?.filters) : null;
  const relayClient = opts.worker !== undefined ? createChainRelayClient(opts.worker.chains) : null;
  const feedRelay = opts.worker !== undefined ? connectFeedRelay(opts.worker.feeds, { log: feedsLog }) : null;
  const eventRelay = opts.worker !== undefined ? connectEventRelay(opts.worker.events) : null;
  const writes = createWriteMark(opts.worker?.writes);
  /** What a chain shares with the other threads: the main thread's relays its probes, a worker's follows them. */
  const sharing = (slug: string): Pick<ChainRuntimeOptions, 'relay' | 'replica' | 'writes' | 'poolShare'> => {
    if (relayHost !== null) {
      return {
        writes,
        relay: {
          probes: relayHost.observer(slug),
          feedHead: (i, h) => relayHost.feedHead(slug, i, h),
          wrongChain: (i, w) => relayHost.wrongChain(slug, i, w),
        },
      };
    }
    if (relayClient !== null) {
      const c = inForce.chains[slug]!;
      return {
        writes,
        poolShare: opts.worker!.workers,
        replica: {
          follow: (health) => relayClient.follow(slug, health),
          filters: relayClient.filters(slug),
          feeds: c.upstreams.some((u) => u.ws !== undefined) ? feedRelay!.feeds(slug) : null,
          openEventLink: eventRelay!.openLink(slug),
          subscriptionIdPrefix: (key) =>
            createHmac('sha256', opts.worker!.subscriptionSecret).update(`${slug}\u0000${key}`).digest('hex').slice(0, 24),
        },
      };
    }
    return { writes };
  };
  const chainSet = createChainSet(config.chains, {
    // The config in force: chains are made before ctx exists, and again at reloads (ctx.config is the new one).
    make: (c) => createChainRuntime(c, { ...chainOpts(inForce), metrics: metrics.chain(c.slug), ...sharing(c.slug) }),
    start(chain) {
      chain.startHealthChecks();
      if (opts.worker === undefined) void probeUpstreams([chain], opts.log);
    },
    closeClients(chain) {
      wsRoute.closeChain(chain, 1001, 'chain removed');
    },
    inUse: (chain) => wsRoute.usesChain(chain) || (chain.events?.clients() ?? 0) > 0,
    removed: (slug) => metrics.chain(slug).remove(),
  });
  const chains = chainSet.live;
  // A worker's occurrences are counted by the main thread's logs of the same name: one condition per process.
  const repeatedLog = (name: string): RepeatedLog =>
    opts.worker === undefined ? createRepeatedLog(opts.log) : createForwardingRepeatedLog(name, opts.worker.forward);
  const upstreamFailures = repeatedLog('upstreamFailures');
  const failedAnswers = repeatedLog('failedAnswers');
  // After the store opened: the default cap reserves what the process holds by now.
  const connectionsRefused = repeatedLog('connectionsRefused');
  const gate = createConnectionGate(config, {
    log: opts.log,
    metrics,
    refusals: connectionsRefused,
    workers,
    ...(opts.worker !== undefined ? { memory: opts.worker.connections } : {}),
  });
  const ctx: GatewayContext = {
    config,
    chains,
    log: opts.log,
    upstreamFailures,
    failedAnswers,
    connections: gate.cap,
    tenancy,
    corsOrigin: createCorsPolicy(config.server.cors_origins),
    metrics,
    inFlight: 0,
    stopping: false,
    onIdle: null,
  };
  const table: RouteTable = { chains: config.chains, defaultChain: config.server.default_chain };
  const views = storeViews(tenancy);
  const managementDeps: ManagementDeps = {
    config,
    ...views.management,
    onEndpointDeleted: (endpointId) => closeEndpoint(endpointId),
    limiter: tenancy.limiter,
    unknownKeys: tenancy.unknownKeys,
    clientIp: (res, req) => clientLimitAddress(res, req, ctx.config.server),
    onStoreFault: (during, err) => tenancy.storeFault(during, err),
  };
  const wsRoute = createWsRoute(ctx, table, gate);
  const events = createBeaconEvents(ctx);
  // A key deleted or suspended (by the management API or the CLI) closes the sockets and streams it opened.
  const closeEndpoint = (endpointId: string): void => {
    wsRoute.closeEndpoint(endpointId, 1008, 'API key revoked');
    events.closeEndpoint(endpointId);
  };
  tenancy.onRevoked(closeEndpoint);
  const startedAt = performance.now();
  const healthEntries = (): ChainHealthEntry[] => [...chains.values()].map((c) => ({ slug: c.config.slug, health: c.health }));
  // The owners' page, beside the management API it calls (same origin, so its CSP can say connect-src 'self').
  const dashboard = loadDashboardAssets();
  /** The main listener's app, with every route; made again by a reload that renews the TLS certificate. */
  const mainApp = (c: Config): TemplatedApp => {
    const a = createApp(c);
    for (const headOnly of [false, true]) {
      const route = headOnly ? a.head.bind(a) : a.get.bind(a);
      route('/healthz', (res, req) =>
        serveHealth(res, req, () => healthz(healthEntries(), performance.now() - startedAt), ctx.stopping, false, headOnly),
      );
      route('/readyz', (res, req) => serveHealth(res, req, () => readyz(healthEntries()), ctx.stopping, true, headOnly));
    }
    if (!config.management) routeDashboard(a, dashboard);
    a.ws('/*', wsRoute.behavior);
    a.any('/*', (res, req) => {
      if (!gate.refuseRequest(res)) routeRequest(ctx, config.management ? null : managementDeps, events, table, res, req);
    });
    return a;
  };
  let app = core ? null : mainApp(config);
  /** Apps a certificate renewal replaced: their connections finish on them, and a stop closes them. */
  const replacedApps: TemplatedApp[] = [];
  let management: { app: TemplatedApp; host: string; port: number } | null = null;
  if (config.management && opts.worker === undefined) {
    const mapp = createApp(config);
    routeDashboard(mapp, dashboard);
    mapp.any('/*', (res, req) => routeManagementOnly(ctx, managementDeps, res, req));
    management = { app: mapp, host: config.management.host, port: config.management.port };
  }
  const metricsApp = config.metrics && opts.worker === undefined ? uws().App() : null;
  const status = async (): Promise<StatusReport> => {
    // Connections and requests are the workers': each tells what it saw of each chain.
    const asked = pool === null ? null : await pool.ask({ type: 'traffic' }, answerMs);
    const theirs = (asked?.values ?? []) as Array<Record<string, ChainTraffic> | undefined>;
    const fleet = views.fleet === undefined ? undefined : await fleetStatus(views.fleet, Date.now());
    return statusReport(
      chains.values(),
      (slug) => sumTraffic([metrics.chain(slug).snapshot(), ...theirs.map((w) => w?.[slug])]),
      { lastAt: tenancy.ledger.lastFlushAt(), lastOk: tenancy.ledger.healthy(), failures: tenancy.flushFailures() },
      performance.now() - startedAt,
      fleet,
      asked === null ? undefined : { count: workers, unanswered: asked.unanswered },
    );
  };
  if (metricsApp !== null) serveMetrics(metricsApp, ctx.metrics, config.metrics!.token, status);
  const sockets: us_listen_socket[] = [];
  let metricsSocket: us_listen_socket | undefined;
  /** Closes the upstream sockets and the store; false when the ledger's last flush failed. */
  const release = (): Promise<boolean> => {
    wsRoute.closeAll(1001, 'Server shutting down');
    upstreamFailures.close();
    failedAnswers.close();
    connectionsRefused.close();
    gate.close();
    chainSet.closeAll();
    relayClient?.close();
    feedRelay?.close();
    eventRelay?.close();
    return tenancy.close();
  };
  let port: number;
  try {
    const mainPort = opts.port ?? config.server.port;
    if (app === null) {
      port = await choosePort(config.server.host, mainPort);
    } else {
      const socket = await (opts.worker !== undefined
        ? listenOn(app, config.server.host, mainPort, false)
        : config.server.tls
          ? listenRenewable(app, config.server.host, mainPort)
          : listenOn(app, config.server.host, mainPort));
      sockets.push(socket);
      port = uws().us_socket_local_port(socket);
    }
    if (management) sockets.push(await listenOn(management.app, management.host, opts.managementPort ?? management.port));
    if (metricsApp !== null) metricsSocket = await listenOn(metricsApp, config.metrics!.host, opts.metricsPort ?? config.metrics!.port);
    if (core) {
      const links = createWorkerLinks({
        log: opts.log,
        chains: relayHost!,
        chainOf: (slug) => chains.get(slug),
        feedsLog,
        tenancy,
        workers,
        writes,
        repeated: { upstreamFailures, failedAnswers, connectionsRefused },
        connections: gate.cap.memory,
        ...(opts.ca !== undefined ? { ca: opts.ca } : {}),
      });
      pool = createWorkerPool({
        script: WORKER_SCRIPT,
        count: workers,
        log: opts.log,
        stopGraceMs: config.server.stop_timeout_s * 1000 + WORKER_STOP_GRACE_MS,
        stallMs: config.server.worker_stall_s * 1000,
        maxHeapMb: config.server.worker_max_heap_mb,
        onStall: (index) => metrics.workerStall(index),
        connect: () => links.start(ctx.config, port),
        onRestart: (index) => metrics.workerRestart(index),
        onExit: (threadId) => tenancy.threadEnded(threadId),
      });
      if (workers > availableParallelism()) opts.log.warn('more worker threads than cores', { workers, cores: availableParallelism() });
      await pool.start();
      metrics.workersStarted(workers);
    }
  } catch (err) {
    for (const s of sockets) uws().us_listen_socket_close(s);
    await release();
    throw err;
  }
  if (opts.worker === undefined) void probeUpstreams(chains.values(), opts.log);
  if (opts.worker === undefined) gate.watch();
  // Stopped by release(), through each chain's close().
  for (const c of chains.values()) c.startHealthChecks();
  const managementPort = management ? uws().us_socket_local_port(sockets[app === null ? 0 : 1]!) : undefined;
  const metricsPort = metricsSocket ? uws().us_socket_local_port(metricsSocket) : undefined;
  // Scrapes go on while a stop drains the requests in flight; the listener closes with the rest.
  if (metricsSocket) sockets.push(metricsSocket);
  let stopped: Promise<number> | null = null;
  const stop = (): Promise<number> => {
    stopped ??= new Promise<number>((done) => {
      ctx.stopping = true;
      for (const s of sockets) uws().us_listen_socket_close(s);
      // The workers drain first, each as a single gateway does, and hand over what they hold (their debits).
      const drained = pool === null ? Promise.resolve(0) : pool.stop();
      const close = (): void => {
        clearTimeout(timer);
        ctx.onIdle = null;
        void drained.then((workersCut) => closeRest(ctx.inFlight + workersCut));
      };
      // The main thread of workers holds no client's socket: its workers waited for theirs.
      const closeAfterMs = core ? 0 : CLOSE_SOCKETS_AFTER_MS;
      const closeRest = async (cut: number): Promise<void> => {
        if (!(await release())) opts.log.error('the last ledger flush failed: debits since the previous flush are lost');
        // Then every socket still open (idle keep-alive clients, WebSockets whose close frame went out above):
        // closed listen sockets alone leave them to uWS, whose loop then holds a process that embeds the
        // gateway. A moment first, so the close frames queued above are flushed before the daemon exits.
        setTimeout(() => {
          if (app !== null) closeApp(app);
          for (const a of replacedApps) closeApp(a);
          if (management !== null) closeApp(management.app);
          if (metricsApp !== null) closeApp(metricsApp);
          done(cut);
        }, closeAfterMs);
      };
      const timer = setTimeout(close, ctx.config.server.stop_timeout_s * 1000);
      if (ctx.inFlight === 0) close();
      else ctx.onIdle = close;
    });
    return stopped;
  };
  const streamStats = async (): Promise<StreamStats> => {
    const own = threadStreamStats();
    if (pool === null) return own;
    // Upstream subscriptions and event streams are the main thread's; connections and subscribers the workers'.
    const theirs = (await pool.ask({ type: 'stats' }, answerMs)).values as Array<StreamStats | undefined>;
    for (const w of theirs) {
      if (w === undefined) continue;
      own.wsConnections += w.wsConnections;
      own.wsConnectionsByWorker.push(w.wsConnections);
      own.subscriptions += w.subscriptions;
      own.slowConsumers += w.slowConsumers;
      own.sseClients += w.sseClients;
      own.sseSlowClients += w.sseSlowClients;
    }
    return own;
  };
  const threadStreamStats = (): StreamStats => {
    let subscriptions = 0;
    let upstreamSubscriptions = 0;
    let sseTopics = 0;
    for (const chain of chains.values()) {
      subscriptions += chain.subscriptions?.stats().subscriptions ?? 0;
      upstreamSubscriptions += chain.feeds?.upstreamSubscriptions() ?? 0;
      sseTopics += chain.events?.topicsOpen().length ?? 0;
    }
    const sse = events.stats();
    return {
      wsConnections: wsRoute.server.conns.size,
      wsConnectionsByWorker: [],
      subscriptions,
      upstreamSubscriptions,
      slowConsumers: wsRoute.server.slowConsumers,
      sseClients: sse.clients,
      sseTopics,
      sseSlowClients: sse.slowClients,
    };
  };
  /**
   * A new certificate (same or new files, read again): a new app with it listens on the main port beside
   * the old one (listenRenewable), then the old listen socket closes. New connections get the new
   * certificate from then on, the connections open on the old app finish there, and none is refused in
   * between. Should the new app not get the port, the old one serves on and the reload fails.
   */
  const renewCertificate = async (next: Config): Promise<void> => {
    const fresh = mainApp(next);
    const mainPort = uws().us_socket_local_port(sockets[0]!);
    let socket: us_listen_socket;
    try {
      socket = await listenOn(fresh, config.server.host, mainPort, false);
    } catch (err) {
      closeApp(fresh);
      throw new Error(`the new TLS certificate could not be served on port ${mainPort}; the old one serves on`, { cause: err });
    }
    uws().us_listen_socket_close(sockets[0]!);
    sockets[0] = socket;
    replacedApps.push(app!);
    app = fresh;
  };
  const reload = async (next: Config): Promise<ReloadOutcome> => {
    if (pool !== null) {
      // Each worker renews its certificate and applies the rest to its own part; the first refusal fails the
      // reload, and so does a worker that does not answer (stalled: it is being replaced, with the config in
      // force). The workers that applied it go back to the config in force.
      const asked = await pool.ask({ type: 'reload', config: next });
      const refusal =
        asked.unanswered.length > 0
          ? `worker ${asked.unanswered.join(', ')} did not answer within server.worker_stall_s (${inForce.server.worker_stall_s} s)`
          : asked.values.find((r) => typeof r === 'string');
      if (refusal !== undefined) {
        await pool.ask({ type: 'reload', config: inForce });
        throw new Error(String(refusal));
      }
    } else if (next.server.tls !== undefined) await renewCertificate(next);
    inForce = next;
    ctx.config = next;
    ctx.corsOrigin = createCorsPolicy(next.server.cors_origins);
    managementDeps.config = next;
    table.chains = next.chains;
    table.defaultChain = next.server.default_chain;
    tenancy.reconfigure(next);
    responseCache.resize(cacheBytes(next));
    return chainSet.apply(next.chains);
  };
  const abandon = (): void => {
    tenancy.ledger.flush();
    // Close frames first: queued on sockets the closes below then end.
    wsRoute.closeAll(1001, 'Server restarting');
    for (const a of [app, ...replacedApps, management?.app, metricsApp]) if (a) closeApp(a);
  };
  const traffic = (): Record<string, ChainTraffic> =>
    Object.fromEntries([...chains.keys()].map((slug) => [slug, metrics.chain(slug).snapshot()]));
  return { port, managementPort, metricsPort, context: ctx, stop, streamStats, reload, traffic, abandon, workers: pool };
}

/**
 * The main port for worker threads to share: taken exclusively for a moment, so a port another process holds
 * is refused at start and port 0 gets its number, then let go for the workers to take with SO_REUSEPORT.
 */
async function choosePort(host: string, port: number): Promise<number> {
  const probeApp = uws().App();
  const probe = await listenOn(probeApp, host, port);
  const chosen = uws().us_socket_local_port(probe);
  uws().us_listen_socket_close(probe);
  closeApp(probeApp);
  return chosen;
}

/** Listens exclusively: uWS would otherwise share a taken port (SO_REUSEPORT) and split traffic unnoticed. */
function listenOn(app: TemplatedApp, host: string, port: number, exclusive = true): Promise<us_listen_socket> {
  const listen = app.listen as unknown as (h: string, p: number, o: number, cb: (s: us_listen_socket | false) => void) => void;
  return new Promise((resolve, reject) => {
    listen.call(app, host, port, exclusive ? LIBUS_LISTEN_EXCLUSIVE_PORT : 0, (socket) => {
      if (socket) resolve(socket);
      else reject(new Error(`cannot listen on ${host}:${port} (the port is taken or the address is not local)`));
    });
  });
}

/**
 * The TLS listener, which a certificate renewal must be able to join on its port (SO_REUSEPORT). The port
 * is first taken exclusively, so a port another process holds is still refused at start (and port 0 gets
 * its number), then let go and taken again shared. uWS sets SO_REUSEPORT only on a port given by number.
 */
async function listenRenewable(app: TemplatedApp, host: string, port: number): Promise<us_listen_socket> {
  const probe = await listenOn(app, host, port);
  const chosen = uws().us_socket_local_port(probe);
  uws().us_listen_socket_close(probe);
  return listenOn(app, host, chosen, false);
}

/** The separate management listener: /api/dashboard and nothing else. */
function routeManagementOnly(ctx: GatewayContext, deps: ManagementDeps, res: HttpResponse, req: HttpRequest): void {
  const url = req.getUrl();
  const meta = responseMeta(req, ctx.corsOrigin(req.getHeader('origin')));
  if (isManagementPath(url)) serveManagement(deps, res, req, req.getMethod(), url, meta);
  else sendRouteError(res, meta, 'not_found', `No route for ${url}`);
}
