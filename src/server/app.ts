/**
 * The gateway of one thread: made from its role (thread-role.ts) into its parts (gateway-thread.ts), its
 * listeners (listeners.ts), and for the main thread of workers its worker threads; stopped and reloaded by
 * gateway-stop.ts, its statistics read by stream-stats.ts.
 */
import { availableParallelism } from 'node:os';
import type { Config } from '../config/schema.js';
import type { Logger } from '../log.js';
import type { ChainRuntimeOptions } from '../chain/runtime.js';
import { probeUpstreams } from '../chain/startup-probe.js';
import type { GatewayContext } from '../pipeline/context.js';
import type { Metrics } from '../metrics/registry.js';
import type { ChainTraffic } from './status-report.js';
import { type GatewayThread, openThread, releaseThread } from './gateway-thread.js';
import { type RoleParts, workerPool } from './role-parts.js';
import { abandonThread, reloadThread, type RunningThread, stopThread } from './gateway-stop.js';
import { listenAll, openListeners, portsOf } from './listeners.js';
import { type StreamStats, streamStats, traffic } from './stream-stats.js';
import { threadRole } from './thread-role.js';
import { createWorkerLinks } from './worker-links.js';
import { createWorkerPool, type WorkerPool } from './worker-pool.js';
import type { WorkerSide } from './worker-link.js';
import { uws } from './uws.js';

export type { StreamStats } from './stream-stats.js';

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
  /** Wall-clock ms since the epoch, for the end of a rotated key's grace (tests drive a fake clock); Date.now by default. */
  now?: () => number;
  /** Set in a worker thread (server/worker-thread.ts): what it shares with the main thread. */
  worker?: WorkerSide;
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

/** The main thread's worker threads, started on the main port it chose; resolves once each listens. */
async function startWorkers(t: GatewayThread, role: Extract<RoleParts, { kind: 'main' }>, port: number): Promise<void> {
  const { opts, metrics, tenancy, ctx } = t;
  const workers = role.workers;
  const config = t.started;
  const workerLinks = createWorkerLinks({
    log: opts.log,
    chains: role.host,
    chainOf: (slug) => t.chains.get(slug),
    feedsLog: t.feedsLog,
    tenancy,
    workers,
    writes: t.writes,
    heads: t.heads,
    repeated: { ...t.repeated },
    connections: t.gate.cap.memory,
    ...(opts.ca !== undefined ? { ca: opts.ca } : {}),
  });
  const pool = createWorkerPool({
    script: WORKER_SCRIPT,
    count: workers,
    log: opts.log,
    stopGraceMs: config.server.stop_timeout_s * 1000 + WORKER_STOP_GRACE_MS,
    stallMs: config.server.worker_stall_s * 1000,
    maxHeapMb: config.server.worker_max_heap_mb,
    onStall: (index) => metrics.workerStall(index),
    connect: () => workerLinks.start(ctx.config, port),
    onRestart: (index) => metrics.workerRestart(index),
    onExit: (threadId) => tenancy.threadEnded(threadId),
  });
  role.pool = pool;
  if (workers > availableParallelism()) opts.log.warn('more worker threads than cores', { workers, cores: availableParallelism() });
  await pool.start();
  metrics.workersStarted(workers);
}

/** Builds the chains' upstream clients, starts listening, and returns the running gateway. */
export async function startGateway(config: Config, opts: GatewayOptions): Promise<Gateway> {
  const role = threadRole(config, opts.worker);
  const t = await openThread(config, opts, role);
  const l = openListeners(t);
  let listened: Awaited<ReturnType<typeof listenAll>>;
  try {
    listened = await listenAll(t, l);
    if (t.role.kind === 'main') await startWorkers(t, t.role, listened.port);
  } catch (err) {
    for (const s of l.sockets) uws().us_listen_socket_close(s);
    await releaseThread(t);
    throw err;
  }
  if (role.kind !== 'worker') void probeUpstreams(t.chains.values(), opts.log);
  if (role.kind !== 'worker') t.gate.watch();
  // Stopped by releaseThread, through each chain's close().
  for (const c of t.chains.values()) c.startHealthChecks();
  const { managementPort, metricsPort } = portsOf(l, listened.metricsSocket);
  const running: RunningThread = { t, l, stopped: null };
  return {
    port: listened.port,
    managementPort,
    metricsPort,
    context: t.ctx,
    stop: () => stopThread(running),
    streamStats: () => streamStats(t),
    reload: (next) => reloadThread(running, next),
    traffic: () => traffic(t),
    abandon: () => abandonThread(running),
    workers: workerPool(t.role),
  };
}
