import type { Config } from '../config/schema.js';
import { ERRORS, managementErrorBody } from '../errors.js';
import type { Logger } from '../log.js';
import { type ChainRuntime, type ChainRuntimeOptions, createChainRuntime } from '../upstreams/chain.js';
import type { GatewayContext } from './context.js';
import { handleHttpRpc } from './http-rpc.js';
import { createCorsPolicy, JSON_TYPE, type ResponseMeta, sendPreflight, sendWhole } from './respond.js';
import { resolveRoute, type RouteTable } from './routes.js';
import { type TemplatedApp, type us_listen_socket, uws } from './uws.js';

/** uWS's ListenOptions.LIBUS_LISTEN_EXCLUSIVE_PORT (a const enum in its typings, so not importable as a value). */
const LIBUS_LISTEN_EXCLUSIVE_PORT = 1;

export interface Gateway {
  /** The port actually listened on (useful with port 0). */
  readonly port: number;
  readonly context: GatewayContext;
  /**
   * Graceful stop: stop accepting, let in-flight requests finish within `server.stop_timeout_s`, then
   * close upstream sockets. Resolves with the number of requests cut short by the deadline.
   */
  stop(): Promise<number>;
}

export interface GatewayOptions extends ChainRuntimeOptions {
  log: Logger;
  /** Overrides server.port (the devnet's --port, tests' 0). */
  port?: number;
}

function createApp(config: Config): TemplatedApp {
  const u = uws();
  const tls = config.server.tls;
  if (!tls) return u.App();
  return u.SSLApp({ cert_file_name: tls.cert_file, key_file_name: tls.key_file, ...(tls.passphrase ? { passphrase: tls.passphrase } : {}) });
}

function routeRequest(ctx: GatewayContext, table: RouteTable, res: Parameters<Parameters<TemplatedApp['any']>[1]>[0], req: Parameters<Parameters<TemplatedApp['any']>[1]>[1]): void {
  const method = req.getMethod();
  const url = req.getUrl();
  const meta: ResponseMeta = { allowOrigin: ctx.corsOrigin(req.getHeader('origin')) };
  const route = resolveRoute(method, url, req.getHeader('host'), table);
  if (route.kind === 'preflight') {
    sendPreflight(res, meta, req.getHeader('access-control-request-headers'));
    return;
  }
  if (route.kind === 'error') {
    const headers: Array<[string, string]> = route.allow ? [['allow', route.allow]] : [];
    sendWhole(res, ERRORS[route.code].http, meta, JSON_TYPE, managementErrorBody(route.code, route.message), headers, true);
    return;
  }
  const chain = ctx.chains.get(route.chain.slug)!;
  if (route.chain.kind === 'beacon') {
    sendWhole(res, 404, meta, JSON_TYPE, managementErrorBody('not_found', `Chain '${route.chain.slug}' is a beacon chain: it serves the Beacon REST API, not JSON-RPC`), undefined, true);
    return;
  }
  handleHttpRpc(ctx, res, req, chain, route.key, meta);
}

/** Builds the chains' upstream clients, starts listening, and returns the running gateway. */
export function startGateway(config: Config, opts: GatewayOptions): Promise<Gateway> {
  const chains = new Map<string, ChainRuntime>();
  for (const c of Object.values(config.chains)) chains.set(c.slug, createChainRuntime(c, opts));
  const ctx: GatewayContext = {
    config, chains, log: opts.log, corsOrigin: createCorsPolicy(config.server.cors_origins),
    inFlight: 0, stopping: false, onIdle: null,
  };
  const table: RouteTable = { chains: config.chains, defaultChain: config.server.default_chain };
  const app = createApp(config);
  app.any('/*', (res, req) => routeRequest(ctx, table, res, req));
  const host = config.server.host;
  const wantPort = opts.port ?? config.server.port;
  return new Promise((resolve, reject) => {
    // Exclusive: uWS would otherwise share a taken port with SO_REUSEPORT and two daemons would split the traffic unnoticed.
    const listen = app.listen as unknown as (h: string, p: number, o: number, cb: (s: us_listen_socket | false) => void) => void;
    listen.call(app, host, wantPort, LIBUS_LISTEN_EXCLUSIVE_PORT, (listenSocket: us_listen_socket | false) => {
      if (!listenSocket) {
        for (const c of chains.values()) c.close();
        reject(new Error(`cannot listen on ${host}:${wantPort} (the port is taken or the address is not local)`));
        return;
      }
      const port = uws().us_socket_local_port(listenSocket);
      let stopped: Promise<number> | null = null;
      const stop = (): Promise<number> => {
        stopped ??= new Promise<number>((done) => {
          ctx.stopping = true;
          uws().us_listen_socket_close(listenSocket);
          const close = (): void => {
            clearTimeout(timer);
            ctx.onIdle = null;
            const cut = ctx.inFlight;
            for (const c of chains.values()) c.close();
            done(cut);
          };
          const timer = setTimeout(close, config.server.stop_timeout_s * 1000);
          if (ctx.inFlight === 0) close();
          else ctx.onIdle = close;
        });
        return stopped;
      };
      resolve({ port, context: ctx, stop });
    });
  });
}
