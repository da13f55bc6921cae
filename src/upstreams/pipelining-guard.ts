/**
 * Suspends pipelining to an upstream whose pipelined answers arrive late in the way Nagle's algorithm makes
 * them. A server that leaves Nagle on (anvil does) and writes each answer separately holds every answer after
 * the first until that one is acknowledged, and the gateway's kernel delays that acknowledgement by 40 ms or
 * more. Pipelining then costs far more than it saves, so the pool falls back to one request per socket.
 */
export interface PipeliningGuard {
  /** Requests in flight per socket allowed now: the configured depth, or 1 while suspended. */
  depth: number;
  /**
   * A response that waited on its socket behind another completed `waitedMs` after that one did, when an
   * answer usually takes `usualMs` from write to end.
   */
  observe(waitedMs: number, usualMs: number, now: number): void;
  /** Lifts a suspension that has lasted SUSPENSION_MS; called from the pool's sweep. */
  review(now: number): void;
}

// A delayed acknowledgement takes 40 ms at least and 200 ms at most on Linux: later than this beyond the
// usual answer, and within that range, an answer looks held back by Nagle rather than slow.
const LATE_MS = 30;
const HELD_AT_MOST_MS = 250;
// One held answer can be a pause of the node's; this many, apart from each other, within the window are a pattern.
const STRIKES = 3;
const STRIKE_SPACING_MS = 100;
const STRIKE_WINDOW_MS = 10_000;
// The node behind the URL may be replaced or reconfigured, so pipelining is tried again after a while.
const SUSPENSION_MS = 300_000;

export function createPipeliningGuard(configured: number): PipeliningGuard {
  // Times of the latest strikes, oldest first.
  const strikes: number[] = [];
  let suspendedAt = 0;
  const guard: PipeliningGuard = {
    depth: configured,
    observe(waitedMs, usualMs, now) {
      const late = waitedMs - usualMs;
      if (late < LATE_MS || late > HELD_AT_MOST_MS || guard.depth === 1) return;
      const last = strikes[strikes.length - 1];
      if (last !== undefined && now - last < STRIKE_SPACING_MS) return;
      strikes.push(now);
      if (strikes.length > STRIKES) strikes.shift();
      if (strikes.length === STRIKES && now - strikes[0]! <= STRIKE_WINDOW_MS) {
        guard.depth = 1;
        suspendedAt = now;
        strikes.length = 0;
      }
    },
    review(now) {
      if (guard.depth === 1 && configured > 1 && now - suspendedAt >= SUSPENSION_MS) guard.depth = configured;
    },
  };
  return guard;
}
