import t, { type Test } from 'tap';
import { performance } from 'node:perf_hooks';
import { once } from 'node:events';
import type { Worker } from 'node:worker_threads';
import { createLedger } from '../../src/metering/ledger.js';
import { createWriteLock, MAIN_THREAD_WAIT_MS, releaseWriteLockHeldBy } from '../../src/store/write-lock.js';
import { addOwner, invariantGaps, tempStore } from './temp-store.js';
import { tsWorker } from '../support/ts-worker.js';

const HOLDER = new URL('../support/write-lock-holder.ts', import.meta.url);

function holder(memory: SharedArrayBuffer, holdMs: number): Worker {
  return tsWorker(HOLDER, { workerData: { memory, holdMs } });
}

t.test('a thread waits for another thread holding the lock, then writes: it never fails', async (t) => {
  const lock = createWriteLock(undefined, 2000);
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

t.test('workers writing back to back never keep the main thread out past its bound: it goes first', async (t) => {
  const lock = createWriteLock();
  const churn = [1, 2].map(() => tsWorker(HOLDER, { workerData: { memory: lock.memory, holdMs: 5, churnMs: 1500 } }));
  t.teardown(() => Promise.all(churn.map((w) => w.terminate())));
  await Promise.all(churn.map((w) => once(w, 'message')));
  const ended = Promise.all(churn.map((w) => once(w, 'message')));
  let refused = 0;
  let written = 0;
  const started = Date.now();
  while (Date.now() - started < 1000) {
    try {
      lock.run(() => written++);
    } catch {
      refused++;
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  t.ok(written >= 10, `the main thread wrote (${written} times)`);
  t.equal(refused, 0, 'and was never refused');
  for (const [said] of await ended) t.same(said, { refused: 0 }, 'nor were the workers');
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

/** A worker that takes the lock and keeps it until terminated (a stuck or paused write); resolves once it holds it. */
async function stuckHolder(t: Test, memory: SharedArrayBuffer): Promise<Worker> {
  const worker = holder(memory, 600_000);
  t.teardown(() => worker.terminate());
  const [said] = await once(worker, 'message');
  t.equal(said, 'holding');
  return worker;
}

/** Frees the lock of `worker` once it has exited, as Tenancy.threadEnded does from the pool's 'exit' handler. */
function freeOnExit(worker: Worker, memory: SharedArrayBuffer): Promise<boolean> {
  const id = worker.threadId;
  return once(worker, 'exit').then(() => releaseWriteLockHeldBy(memory, id));
}

t.test('a worker stuck holding the lock: the main thread gives up within its bound and its event loop runs on', async (t) => {
  const lock = createWriteLock();
  const worker = await stuckHolder(t, lock.memory);
  const freed = freeOnExit(worker, lock.memory);
  // The stall rescue: a timer of the main thread ends the stuck worker. It runs only if no take blocks the loop.
  let fired = false;
  const rescue = setTimeout(() => {
    fired = true;
    void worker.terminate();
  }, 10);
  t.teardown(() => clearTimeout(rescue));
  for (let i = 0; i < 3; i++) {
    const started = performance.now();
    t.throws(() => lock.run(() => 'written'), { code: 'SQLITE_BUSY' }, 'refused as a busy store');
    const waited = performance.now() - started;
    t.ok(waited >= MAIN_THREAD_WAIT_MS - 5 && waited < MAIN_THREAD_WAIT_MS + 400, `gave up after ${Math.round(waited)} ms`);
  }
  t.equal(new Int32Array(lock.memory)[0], worker.threadId + 1, 'not taken from a live holder');
  t.equal(await freed, true, "the timer fired, the worker ended and its 'exit' freed the lock");
  t.ok(fired);
  t.equal(
    lock.run(() => 'written'),
    'written',
    'taken again',
  );
});

t.test('a worker waits a bounded time too (503 rather than a hang)', async (t) => {
  const lock = createWriteLock();
  await stuckHolder(t, lock.memory);
  const waiter = holder(lock.memory, 0);
  t.teardown(() => waiter.terminate());
  const [said] = await once(waiter, 'message');
  t.match(said, { refused: 'SQLITE_BUSY' }, "the worker's take failed as a busy store");
  t.ok((said as { waitedMs: number }).waitedMs >= 400, `after waiting (${(said as { waitedMs: number }).waitedMs} ms)`);
});

t.test('a ledger flush that met the held lock writes its rows at a later flush, exactly once', async (t) => {
  const memory = createWriteLock().memory;
  const store = tempStore(t, undefined, { busyTimeoutMs: 100, writeLock: createWriteLock(memory) });
  const owner = addOwner(store.db, 1000);
  const errors: unknown[] = [];
  const ledger = createLedger(store, { flushIntervalMs: 60_000, onFlushError: (e) => errors.push(e) });
  t.teardown(() => ledger.close());
  const ok = { endpointId: 'ep_aaaaaaaaaaaaaaaa', method: 'eth_call', status: 0 };
  const worker = await stuckHolder(t, memory);
  const freed = freeOnExit(worker, memory);
  ledger.settle(ledger.reserve(owner, 100)!, 100, ok);
  t.equal(ledger.flush(), false, 'the flush fails like a busy store');
  t.equal(ledger.healthy(), false);
  t.match(errors[0], { code: 'SQLITE_BUSY' });
  ledger.settle(ledger.reserve(owner, 50)!, 50, ok);
  t.equal(ledger.flush(), false, 'and again at the next flush');
  t.equal(ledger.available(owner), 850, 'the debits wait in memory');
  await worker.terminate();
  t.equal(await freed, true);
  t.equal(ledger.flush(), true, 'written once the lock is free');
  t.equal(ledger.flush(), true, 'nothing left to write twice');
  t.equal(store.sql.ledger.balance.get(owner), 850);
  t.same(store.db.prepare('SELECT requests, ru FROM usage_minute').all(), [{ requests: 2, ru: 150 }]);
  t.same(invariantGaps(store.db), [{ id: owner, gap: 0 }]);
});
