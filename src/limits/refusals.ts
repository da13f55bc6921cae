import { performance } from 'node:perf_hooks';

/**
 * Counts a connection's refused messages over a sliding window: a client that keeps sending into a
 * rate limit is closed rather than answered forever. A ring of the last `limit` refusal times is
 * enough: the limit is reached when the oldest of them is still inside the window.
 */
export interface RefusalCounter {
  /** Records one refusal; true when `limit` refusals fell within `windowMs`. */
  refuse(): boolean;
}

export function createRefusalCounter(limit: number, windowMs: number, now: () => number = () => performance.now()): RefusalCounter {
  const times = new Float64Array(limit);
  let next = 0;
  let filled = 0;
  return {
    refuse() {
      const t = now();
      times[next] = t;
      next = (next + 1) % limit;
      if (filled < limit) filled++;
      // After the write, `next` points at the oldest of the last `limit` refusals.
      return filled === limit && t - times[next]! < windowMs;
    },
  };
}
