import type { Store } from '../store/open.js';
import type { BalanceBook } from './balance-book.js';

/** Owners a shared book holds unless told otherwise: 2.5 MB of shared memory, and 512 KB per worker. */
export const DEFAULT_MAX_OWNERS = 65_536;

/**
 * The memory of a book that every thread reserves from: made once by the main thread and handed to each
 * worker in its workerData (a SharedArrayBuffer is shared, not copied). An owner gets an entry at its
 * first use in any thread and keeps it until the process ends, so `maxOwners` bounds the owners used
 * per run, deleted ones included.
 */
export interface SharedBookMemory {
  readonly buffer: SharedArrayBuffer;
  readonly maxOwners: number;
}

/**
 * A book over shared memory. Each owner has an entry with a spinlock (an Int32 holding the holder's
 * thread number + 1) guarding two Float64: `available` (what `BalanceBook.available` returns) and
 * `stored` (the stored balance `available` is counted from). A reservation is lock, compare, subtract,
 * unlock: no message to another thread. Only the writer's thread changes `stored`, so a flush, a
 * re-read and the debits of every thread compose without a lost update.
 */
export interface SharedBook extends BalanceBook {
  /** The writer's health as it last published it (a worker's ledger answers `healthy()` with it). */
  healthy(): boolean;
  /** When the writer's last flush that passed ended, as it published it, or null. */
  lastFlushAt(): number | null;
  /** Writer only: publishes its health and last flush to every thread. */
  publishFlush(healthy: boolean, at: number | null): void;
  /** Writer only: reads again the owners other threads added since the last call (a top-up may have come after their read). */
  syncAdded(): void;
  /** Writer only: a thread that ended: frees the locks it held and gives back the RU its open reservations held. */
  release(thread: number, held: Float64Array): void;
  /**
   * Writer only: reads stored balances again now (one owner's or all) and moves `available` by what
   * changed outside the ledger. A worker must not: its read could come before or after the writer's
   * last commit, and it cannot tell which.
   */
  reload(ownerId?: number): void;
}

// Layout: a header (Int32 fields; the last flush time as a BigInt64 at byte 32), then per entry
// available and stored (Float64), then the hash index (owner id and entry number + 1 per slot; twice as
// many slots as entries), then per entry its lock and its owner id (set last: "the entry is complete").
const HEADER_BYTES = 64;
const USED = 0; // entries handed out (may pass maxOwners: the claims that found the book full)
const HEALTHY = 1;
const FULL = -1; // a slot's entry number when the book was full
const SPINS = 200; // tries before a waiter lets the OS run the holder
const PER_OWNER_READS = 1024; // up to this many entries a re-read reads owner by owner, beyond it all owners at once

function tableBits(maxOwners: number): number {
  return Math.max(1, Math.ceil(Math.log2(maxOwners * 2)));
}

/** Makes a book's memory for `maxOwners` owners (default DEFAULT_MAX_OWNERS); every entry free, the writer healthy. */
export function createSharedBookMemory(maxOwners = DEFAULT_MAX_OWNERS): SharedBookMemory {
  if (!Number.isSafeInteger(maxOwners) || maxOwners < 1 || maxOwners > 1 << 24) {
    throw new RangeError(`maxOwners must be an integer from 1 to ${1 << 24}, got ${maxOwners}`);
  }
  const table = 2 ** tableBits(maxOwners);
  const memory = { buffer: new SharedArrayBuffer(HEADER_BYTES + maxOwners * 24 + table * 8), maxOwners };
  const header = new Int32Array(memory.buffer, 0, 8);
  Atomics.store(header, HEALTHY, 1);
  Atomics.store(new BigInt64Array(memory.buffer, 32, 1), 0, -1n);
  return memory;
}

/** Memory for one thread's open reservations, per entry (the writer gives them back if the thread dies). */
export function createHeldMemory(memory: SharedBookMemory): SharedArrayBuffer {
  return new SharedArrayBuffer(memory.maxOwners * 8);
}

/**
 * Opens `memory` in this thread. `thread` is 0 for the writer's thread and unique per worker; `held`
 * (from createHeldMemory) records this thread's open reservations. An owner not yet in the book is read
 * from `store` (this thread's own connection) and added; when two threads add one owner at once, the
 * first wins and the other uses its entry. Owner ids are SQLite row ids from 1 to 2^31 − 1 (a RangeError
 * otherwise).
 */
export function openSharedBook(memory: SharedBookMemory, store: Store, thread: number, held?: Float64Array): SharedBook {
  const { buffer, maxOwners } = memory;
  const bits = tableBits(maxOwners);
  const mask = 2 ** bits - 1;
  const header = new Int32Array(buffer, 0, 8);
  const lastFlush = new BigInt64Array(buffer, 32, 1);
  const available = new Float64Array(buffer, HEADER_BYTES, maxOwners);
  const stored = new Float64Array(buffer, available.byteOffset + available.byteLength, maxOwners);
  const keys = new Int32Array(buffer, stored.byteOffset + stored.byteLength, mask + 1);
  const refs = new Int32Array(buffer, keys.byteOffset + keys.byteLength, mask + 1);
  const locks = new Int32Array(buffer, refs.byteOffset + refs.byteLength, maxOwners);
  const owners = new Int32Array(buffer, locks.byteOffset + locks.byteLength, maxOwners);
  const sql = store.sql.ledger;
  const me = thread + 1;
  // Entries never move, so each thread remembers where its owners are.
  const entries = new Map<number, number>();

  function lock(e: number): void {
    if (Atomics.compareExchange(locks, e, 0, me) === 0) return;
    for (let spins = 1; ; spins++) {
      const holder = Atomics.load(locks, e);
      if (holder === 0) {
        if (Atomics.compareExchange(locks, e, 0, me) === 0) return;
      } else if (spins > SPINS) {
        // The holder was descheduled mid-section: give its core back rather than spin against it.
        Atomics.wait(locks, e, holder, 0.05);
      }
    }
  }

  function unlock(e: number): void {
    Atomics.store(locks, e, 0);
  }

  function full(): Error {
    return new Error(`the shared ledger is full: it holds the balances of at most ${maxOwners} owners per run`);
  }

  /** The entry of slot `h` (whose owner another thread may be adding this very moment), or FULL. */
  function entryAt(h: number): number {
    let ref = Atomics.load(refs, h);
    for (let spins = 1; ref === 0; spins++) {
      if (spins > SPINS) Atomics.wait(refs, h, 0, 0.05);
      ref = Atomics.load(refs, h);
    }
    return ref === FULL ? FULL : ref - 1;
  }

  /**
   * The owner's entry. When it has none, with `load` its stored balance is read and it is added (throws
   * when the book is full); without, undefined.
   */
  function lookUp(ownerId: number, load: boolean): number | undefined {
    const known = entries.get(ownerId);
    if (known !== undefined) return known;
    if (!Number.isInteger(ownerId) || ownerId < 1 || ownerId > 0x7fffffff) throw new RangeError(`owner id out of range: ${ownerId}`);
    let balance: number | undefined;
    for (let h = Math.imul(ownerId, 0x9e3779b1) >>> (32 - bits), probes = 0; probes <= mask; h = (h + 1) & mask, probes++) {
      let key = Atomics.load(keys, h);
      if (key === 0) {
        if (!load) return undefined;
        // Read before claiming the slot, so no thread waits behind this thread's SQLite read.
        balance ??= sql.balance.get(ownerId) ?? 0;
        key = Atomics.compareExchange(keys, h, 0, ownerId);
        if (key === 0) return add(h, ownerId, balance);
      }
      if (key === ownerId) {
        const e = entryAt(h);
        if (e === FULL) {
          if (load) throw full();
          return undefined;
        }
        entries.set(ownerId, e);
        return e;
      }
    }
    if (!load) return undefined;
    throw full();
  }

  function add(h: number, ownerId: number, balance: number): number {
    const e = Atomics.add(header, USED, 1);
    if (e >= maxOwners) {
      Atomics.store(refs, h, FULL);
      throw full();
    }
    available[e] = balance;
    stored[e] = balance;
    // Published last: whoever sees the owner id or the entry number sees the balances.
    Atomics.store(owners, e, ownerId);
    Atomics.store(refs, h, e + 1);
    entries.set(ownerId, e);
    return e;
  }

  function entryOf(ownerId: number): number {
    return lookUp(ownerId, true)!;
  }

  /** Writer only: `available` follows what changed in the stored balance since `stored` was last set. */
  function resync(e: number, balance: number): void {
    if (stored[e] === balance) return;
    lock(e);
    available[e]! += balance - stored[e]!;
    stored[e] = balance;
    unlock(e);
  }

  function entriesUsed(): number {
    return Math.min(Atomics.load(header, USED), maxOwners);
  }

  let scanned = 0;
  let unsynced: number[] = [];

  return {
    available(ownerId) {
      const e = entryOf(ownerId);
      lock(e);
      const a = available[e]!;
      unlock(e);
      return a;
    },
    reserve(ownerId, ru) {
      const e = entryOf(ownerId);
      lock(e);
      const ok = available[e]! >= ru;
      if (ok) {
        available[e]! -= ru;
        if (held !== undefined) held[e]! += ru;
      }
      unlock(e);
      return ok;
    },
    close(ownerId, reserved, debited) {
      const e = entryOf(ownerId);
      lock(e);
      available[e]! += reserved - debited;
      if (held !== undefined) held[e]! -= reserved;
      unlock(e);
    },
    charge(ownerId, ru) {
      const e = entryOf(ownerId);
      lock(e);
      const ok = available[e]! >= ru;
      if (ok) available[e]! -= ru;
      unlock(e);
      return ok;
    },
    written(ownerId, debited, balance) {
      const e = lookUp(ownerId, false);
      if (e === undefined) return;
      lock(e);
      // As in the local book: the debit leaves the unflushed part, and the stored part becomes `balance`.
      const now = balance ?? stored[e]!;
      available[e]! += now - (stored[e]! - debited);
      stored[e] = now;
      unlock(e);
    },
    reload(ownerId) {
      if (ownerId !== undefined) {
        const e = lookUp(ownerId, false);
        if (e !== undefined) resync(e, sql.balance.get(ownerId) ?? 0);
        return;
      }
      const n = entriesUsed();
      if (n <= PER_OWNER_READS) {
        for (let e = 0; e < n; e++) {
          const owner = Atomics.load(owners, e);
          if (owner !== 0) resync(e, sql.balance.get(owner) ?? 0);
        }
        return;
      }
      for (const [owner, balance] of sql.balances.iterate()) {
        const e = lookUp(owner, false);
        if (e !== undefined) resync(e, balance);
      }
    },
    syncAdded() {
      const n = entriesUsed();
      if (scanned === n && unsynced.length === 0) return;
      const todo = unsynced;
      for (; scanned < n; scanned++) todo.push(scanned);
      const next: number[] = [];
      for (const e of todo) {
        const owner = Atomics.load(owners, e);
        // Not complete yet: its thread is between claiming and publishing it.
        if (owner === 0) next.push(e);
        else resync(e, sql.balance.get(owner) ?? 0);
      }
      unsynced = next;
    },
    release(deadThread, deadHeld) {
      const n = entriesUsed();
      for (let e = 0; e < n; e++) Atomics.compareExchange(locks, e, deadThread + 1, 0);
      for (let e = 0; e < n; e++) {
        const ru = deadHeld[e]!;
        if (ru === 0) continue;
        lock(e);
        available[e]! += ru;
        unlock(e);
        deadHeld[e] = 0;
      }
    },
    healthy: () => Atomics.load(header, HEALTHY) === 1,
    lastFlushAt() {
      const ms = Atomics.load(lastFlush, 0);
      return ms < 0n ? null : Number(ms);
    },
    publishFlush(healthy, flushedAt) {
      Atomics.store(lastFlush, 0, BigInt(flushedAt ?? -1));
      Atomics.store(header, HEALTHY, healthy ? 1 : 0);
    },
  };
}
