/**
 * One SQLite writer at a time among the threads of one gateway process (the main thread's ledger flush and
 * usage roll-up, each worker's management writes), each on its own connection to the same file.
 *
 * Why not SQLite's own lock alone: a connection that finds the file's write lock taken sleeps in its busy
 * handler (1, 2, 5, 10, 15, 20, 25, 25... ms) and looks again, and gives up with SQLITE_BUSY at the busy
 * timeout (the daemon's is short, 100 ms: better-sqlite3 waits synchronously, stalling the thread). Between
 * two of its looks, the other threads can take and release the lock many times, so a thread can lose every
 * look while no transaction lasts more than a few ms: under load, management writes and ledger flushes
 * failed each other with "database is locked" (503). This lock is taken before SQLite's: a thread waiting
 * for it sleeps in Atomics.wait and is woken by the release itself, so the gateway's threads queue behind
 * each other instead of polling, and SQLite's busy timeout only ever waits for another process (the CLI).
 *
 * The wait is bounded: past `maxWaitMs` the write is refused with SQLITE_BUSY, as a busy store (a ledger
 * flush keeps its debits for the next flush, a management write answers 503), and nothing is written. A
 * holder that takes longer than that is stuck or paused (a debugger), or died inside its write; the main
 * thread, which ends stuck workers and frees a dead one's lock, must keep its event loop running meanwhile.
 * Whether the holder still progresses cannot be read while it holds: a write is synchronous, so a worker's
 * heartbeat (server/worker-watch.ts) stands still during any write, slow or stuck alike.
 *
 * The lock word holds the holder's thread id + 1 (0: free); a second word says the main thread waits. A worker that dies holding it (terminate()
 * lands inside a write) would stop every writer: the main thread frees it with `releaseWriteLockHeldBy`
 * once the worker has exited. Re-entrant within a thread (a write that calls another write).
 */
import Database from 'better-sqlite3';
import { performance } from 'node:perf_hooks';
import { isMainThread, threadId } from 'node:worker_threads';

export interface WriteLock {
  /** The lock word, shared with every thread of the gateway (workerData shares it, not a copy). */
  readonly memory: SharedArrayBuffer;
  /**
   * Runs `write` holding the lock, taken first (waiting for another thread's write to end) unless this thread
   * holds it. Throws a SqliteError SQLITE_BUSY, `write` not run, when another thread holds it past the bound.
   */
  run<T>(write: () => T): T;
}

/**
 * How long the main thread waits for another thread's write, in ms: as long as SQLite's busy timeout of the
 * daemon (100 ms), far above a write's few ms, and short enough that its timers (stall watch, flushes,
 * /metrics, signals, a worker's 'exit') still run while a worker is stuck holding the lock.
 */
export const MAIN_THREAD_WAIT_MS = 100;
/**
 * How long a worker waits, in ms: longer (only its own requests wait), but well inside the shortest stall
 * time (server.worker_stall_s, 1 s at least), so a worker waiting is never taken for a stuck one.
 */
export const WORKER_WAIT_MS = 500;

const HOLDER = 0;
/** 1 while the main thread waits for the lock: the other threads then let it go first. */
const MAIN_WAITING = 1;
/** Only bounds a sleep whose wake-up was missed: the loop looks at the word again either way. */
const WAIT_MS = 50;

/**
 * A write lock over `memory` (new and free when omitted: one thread alone, or the main thread making it),
 * waited for at most `maxWaitMs` (by default per thread: MAIN_THREAD_WAIT_MS or WORKER_WAIT_MS).
 *
 * The main thread goes first: while it waits, a worker does not take the lock it finds free. Without that,
 * workers writing back to back (each create a few ms) could take it in turns for longer than the main
 * thread's short bound, failing its ledger flush although no write is stuck.
 */
export function createWriteLock(
  memory: SharedArrayBuffer = new SharedArrayBuffer(8),
  maxWaitMs: number = isMainThread ? MAIN_THREAD_WAIT_MS : WORKER_WAIT_MS,
): WriteLock {
  const word = new Int32Array(memory, 0, 2);
  const me = threadId + 1;
  let depth = 0;
  function busy(holder: number): Error {
    return new Database.SqliteError(
      `the store's write lock was held by other threads of the gateway (last thread ${holder - 1}) for over ${maxWaitMs} ms`,
      'SQLITE_BUSY',
    );
  }
  /** A worker's take: after the main thread's, if it waits. */
  function acquireAfterMain(): void {
    const deadline = performance.now() + maxWaitMs;
    for (;;) {
      const mainWaits = Atomics.load(word, MAIN_WAITING) === 1;
      const holder = mainWaits ? Atomics.load(word, HOLDER) : Atomics.compareExchange(word, HOLDER, 0, me);
      if (holder === 0 && !mainWaits) return;
      const left = deadline - performance.now();
      if (left <= 0) throw busy(holder);
      // Sleeps only while the word still reads so: a change in between makes the wait return at once.
      if (mainWaits) Atomics.wait(word, MAIN_WAITING, 1, Math.min(left, WAIT_MS));
      else Atomics.wait(word, HOLDER, holder, Math.min(left, WAIT_MS));
    }
  }
  function acquireOnMain(): void {
    let holder = Atomics.compareExchange(word, HOLDER, 0, me);
    if (holder === 0) return;
    const deadline = performance.now() + maxWaitMs;
    Atomics.store(word, MAIN_WAITING, 1);
    try {
      for (;;) {
        const left = deadline - performance.now();
        if (left <= 0) throw busy(holder);
        Atomics.wait(word, HOLDER, holder, Math.min(left, WAIT_MS));
        holder = Atomics.compareExchange(word, HOLDER, 0, me);
        if (holder === 0) return;
      }
    } finally {
      Atomics.store(word, MAIN_WAITING, 0);
      Atomics.notify(word, MAIN_WAITING);
    }
  }
  const acquire = isMainThread ? acquireOnMain : acquireAfterMain;
  return {
    memory,
    run(write) {
      if (depth === 0) acquire();
      depth++;
      try {
        return write();
      } finally {
        depth--;
        if (depth === 0) release(word);
      }
    },
  };
}

/** Frees the lock and wakes every waiter (a few threads at most): the main thread among them takes it first. */
function release(word: Int32Array): void {
  Atomics.store(word, HOLDER, 0);
  Atomics.notify(word, HOLDER);
}

/**
 * Frees the write lock if the thread `deadThreadId` held it when it ended. Call it on the main thread once
 * that worker has exited (its 'exit' event), never for a thread that still runs. True when it was freed.
 */
export function releaseWriteLockHeldBy(memory: SharedArrayBuffer, deadThreadId: number): boolean {
  const word = new Int32Array(memory, 0, 2);
  if (Atomics.compareExchange(word, HOLDER, deadThreadId + 1, 0) !== deadThreadId + 1) return false;
  Atomics.notify(word, HOLDER);
  return true;
}
