/**
 * A thread's listeners: the main port (with its TLS certificate, renewed in place by a reload), the separate
 * management and metrics ports, and their closing. Which a thread has depends on its role: the main thread of
 * workers serves no client (it only picks the port its workers share), a worker has no management or metrics
 * listener (the main thread's serve the process).
 */
import { statusOf } from './stream-stats.js';
import { serveMetrics } from './metrics-listener.js';
import { mainApp, managementApp } from './main-app.js';
import type { GatewayThread } from './gateway-thread.js';
import type { Config } from '../config/schema.js';
import { unreachableRole } from './thread-role.js';
import { closeApp, type TemplatedApp, type us_listen_socket, uws } from './uws.js';

/** uWS's ListenOptions.LIBUS_LISTEN_EXCLUSIVE_PORT (a const enum in its typings, not importable as a value). */
const LIBUS_LISTEN_EXCLUSIVE_PORT = 1;

export interface Listeners {
  /** The main listener's app; null in the main thread of workers (they serve the port). */
  app: TemplatedApp | null;
  /** Apps a certificate renewal replaced: their connections finish on them, and a stop closes them. */
  readonly replacedApps: TemplatedApp[];
  readonly management: { app: TemplatedApp; host: string; port: number } | null;
  readonly metricsApp: TemplatedApp | null;
  /** Listen sockets open: the main port's first (when this thread has an app), then management's, then metrics'. */
  readonly sockets: us_listen_socket[];
}

/** The apps of a thread of this role, with their routes, not listening yet. */
export function openListeners(t: GatewayThread): Listeners {
  const config = t.started;
  const serving = t.role.kind !== 'worker';
  const management =
    config.management && serving ? { app: managementApp(t, config), host: config.management.host, port: config.management.port } : null;
  const metricsApp = config.metrics && serving ? uws().App() : null;
  const l: Listeners = { app: t.role.kind === 'main' ? null : mainApp(t, config), replacedApps: [], management, metricsApp, sockets: [] };
  if (metricsApp !== null)
    serveMetrics(metricsApp, t.ctx.metrics, config.metrics!.token, () => statusOf(t), {
      chains: () => t.chains,
      cordons: t.cordons,
      log: t.opts.log,
    });
  return l;
}

/**
 * Listens on every port of this thread, in order: the main port, management's, metrics'. Resolves with the
 * main port and the metrics socket, which joins `l.sockets` only once the gateway runs (portsOf); the caller
 * closes `l.sockets` when this fails.
 */
export async function listenAll(t: GatewayThread, l: Listeners): Promise<{ port: number; metricsSocket: us_listen_socket | undefined }> {
  const config = t.started;
  const opts = t.opts;
  const mainPort = opts.port ?? config.server.port;
  let port: number;
  const app = l.app;
  switch (t.role.kind) {
    case 'main':
      port = await choosePort(config.server.host, mainPort);
      break;
    case 'worker':
      port = listened(l, await listenOn(app!, config.server.host, mainPort, false));
      break;
    case 'alone':
      port = listened(
        l,
        await (config.server.tls ? listenRenewable(app!, config.server.host, mainPort) : listenOn(app!, config.server.host, mainPort)),
      );
      break;
    default:
      return unreachableRole(t.role);
  }
  const management = l.management;
  if (management) l.sockets.push(await listenOn(management.app, management.host, opts.managementPort ?? management.port));
  let metricsSocket: us_listen_socket | undefined;
  if (l.metricsApp !== null) metricsSocket = await listenOn(l.metricsApp, config.metrics!.host, opts.metricsPort ?? config.metrics!.port);
  return { port, metricsSocket };
}

function listened(l: Listeners, socket: us_listen_socket): number {
  l.sockets.push(socket);
  return uws().us_socket_local_port(socket);
}

/**
 * The management and metrics ports, once the gateway runs. Scrapes go on while a stop drains the requests in
 * flight: the metrics listener joins the others now, to close with the rest.
 */
export function portsOf(
  l: Listeners,
  metricsSocket: us_listen_socket | undefined,
): { managementPort: number | undefined; metricsPort: number | undefined } {
  const managementPort = l.management ? uws().us_socket_local_port(l.sockets[l.app === null ? 0 : 1]!) : undefined;
  const metricsPort = metricsSocket ? uws().us_socket_local_port(metricsSocket) : undefined;
  if (metricsSocket) l.sockets.push(metricsSocket);
  return { managementPort, metricsPort };
}

/** Stops accepting: every listen socket closes. */
export function closeListenSockets(l: Listeners): void {
  for (const s of l.sockets) uws().us_listen_socket_close(s);
}

/** Closes every app, so the sockets still open on them close too. */
export function closeApps(l: Listeners): void {
  for (const a of [l.app, ...l.replacedApps, l.management?.app, l.metricsApp]) if (a) closeApp(a);
}

/**
 * A new certificate (same or new files, read again): a new app with it listens on the main port beside
 * the old one (listenRenewable), then the old listen socket closes. New connections get the new
 * certificate from then on, the connections open on the old app finish there, and none is refused in
 * between. Should the new app not get the port, the old one serves on and the reload fails.
 */
export async function renewCertificate(t: GatewayThread, l: Listeners, next: Config): Promise<void> {
  const fresh = mainApp(t, next);
  const mainPort = uws().us_socket_local_port(l.sockets[0]!);
  let socket: us_listen_socket;
  try {
    socket = await listenOn(fresh, t.started.server.host, mainPort, false);
  } catch (err) {
    closeApp(fresh);
    throw new Error(`the new TLS certificate could not be served on port ${mainPort}; the old one serves on`, { cause: err });
  }
  uws().us_listen_socket_close(l.sockets[0]!);
  l.sockets[0] = socket;
  l.replacedApps.push(l.app!);
  l.app = fresh;
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
