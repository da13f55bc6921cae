/**
 * The main listener's routes (health probes, the dashboard, WebSocket and every HTTP road) and the separate
 * management listener's: each request is routed here and handed to its road.
 */
import { performance } from 'node:perf_hooks';
import type { Config } from '../config/schema.js';
import type { GatewayContext } from '../pipeline/context.js';
import { chainOfKey } from '../pipeline/caller.js';
import { HTTP_RPC_ROUTE, handleHttpRpc } from './http-rpc.js';
import { type BeaconRoute, beaconRoute, handleBeacon, sendBeaconError } from './beacon.js';
import { openExchange } from './exchange.js';
import { routeDashboard } from './dashboard.js';
import { handleManagement, type ManagementDeps, managementVerbs } from './management.js';
import { type ChainHealthEntry, type HealthReply, healthz, readyz } from './health-report.js';
import { endHead, JSON_TYPE, type ResponseMeta, responseMeta, sendPreflight, sendRouteError, sendWhole, writeHead } from './respond.js';
import { isBeaconRest, isManagementPath, kindRefusal, RouteMemo, type RouteTable } from './routes.js';
import { holdForKey } from './held-request.js';
import { requestKey } from './request-key.js';
import { KEY_IN_PATH } from '../pipeline/request-fences.js';
import { autoCapabilities } from '../chain/node-findings.js';
import type { GatewayThread } from './gateway-thread.js';
import { type HttpRequest, type HttpResponse, type TemplatedApp, uws } from './uws.js';

/** An app with the config's TLS certificate, or a plain one. */
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

/** What the main listener's road reads, made once per app (mainApp): never per request. */
interface MainRoutes {
  readonly ctx: GatewayContext;
  /** Null when the management API has its own listener (management.port). */
  readonly management: ManagementDeps | null;
  readonly table: RouteTable;
  /** The table's routes of POSTs met lately. */
  readonly memo: RouteMemo;
  readonly beacon: BeaconRoute;
}

/** An HTTP request of the main listener, to its road: the request's exchange opened on its chain. */
function routeRequest(routes: MainRoutes, res: HttpResponse, req: HttpRequest): void {
  const { ctx, management, table, memo } = routes;
  const method = req.getMethod();
  const url = req.getUrl();
  const meta = responseMeta(req, ctx.corsOrigin(req.getHeader('origin')));
  const route = memo.resolve(method, url, req.getHeader('host'), table);
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
  const found = requestKey(req, route, false);
  if (found?.ok === false) {
    const x = openExchange(ctx, res, req, meta, ctx.chains.get(route.chain.slug)!, route);
    const refusal = { kind: 'refused', error: 'unauthorized', message: found.message } as const;
    if (isBeaconRest(route.rest)) routes.beacon.refuseCaller(x, refusal);
    else HTTP_RPC_ROUTE.refuseCaller(x, refusal);
    return;
  }
  const target = found?.target ?? route;
  const facts = found?.facts ?? KEY_IN_PATH;
  // Only a fleet can meet a key it does not know yet: one machine's road reads SQLite itself.
  if (ctx.tenancy.fleet !== null && target.key !== null && ctx.tenancy.keys.cached(target.key) === undefined) {
    holdForKey(ctx, res, req, target.key, method !== 'get' && method !== 'head', (r, q) => routeRequest(routes, r, q), {
      chain: route.chain.slug,
      transport: isBeaconRest(route.rest) ? 'beacon' : 'http',
      meta,
    });
    return;
  }
  let chain = ctx.chains.get(route.chain.slug)!;
  if (target.key !== null && !route.named) {
    const own = chainOfKey(ctx, target.key);
    if (own === undefined) {
      // A key that does not exist has no network whose kind could refuse the path: it is 401 whatever the
      // path, in the Beacon shape for a Beacon path and JSON-RPC's otherwise, by the handlers' own road.
      const x = openExchange(ctx, res, req, meta, chain, target, facts);
      if (isBeaconRest(route.rest)) handleBeacon(x, routes.beacon);
      else handleHttpRpc(x, HTTP_RPC_ROUTE);
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
      handleBeacon(openExchange(ctx, res, req, meta, chain, target, facts), routes.beacon);
    }
    return;
  }
  handleHttpRpc(openExchange(ctx, res, req, meta, chain, target, facts), HTTP_RPC_ROUTE);
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

/** The main listener's app, with every route; made again by a reload that renews the TLS certificate. */
export function mainApp(t: GatewayThread, c: Config): TemplatedApp {
  const { ctx, started: config } = t;
  const a = createApp(c);
  const healthEntries = (): ChainHealthEntry[] =>
    [...t.chains.values()].map((chain) => ({
      slug: chain.config.slug,
      health: chain.health,
      served: chain.served,
      finality: chain.finality,
      capabilities: (i: number) => autoCapabilities(chain.config.upstreams[i], chain.findings[i]),
    }));
  for (const headOnly of [false, true]) {
    const route = headOnly ? a.head.bind(a) : a.get.bind(a);
    route('/healthz', (res, req) =>
      serveHealth(res, req, () => healthz(healthEntries(), performance.now() - t.startedAt), ctx.stopping, false, headOnly),
    );
    route('/readyz', (res, req) => serveHealth(res, req, () => readyz(healthEntries()), ctx.stopping, true, headOnly));
  }
  if (!config.management) routeDashboard(a, t.dashboard);
  a.ws('/*', t.wsRoute.behavior);
  const routes: MainRoutes = {
    ctx,
    management: config.management ? null : t.managementDeps,
    table: t.table,
    memo: new RouteMemo(),
    beacon: beaconRoute(t.events.serve),
  };
  a.any('/*', (res, req) => {
    if (!t.gate.refuseRequest(res)) routeRequest(routes, res, req);
  });
  return a;
}

/** The separate management listener's app (management.port): the dashboard and its API. */
export function managementApp(t: GatewayThread, c: Config): TemplatedApp {
  const mapp = createApp(c);
  routeDashboard(mapp, t.dashboard);
  mapp.any('/*', (res, req) => routeManagementOnly(t.ctx, t.managementDeps, res, req));
  return mapp;
}

/** The separate management listener: /api/dashboard and nothing else. */
function routeManagementOnly(ctx: GatewayContext, deps: ManagementDeps, res: HttpResponse, req: HttpRequest): void {
  const url = req.getUrl();
  const meta = responseMeta(req, ctx.corsOrigin(req.getHeader('origin')));
  if (isManagementPath(url)) serveManagement(deps, res, req, req.getMethod(), url, meta);
  else sendRouteError(res, meta, 'not_found', `No route for ${url}`);
}
