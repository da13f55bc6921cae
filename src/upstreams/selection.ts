/**
 * The choice of upstream for each call among a chain's nodes.
 *
 * In rotation: not failing (see health.ts) and not more than maxLagBlocks behind the best head. The best head
 * is the highest head reported by a node that is not failing; the node holding it is never lagging, so lag is
 * judged against nodes in rotation only, and a chain has a node in rotation exactly when one is not failing.
 *
 * Among the nodes in rotation a call goes to one drawn at random with weight 1 / cost, where
 * cost = latency EWMA × (calls in flight + 1) / (1 − error rate). The fastest node gets most calls but not all:
 * against one twice as slow it gets two thirds, against one ten times as slow ten elevenths; and a node that
 * gathers calls in flight, or errors, is weighed down until it drains. Every node in rotation keeps getting
 * some calls, so its latency stays measured. Power of two choices would send nothing at all to the slower
 * of two idle nodes.
 *
 * A suspected node (a head probe unanswered for a second, see health.ts) stays in rotation but gets no call
 * while another node in rotation is not suspected: it is likely hanging, and a call sent to it would wait for
 * the hedge. Its weight alone cannot say so, since a hanging node has answered nothing to measure.
 */
import { performance } from 'node:perf_hooks';
import { checkMaxLagBlocks, createUpstreamHealth, isLagging, type UpstreamHealth } from './health.js';

/** Latencies below this count as this, in ms: sub-millisecond differences between local nodes are noise. */
const LATENCY_FLOOR_MS = 1;
/** The error-rate factor is capped so a node with a bad streak of few calls is weighed down, not zeroed. */
const MIN_SUCCESS_SHARE = 0.1;

export interface ChainHealth {
  readonly upstreams: readonly UpstreamHealth[];
  readonly maxLagBlocks: number;
  /** The clock the trackers use (headAt and the window are in its time). */
  readonly clock: () => number;
  /** Best head among nodes that are not failing (the answer eth_blockNumber may give); null when none is known. */
  bestHead(): number | null;
  /** Index of the upstream for the next call, never one in `exclude`, a suspected one only when every other
   *  is; null when no other node is in rotation (the caller answers 502 at once). */
  pick(exclude?: ReadonlySet<number>): number | null;
  /** Indices in rotation, ascending (e.g. for broadcasting eth_sendRawTransaction). */
  healthyIndices(): number[];
}

export interface ChainHealthOptions {
  /** Blocks a node may be behind the best head and stay in rotation (config chains.<slug>.max_lag_blocks). */
  maxLagBlocks: number;
  /** Monotonic ms; default performance.now. */
  clock?: () => number;
  /** Uniform in [0, 1); default Math.random. */
  random?: () => number;
}

/** One health tracker per label, in the order given (indices match the chain's upstreams). */
export function createChainHealth(labels: readonly string[], opts: ChainHealthOptions): ChainHealth {
  checkMaxLagBlocks(opts.maxLagBlocks);
  if (labels.length === 0) throw new RangeError('a chain needs at least one upstream');
  const maxLagBlocks = opts.maxLagBlocks;
  const clock = opts.clock ?? (() => performance.now());
  const random = opts.random ?? Math.random;

  function bestHead(): number | null {
    let best: number | null = null;
    for (const u of upstreams) {
      const head = u.head;
      if (!u.failing && head !== null && (best === null || head > best)) best = head;
    }
    return best;
  }

  const upstreams: UpstreamHealth[] = labels.map((label) => createUpstreamHealth(label, { clock, bestHead, maxLagBlocks }));

  function inRotation(u: UpstreamHealth, best: number | null): boolean {
    return !u.failing && !isLagging(u.head, best, maxLagBlocks);
  }

  const candidates: number[] = [];
  const weights: number[] = [];

  /** Drops the suspected candidates when some are not. */
  function dropSuspected(): void {
    let kept = 0;
    for (const i of candidates) if (!upstreams[i]!.suspected) candidates[kept++] = i;
    if (kept > 0) candidates.length = kept;
  }

  function pick(exclude?: ReadonlySet<number>): number | null {
    const best = bestHead();
    candidates.length = 0;
    let fastestKnown = Infinity;
    let suspects = 0;
    for (let i = 0; i < upstreams.length; i++) {
      const u = upstreams[i]!;
      if (exclude?.has(i) || !inRotation(u, best)) continue;
      candidates.push(i);
      if (u.suspected) suspects++;
      if (u.ewmaMs !== null && u.ewmaMs < fastestKnown) fastestKnown = u.ewmaMs;
    }
    if (candidates.length === 0) return null;
    if (suspects > 0) dropSuspected();
    if (candidates.length === 1) return candidates[0]!;
    // A node not measured yet is taken to be as fast as the fastest, so it gets its share and is measured.
    const unknownMs = fastestKnown === Infinity ? LATENCY_FLOOR_MS : fastestKnown;
    weights.length = 0;
    let total = 0;
    for (const i of candidates) {
      const u = upstreams[i]!;
      const latency = Math.max(LATENCY_FLOOR_MS, u.ewmaMs ?? unknownMs);
      const cost = (latency * (Math.max(0, u.inflight) + 1)) / Math.max(MIN_SUCCESS_SHARE, 1 - u.errorRate());
      const weight = 1 / cost;
      weights.push(weight);
      total += weight;
    }
    let r = random() * total;
    for (let k = 0; k < candidates.length; k++) {
      r -= weights[k]!;
      if (r < 0) return candidates[k]!;
    }
    // Rounding can leave r at a hair above zero after the last weight.
    return candidates[candidates.length - 1]!;
  }

  return {
    upstreams,
    maxLagBlocks,
    clock,
    bestHead,
    pick,
    healthyIndices() {
      const best = bestHead();
      const out: number[] = [];
      for (let i = 0; i < upstreams.length; i++) if (inRotation(upstreams[i]!, best)) out.push(i);
      return out;
    },
  };
}
