/**
 * What the gateway may still send one node: its calls per second (`rps`), its calls in flight (`max_in_flight`)
 * and a cooldown after the node answered 429. Selection (selection.ts) skips a node with no room, so calls spill
 * to other nodes; a call no node has room for is refused at once (upstream_budget, 503) rather than held: a wait
 * would hold the client for a share of a second it may not have, and a client that retries sooner or elsewhere
 * does better with the refusal.
 *
 * Calls per second: the send times of the last `rps` calls, in a ring. A call may go when the oldest of them is
 * at least WINDOW_MS old, so no window of WINDOW_MS ever holds more than `rps` sends: an exact sliding window,
 * O(1) per call and nothing made per call. A call is counted as it is sent (NodeAttempt, chain/attempts.ts), so
 * retries, hedges, quorum votes and broadcasts count; so does each second write of a request by the upstream
 * client (moved off a stalled socket, re-sent after its socket was lost: ChainHealth.chargeAgain), which the node
 * may count as a call of its own, and which is not made without room. The gateway's head probes of the node do
 * not count (see docs/failover.md: leave about one call a second of the provider's quota to them).
 *
 * Cooldown: the node's Retry-After (seconds, or an HTTP date) when it gave one, capped at MAX_COOLDOWN_MS; else
 * FIRST_COOLDOWN_MS, doubled for each 429 that follows a cooldown within STREAK_RESET_MS of its end, up to
 * MAX_DEFAULT_COOLDOWN_MS.
 */

/** The window of `rps`, in ms. */
export const WINDOW_MS = 1_000;
/** A 429 without Retry-After cools its node down this long first, in ms. */
export const FIRST_COOLDOWN_MS = 1_000;
/** The doubling of cooldowns without Retry-After stops here, in ms. */
export const MAX_DEFAULT_COOLDOWN_MS = 30_000;
/** No cooldown lasts longer, whatever Retry-After says, in ms: a node saying "an hour" is asked again sooner. */
export const MAX_COOLDOWN_MS = 300_000;
/** A 429 this long after the last cooldown ended starts again at FIRST_COOLDOWN_MS, in ms. */
export const STREAK_RESET_MS = 60_000;

/** A node's limits, per thread (the process's split between worker threads by the caller). */
export interface BudgetLimits {
  /** Calls per WINDOW_MS at most; null: no limit. */
  readonly rps: number | null;
  /** Calls in flight at most; null: no limit. */
  readonly maxInFlight: number | null;
}

/** One node's budget: its send times, its cooldown. Times are in ms on the chain's health clock. */
export class NodeBudget {
  readonly rps: number | null;
  readonly maxInFlight: number | null;
  /** The last `rps` send times, oldest at `next`; -Infinity where none was sent yet. */
  private readonly sent: Float64Array | null;
  private next = 0;
  /** No call goes to the node before this time (a 429's cooldown). */
  coolUntil = -Infinity;
  /** Cooldowns in a row without Retry-After, for the doubling. */
  private streak = 0;

  constructor(limits: BudgetLimits) {
    this.rps = limits.rps;
    this.maxInFlight = limits.maxInFlight;
    this.sent = limits.rps === null ? null : new Float64Array(limits.rps).fill(-Infinity);
  }

  /** Whether a call may go to the node at `now` with `inflight` calls already in flight to it. */
  hasRoom(now: number, inflight: number): boolean {
    if (now < this.coolUntil) return false;
    if (this.maxInFlight !== null && inflight >= this.maxInFlight) return false;
    return this.sent === null || this.sent[this.next]! <= now - WINDOW_MS;
  }

  /** Whether the node is cooling down after a 429 at `now`. */
  cooling(now: number): boolean {
    return now < this.coolUntil;
  }

  /** A call goes to the node at `now`. */
  take(now: number): void {
    const sent = this.sent;
    if (sent === null) return;
    sent[this.next] = now;
    this.next = this.next + 1 === sent.length ? 0 : this.next + 1;
  }

  /**
   * The node answered 429 at `now`, with `retryAfterMs` from its Retry-After (null without one): it gets no call
   * until the cooldown ends. Returns the cooldown in ms, or 0 when the node was cooling down already (a 429 to a
   * call sent before the first; the cooldown is then extended to the later end, not started again).
   */
  coolDown(now: number, retryAfterMs: number | null): number {
    const already = now < this.coolUntil;
    let ms: number;
    if (retryAfterMs !== null) {
      ms = Math.min(MAX_COOLDOWN_MS, Math.max(0, retryAfterMs));
    } else if (already) {
      ms = 0;
    } else {
      if (now - this.coolUntil > STREAK_RESET_MS) this.streak = 0;
      ms = Math.min(MAX_DEFAULT_COOLDOWN_MS, FIRST_COOLDOWN_MS * 2 ** this.streak);
      this.streak++;
    }
    this.coolUntil = Math.max(this.coolUntil, now + ms);
    return already ? 0 : ms;
  }
}

/**
 * A chain's budgets, one per node (indices match its upstreams), as selection reads them in pick(): look() once,
 * then hasRoom() per node. Nothing is looked at, nor the clock read, on a chain without a limited node and with no
 * cooldown running.
 */
export class ChainBudgets {
  private readonly budgets: readonly NodeBudget[];
  /** Some node has a limit: every look() counts. */
  private readonly limited: boolean;
  /** The latest cooldown end among the nodes: while it is ahead, look() counts too. */
  private coolingUntil = -Infinity;
  /** The last look()'s clock reading; the nodes left out since it for want of room. */
  private at = 0;
  short = 0;
  /** Where this thread's cooldowns are told (selection.ts shareCooldowns). */
  tell: ((index: number, ms: number) => void) | null = null;

  constructor(count: number, limits: readonly BudgetLimits[] | undefined) {
    this.budgets = Array.from({ length: count }, (_, i) => new NodeBudget(limits?.[i] ?? { rps: null, maxInFlight: null }));
    this.limited = limits?.some((l) => l.rps !== null || l.maxInFlight !== null) === true;
  }

  /** Whether a pick need look at the budgets at all: some node is limited or cooling down. */
  active(): boolean {
    return this.limited || this.coolingUntil > -Infinity;
  }

  /** Readies a pick's look at the budgets at `now` (read only when active()). */
  look(now: number): void {
    this.short = 0;
    this.at = now;
    if (now >= this.coolingUntil) this.coolingUntil = -Infinity;
  }

  /** Whether node `index` with `inflight` calls in flight has room at the last look; a node without is counted. */
  hasRoom(index: number, inflight: number): boolean {
    if (this.budgets[index]!.hasRoom(this.at, inflight)) return true;
    this.short++;
    return false;
  }

  /** Those of `indices` with room at `now()` (`inflight(i)`: node i's calls in flight); `indices` itself while not
   *  active(), the clock unread. */
  withRoom(indices: number[], now: () => number, inflight: (index: number) => number): number[] {
    if (!this.active()) return indices;
    this.look(now());
    return indices.filter((i) => this.hasRoom(i, inflight(i)));
  }

  /** A call goes to node `index` at `at`, its room looked at already (pick, withRoom). */
  charge(index: number, at: number): void {
    if (this.limited) this.budgets[index]!.take(at);
  }

  /** A send to node `index` at `now` that no pick looked at (a re-send): taken when the node has room (`inflight`:
   *  its calls in flight), else false. */
  takeIfRoom(index: number, now: number, inflight: number): boolean {
    const budget = this.budgets[index]!;
    if (!budget.hasRoom(now, inflight)) return false;
    budget.take(now);
    return true;
  }

  /** NodeBudget.coolDown of node `index` at `now`; `heard`: another thread's cooldown, `retryAfterMs` what is left
   *  of it, kept as it is and never told again. Returns the cooldown started, 0 for none. */
  coolDown(index: number, now: number, retryAfterMs: number | null, heard: boolean): number {
    const budget = this.budgets[index];
    if (budget === undefined) return 0;
    let ms = 0;
    if (heard) budget.coolUntil = Math.max(budget.coolUntil, now + (retryAfterMs ?? 0));
    else ms = budget.coolDown(now, retryAfterMs);
    this.coolingUntil = Math.max(this.coolingUntil, budget.coolUntil);
    if (ms > 0) this.tell?.(index, ms);
    return ms;
  }
}

/**
 * A Retry-After header's wait in ms (RFC 9110 §10.2.3): delay-seconds, or an HTTP date (less `nowEpochMs`, the
 * wall clock). null when absent or neither form; 0 for a date in the past.
 */
export function retryAfterMs(value: string | undefined, nowEpochMs: number): number | null {
  if (value === undefined) return null;
  const text = value.trim();
  if (/^\d{1,10}$/.test(text)) return Number(text) * 1000;
  // Dates only: Date.parse takes many shapes, and a bare number is not one of them here.
  if (!/^[A-Za-z]{3},? /.test(text)) return null;
  const at = Date.parse(text);
  return Number.isNaN(at) ? null : Math.max(0, at - nowEpochMs);
}
