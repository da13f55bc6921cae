/**
 * The latency of calls as a fixed-bucket histogram: the same bounds in every usage row, so rows of any
 * minute, hour or day merge by adding counts bucket by bucket, and percentiles read from the merged counts
 * are those of all the calls (averaging per-minute percentiles would not be). Bounds are roughly log-spaced
 * (1-2-3-5-7 per decade): a percentile is within one bucket, about ±25 %, of the exact value.
 */
import { LATENCY_BUCKET_COUNT } from '../store/latency-columns.js';

/** Upper bounds in ms (inclusive) of every bucket but the last, which holds everything slower (> 30 s). */
export const LATENCY_BOUNDS_MS: readonly number[] = [
  0.5, 1, 2, 3, 5, 7, 10, 15, 20, 30, 50, 70, 100, 150, 200, 300, 500, 700, 1000, 2000, 5000, 10_000, 30_000,
];
if (LATENCY_BOUNDS_MS.length !== LATENCY_BUCKET_COUNT - 1) throw new Error('latency bounds and columns disagree');

/** The bucket of a latency in ms: a binary search over 23 bounds, five comparisons. */
export function latencyBucket(ms: number): number {
  let lo = 0;
  let hi = LATENCY_BOUNDS_MS.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (ms <= LATENCY_BOUNDS_MS[mid]!) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

/** A histogram's counts, one per bucket. */
export type LatencyCounts = number[];

export function emptyLatency(): LatencyCounts {
  return new Array<number>(LATENCY_BUCKET_COUNT).fill(0);
}

/** Adds `from`'s counts into `into`. */
export function mergeLatency(into: LatencyCounts, from: readonly number[]): void {
  for (let i = 0; i < LATENCY_BUCKET_COUNT; i++) into[i]! += from[i] ?? 0;
}

/**
 * The `q` quantile (0 < q ≤ 1) in ms, interpolated linearly inside the bucket it falls in (the first bucket
 * starts at 0; the last, unbounded, answers its lower bound); null when nothing was timed. Rounded to 0.01 ms.
 */
export function latencyQuantile(counts: readonly number[], q: number): number | null {
  let total = 0;
  for (const c of counts) total += c;
  if (total === 0) return null;
  const rank = q * total;
  let seen = 0;
  for (let i = 0; i < LATENCY_BUCKET_COUNT; i++) {
    const c = counts[i] ?? 0;
    if (c > 0 && seen + c >= rank) {
      const low = i === 0 ? 0 : LATENCY_BOUNDS_MS[i - 1]!;
      const high = LATENCY_BOUNDS_MS[i];
      if (high === undefined) return low;
      return Math.round((low + ((high - low) * (rank - seen)) / c) * 100) / 100;
    }
    seen += c;
  }
  return LATENCY_BOUNDS_MS[LATENCY_BOUNDS_MS.length - 1]!;
}

/** p50, p95 and p99 in ms of one histogram: what the stats answer carries (null each when nothing was timed). */
export function latencySummary(counts: readonly number[]): { p50: number | null; p95: number | null; p99: number | null } {
  return { p50: latencyQuantile(counts, 0.5), p95: latencyQuantile(counts, 0.95), p99: latencyQuantile(counts, 0.99) };
}
