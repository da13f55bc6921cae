/**
 * GET /status on the metrics listener: what `chaingate status` prints. Per chain, each upstream by its
 * configured name (never its URL) with its rotation state, head and lag; the chain's request rate over the
 * last minute; its open WebSockets, subscriptions and event streams; and the ledger's last flush.
 */
import type { ChainRuntime } from '../chain/runtime.js';
import type { ChainMetrics } from '../metrics/registry.js';

export interface StatusReport {
  uptime_s: number;
  chains: Record<string, ChainStatus>;
  ledger: { last_flush_at: string | null; last_flush_ok: boolean | null; flush_failures: number };
}

export interface ChainStatus {
  ready: boolean;
  best_head: number | null;
  requests_per_s_1m: number;
  ws_connections: number;
  subscriptions: number;
  event_streams: number;
  upstreams: Array<{ name: string; in_rotation: boolean; reason: string | null; head: number | null; lag: number | null }>;
}

/** The ledger's flushes as status shows them: when the last one ended (ms since the epoch) and how. */
export interface FlushState {
  lastAt: number | null;
  lastOk: boolean | null;
  failures: number;
}

/** What status shows of one chain's traffic (ChainMetrics.snapshot(), summed over the worker threads). */
export type ChainTraffic = ReturnType<ChainMetrics['snapshot']>;

/** Adds up the traffic each thread saw of a chain (absent: a thread that has not seen it). */
export function sumTraffic(parts: ReadonlyArray<ChainTraffic | undefined>): ChainTraffic {
  const sum: ChainTraffic = { wsConnections: 0, sseClients: 0, subscriptions: 0, requestsPerSecond1m: 0 };
  for (const p of parts) {
    if (p === undefined) continue;
    sum.wsConnections += p.wsConnections;
    sum.sseClients += p.sseClients;
    sum.subscriptions += p.subscriptions;
    sum.requestsPerSecond1m += p.requestsPerSecond1m;
  }
  return sum;
}

export function statusReport(
  chains: Iterable<ChainRuntime>,
  trafficOf: (slug: string) => ChainTraffic,
  ledger: FlushState,
  uptimeMs: number,
): StatusReport {
  const out: Record<string, ChainStatus> = {};
  for (const chain of chains) {
    const slug = chain.config.slug;
    const upstreams = chain.health.upstreams.map((u, i) => {
      const s = u.status();
      return {
        name: chain.config.upstreams[i]!.name,
        in_rotation: s.inRotation,
        reason: s.reason ?? null,
        head: s.head,
        lag: s.lag,
      };
    });
    const seen = trafficOf(slug);
    out[slug] = {
      ready: upstreams.some((u) => u.in_rotation),
      best_head: chain.health.bestHead(),
      requests_per_s_1m: Math.round(seen.requestsPerSecond1m * 100) / 100,
      ws_connections: seen.wsConnections,
      subscriptions: seen.subscriptions,
      event_streams: seen.sseClients,
      upstreams,
    };
  }
  return {
    uptime_s: Math.max(0, Math.floor(uptimeMs / 1000)),
    chains: out,
    ledger: {
      last_flush_at: ledger.lastAt === null ? null : new Date(ledger.lastAt).toISOString(),
      last_flush_ok: ledger.lastOk,
      flush_failures: ledger.failures,
    },
  };
}
