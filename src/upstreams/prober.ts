/**
 * Keeps a chain's health current when calls alone do not: probes nodes out of rotation so they come back, and
 * polls the heads of nodes in rotation that no feed keeps current.
 *
 * - Every intervalMs (default 2 s), each node out of rotation (failing or lagging) is probed; a probe that
 *   reads a head restores a failing node (see health.ts), and the head read judges its lag.
 * - At start and every headIntervalMs (default 5 s), each node in rotation is probed for its head unless
 *   something other than these polls (its newHeads feed) reported its head in the last headIntervalMs.
 * - A probe unanswered after probeTimeoutMs (default 3 s) is aborted through its signal and takes the node out
 *   of rotation at once (health.ts); it is noticed at the next tick of either loop, so within probeTimeoutMs
 *   plus the shorter interval.
 *
 * Rate: one probe in flight per node at most, and two probes of one node start at least intervalMs / 2 apart
 * (half, so timer jitter never skips a tick). A node that recovers is back in rotation within intervalMs plus
 * its answer time; when a probe of it was hanging as it recovered, within probeTimeoutMs + intervalMs plus its
 * answer time (the hung probe is given up at the first tick past its deadline, and the next starts at that
 * tick): with the defaults 5 s plus the answer, within 10 s for any node that answers in under 5 s.
 */
import type { ChainHealth } from './selection.js';

/** Reads one node's head (eth_blockNumber, or the beacon head slot). Rejects when the node does not answer
 *  with one. `signal` aborts when the prober gives up on it or stops. */
export type HeadProbe = (index: number, signal: AbortSignal) => Promise<number>;

/** The interval timers the prober uses; default the global ones, unref'd so they never hold the process. */
export interface IntervalTimers {
  setInterval(fn: () => void, ms: number): unknown;
  clearInterval(handle: unknown): void;
}

export interface ProberOptions {
  /** How often nodes out of rotation are probed, in ms; default 2_000. */
  intervalMs?: number;
  /** How often nodes in rotation with no recent head report are polled, in ms; default 5_000. */
  headIntervalMs?: number;
  /** A probe unanswered this long counts as failed, in ms; default 3_000. */
  probeTimeoutMs?: number;
  timers?: IntervalTimers;
}

export interface Prober {
  /** Stops both loops and aborts probes in flight; their results are ignored. */
  stop(): void;
}

const DEFAULT_INTERVAL_MS = 2_000;
const DEFAULT_HEAD_INTERVAL_MS = 5_000;
const DEFAULT_PROBE_TIMEOUT_MS = 3_000;

const globalTimers: IntervalTimers = {
  setInterval(fn, ms) {
    const handle = setInterval(fn, ms);
    handle.unref();
    return handle;
  },
  clearInterval(handle) {
    clearInterval(handle as NodeJS.Timeout);
  },
};

function positiveMs(value: number | undefined, fallback: number, name: string): number {
  if (value === undefined) return fallback;
  if (!(value > 0) || !Number.isFinite(value)) throw new RangeError(`${name} must be a positive number of ms, got ${value}`);
  return value;
}

interface InFlight {
  startedAt: number;
  controller: AbortController;
}

export function startProber(health: ChainHealth, probe: HeadProbe, opts: ProberOptions = {}): Prober {
  const intervalMs = positiveMs(opts.intervalMs, DEFAULT_INTERVAL_MS, 'intervalMs');
  const headIntervalMs = positiveMs(opts.headIntervalMs, DEFAULT_HEAD_INTERVAL_MS, 'headIntervalMs');
  const probeTimeoutMs = positiveMs(opts.probeTimeoutMs, DEFAULT_PROBE_TIMEOUT_MS, 'probeTimeoutMs');
  const timers = opts.timers ?? globalTimers;
  const clock = health.clock;
  const upstreams = health.upstreams;

  const inFlight: Array<InFlight | null> = upstreams.map(() => null);
  const lastStart: number[] = upstreams.map(() => -Infinity);
  // headAt as this prober's own poll left it: a later headAt came from elsewhere (a newHeads feed).
  const polledHeadAt: Array<number | null> = upstreams.map(() => null);
  let stopped = false;

  function launch(index: number, now: number): void {
    if (inFlight[index] !== null || now - lastStart[index]! < intervalMs / 2) return;
    const entry: InFlight = { startedAt: now, controller: new AbortController() };
    inFlight[index] = entry;
    lastStart[index] = now;
    let pending: Promise<number>;
    try {
      pending = probe(index, entry.controller.signal);
    } catch (err) {
      pending = Promise.reject(err);
    }
    pending.then(
      (head) => settle(index, entry, Number.isSafeInteger(head) && head >= 0 ? head : null),
      () => settle(index, entry, null),
    );
  }

  function settle(index: number, entry: InFlight, head: number | null): void {
    // A probe given up on, or one outliving stop(), has already been accounted for.
    if (stopped || inFlight[index] !== entry) return;
    inFlight[index] = null;
    const u = upstreams[index]!;
    u.reportProbe(head, clock() - entry.startedAt);
    polledHeadAt[index] = u.headAt;
  }

  function abandonHung(now: number): void {
    for (let i = 0; i < inFlight.length; i++) {
      const entry = inFlight[i];
      if (entry == null || now - entry.startedAt < probeTimeoutMs) continue;
      inFlight[i] = null;
      entry.controller.abort();
      upstreams[i]!.reportProbe(null, now - entry.startedAt, true);
    }
  }

  function probeOutOfRotation(): void {
    const now = clock();
    abandonHung(now);
    const healthy = new Set(health.healthyIndices());
    for (let i = 0; i < upstreams.length; i++) if (!healthy.has(i)) launch(i, now);
  }

  function pollStaleHeads(): void {
    const now = clock();
    abandonHung(now);
    for (const i of health.healthyIndices()) {
      const headAt = upstreams[i]!.headAt;
      const fedRecently = headAt !== null && headAt !== polledHeadAt[i] && now - headAt < headIntervalMs;
      if (!fedRecently) launch(i, now);
    }
  }

  const probeTimer = timers.setInterval(probeOutOfRotation, intervalMs);
  const headTimer = timers.setInterval(pollStaleHeads, headIntervalMs);
  pollStaleHeads();

  return {
    stop() {
      if (stopped) return;
      stopped = true;
      timers.clearInterval(probeTimer);
      timers.clearInterval(headTimer);
      for (const entry of inFlight) entry?.controller.abort();
      inFlight.fill(null);
    },
  };
}
