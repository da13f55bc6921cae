/**
 * The bodies of GET /healthz (live) and GET /readyz (ready), with every chain's upstreams in detail.
 *
 * /healthz is 200 whenever the process can answer at all: a load balancer or systemd watchdog restarts the
 * daemon on its failure, and restarting fixes no upstream. /readyz is 503 while some chain has no upstream
 * in rotation (a chain whose nodes all serve another chain has none), so a load balancer in front of several gateways sends that chain's traffic elsewhere.
 *
 * Upstreams are labelled by their configured name (see HttpUpstream.label): neither body ever holds a URL or a credential.
 */
import type { ServedHead } from '../chain/served-head.js';
import type { UpstreamStatus } from '../upstreams/health.js';
import type { ChainFinality } from '../chain/finality.js';
import type { ChainHealth } from '../upstreams/selection.js';

/** A chain as the reports name it. */
export interface ChainHealthEntry {
  slug: string;
  health: ChainHealth;
  /** The head the chain serves (ChainRuntime.served). */
  served: Pick<ServedHead, 'now'>;
  /** The chain's finalized and safe blocks (chain/finality.ts); absent: shown as null. */
  finality?: Pick<ChainFinality, 'finalized' | 'safe'>;
  /** Node `index`'s archive and methods as found out, for a node whose config leaves them to `auto`; else undefined. */
  capabilities?: (index: number) => { archive: string; methods: string } | undefined;
}

export interface HealthReply {
  status: number;
  /** JSON, for Content-Type: application/json. */
  body: string;
}

interface UpstreamReport {
  label: string;
  in_rotation: boolean;
  /** 'cordoned' (by the operator), 'failing', 'lagging' or 'wrong_chain' (it serves another chain) when out of
   *  rotation, else null. */
  reason: string | null;
  head: number | null;
  lag: number | null;
  /** Failed share of the calls in the last 10 s, three decimals. */
  error_rate: number;
  calls: number;
  p50_ms: number | null;
  inflight: number;
  /** With `archive: auto` or `methods: auto` only: e.g. `true (auto)`, `all but debug_* (auto)`. */
  archive?: string;
  methods?: string;
}

interface ChainReport {
  ready: boolean;
  best_head: number | null;
  /** The head the chain serves (eth_blockNumber, newHeads): reached by enough nodes in rotation. */
  served_head: number | null;
  /** null while unknown, and on a beacon chain. */
  finalized_block: number | null;
  safe_block: number | null;
  max_lag_blocks: number;
  upstreams: UpstreamReport[];
}

function roundTo(value: number, places: number): number {
  const scale = 10 ** places;
  return Math.round(value * scale) / scale;
}

function upstreamReport(label: string, s: UpstreamStatus): UpstreamReport {
  return {
    label,
    in_rotation: s.inRotation,
    reason: s.reason ?? null,
    head: s.head,
    lag: s.lag,
    error_rate: roundTo(s.errorRate, 3),
    calls: s.calls,
    p50_ms: s.p50Ms === null ? null : roundTo(s.p50Ms, 1),
    inflight: s.inflight,
  };
}

function chainReports(chains: readonly ChainHealthEntry[]): { ready: boolean; detail: Record<string, ChainReport> } {
  const detail: Record<string, ChainReport> = {};
  let ready = true;
  for (const { slug, health, served, finality, capabilities } of chains) {
    const upstreams = health.upstreams.map((u, i) => {
      const report = upstreamReport(u.label, u.status());
      const found = capabilities?.(i);
      return found === undefined ? report : { ...report, ...found };
    });
    const chainReady = upstreams.some((u) => u.in_rotation);
    if (!chainReady) ready = false;
    detail[slug] = {
      ready: chainReady,
      best_head: health.bestHead(),
      served_head: served.now(),
      finalized_block: finality?.finalized()?.number ?? null,
      safe_block: finality?.safe()?.number ?? null,
      max_lag_blocks: health.maxLagBlocks,
      upstreams,
    };
  }
  return { ready, detail };
}

/** Liveness: always 200 while the process serves, with its uptime in whole seconds and each chain's detail. */
export function healthz(chains: readonly ChainHealthEntry[], uptimeMs: number): HealthReply {
  const { detail } = chainReports(chains);
  return {
    status: 200,
    body: JSON.stringify({ status: 'live', uptime_s: Math.max(0, Math.floor(uptimeMs / 1000)), chains: detail }),
  };
}

/** Readiness: 200 when every chain has an upstream in rotation, else 503 naming the chains without one. */
export function readyz(chains: readonly ChainHealthEntry[]): HealthReply {
  const { ready, detail } = chainReports(chains);
  const notReady = Object.keys(detail).filter((slug) => !detail[slug]!.ready);
  return {
    status: ready ? 200 : 503,
    body: JSON.stringify({ status: ready ? 'ready' : 'not ready', not_ready: notReady, chains: detail }),
  };
}
