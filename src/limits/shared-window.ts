/**
 * The sliding-window rate limiter over shared memory: the same interface and promises as
 * createSlidingWindowLimiter (see the top of sliding-window.ts), with every key's window in
 * SharedArrayBuffers, so worker threads each holding a view over the same memory limit a key together,
 * exactly: a take is decided and recorded under the key's slot lock, against what every thread took, at a
 * time read under that lock from a clock every thread shares (shared-clock.ts).
 *
 *   main thread:  const memory = allocateSharedWindows({ maxKeys });   // plain object of SharedArrayBuffers
 *                 new Worker(file, { workerData: { limits: memory } });  // shared, not copied
 *   each worker:  const limiter = createSharedWindowLimiter(workerData.limits);
 *
 * A slot keeps the same entry log as the in-process limiter (entry-log.ts), its first INLINE_ENTRIES
 * entries in the slot itself. A log that needs more grows as the in-process one does, doubling up to
 * MAX_ENTRIES, in blocks of a shared arena (shared-arena.ts), and moves back into its slot once it is down
 * to INLINE_ENTRIES / 2. If the arena has no block to give (more busy keys than `logEntries` was sized
 * for), the log folds its two oldest entries instead of growing: the limit still holds, and only that key
 * may be refused somewhat below 98 % of its limit until blocks free up.
 *
 * A full table (more than maxKeys keys took within one second, or every slot of a key's probe run is busy)
 * gives the new key the slot of its run holding the fewest units in the window (of those, the least
 * recently seen), whose count starts again (shared-table.ts): no key is ever admitted uncounted, and a flood
 * of one-shot keys only takes over keys that took as little as each of its own.
 */
import { ADMITTED, checkTake, type EntryLog, expire, foldOldest, MAX_ENTRIES, moveEntries, settle, WINDOW_MS } from './entry-log.js';
import { arenaFloats, arenaInts, arenaUnits, initArena, openArena, orderOf, UNIT_ENTRIES } from './shared-arena.js';
import { sharedNow } from './shared-clock.js';
import { allocateTable, FIRST_SLOT_INT, openTable, type SharedTableMemory, slotsFor } from './shared-table.js';
import type { SlidingWindowLimiter, Take } from './sliding-window.js';

/** The memory of a shared limiter: made once by allocateSharedWindows, given to every thread. */
export type SharedWindowMemory = SharedTableMemory;

export interface SharedWindowsOptions {
  /**
   * Keys held at once (default 100_000): a key holds a slot while it took within the last second.
   * Memory: 135 bytes per key, for the slots (a quarter more slots than keys).
   */
  maxKeys?: number;
  /**
   * Entries of logs grown out of their slot, all keys together (default 262,144, or room for every key's
   * full log when maxKeys is below 2,048). Each live entry holds at least one take of the last second, so
   * this is about the takes per second that keys busier than 4 takes a second may make together; logs grow
   * in powers of two, so plan on half. Memory: 18 bytes per entry, 4.7 MB at the default.
   */
  logEntries?: number;
}

export interface SharedWindowOptions {
  /**
   * Monotonic milliseconds on a time line every view shares (default sharedNow: see shared-clock.ts). A
   * test injects its own; every view over one memory must use the same clock.
   */
  now?: () => number;
  /** Called when this view evicts a key that still counted, to give its slot to another (a full table). */
  onEvict?: () => void;
}

const KIND = 0x5357_0002;
const INLINE_ENTRIES = 4;
// A slot's ints after the table's own.
const HEAD = FIRST_SLOT_INT;
const LENGTH = FIRST_SLOT_INT + 1;
const CAPACITY = FIRST_SLOT_INT + 2;
/** Where the log's ring starts in the floats: the slot's own entries, or its block. */
const BASE = FIRST_SLOT_INT + 3;
/** The arena block the log is in, plus one; 0 (as in a never-used slot) while it is in the slot. */
const BLOCK = FIRST_SLOT_INT + 4;
const INTS_PER_SLOT = FIRST_SLOT_INT + 5;
// A slot's floats: the sum of its live entries, then its own entries.
const SUM = 0;
const INLINE = 1;
const FLOATS_PER_SLOT = INLINE + 2 * INLINE_ENTRIES;

export function allocateSharedWindows(opts: SharedWindowsOptions = {}): SharedWindowMemory {
  const maxKeys = opts.maxKeys ?? 100_000;
  const slots = slotsFor(maxKeys, 'maxKeys');
  const entries = opts.logEntries ?? Math.min(262_144, MAX_ENTRIES * maxKeys);
  if (!Number.isSafeInteger(entries) || entries < 0 || entries > 1 << 26) {
    throw new RangeError(`logEntries must be an integer from 0 to ${1 << 26}`);
  }
  const units = arenaUnits(entries);
  const memory = allocateTable({
    kind: KIND,
    slots,
    intsPerSlot: INTS_PER_SLOT,
    floatsPerSlot: FLOATS_PER_SLOT,
    extraInts: arenaInts(units),
    extraFloats: arenaFloats(units),
  });
  const ints = new Int32Array(memory.ints);
  initArena(ints, ints.length - arenaInts(units), units);
  return memory;
}

export function createSharedWindowLimiter(memory: SharedWindowMemory, opts: SharedWindowOptions = {}): SlidingWindowLimiter {
  const now = opts.now ?? sharedNow;
  if (typeof now !== 'function') throw new TypeError('now must be a function returning milliseconds');
  /** The slot of the take in progress (its lock held), for makeRoom. */
  let current = -1;
  const table = openTable(
    memory,
    KIND,
    { isIdle, weight, reset, now, ...(opts.onEvict ? { onEvict: opts.onEvict } : {}) },
    'createSharedWindowLimiter',
  );
  const { ints, floats } = table;
  const arena = openArena(table, takeBack);
  /** The log of the take in progress, loaded from its slot and stored back before the lock is released. */
  const log: EntryLog = { ring: floats, base: 0, capacity: 0, head: 0, length: 0, sum: 0 };
  /** Another slot's log, read only, while place() weighs it. */
  const weighed: EntryLog = { ring: floats, base: 0, capacity: 0, head: 0, length: 0, sum: 0 };

  /** Reads a slot's log into `l`. */
  function load(l: EntryLog, slot: number): void {
    const i = table.intsOf(slot);
    l.base = ints[i + BASE]!;
    l.capacity = ints[i + CAPACITY]!;
    l.head = ints[i + HEAD]!;
    l.length = ints[i + LENGTH]!;
    l.sum = floats[table.floatsOf(slot) + SUM]!;
  }

  /** The units the slot's key took in the window at `at`: the count an eviction would start again. */
  function weight(slot: number, at: number): number {
    load(weighed, slot);
    expire(weighed, at - WINDOW_MS);
    return weighed.sum;
  }

  function isIdle(slot: number, at: number): boolean {
    const i = table.intsOf(slot);
    const length = ints[i + LENGTH]!;
    if (length === 0) return true;
    const capacity = ints[i + CAPACITY]!;
    let newest = ints[i + HEAD]! + length - 1;
    if (newest >= capacity) newest -= capacity;
    return floats[ints[i + BASE]! + 2 * newest]! <= at - WINDOW_MS;
  }

  /** Empties a slot's log into its own entries; its block, if any, is the caller's to free or keep. */
  function empty(slot: number): void {
    const i = table.intsOf(slot);
    ints[i + HEAD] = 0;
    ints[i + LENGTH] = 0;
    ints[i + CAPACITY] = INLINE_ENTRIES;
    ints[i + BASE] = table.floatsOf(slot) + INLINE;
    ints[i + BLOCK] = 0;
    floats[table.floatsOf(slot) + SUM] = 0;
  }

  function reset(slot: number): void {
    const block = ints[table.intsOf(slot) + BLOCK]! - 1;
    if (block >= 0) arena.free(block, slot);
    empty(slot);
  }

  /** The arena taking back `block` from an idle `holder`: only tried, as this thread holds a slot lock. */
  function takeBack(holder: number, block: number): boolean {
    if (holder === current || !table.tryAcquire(holder)) return false;
    const idle = ints[table.intsOf(holder) + BLOCK] === block + 1 && isIdle(holder, now());
    if (idle) empty(holder);
    table.release(holder);
    return idle;
  }

  /** Moves the log to `capacity` entries at `base`, giving back the block it leaves. */
  function moveLog(l: EntryLog, i: number, base: number, capacity: number, block: number): void {
    const old = ints[i + BLOCK]! - 1;
    moveEntries(l, floats, base, capacity);
    ints[i + BLOCK] = block + 1;
    if (old >= 0) arena.free(old, current);
  }

  function makeRoom(l: EntryLog): void {
    if (l.capacity < MAX_ENTRIES) {
      const order = orderOf(2 * l.capacity);
      const block = arena.allocate(order, current);
      if (block >= 0) return moveLog(l, table.intsOf(current), arena.floatsOf(block), UNIT_ENTRIES << order, block);
    }
    foldOldest(l);
  }

  function take(key: string, limit: number, units = 1): Take {
    checkTake(limit, units);
    if (units > limit) return { ok: false, retryAfterMs: Infinity };
    const slot = table.acquire(key, true);
    // Read under the key's lock (by acquire), so the key's takes are decided in the order of their times,
    // whichever threads they come from (the clock is the same for all, see shared-clock.ts).
    const at = table.at;
    current = slot;
    const i = table.intsOf(slot);
    const sumAt = table.floatsOf(slot) + SUM;
    load(log, slot);
    expire(log, at - WINDOW_MS);
    // Back into the slot once small again, with room to spare so a key near the edge does not move each take.
    if (log.length <= INLINE_ENTRIES / 2 && ints[i + BLOCK] !== 0) moveLog(log, i, table.floatsOf(slot) + INLINE, INLINE_ENTRIES, -1);
    const wait = settle(log, at, limit, units, makeRoom);
    ints[i + BASE] = log.base;
    ints[i + CAPACITY] = log.capacity;
    ints[i + HEAD] = log.head;
    ints[i + LENGTH] = log.length;
    floats[sumAt] = log.sum;
    table.release(slot);
    return wait === 0 ? ADMITTED : { ok: false, retryAfterMs: wait };
  }

  return {
    take,
    get size() {
      return table.used;
    },
  };
}
