import type { Store } from '../store/open.js';
import type { BalanceBook } from './balance-book.js';
import { bookViews, HEALTHY, type SharedBookMemory, USED } from './shared-book-memory.js';

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

const FULL = -1; // a slot's entry number when the book was full
const SPINS = 200; // tries before a waiter lets the OS run the holder
const PER_OWNER_READS = 1024; // up to this many entries a re-read reads owner by owner, beyond it all owners at once

/** One thread's view of a shared book: the memory's views (shared-book-memory.ts) and where this thread found its owners. */
class SharedBookView implements SharedBook {
  readonly maxOwners: number;
  readonly bits: number;
  readonly mask: number;
  readonly header: Int32Array;
  readonly lastFlush: BigInt64Array;
  readonly availableRu: Float64Array;
  readonly storedRu: Float64Array;
  readonly keys: Int32Array;
  readonly refs: Int32Array;
  readonly locks: Int32Array;
  readonly owners: Int32Array;
  readonly sql: Store['sql']['ledger'];
  readonly me: number;
  readonly held: Float64Array | undefined;
  /** Entries never move, so each thread remembers where its owners are. */
  readonly entries = new Map<number, number>();
  /** Writer only: entries syncAdded has looked at, and those it found not complete yet. */
  scanned = 0;
  unsynced: number[] = [];

  constructor(memory: SharedBookMemory, store: Store, thread: number, held: Float64Array | undefined) {
    const views = bookViews(memory);
    this.maxOwners = memory.maxOwners;
    this.bits = views.bits;
    this.mask = views.mask;
    this.header = views.header;
    this.lastFlush = views.lastFlush;
    this.availableRu = views.available;
    this.storedRu = views.stored;
    this.keys = views.keys;
    this.refs = views.refs;
    this.locks = views.locks;
    this.owners = views.owners;
    this.sql = store.sql.ledger;
    this.me = thread + 1;
    this.held = held;
  }

  private lock(e: number): void {
    const locks = this.locks;
    const me = this.me;
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

  private unlock(e: number): void {
    Atomics.store(this.locks, e, 0);
  }

  private full(): Error {
    return new Error(`the shared ledger is full: it holds the balances of at most ${this.maxOwners} owners per run`);
  }

  /** The entry of slot `h` (whose owner another thread may be adding this very moment), or FULL. */
  private entryAt(h: number): number {
    const refs = this.refs;
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
  private lookUp(ownerId: number, load: boolean): number | undefined {
    const known = this.entries.get(ownerId);
    if (known !== undefined) return known;
    if (!Number.isInteger(ownerId) || ownerId < 1 || ownerId > 0x7fffffff) throw new RangeError(`owner id out of range: ${ownerId}`);
    const { keys, mask } = this;
    let balance: number | undefined;
    for (let h = Math.imul(ownerId, 0x9e3779b1) >>> (32 - this.bits), probes = 0; probes <= mask; h = (h + 1) & mask, probes++) {
      let key = Atomics.load(keys, h);
      if (key === 0) {
        if (!load) return undefined;
        // Read before claiming the slot, so no thread waits behind this thread's SQLite read.
        balance ??= this.sql.balance.get(ownerId) ?? 0;
        key = Atomics.compareExchange(keys, h, 0, ownerId);
        if (key === 0) return this.add(h, ownerId, balance);
      }
      if (key === ownerId) {
        const e = this.entryAt(h);
        if (e === FULL) {
          if (load) throw this.full();
          return undefined;
        }
        this.entries.set(ownerId, e);
        return e;
      }
    }
    if (!load) return undefined;
    throw this.full();
  }

  private add(h: number, ownerId: number, balance: number): number {
    const e = Atomics.add(this.header, USED, 1);
    if (e >= this.maxOwners) {
      Atomics.store(this.refs, h, FULL);
      throw this.full();
    }
    this.availableRu[e] = balance;
    this.storedRu[e] = balance;
    // Published last: whoever sees the owner id or the entry number sees the balances.
    Atomics.store(this.owners, e, ownerId);
    Atomics.store(this.refs, h, e + 1);
    this.entries.set(ownerId, e);
    return e;
  }

  private entryOf(ownerId: number): number {
    return this.lookUp(ownerId, true)!;
  }

  /** Writer only: `available` follows what changed in the stored balance since `stored` was last set. */
  private resync(e: number, balance: number): void {
    const stored = this.storedRu;
    if (stored[e] === balance) return;
    this.lock(e);
    this.availableRu[e]! += balance - stored[e]!;
    stored[e] = balance;
    this.unlock(e);
  }

  private entriesUsed(): number {
    return Math.min(Atomics.load(this.header, USED), this.maxOwners);
  }

  available(ownerId: number): number {
    const e = this.entryOf(ownerId);
    this.lock(e);
    const a = this.availableRu[e]!;
    this.unlock(e);
    return a;
  }

  reserve(ownerId: number, ru: number): boolean {
    const e = this.entryOf(ownerId);
    this.lock(e);
    const available = this.availableRu;
    const ok = available[e]! >= ru;
    if (ok) {
      available[e]! -= ru;
      if (this.held !== undefined) this.held[e]! += ru;
    }
    this.unlock(e);
    return ok;
  }

  close(ownerId: number, reserved: number, debited: number): void {
    const e = this.entryOf(ownerId);
    this.lock(e);
    this.availableRu[e]! += reserved - debited;
    if (this.held !== undefined) this.held[e]! -= reserved;
    this.unlock(e);
  }

  charge(ownerId: number, ru: number): boolean {
    const e = this.entryOf(ownerId);
    this.lock(e);
    const available = this.availableRu;
    const ok = available[e]! >= ru;
    if (ok) available[e]! -= ru;
    this.unlock(e);
    return ok;
  }

  written(ownerId: number, debited: number, balance: number | undefined): void {
    const e = this.lookUp(ownerId, false);
    if (e === undefined) return;
    const stored = this.storedRu;
    this.lock(e);
    // As in the local book: the debit leaves the unflushed part, and the stored part becomes `balance`.
    const now = balance ?? stored[e]!;
    this.availableRu[e]! += now - (stored[e]! - debited);
    stored[e] = now;
    this.unlock(e);
  }

  reload(ownerId?: number): void {
    const sql = this.sql;
    if (ownerId !== undefined) {
      const e = this.lookUp(ownerId, false);
      if (e !== undefined) this.resync(e, sql.balance.get(ownerId) ?? 0);
      return;
    }
    const n = this.entriesUsed();
    if (n <= PER_OWNER_READS) {
      for (let e = 0; e < n; e++) {
        const owner = Atomics.load(this.owners, e);
        if (owner !== 0) this.resync(e, sql.balance.get(owner) ?? 0);
      }
      return;
    }
    for (const [owner, balance] of sql.balances.iterate()) {
      const e = this.lookUp(owner, false);
      if (e !== undefined) this.resync(e, balance);
    }
  }

  syncAdded(): void {
    const n = this.entriesUsed();
    if (this.scanned === n && this.unsynced.length === 0) return;
    const todo = this.unsynced;
    for (; this.scanned < n; this.scanned++) todo.push(this.scanned);
    const next: number[] = [];
    for (const e of todo) {
      const owner = Atomics.load(this.owners, e);
      // Not complete yet: its thread is between claiming and publishing it.
      if (owner === 0) next.push(e);
      else this.resync(e, this.sql.balance.get(owner) ?? 0);
    }
    this.unsynced = next;
  }

  release(deadThread: number, deadHeld: Float64Array): void {
    const n = this.entriesUsed();
    for (let e = 0; e < n; e++) Atomics.compareExchange(this.locks, e, deadThread + 1, 0);
    for (let e = 0; e < n; e++) {
      const ru = deadHeld[e]!;
      if (ru === 0) continue;
      this.lock(e);
      this.availableRu[e]! += ru;
      this.unlock(e);
      deadHeld[e] = 0;
    }
  }

  healthy(): boolean {
    return Atomics.load(this.header, HEALTHY) === 1;
  }

  lastFlushAt(): number | null {
    const ms = Atomics.load(this.lastFlush, 0);
    return ms < 0n ? null : Number(ms);
  }

  publishFlush(healthy: boolean, flushedAt: number | null): void {
    Atomics.store(this.lastFlush, 0, BigInt(flushedAt ?? -1));
    Atomics.store(this.header, HEALTHY, healthy ? 1 : 0);
  }
}

/**
 * Opens `memory` in this thread. `thread` is 0 for the writer's thread and unique per worker; `held`
 * (from createHeldMemory) records this thread's open reservations. An owner not yet in the book is read
 * from `store` (this thread's own connection) and added; when two threads add one owner at once, the
 * first wins and the other uses its entry. Owner ids are SQLite row ids from 1 to 2^31 − 1 (a RangeError
 * otherwise).
 */
export function openSharedBook(memory: SharedBookMemory, store: Store, thread: number, held?: Float64Array): SharedBook {
  return new SharedBookView(memory, store, thread, held);
}
