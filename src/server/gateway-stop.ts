/**
 * A running thread's stop (graceful, or abandoned at once) and reload: the order of each is a contract the
 * e2e tests of stop, reload and worker faults hold it to.
 */
import type { Config } from '../config/schema.js';
import { cacheBytes, type GatewayThread, releaseThread } from './gateway-thread.js';
import { closeApps, closeListenSockets, type Listeners, renewCertificate } from './listeners.js';
import { createCorsPolicy } from './respond.js';
import { workerPool } from './role-parts.js';
import { reloadTracing, stopTracing } from '../pipeline/tracing.js';
import type { ReloadOutcome } from './app.js';

/** After a stop has released everything, open sockets are closed this much later, in ms. */
const CLOSE_SOCKETS_AFTER_MS = 100;

/** A running thread: its parts, its listeners, and its stop once begun. */
export interface RunningThread {
  readonly t: GatewayThread;
  readonly l: Listeners;
  stopped: Promise<number> | null;
}

/**
 * Graceful stop: stop accepting, let in-flight requests finish within `server.stop_timeout_s`, then close
 * upstream sockets. Resolves with the number of requests cut short by the deadline.
 */
export function stopThread(r: RunningThread): Promise<number> {
  const { t, l } = r;
  const ctx = t.ctx;
  r.stopped ??= new Promise<number>((done) => {
    ctx.stopping = true;
    closeListenSockets(l);
    // The workers drain first, each as a single gateway does, and hand over what they hold (their debits).
    const pool = workerPool(t.role);
    const drained = pool === null ? Promise.resolve(0) : pool.stop();
    const close = (): void => {
      clearTimeout(timer);
      ctx.onIdle = null;
      void drained.then((workersCut) => closeRest(ctx.inFlight + workersCut));
    };
    // The main thread of workers holds no client's socket: its workers waited for theirs.
    const closeAfterMs = t.role.kind === 'main' ? 0 : CLOSE_SOCKETS_AFTER_MS;
    const closeRest = async (cut: number): Promise<void> => {
      if (!(await releaseThread(t))) t.opts.log.error('the last ledger flush failed: debits since the previous flush are lost');
      // The spans still buffered are sent (a collector that does not answer costs the exporter's timeout at most).
      await stopTracing();
      // Then every socket still open (idle keep-alive clients, WebSockets whose close frame went out above):
      // closed listen sockets alone leave them to uWS, whose loop then holds a process that embeds the
      // gateway. A moment first, so the close frames queued above are flushed before the daemon exits.
      setTimeout(() => {
        closeApps(l);
        done(cut);
      }, closeAfterMs);
    };
    const timer = setTimeout(close, ctx.config.server.stop_timeout_s * 1000);
    if (ctx.inFlight === 0) close();
    else ctx.onIdle = close;
  });
  return r.stopped;
}

/**
 * Closes every socket at once, without a drain, and ships what this thread's ledger holds: what a worker
 * thread does as it ends abruptly (worker-thread.ts).
 */
export function abandonThread(r: RunningThread): void {
  r.t.tenancy.ledger.flush();
  // Close frames first: queued on sockets the closes below then end.
  r.t.wsRoute.closeAll(1001, 'Server restarting');
  closeApps(r.l);
}

/**
 * Applies a new config, already validated whole and checked by restartOnlyChanges: the workers' parts first
 * (the main thread of workers), or this thread's renewed certificate, then the rest.
 */
export async function reloadThread(r: RunningThread, next: Config): Promise<ReloadOutcome> {
  const { t, l } = r;
  const pool = workerPool(t.role);
  if (pool !== null) {
    // Each worker renews its certificate and applies the rest to its own part; the first refusal fails the
    // reload, and so does a worker that does not answer (stalled: it is being replaced, with the config in
    // force). The workers that applied it go back to the config in force.
    const asked = await pool.ask({ type: 'reload', config: next });
    const refusal =
      asked.unanswered.length > 0
        ? `worker ${asked.unanswered.join(', ')} did not answer within server.worker_stall_s (${t.inForce.server.worker_stall_s} s)`
        : asked.values.find((v) => typeof v === 'string');
    if (refusal !== undefined) {
      await pool.ask({ type: 'reload', config: t.inForce });
      throw new Error(String(refusal));
    }
  } else if (next.server.tls !== undefined) await renewCertificate(t, l, next);
  t.inForce = next;
  t.ctx.config = next;
  t.ctx.corsOrigin = createCorsPolicy(next.server.cors_origins);
  t.managementDeps.config = next;
  t.table.chains = next.chains;
  t.table.defaultChain = next.server.default_chain;
  t.tenancy.reconfigure(next);
  t.responseCache.resize(cacheBytes(t.role, next));
  // Each thread its own tracer (a worker's own reload does this part for it).
  reloadTracing(next.tracing);
  return t.chainSet.apply(next.chains);
}
