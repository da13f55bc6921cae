/**
 * When a node leaves rotation for failing and how it comes back (health.ts judges it; config
 * chains.<slug>.failover.breaker sets it per chain): the built-in figures, and the shape a policy gives them in.
 */

/** Failed outcomes in a row that take a node out of rotation. */
export const FAILURE_STREAK = 3;
/** Share of failed outcomes in the window that takes a node out of rotation, once MIN_CALLS_JUDGED are counted. */
export const ERROR_RATE_LIMIT = 0.5;
/** Outcomes in the window needed before the error rate is judged: two failures out of three calls say little. */
export const MIN_CALLS_JUDGED = 10;
/** The sliding window for error rate and p50, in ms (a breaker's window_s in its place; health.ts keeps it in 1 s buckets). */
export const WINDOW_MS = 10_000;
/**
 * When a node leaves rotation for failing and how it comes back (config chains.<slug>.failover.breaker); each
 * default is the constant above, and `openMs` null: back whole at its next good probe.
 */
export interface BreakerPolicy {
  failureStreak: number;
  failureRate: number;
  minCalls: number;
  /** A whole number of seconds, in ms. */
  windowMs: number;
  /** Out at least this long; then a good probe brings it back half-open. null: back whole at its next good probe. */
  openMs: number | null;
  /** Half-open: answered calls needed to close; a failure among them opens it again. */
  halfOpenProbes: number;
}

/** The breaker before policies: the constants above. */
export const BUILT_IN_BREAKER: BreakerPolicy = Object.freeze({
  failureStreak: FAILURE_STREAK,
  failureRate: ERROR_RATE_LIMIT,
  minCalls: MIN_CALLS_JUDGED,
  windowMs: WINDOW_MS,
  openMs: null,
  halfOpenProbes: 1,
});
