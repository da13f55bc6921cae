/**
 * A chain's failover policies as its calls read them (config chains.<slug>.failover, docs/failover.md): each
 * method's policy, decided once per method and kept, and for a method hedged at a latency quantile the sliding
 * window of its latencies on this chain. A chain without `methods` overrides and without a quantile hedge hands
 * every call the same object, so the policy costs a call one field read.
 */
import { builtInPolicy, chainPolicy, type FailoverConfig, type FailoverPolicy, overlay, patternFor } from '../config/failover.js';

/** The latency window: WINDOW_STEPS steps of STEP_MS (a minute), its quantiles read again at most every STEP_MS / 10. */
const STEP_MS = 10_000;
const WINDOW_STEPS = 6;
const READ_EVERY_MS = 1000;
/** Answers in the window before its quantile is trusted; with fewer, a quantile hedge fires at half the timeout. */
export const MIN_LATENCY_SAMPLES = 20;
/** Latency bins per doubling (about 9% each), as health.ts's. */
const BINS_PER_OCTAVE = 8;
/** 128 bins reach 2^16 ms (65 s). */
const BINS = 128;

/**
 * One method's latency on one chain over the last minute, in log-spaced bins: record() is a few array writes,
 * quantile() merges the window at most once a second.
 */
export class LatencyWindow {
  private readonly step = new Float64Array(WINDOW_STEPS).fill(-Infinity);
  private readonly counts = new Uint32Array(WINDOW_STEPS * BINS);
  private readonly totals = new Uint32Array(WINDOW_STEPS);
  private readonly merged = new Uint32Array(BINS);
  private readAt = -Infinity;
  private readQ = -1;
  private readMs: number | null = null;

  constructor(private readonly now: () => number) {}

  /** An answer that began `ms` after its attempt started. */
  record(ms: number): void {
    if (!(ms >= 0) || !Number.isFinite(ms)) return;
    const s = Math.floor(this.now() / STEP_MS);
    const i = ((s % WINDOW_STEPS) + WINDOW_STEPS) % WINDOW_STEPS;
    if (this.step[i] !== s) {
      this.step[i] = s;
      this.totals[i] = 0;
      this.counts.fill(0, i * BINS, (i + 1) * BINS);
    }
    this.totals[i]!++;
    this.counts[i * BINS + Math.min(BINS - 1, Math.floor(Math.log2(1 + ms) * BINS_PER_OCTAVE))]!++;
  }

  /** The `q` quantile (0.5 to 0.99) of the window in ms (the upper edge of its bin), or null with too few answers. */
  quantile(q: number): number | null {
    const now = this.now();
    if (q === this.readQ && now - this.readAt < READ_EVERY_MS) return this.readMs;
    this.readAt = now;
    this.readQ = q;
    this.readMs = this.compute(q, Math.floor(now / STEP_MS));
    return this.readMs;
  }

  private compute(q: number, s: number): number | null {
    const merged = this.merged.fill(0);
    let total = 0;
    for (let i = 0; i < WINDOW_STEPS; i++) {
      const at = this.step[i]!;
      if (at <= s - WINDOW_STEPS || at > s) continue;
      total += this.totals[i]!;
      for (let b = 0; b < BINS; b++) merged[b]! += this.counts[i * BINS + b]!;
    }
    if (total < MIN_LATENCY_SAMPLES) return null;
    const rank = Math.ceil(total * q);
    let seen = 0;
    for (let b = 0; b < BINS; b++) {
      seen += merged[b]!;
      if (seen >= rank) return 2 ** ((b + 1) / BINS_PER_OCTAVE) - 1;
    }
    return 2 ** (BINS / BINS_PER_OCTAVE) - 1;
  }
}

/** One method's failover on one chain: its policy and, when it is hedged at a quantile, its latency window. */
export interface MethodFailover {
  readonly policy: FailoverPolicy;
  readonly latency: LatencyWindow | null;
  /** The policy's answer deadline when it is not the one the chain's clients already keep (else undefined). */
  readonly answerTimeoutMs: number | undefined;
}

/** A chain's policies: the chain one, and each method's, decided at its first call. */
export class ChainFailover {
  readonly chain: MethodFailover;
  private readonly patterns: readonly string[];
  private readonly byMethod = new Map<string, MethodFailover>();
  /** The answer deadline the chain's upstream clients keep (chains.<slug>.answer_timeout_s). */
  private readonly clientAnswerMs: number;

  constructor(
    private readonly config: FailoverConfig | undefined,
    timeoutMs: number,
    answerTimeoutMs: number,
    private readonly now: () => number,
  ) {
    const policy =
      config === undefined ? builtInPolicy(timeoutMs, answerTimeoutMs) : chainPolicy(config, timeoutMs / 1000, answerTimeoutMs / 1000);
    this.clientAnswerMs = answerTimeoutMs;
    this.chain = this.made(policy, false);
    this.patterns = config === undefined ? [] : Object.keys(config.methods);
  }

  /** `method`'s policy and latency window, the same object for every call of it. */
  forMethod(method: string): MethodFailover {
    if (this.patterns.length === 0 && this.chain.policy.hedge.kind !== 'quantile') return this.chain;
    let m = this.byMethod.get(method);
    if (m === undefined) {
      const pattern = patternFor(this.patterns, method);
      const policy = pattern === undefined ? this.chain.policy : overlay(this.chain.policy, this.config!.methods[pattern]!);
      m = this.made(policy, policy.hedge.kind === 'quantile');
      this.byMethod.set(method, m);
    }
    return m;
  }

  private made(policy: FailoverPolicy, timed: boolean): MethodFailover {
    const answerTimeoutMs = policy.answerTimeoutMs === this.clientAnswerMs ? undefined : policy.answerTimeoutMs;
    return { policy, latency: timed ? new LatencyWindow(this.now) : null, answerTimeoutMs };
  }
}

/** The built-in policies of chains that bring none (stand-ins in tests), made once per chain. */
const builtIn = new WeakMap<object, ChainFailover>();

/** A chain's policies: its own, or the built-in ones over its timeout when it has none. */
export function failoverOf(chain: { failover?: ChainFailover; timeoutMs: number; health: { now: () => number } }): ChainFailover {
  if (chain.failover !== undefined) return chain.failover;
  let f = builtIn.get(chain);
  if (f === undefined) builtIn.set(chain, (f = new ChainFailover(undefined, chain.timeoutMs, Infinity, chain.health.now)));
  return f;
}

/**
 * When an attempt that has not begun answering gets a hedge, in ms after it started, under `m`; null: never.
 * A quantile with too few answers known, or one not below the timeout, is half the timeout.
 */
export function hedgeAfterMs(m: MethodFailover): number | null {
  const p = m.policy;
  if (p.hedgeMax === 0) return null;
  const hedge = p.hedge;
  switch (hedge.kind) {
    case 'off':
      return null;
    case 'half':
      return p.timeoutMs * 0.5;
    case 'fixed':
      return hedge.ms;
    case 'quantile': {
      const ms = m.latency?.quantile(hedge.q) ?? null;
      return ms === null || ms >= p.timeoutMs ? p.timeoutMs * 0.5 : Math.max(1, ms);
    }
  }
}
