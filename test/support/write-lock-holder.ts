/**
 * A worker for test/store/write-lock.test.ts: takes the shared write lock, says so, and holds it for `holdMs`
 * (or until terminated). With `holdMs` 0 it only tries to take it (with a worker's bound) and says how that went;
 * with `churnMs`, it writes back to back.
 */
import { performance } from 'node:perf_hooks';
import { parentPort, workerData } from 'node:worker_threads';
import { createWriteLock } from '../../src/store/write-lock.js';

const { memory, holdMs, churnMs } = workerData as { memory: SharedArrayBuffer; holdMs: number; churnMs?: number };
const lock = createWriteLock(memory);
const hold = (ms: number): void => {
  const until = Date.now() + ms;
  while (Date.now() < until) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1);
};
if (churnMs !== undefined) {
  // Writes back to back for `churnMs`, each holding the lock `holdMs`: a worker under a burst of management writes.
  parentPort!.postMessage('churning');
  const until = Date.now() + churnMs;
  let refused = 0;
  while (Date.now() < until) {
    try {
      lock.run(() => hold(holdMs));
    } catch {
      refused++;
    }
  }
  parentPort!.postMessage({ refused });
} else if (holdMs === 0) {
  const started = performance.now();
  try {
    lock.run(() => parentPort!.postMessage('written'));
  } catch (err) {
    parentPort!.postMessage({ refused: (err as { code?: string }).code, waitedMs: Math.round(performance.now() - started) });
  }
} else {
  lock.run(() => {
    parentPort!.postMessage('holding');
    hold(holdMs);
  });
  parentPort!.postMessage('released');
}
