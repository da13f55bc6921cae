/**
 * The parts of one thread of the gateway, whatever its role: its metrics and tenancy, its chains, its
 * connection gate, the context every request reads, and the roads (WebSocket, Beacon events) that hold
 * clients. startGateway makes them once (openThread), listens (listeners.ts), and stops, reloads and reports
 * through them (gateway-stop.ts, stream-stats.ts).
 */
import { type AlertWatch, startAlertWatch } from '../alerts/alert-watch.js';
import { startTracing } from '../pipeline/tracing.js';
import { performance } from 'node:perf_hooks';
import type { ChainConfig, Config } from '../config/schema.js';
import { createForwardingRepeatedLog, createRepeatedLog, type RepeatedLog } from '../repeated-log.js';
import { type ChainRuntime, type ChainRuntimeOptions, createChainRuntime } from '../chain/runtime.js';
import { createSwappableCache, type SwappableCache } from '../chain/response-cache.js';
import { createWriteMark, type WriteMark } from '../chain/write-mark.js';
import { type Cordons, createCordons } from '../chain/cordons.js';
import { createSharedHeads, type SharedHeads } from '../chain/shared-heads.js';
import { probeUpstreams } from '../chain/startup-probe.js';
import type { FeedsLog } from '../fanout/feeds.js';
import { createMetrics, type Metrics, noMetrics } from '../metrics/registry.js';
import type { GatewayContext } from '../pipeline/context.js';
import { createTenancy, type Tenancy, type TenancyThreads } from '../pipeline/tenancy.js';
import { openFleetTenancy } from '../pipeline/fleet-tenancy.js';
import { type ChainSet, createChainSet } from './chain-set.js';
import { chainSharing, closeRoleParts, type RoleParts, roleParts, workerPool } from './role-parts.js';
import { type BeaconEvents, createBeaconEvents } from './beacon-events.js';
import { type ConnectionGate, createConnectionGate } from './connection-gate.js';
import { type DashboardAssets, loadDashboardAssets } from './dashboard.js';
import type { ManagementDeps } from './management.js';
import { clientLimitAddress } from './peer-address.js';
import { createCorsPolicy } from './respond.js';
import type { RouteTable } from './routes.js';
import type { FleetStatusSource } from './status-report.js';
import { type ThreadRole, unreachableRole, workersStarted } from './thread-role.js';
import type { WorkerPool } from './worker-pool.js';
import { createWsRoute, notificationRu, type WsRoute } from './ws-route.js';
import type { GatewayOptions } from './app.js';

/**
 * How long a scrape (/metrics, /status, stream stats) waits for a worker's values at most, in ms: below
 * `chaingate status`'s own patience (5 s), so a stalled worker leaves a report without its part, not none.
 */
const WORKER_ANSWER_MS = 2_000;

/** The logs of repeated conditions, by the name a worker forwards its occurrences under. */
export interface RepeatedLogs {
  upstreamFailures: RepeatedLog;
  failedAnswers: RepeatedLog;
  connectionsRefused: RepeatedLog;
}

/** What the management API and GET /status read of the store: the one spot that differs in a fleet. */
export interface StoreViews {
  management: Pick<ManagementDeps, 'accounts' | 'balance'>;
  /** The fleet's instances for GET /status; undefined on one machine (the report has no fleet section). */
  fleet: FleetStatusSource | undefined;
}

export interface GatewayThread {
  /** The thread's role, built into what only a thread of that role has. */
  readonly role: RoleParts;
  readonly opts: GatewayOptions;
  /** The config the thread started with: what only a restart changes (its listeners) is read from it. */
  readonly started: Config;
  /** The config in force: chains are made before ctx exists, and again at reloads (ctx.config is the new one). */
  inForce: Config;
  readonly metrics: Metrics;
  readonly tenancy: Tenancy;
  /** One store for the gateway (cache.max_bytes is one budget): each chain reads it through its own view. */
  readonly responseCache: SwappableCache;
  readonly writes: WriteMark;
  /** The nodes the operator cordoned, by chain slug and node name: outside the runtimes, so a reload keeps them. */
  readonly cordons: Cordons;
  readonly heads: SharedHeads;
  readonly feedsLog: FeedsLog;
  readonly chainSet: ChainSet;
  readonly chains: ReadonlyMap<string, ChainRuntime>;
  readonly repeated: RepeatedLogs;
  readonly gate: ConnectionGate;
  readonly ctx: GatewayContext;
  readonly table: RouteTable;
  readonly views: StoreViews;
  readonly managementDeps: ManagementDeps;
  readonly wsRoute: WsRoute;
  readonly events: BeaconEvents;
  readonly startedAt: number;
  readonly dashboard: DashboardAssets;
  /** The sender of owners' webhooks: on the thread that owns the ledger only (alone or main), null in a worker. */
  readonly alerts: AlertWatch | null;
  /** How long a scrape waits for a worker's values, in ms. */
  readonly answerMs: number;
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

/** The registry a thread measures into; the main thread of workers asks them for theirs at each scrape. */
function threadMetrics(config: Config, opts: GatewayOptions, role: ThreadRole, poolOf: () => WorkerPool, answerMs: number): Metrics {
  if (opts.metrics !== undefined) return opts.metrics;
  if (!config.metrics) return noMetrics();
  switch (role.kind) {
    case 'alone':
      return createMetrics({});
    case 'main':
      return createMetrics({ workers: async () => (await poolOf().ask({ type: 'metrics' }, answerMs)).values as never });
    case 'worker':
      return createMetrics({ exposition: false });
    default:
      return unreachableRole(role);
  }
}

function tenancyThreads(role: ThreadRole): TenancyThreads {
  return role.kind === 'worker' ? { role: 'worker', shared: role.side.tenancy } : { role: role.kind };
}

/**
 * With workers, each worker keeps its own response store (a shared one would cost a copy and a lock per hit)
 * with an equal share of the budget; the main thread serves no call and keeps none.
 */
function cacheShare(role: ThreadRole): number {
  switch (role.kind) {
    case 'alone':
      return 1;
    case 'main':
      return Number.POSITIVE_INFINITY;
    case 'worker':
      return role.side.workers;
    default:
      return unreachableRole(role);
  }
}

/** The response cache's budget for this thread under config `c`. */
export function cacheBytes(role: ThreadRole, c: Config): number {
  return Math.floor(c.cache.max_bytes / cacheShare(role));
}

/** A worker's occurrences are counted by the main thread's logs of the same name: one condition per process. */
function repeatedLog(opts: GatewayOptions, role: ThreadRole, name: string): RepeatedLog {
  return role.kind === 'worker' ? createForwardingRepeatedLog(name, role.side.forward) : createRepeatedLog(opts.log);
}

/** What a chain's runtime is made with, from the config in force when it is made. */
function chainOptions(
  t: Pick<GatewayThread, 'opts' | 'feedsLog' | 'responseCache' | 'tenancy'>,
  c: Config,
  ctx: () => GatewayContext,
): ChainRuntimeOptions {
  const { opts, tenancy } = t;
  return {
    ...(opts.ca !== undefined ? { ca: opts.ca } : {}),
    ...(opts.prober !== undefined ? { prober: opts.prober } : {}),
    log: opts.log,
    maxUpstreamOutageS: c.websocket.max_upstream_outage_s,
    replayBlocks: c.subscriptions.replay_blocks,
    logMemory: {
      grace_s: c.subscriptions.retract_grace_s,
      max_filters: c.subscriptions.retract_max_filters,
      max_bytes: c.subscriptions.retract_max_bytes,
    },
    sse: c.sse,
    feedsLog: t.feedsLog,
    responseCache: t.responseCache,
    filters: c.filters,
    transactions: c.transactions,
    stopping: () => ctx().stopping,
    subscriptionMetering: {
      // Read at each delivery, so a reload's price applies to subscriptions already open.
      ruPerMessage: (bytes) => notificationRu(ctx().config.ru.notification_per_250_bytes, bytes),
      charge: (ownerId, endpointId, ru, deliveries) =>
        tenancy.ledger.chargeDeliveries(ownerId, ru, { endpointId, method: 'eth_subscription', status: 0 }, deliveries),
    },
  };
}

/**
 * The beacon chain whose checkpoints decide chain `c`'s finality (config chains.<slug>.beacon): this thread's
 * runtime of it, looked up at each reading, so a reload that makes it anew is followed.
 */
function beaconOf(t: Pick<GatewayThread, 'chains'>, c: ChainConfig): Pick<ChainRuntimeOptions, 'beacon'> {
  const slug = c.kind === 'evm' ? c.beacon : undefined;
  return slug === undefined ? {} : { beacon: () => t.chains.get(slug) ?? null };
}

/** A thread while openThread makes its parts, one field after the other. */
type ThreadUnderway = { -readonly [K in keyof GatewayThread]: GatewayThread[K] };

/** Makes the parts of a thread of `role`, in the order each needs the ones before it. */
export async function openThread(config: Config, opts: GatewayOptions, role: ThreadRole): Promise<GatewayThread> {
  const answerMs = Math.min(WORKER_ANSWER_MS, config.server.worker_stall_s * 1000);
  // Filled in as the parts are made: the closures below read it only once the thread runs.
  const t = { opts, started: config, inForce: config, answerMs } as ThreadUnderway;
  // This thread's own tracer provider (each worker's too), when tracing.otlp_endpoint is set.
  startTracing(config.tracing);
  t.metrics = threadMetrics(config, opts, role, () => workerPool(t.role)!, answerMs);
  t.tenancy =
    config.storage.url !== undefined
      ? await openFleetTenancy(config, opts.log, t.metrics)
      : createTenancy(config, opts.log, t.metrics, tenancyThreads(role));
  t.responseCache = createSwappableCache(cacheBytes(role, config));
  t.feedsLog = (level, msg, fields) => opts.log[level](msg, fields);
  t.cordons = createCordons();
  t.role = roleParts(role, t.feedsLog, (slug) => t.chains.get(slug)?.filters, t.cordons);
  t.writes = createWriteMark(role.kind === 'worker' ? role.side.writes : undefined);
  t.heads = createSharedHeads(role.kind === 'worker' ? role.side.heads : undefined);
  const ctxOf = (): GatewayContext => t.ctx;
  t.chainSet = createChainSet(config.chains, {
    make: (c) =>
      createChainRuntime(c, {
        ...chainOptions(t, t.inForce, ctxOf),
        metrics: t.metrics.chain(c.slug),
        ...chainSharing(t.role, c.slug, t.inForce, t.writes),
        servedHeadCell: t.heads.cell(c.slug),
        cordons: t.cordons,
        ...beaconOf(t, c),
      }),
    start(chain) {
      chain.startHealthChecks();
      if (role.kind !== 'worker') void probeUpstreams([chain], opts.log);
    },
    closeClients(chain) {
      t.wsRoute.closeChain(chain, 1001, 'chain removed');
    },
    // A retired runtime (a reload changed its chain) is closed once nothing uses it: no WebSocket or event-stream
    // client, and no call in flight or queued on its nodes' sockets, whose answers closing them would cut.
    inUse: (chain) => t.wsRoute.usesChain(chain) || (chain.events?.clients() ?? 0) > 0 || callsInFlight(chain),
    removed: (slug) => t.metrics.chain(slug).remove(),
  });
  t.chains = t.chainSet.live;
  t.repeated = {
    upstreamFailures: repeatedLog(opts, role, 'upstreamFailures'),
    failedAnswers: repeatedLog(opts, role, 'failedAnswers'),
    connectionsRefused: repeatedLog(opts, role, 'connectionsRefused'),
  };
  // After the store opened: the default cap reserves what the process holds by now.
  t.gate = createConnectionGate(config, {
    log: opts.log,
    metrics: t.metrics,
    refusals: t.repeated.connectionsRefused,
    workers: workersStarted(role),
    ...(role.kind === 'worker' ? { memory: role.side.connections } : {}),
  });
  openRoads(t, config);
  return t;
}

/** The context every request reads, the management API's needs and the roads that hold clients. */
function openRoads(t: ThreadUnderway, config: Config): void {
  const { tenancy, opts } = t;
  const ctx: GatewayContext = {
    config,
    chains: t.chains,
    log: opts.log,
    upstreamFailures: t.repeated.upstreamFailures,
    failedAnswers: t.repeated.failedAnswers,
    connections: t.gate.cap,
    tenancy,
    corsOrigin: createCorsPolicy(config.server.cors_origins),
    metrics: t.metrics,
    now: opts.now ?? Date.now,
    inFlight: 0,
    stopping: false,
    onIdle: null,
  };
  t.ctx = ctx;
  t.table = { chains: config.chains, defaultChain: config.server.default_chain };
  t.views = storeViews(tenancy);
  t.managementDeps = {
    config,
    ...t.views.management,
    onEndpointDeleted: (endpointId) => closeEndpoint(endpointId),
    limiter: tenancy.limiter,
    unknownKeys: tenancy.unknownKeys,
    clientIp: (res, req) => clientLimitAddress(res, req, ctx.config.server),
    onStoreFault: (during, err) => tenancy.storeFault(during, err),
  };
  t.wsRoute = createWsRoute(ctx, t.table, t.gate);
  t.events = createBeaconEvents(ctx);
  // A key deleted through this thread's management API closes the sockets and streams it opened.
  const closeEndpoint = (endpointId: string): void => {
    t.wsRoute.closeEndpoint(endpointId, 1008, 'API key revoked');
    t.events.closeEndpoint(endpointId);
  };
  // Any other change of an endpoint (deleted or suspended elsewhere, restrictions set, key rotated): each
  // socket and stream asks again what its key grants, and closes now, at the key's end, or not at all.
  tenancy.onRevoked((endpointId) => {
    t.wsRoute.endpointChanged(endpointId);
    t.events.endpointChanged(endpointId);
  });
  t.alerts =
    t.role.kind === 'worker'
      ? null
      : startAlertWatch({
          store: tenancy.accounts.webhooks,
          balance: t.views.management.balance,
          settings: () => t.inForce.webhooks,
          onError: (err) => opts.log.warn('webhook alerts: a check failed; the next one retries', { err: err.message }),
        });
  t.startedAt = performance.now();
  // The owners' page, beside the management API it calls (same origin, so its CSP can say connect-src 'self').
  t.dashboard = loadDashboardAssets();
}

/** Closes the upstream sockets and the store; false when the ledger's last flush failed. */
export function releaseThread(t: GatewayThread): Promise<boolean> {
  t.wsRoute.closeAll(1001, 'Server shutting down');
  t.repeated.upstreamFailures.close();
  t.repeated.failedAnswers.close();
  t.repeated.connectionsRefused.close();
  t.gate.close();
  t.chainSet.closeAll();
  closeRoleParts(t.role);
  // The alerts' last writes (a delivery's outcome) before the store closes.
  return (t.alerts?.close() ?? Promise.resolve()).then(() => t.tenancy.close());
}

/**
 * Whether any of `chain`'s nodes has a call in flight (chain/attempts.ts NodeAttempt: until its answer's head or
 * whole answer) or an answer still streaming from it (a call the reload found under way). Not its sockets' busy
 * count: that holds the chain's own probes too, and a hanging node keeps one in flight most of the time.
 */
export function callsInFlight(chain: Pick<ChainRuntime, 'health'>): boolean {
  return chain.health.upstreams.some((u) => u.inflight > 0 || u.streaming > 0);
}
