/**
 * Where client connections are refused when the process must take no more (limits/connection-cap.ts): its
 * cap resolved and logged at start, the fd watch started on the main thread, and the refusal itself, the same
 * for every thread: HTTP 503 with the connection closed (a WebSocket is refused so before its upgrade),
 * counted in chaingate_connections_refused_total{reason} and logged once per condition (a repeated log: a
 * line when it starts, summaries while it lasts, one when it ends).
 *
 * Health checks (/healthz, /readyz) are routes of their own and never asked; the metrics and management
 * listeners are other apps. They keep answering: the cap leaves them descriptors (fd-watch.ts HEADROOM).
 */
import type { Config } from '../config/schema.js';
import { ERRORS, rpcErrorBody } from '../errors.js';
import { type ConnectionCap, type ConnectionRefusal, createConnectionCap } from '../limits/connection-cap.js';
import type { Logger } from '../log.js';
import type { Metrics } from '../metrics/registry.js';
import type { RepeatedLog } from '../repeated-log.js';
import { openFiles, openFilesLimit, resolveMaxConnections, startFdWatch } from './fd-watch.js';
import { JSON_TYPE, sendWhole } from './respond.js';
import type { HttpResponse } from './uws.js';

/** What each refusal says, naming the setting or the limit behind it. */
const REFUSALS: Readonly<Record<ConnectionRefusal, string>> = {
  max_connections: ERRORS.too_many_connections.message,
  file_descriptors: 'The gateway is short of file descriptors (its open-files limit); try again shortly',
};
const LOG_LINES: Readonly<Record<ConnectionRefusal, string>> = {
  max_connections: 'connections refused: server.max_connections reached',
  file_descriptors: "connections refused: the process's open files are near its open-files limit",
};
const RETRY_AFTER: ReadonlyArray<readonly [string, string]> = [['retry-after', '1']];
const NO_CORS = { allowOrigin: undefined };

export interface ConnectionGate {
  readonly cap: ConnectionCap;
  /** Counts and logs one refusal (the caller answers it). */
  refused(reason: ConnectionRefusal): void;
  /** What a refused request or upgrade is answered: 503 and the message naming the reason. */
  answer(reason: ConnectionRefusal): { status: number; message: string };
  /** A request arriving while connections are refused is answered 503 here, its connection closed: true;
   *  false when it may go on. */
  refuseRequest(res: HttpResponse): boolean;
  /** Starts the fd watch (the main thread, or a gateway alone, once it listens). */
  watch(): void;
  /** Stops the watch. */
  close(): void;
}

export interface ConnectionGateOptions {
  log: Logger;
  metrics: Metrics;
  /** Where refusals are logged, once per condition (a worker's forwards to the main thread's). */
  refusals: RepeatedLog;
  /** Set in a worker thread: the main thread's cap memory. */
  memory?: SharedArrayBuffer;
  /** Worker threads the process runs (their descriptors are reserved). */
  workers: number;
}

export function createConnectionGate(config: Config, opts: ConnectionGateOptions): ConnectionGate {
  let limit: number | null = null;
  let cap: ConnectionCap;
  if (opts.memory !== undefined) {
    cap = createConnectionCap(0, opts.memory);
  } else {
    limit = openFilesLimit();
    const resolved = resolveMaxConnections(config, limit, openFiles() ?? 0, opts.workers);
    cap = createConnectionCap(resolved.max);
    opts.metrics.connectionsMax(resolved.max);
    const fields = { max_connections: resolved.max, source: resolved.source, open_files_limit: limit ?? 'unknown' };
    if (resolved.reserve !== null && resolved.limit !== null && resolved.limit - resolved.reserve < resolved.max) {
      opts.log.warn('the open-files limit leaves too few descriptors for clients: raise it (LimitNOFILE, ulimit -n)', {
        ...fields,
        reserve: resolved.reserve,
      });
    } else if (resolved.source === 'config' && limit !== null && resolved.max > limit) {
      opts.log.warn('server.max_connections is above the open-files limit: accept fails before the cap refuses', fields);
    } else {
      opts.log.info('connections capped', { ...fields, ...(resolved.reserve !== null ? { reserve: resolved.reserve } : {}) });
    }
  }
  let stopWatch: (() => void) | null = null;
  const gate: ConnectionGate = {
    cap,
    refused(reason) {
      opts.metrics.connectionRefused(reason);
      opts.refusals.report(reason, LOG_LINES[reason], { reason, max_connections: cap.max });
    },
    answer: (reason) => ({ status: ERRORS.too_many_connections.http, message: REFUSALS[reason] }),
    refuseRequest(res) {
      const reason = cap.refusal();
      if (reason === null) return false;
      gate.refused(reason);
      sendWhole(res, 503, NO_CORS, JSON_TYPE, rpcErrorBody('too_many_connections', 'null', REFUSALS[reason]), RETRY_AFTER, true);
      return true;
    },
    watch() {
      if (stopWatch !== null || limit === null) return;
      stopWatch = startFdWatch({
        limit,
        cap,
        onShort(short, open) {
          if (short) opts.log.warn('open files near the limit: new connections are refused until some close', { open, limit: limit! });
          else opts.log.info('open files back below the limit: connections are taken again', { open, limit: limit! });
        },
        onExhausted(exhausted, open) {
          if (exhausted)
            opts.log.error('out of file descriptors (EMFILE): new connections cannot be accepted', {
              open: Number.isFinite(open) ? open : 'all',
              limit: limit!,
            });
          else opts.log.info('file descriptors free again: connections are accepted', { open, limit: limit! });
        },
      });
    },
    close() {
      stopWatch?.();
      stopWatch = null;
    },
  };
  return gate;
}
