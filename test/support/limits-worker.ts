// A worker thread for test/limits/shared-threads.test.ts: it opens its own views over the shared memory each
// task carries and answers the task with what it saw. Started with tsWorker (ts-worker.ts).
import { parentPort } from 'node:worker_threads';
import { sharedNow } from '../../src/limits/shared-clock.js';
import { createSharedCounts, type SharedCountsMemory } from '../../src/limits/shared-counts.js';
import { createSharedUnknownKeyGuard, type SharedUnknownKeysMemory } from '../../src/limits/shared-unknown-keys.js';
import { createSharedWindowLimiter, type SharedWindowMemory } from '../../src/limits/shared-window.js';

export type LimitsTask =
  /** Takes `key` at `limit` as fast as it can from `startAt` for `durationMs` (shared clock). */
  | { task: 'hammer'; memory: SharedWindowMemory; key: string; limit: number; startAt: number; durationMs: number }
  /** From `startAt`, takes each key once at limit 1, the clock standing at 0. */
  | { task: 'take-each'; memory: SharedWindowMemory; keys: string[]; startAt: number }
  /** From `startAt`, presents `n` unknown keys from `ip` in one minute. */
  | { task: 'guess'; memory: SharedUnknownKeysMemory; ip: string; n: number; startAt: number }
  /** From `startAt`, `n` opens and closes of `key`, in pairs or alone. */
  | { task: 'open-close' | 'open' | 'close'; memory: SharedCountsMemory; key: string; n: number; startAt: number }
  /** From `startAt`, `n` times: tryOpen, count itself in `inside` while open, close. */
  | { task: 'try-open'; memory: SharedCountsMemory; key: string; max: number; n: number; inside: Int32Array; startAt: number }
  /** From `startAt` for `durationMs`, takes a new key (`prefix` + a number) at limit 1 after another. */
  | { task: 'flood'; memory: SharedWindowMemory; prefix: string; startAt: number; durationMs: number }
  /** From `startAt` until `endAt`, takes `key` at `limit` every millisecond: the times of its admissions. */
  | { task: 'steady'; memory: SharedWindowMemory; key: string; limit: number; startAt: number; endAt: number }
  | { task: 'clock' }
  /** Takes `key`, and stops for good inside the take, holding the key's lock. */
  | { task: 'die-in-take'; memory: SharedWindowMemory; key: string };

function waitUntil(at: number): void {
  while (sharedNow() < at);
}

function run(t: LimitsTask): unknown {
  switch (t.task) {
    case 'hammer': {
      // The limiter's own reading of the clock: the time its decision was made at, under the key's lock.
      let at = 0;
      const limiter = createSharedWindowLimiter(t.memory, { now: () => (at = sharedNow()) });
      const admitted: number[] = [];
      const refused: number[] = [];
      let offered = 0;
      waitUntil(t.startAt);
      do {
        const ok = limiter.take(t.key, t.limit).ok;
        offered++;
        if (ok) admitted.push(at);
        // One refusal a millisecond is plenty to check against, and keeps the answer small.
        else if (refused.length === 0 || at - refused[refused.length - 1]! >= 1) refused.push(at);
      } while (at < t.startAt + t.durationMs);
      return { admitted, refused, offered };
    }
    case 'take-each': {
      const limiter = createSharedWindowLimiter(t.memory, { now: () => 0 });
      waitUntil(t.startAt);
      return t.keys.filter((key) => limiter.take(key, 1).ok);
    }
    case 'guess': {
      const guard = createSharedUnknownKeyGuard(t.memory, { now: () => 0 });
      let passed = 0;
      waitUntil(t.startAt);
      for (let i = 0; i < t.n; i++) if (!guard.refuse(t.ip)) passed++;
      return passed;
    }
    case 'open-close':
    case 'open':
    case 'close': {
      const counts = createSharedCounts(t.memory);
      waitUntil(t.startAt);
      for (let i = 0; i < t.n; i++) {
        if (t.task !== 'close') counts.open(t.key);
        if (t.task !== 'open') counts.close(t.key);
      }
      return null;
    }
    case 'try-open': {
      const counts = createSharedCounts(t.memory);
      let opened = 0;
      let most = 0;
      waitUntil(t.startAt);
      for (let i = 0; i < t.n; i++) {
        if (!counts.tryOpen(t.key, t.max)) continue;
        opened++;
        most = Math.max(most, Atomics.add(t.inside, 0, 1) + 1, counts.count(t.key));
        Atomics.sub(t.inside, 0, 1);
        counts.close(t.key);
      }
      return { opened, most };
    }
    case 'flood': {
      let evictions = 0;
      const limiter = createSharedWindowLimiter(t.memory, { onEvict: () => void evictions++ });
      let keys = 0;
      let admitted = 0;
      waitUntil(t.startAt);
      while (sharedNow() < t.startAt + t.durationMs) {
        for (let i = 0; i < 100; i++) if (limiter.take(`${t.prefix}${keys++}`, 1).ok) admitted++;
      }
      return { keys, admitted, evictions };
    }
    case 'steady': {
      let at = 0;
      const limiter = createSharedWindowLimiter(t.memory, { now: () => (at = sharedNow()) });
      const admitted: number[] = [];
      let offered = 0;
      for (let next = t.startAt; next < t.endAt; next += 1) {
        waitUntil(next);
        offered++;
        if (limiter.take(t.key, t.limit).ok) admitted.push(at);
      }
      return { admitted, offered };
    }
    case 'clock':
      return sharedNow();
    case 'die-in-take': {
      const limiter = createSharedWindowLimiter(t.memory, {
        now: () => {
          parentPort!.postMessage({ holding: true });
          for (;;);
        },
      });
      return limiter.take(t.key, 1);
    }
  }
}

parentPort!.on('message', (message: { id: number; task: LimitsTask }) => {
  parentPort!.postMessage({ id: message.id, result: run(message.task) });
});
