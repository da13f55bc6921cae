/**
 * Open connections (or event streams) per key string over shared memory: the ConnectionCounts of
 * pipeline/stream-limits.ts (open, close, count; same shape, so it is one), for worker threads that must
 * hold a key's connections under one limit together.
 *
 *   main thread:  const memory = allocateSharedCounts({ maxKeys });
 *   each worker:  const counts = createSharedCounts(workerData.wsCounts);
 *
 * `count` then `open` is a check and an act apart: two workers can both see one below the limit and both
 * open. `tryOpen(key, max)` does both under the key's lock, so the limit holds across threads.
 *
 * A key holds a slot while its count is above 0. Memory: 25 bytes per key (20 bytes a slot), 2.5 MB at the
 * default 100_000. A full table (more than maxKeys keys with something open, or a key's whole probe run)
 * gives a new key the slot of its run with the fewest open (of those, the least recently seen:
 * shared-table.ts): the key evicted counts from 0 again when it next opens, and its closes meanwhile find
 * no slot and change nothing. No key is ever opened uncounted.
 */
import { sharedNow } from './shared-clock.js';
import { allocateTable, FIRST_SLOT_INT, openTable, type SharedTableMemory, slotsFor } from './shared-table.js';

/** The memory of shared counts: made once by allocateSharedCounts, given to every thread. */
export type SharedCountsMemory = SharedTableMemory;

export interface SharedCountsOptions {
  /** Keys with something open at once (default 100_000). */
  maxKeys?: number;
}

export interface SharedCountsViewOptions {
  /** Monotonic ms on a time line every view shares (default sharedNow): when a key was last seen. */
  now?: () => number;
  /** Called when this view evicts a key with something open, to give its slot to another (a full table). */
  onEvict?: () => void;
}

/** Open connections per key, the same for every thread with a view over one memory. */
export interface SharedCounts {
  open(key: string): void;
  close(key: string): void;
  count(key: string): number;
  /** Opens one for `key` unless `max` are open already, as one step: true when opened. */
  tryOpen(key: string, max: number): boolean;
}

const KIND = 0x4343_0001;
const COUNT = FIRST_SLOT_INT;

export function allocateSharedCounts(opts: SharedCountsOptions = {}): SharedCountsMemory {
  const slots = slotsFor(opts.maxKeys ?? 100_000, 'maxKeys');
  return allocateTable({ kind: KIND, slots, intsPerSlot: FIRST_SLOT_INT + 1, floatsPerSlot: 0 });
}

export function createSharedCounts(memory: SharedCountsMemory, opts: SharedCountsViewOptions = {}): SharedCounts {
  const table = openTable(
    memory,
    KIND,
    {
      isIdle: (slot) => table.ints[table.intsOf(slot) + COUNT] === 0,
      weight: (slot) => table.ints[table.intsOf(slot) + COUNT]!,
      // An evicted key's count is not the new key's. (A damaged slot is reset too: its count, one whole Int32,
      // was consistent, but starting again is what an evicted key does, and its holder's thread is gone.)
      reset: (slot) => void (table.ints[table.intsOf(slot) + COUNT] = 0),
      now: opts.now ?? sharedNow,
      ...(opts.onEvict ? { onEvict: opts.onEvict } : {}),
    },
    'createSharedCounts',
  );
  const ints = table.ints;

  /** Adds `delta` to `key`'s count unless that passes `max` or goes below 0; whether it did. */
  function add(key: string, delta: number, max: number): boolean {
    const slot = table.acquire(key, delta > 0);
    // Only a close finds no slot: its key was evicted (its count started again) or never opened.
    if (slot < 0) return false;
    const i = table.intsOf(slot) + COUNT;
    const n = ints[i]! + delta;
    const done = n >= 0 && n <= max;
    if (done) ints[i] = n;
    table.release(slot);
    return done;
  }

  return {
    open: (key) => void add(key, 1, Infinity),
    close: (key) => void add(key, -1, Infinity),
    count(key) {
      const slot = table.acquire(key, false);
      if (slot < 0) return 0;
      const n = ints[table.intsOf(slot) + COUNT]!;
      table.release(slot);
      return n;
    },
    tryOpen: (key, max) => add(key, 1, max),
  };
}
