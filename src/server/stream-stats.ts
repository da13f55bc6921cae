/**
 * What a thread reports of its traffic and streams: the open sockets and streams (over every worker for the
 * main thread), each chain's traffic, and GET /status.
 */
import type { GatewayThread } from './gateway-thread.js';
import { type ChainTraffic, fleetStatus, type StatusReport, statusReport, sumTraffic } from './status-report.js';
import { performance } from 'node:perf_hooks';
import { workerPool } from './role-parts.js';
import { workersStarted } from './thread-role.js';

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

/** Open sockets and streams, upstream subscriptions and slow-consumer cuts, over every worker. */
export async function streamStats(t: GatewayThread): Promise<StreamStats> {
  const own = threadStreamStats(t);
  const pool = workerPool(t.role);
  if (pool === null) return own;
  // Upstream subscriptions and event streams are the main thread's; connections and subscribers the workers'.
  const theirs = (await pool.ask({ type: 'stats' }, t.answerMs)).values as Array<StreamStats | undefined>;
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
}

function threadStreamStats(t: GatewayThread): StreamStats {
  let subscriptions = 0;
  let upstreamSubscriptions = 0;
  let sseTopics = 0;
  for (const chain of t.chains.values()) {
    subscriptions += chain.subscriptions?.stats().subscriptions ?? 0;
    upstreamSubscriptions += chain.feeds?.upstreamSubscriptions() ?? 0;
    sseTopics += chain.events?.topicsOpen().length ?? 0;
  }
  const sse = t.events.stats();
  return {
    wsConnections: t.wsRoute.server.conns.size,
    wsConnectionsByWorker: [],
    subscriptions,
    upstreamSubscriptions,
    slowConsumers: t.wsRoute.server.slowConsumers,
    sseClients: sse.clients,
    sseTopics,
    sseSlowClients: sse.slowClients,
  };
}

/** What this thread saw of each chain's traffic (a worker's part of GET /status). */
export function traffic(t: GatewayThread): Record<string, ChainTraffic> {
  return Object.fromEntries([...t.chains.keys()].map((slug) => [slug, t.metrics.chain(slug).snapshot()]));
}

/** GET /status on the metrics listener. */
export async function statusOf(t: GatewayThread): Promise<StatusReport> {
  // Connections and requests are the workers': each tells what it saw of each chain.
  const pool = workerPool(t.role);
  const asked = pool === null ? null : await pool.ask({ type: 'traffic' }, t.answerMs);
  const theirs = (asked?.values ?? []) as Array<Record<string, ChainTraffic> | undefined>;
  const fleet = t.views.fleet === undefined ? undefined : await fleetStatus(t.views.fleet, Date.now());
  const { tenancy } = t;
  return statusReport(
    t.chains.values(),
    (slug) => sumTraffic([t.metrics.chain(slug).snapshot(), ...theirs.map((w) => w?.[slug])]),
    { lastAt: tenancy.ledger.lastFlushAt(), lastOk: tenancy.ledger.healthy(), failures: tenancy.flushFailures() },
    performance.now() - t.startedAt,
    fleet,
    asked === null ? undefined : { count: workersStarted(t.role), unanswered: asked.unanswered },
  );
}
