/** A worker for test/store/write-lock.test.ts: takes the shared write lock, says so, and holds it for `holdMs` (or until terminated). */
import { parentPort, workerData } from 'node:worker_threads';
import { createWriteLock } from '../../src/store/write-lock.js';

const { memory, holdMs } = workerData as { memory: SharedArrayBuffer; holdMs: number };
createWriteLock(memory).run(() => {
  parentPort!.postMessage('holding');
  const until = Date.now() + holdMs;
  while (Date.now() < until) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 5);
});
parentPort!.postMessage('released');
