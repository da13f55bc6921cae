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
 * The lock word holds the holder's thread id + 1 (0: free). A worker that dies holding it (terminate()
 * lands inside a write) would stop every writer: the main thread frees it with `releaseWriteLockHeldBy`
 * once the worker has exited. Re-entrant within a thread (a write that calls another write).
 */
import { threadId } from 'node:worker_threads';

export interface WriteLock {
  /** The lock word, shared with every thread of the gateway (workerData shares it, not a copy). */
  readonly memory: SharedArrayBuffer;
  /** Runs `write` holding the lock, taken first (waiting for another thread's write to end) unless this thread holds it. */
  run<T>(write: () => T): T;
}

const HOLDER = 0;
/** Only bounds a sleep whose wake-up was missed: the loop looks at the word again either way. */
const WAIT_MS = 50;

/** A write lock over `memory` (new and free when omitted: one thread alone, or the main thread making it). */
export function createWriteLock(memory: SharedArrayBuffer = new SharedArrayBuffer(4)): WriteLock {
  const word = new Int32Array(memory, 0, 1);
  const me = threadId + 1;
  let depth = 0;
  function acquire(): void {
    for (;;) {
      const holder = Atomics.compareExchange(word, HOLDER, 0, me);
      if (holder === 0) return;
      // Sleeps only while `holder` still holds it: a release in between makes the wait return at once.
      Atomics.wait(word, HOLDER, holder, WAIT_MS);
    }
  }
  return {
    memory,
    run(write) {
      if (depth === 0) acquire();
      depth++;
      try {
        return write();
      } finally {
        depth--;
        if (depth === 0) {
          Atomics.store(word, HOLDER, 0);
          Atomics.notify(word, HOLDER, 1);
        }
      }
    },
  };
}

/**
 * Frees the write lock if the thread `deadThreadId` held it when it ended. Call it on the main thread once
 * that worker has exited (its 'exit' event), never for a thread that still runs. True when it was freed.
 */
export function releaseWriteLockHeldBy(memory: SharedArrayBuffer, deadThreadId: number): boolean {
  const word = new Int32Array(memory, 0, 1);
  if (Atomics.compareExchange(word, HOLDER, deadThreadId + 1, 0) !== deadThreadId + 1) return false;
  Atomics.notify(word, HOLDER, 1);
  return true;
}
