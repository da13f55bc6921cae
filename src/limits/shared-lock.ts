/**
 * The locks of the shared tables (shared-table.ts, whose top comment says how they are used): an Int32
 * holding its holder's tag, taken with Atomics.compareExchange, spun on briefly, then slept on in
 * Atomics.wait until the holder's release wakes the waiter.
 */
import { performance } from 'node:perf_hooks';
import { isMainThread, threadId } from 'node:worker_threads';

/** A free lock whose last holder died in its critical section: the next holder repairs what it guards. */
export const DAMAGED = -2;
/** This thread's lock word: its owner tag (thread id + 1) shifted left; bit 0 says someone may be waiting. */
export const MINE = (threadId + 1) * 2;
const SPINS = 64;
/**
 * How long the main thread waits for a lock before it takes it over as damaged, in ms. Critical sections last
 * under a microsecond: a holder silent this long died in one (terminated before its 'exit' event could free
 * it, which needs the main thread's event loop) or is paused in it by a debugger, and would otherwise freeze
 * the main thread for good. Workers wait on: the main thread frees a dead holder's locks.
 */
const MAIN_TAKEOVER_MS = 1000;

function lockSlow(ints: Int32Array, index: number, seen: number): boolean {
  let v = seen;
  for (let spin = 0; spin < SPINS; spin++) {
    if (v === 0 || v === DAMAGED) {
      const was = Atomics.compareExchange(ints, index, v, MINE);
      if (was === v) return v === DAMAGED;
      v = was;
    } else {
      v = Atomics.load(ints, index);
    }
  }
  // Sleep until woken. Taken from here on as contended (bit 0), because other sleepers may remain and the
  // release must wake one of them.
  const takeOverAt = isMainThread ? performance.now() + MAIN_TAKEOVER_MS : Number.POSITIVE_INFINITY;
  for (;;) {
    if (v === 0 || v === DAMAGED) {
      const was = Atomics.compareExchange(ints, index, v, MINE | 1);
      if (was === v) return v === DAMAGED;
      v = was;
      continue;
    }
    if ((v & 1) === 0) {
      const was = Atomics.compareExchange(ints, index, v, v | 1);
      if (was !== v) {
        v = was;
        continue;
      }
    }
    if (performance.now() >= takeOverAt) {
      // Its holder is taken for dead: the caller repairs what the lock guards, as after releaseLocksHeldBy.
      const was = Atomics.compareExchange(ints, index, v | 1, MINE | 1);
      if (was === (v | 1)) return true;
      v = was;
      continue;
    }
    // The timeout only bounds a sleep whose wake-up was missed; the loop checks again either way.
    Atomics.wait(ints, index, v | 1, 100);
    v = Atomics.load(ints, index);
  }
}

/** Takes the lock at `index`; true when its last holder died in it (the caller repairs what it guards). */
export function lock(ints: Int32Array, index: number): boolean {
  const v = Atomics.compareExchange(ints, index, 0, MINE);
  return v === 0 ? false : lockSlow(ints, index, v);
}

export function unlock(ints: Int32Array, index: number): void {
  if ((Atomics.exchange(ints, index, 0) & 1) !== 0) Atomics.notify(ints, index, 1);
}
