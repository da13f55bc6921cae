/**
 * Keeps a chain's health current when calls alone do not: probes nodes out of rotation so they come back, and
 * polls the heads of nodes in rotation that no feed keeps current.
 *
 * - Every intervalMs (default 2 s), each node out of rotation (failing or lagging) is probed; a probe that
 *   reads a head restores a failing node (see health.ts), and the head read judges its lag.
 * - At start and every headIntervalMs (default 5 s), each node in rotation is probed for its head unless
 *   something other than these polls (its newHeads feed) reported its head in the last headIntervalMs.
 * - A probe unanswered after probeTimeoutMs (default 3 s) is given up by its own timer, at that moment rather
 *   than at the next tick: aborted through its signal, it takes the node out of rotation at once (health.ts).
 *   The probe's own request timeout must lie beyond probeTimeoutMs (chain/node-probes.ts): a probe that fails by itself is
 *   an ordinary failure, and three of those in a row are needed.
 * - While a probe is in flight the node's probeSince is set, so a probe late by SUSPECT_AFTER_MS makes the node
 *   suspected (health.ts) well before it is given up.
 *
 * Rate: one probe in flight per node at most, and two probes of one node start at least intervalMs / 2 apart
 * (half, so timer jitter never skips a tick). A node that recovers is back in rotation within intervalMs plus
 * its answer time; when a probe of it was hanging as it recovered, within probeTimeoutMs + intervalMs plus its
 * answer time (the hung probe is given up at its deadline, and the next starts at the following tick): with the
 * defaults 5 s plus the answer, within 10 s for any node that answers in under 5 s.
 */
import type { ChainHealth } from './selection.js';

/** Reads one node's head (eth_blockNumber, or the beacon head slot). Rejects when the node does not answer
 *  with one. `signal` aborts when the prober gives up on it or stops. */
export type HeadProbe = (index: number, signal: AbortSignal) => Promise<number>;

/** The timers the prober uses; default the global ones, unref'd so they never hold the process. */
export interface ProberTimers {
  setInterval(fn: () => void, ms: number): unknown;
  clearInterval(handle: unknown): void;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export interface ProberOptions {
  /** How often nodes out of rotation are probed, in ms; default 2_000. */
  intervalMs?: number;
  /** How often nodes in rotation with no recent head report are polled, in ms; default 5_000. */
  headIntervalMs?: number;
  /** A probe unanswered this long counts as failed, in ms; default 3_000. */
  probeTimeoutMs?: number;
  timers?: ProberTimers;
  /** Told of each probe as the node's health is (the worker threads' copies of it, chain/relay.ts). */
  observer?: ProbeObserver;
}

/** Each probe's start and report, in the order the node's health gets them. */
export interface ProbeObserver {
  started(index: number): void;
  reported(index: number, head: number | null, latencyMs: number, hung: boolean): void;
}

export interface Prober {
  /** Stops both loops and aborts probes in flight; their results are ignored. */
  stop(): void;
}

const DEFAULT_INTERVAL_MS = 2_000;
const DEFAULT_HEAD_INTERVAL_MS = 5_000;
const DEFAULT_PROBE_TIMEOUT_MS = 3_000;

const globalTimers: ProberTimers = {
  setInterval(fn, ms) {
    return setInterval(fn, ms).unref();
  },
  clearInterval(handle) {
    clearInterval(handle as NodeJS.Timeout);
  },
  setTimeout(fn, ms) {
    return setTimeout(fn, ms).unref();
  },
  clearTimeout(handle) {
    clearTimeout(handle as NodeJS.Timeout);
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
  /** The timer that gives the probe up at probeTimeoutMs. */
  deadline: unknown;
}

export function startProber(health: ChainHealth, probe: HeadProbe, opts: ProberOptions = {}): Prober {
  const intervalMs = positiveMs(opts.intervalMs, DEFAULT_INTERVAL_MS, 'intervalMs');
  const headIntervalMs = positiveMs(opts.headIntervalMs, DEFAULT_HEAD_INTERVAL_MS, 'headIntervalMs');
  const probeTimeoutMs = positiveMs(opts.probeTimeoutMs, DEFAULT_PROBE_TIMEOUT_MS, 'probeTimeoutMs');
  const timers = opts.timers ?? globalTimers;
  const clock = health.now;
  const upstreams = health.upstreams;

  const inFlight: Array<InFlight | null> = upstreams.map(() => null);
  const lastStart: number[] = upstreams.map(() => -Infinity);
  // headAt as this prober's own poll left it: a later headAt came from elsewhere (a newHeads feed).
  const polledHeadAt: Array<number | null> = upstreams.map(() => null);
  let stopped = false;

  function launch(index: number, now: number): void {
    if (inFlight[index] !== null || now - lastStart[index]! < intervalMs / 2) return;
    const entry: InFlight = { startedAt: now, controller: new AbortController(), deadline: null };
    inFlight[index] = entry;
    lastStart[index] = now;
    upstreams[index]!.probeSince = now;
    opts.observer?.started(index);
    entry.deadline = timers.setTimeout(() => giveUp(index, entry), probeTimeoutMs);
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

  /** Ends the probe in flight to `index`; false when `entry` is no longer it (given up, or after stop()). */
  function end(index: number, entry: InFlight): boolean {
    if (stopped || inFlight[index] !== entry) return false;
    inFlight[index] = null;
    timers.clearTimeout(entry.deadline);
    upstreams[index]!.probeSince = null;
    return true;
  }

  function settle(index: number, entry: InFlight, head: number | null): void {
    if (!end(index, entry)) return;
    const u = upstreams[index]!;
    const latencyMs = clock() - entry.startedAt;
    u.reportProbe(head, latencyMs);
    opts.observer?.reported(index, head, latencyMs, false);
    polledHeadAt[index] = u.headAt;
  }

  function giveUp(index: number, entry: InFlight): void {
    if (!end(index, entry)) return;
    entry.controller.abort();
    const latencyMs = clock() - entry.startedAt;
    upstreams[index]!.reportProbe(null, latencyMs, true);
    opts.observer?.reported(index, null, latencyMs, true);
  }

  function probeOutOfRotation(): void {
    const now = clock();
    const healthy = new Set(health.healthyIndices());
    for (let i = 0; i < upstreams.length; i++) if (!healthy.has(i)) launch(i, now);
  }

  function pollStaleHeads(): void {
    const now = clock();
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
      timers.clearInterval(probeTimer);
      timers.clearInterval(headTimer);
      for (let i = 0; i < inFlight.length; i++) {
        const entry = inFlight[i];
        if (entry != null && end(i, entry)) entry.controller.abort();
      }
      stopped = true;
    },
  };
}
