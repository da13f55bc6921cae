/**
 * GET /status on the metrics listener: what `chaingate status` prints. Per chain, each upstream by its
 * configured name (never its URL) with its rotation state, head and lag; the chain's request rate over the
 * last minute; its open WebSockets, subscriptions and event streams; the ledger's last flush; and, in a
 * fleet, every instance and its last heartbeat.
 */
import { autoCapabilities } from '../chain/node-findings.js';
import type { ChainRuntime } from '../chain/runtime.js';
import type { InstanceRow } from '../metering/ledger-store.js';
import type { ChainMetrics } from '../metrics/registry.js';
import { errorText } from '../log.js';

export interface StatusReport {
  uptime_s: number;
  chains: Record<string, ChainStatus>;
  ledger: { last_flush_at: string | null; last_flush_ok: boolean | null; flush_failures: number };
  /** The fleet this daemon is an instance of (storage.url); absent on one machine. */
  fleet?: FleetStatus;
  /** With worker threads: how many, and those that did not answer in time (their traffic is missing above). */
  workers?: WorkersStatus;
}

export interface WorkersStatus {
  count: number;
  /** Worker numbers (from 1) that gave no answer within server.worker_stall_s. */
  unanswered: number[];
}

/** Every instance of the fleet that sent a heartbeat and was not pruned, as the shared store lists them. */
export interface FleetStatus {
  /** This daemon's name in the fleet (cluster.instance). */
  this_instance: string;
  /** By id; empty when `error` says the store could not be asked. */
  instances: FleetInstanceStatus[];
  /** Why the instances could not be read (PostgreSQL unreachable...), else null: the rest of the report stands. */
  error: string | null;
}

export interface FleetInstanceStatus {
  id: string;
  started_at: string;
  last_heartbeat_at: string;
  /** Seconds since the last heartbeat, by this daemon's clock (the times are the store's). */
  heartbeat_age_s: number;
  /** What the instance says of itself in its heartbeat (version, host, pid...). */
  info: Record<string, unknown>;
}

/** Where GET /status reads the fleet from: given by the app in fleet mode, absent on one machine. */
export interface FleetStatusSource {
  /** This daemon's name in the fleet (cluster.instance). */
  instance: string;
  /** The fleet's instances (LedgerStore.instances()). */
  instances: () => Promise<InstanceRow[]>;
}

/** Asks the fleet's store for its instances; a failure is reported in the section, never thrown. */
export async function fleetStatus(source: FleetStatusSource, nowMs: number): Promise<FleetStatus> {
  let rows: InstanceRow[];
  try {
    rows = await source.instances();
  } catch (err) {
    return { this_instance: source.instance, instances: [], error: errorText(err) };
  }
  return {
    this_instance: source.instance,
    instances: rows.map((r) => ({
      id: r.id,
      started_at: new Date(r.startedAt).toISOString(),
      last_heartbeat_at: new Date(r.heartbeatAt).toISOString(),
      heartbeat_age_s: Math.max(0, Math.floor((nowMs - r.heartbeatAt) / 1000)),
      info: { ...r.info },
    })),
    error: null,
  };
}

export interface ChainStatus {
  ready: boolean;
  best_head: number | null;
  /** The head the chain serves (chain/served-head.ts). */
  served_head: number | null;
  /** The chain's finalized and safe block numbers (chain/finality.ts), null while unknown (and on a beacon chain). */
  finalized_block: number | null;
  safe_block: number | null;
  requests_per_s_1m: number;
  ws_connections: number;
  subscriptions: number;
  event_streams: number;
  /** `reason` is failing, lagging or wrong_chain when out of rotation; `serves` is what the node last said it
   *  serves (a decimal chain id, or a beacon genesis "root fork_version time"), null before it said. */
  upstreams: Array<{
    name: string;
    in_rotation: boolean;
    reason: string | null;
    head: number | null;
    lag: number | null;
    serves: string | null;
    /** With `archive: auto` or `methods: auto` only: what the node was found to serve (chain/node-findings.ts). */
    archive?: string;
    methods?: string;
  }>;
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
  fleet?: FleetStatus,
  workers?: WorkersStatus,
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
        serves: chain.identity.served(i),
        ...autoCapabilities(chain.config.upstreams[i], chain.findings[i]),
      };
    });
    const seen = trafficOf(slug);
    out[slug] = {
      ready: upstreams.some((u) => u.in_rotation),
      best_head: chain.health.bestHead(),
      served_head: chain.served.now(),
      finalized_block: chain.finality.finalized()?.number ?? null,
      safe_block: chain.finality.safe()?.number ?? null,
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
    ...(fleet !== undefined ? { fleet } : {}),
    ...(workers !== undefined ? { workers } : {}),
  };
}
