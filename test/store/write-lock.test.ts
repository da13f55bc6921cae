import t from 'tap';
import { once } from 'node:events';
import type { Worker } from 'node:worker_threads';
import { createWriteLock, releaseWriteLockHeldBy } from '../../src/store/write-lock.js';
import { tsWorker } from '../support/ts-worker.js';

const HOLDER = new URL('../support/write-lock-holder.ts', import.meta.url);

function holder(memory: SharedArrayBuffer, holdMs: number): Worker {
  return tsWorker(HOLDER, { workerData: { memory, holdMs } });
}

t.test('a thread waits for another thread holding the lock, then writes: it never fails', async (t) => {
  const lock = createWriteLock();
  const worker = holder(lock.memory, 300);
  t.teardown(() => worker.terminate());
  const [said] = await once(worker, 'message');
  t.equal(said, 'holding');
  const started = Date.now();
  const result = lock.run(() => 'written');
  const waited = Date.now() - started;
  t.equal(result, 'written');
  // Well past SQLite's 100 ms busy timeout the daemon uses: the wait is for the lock, not SQLite's.
  t.ok(waited >= 150, `waited for the holder's release (${waited} ms)`);
});

t.test('re-entrant within a thread; released after a throw', async (t) => {
  const lock = createWriteLock();
  t.equal(
    lock.run(() => lock.run(() => 2) + 1),
    3,
  );
  t.throws(
    () =>
      lock.run(() => {
        throw new Error('refused');
      }),
    /refused/,
  );
  t.equal(new Int32Array(lock.memory)[0], 0, 'free again');
});

t.test('a thread ended while holding it: the main thread frees it, and only for that thread', async (t) => {
  const lock = createWriteLock();
  const worker = holder(lock.memory, 60_000);
  const [said] = await once(worker, 'message');
  t.equal(said, 'holding');
  const id = worker.threadId;
  t.notOk(releaseWriteLockHeldBy(lock.memory, id + 1), 'another thread id frees nothing');
  await worker.terminate();
  t.equal(new Int32Array(lock.memory)[0], id + 1, 'still held by the ended thread');
  t.ok(releaseWriteLockHeldBy(lock.memory, id), 'freed');
  t.equal(
    lock.run(() => 'written'),
    'written',
  );
});
