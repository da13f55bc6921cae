/**
 * The unknown-key guard (unknown-keys.ts) over shared memory: worker threads with views over the same
 * memory count one IP's unknown keys together, so an address spreading its guesses over every worker still
 * gets `maxPerMinute` of them per minute, not that many per worker.
 *
 *   main thread:  const memory = allocateSharedUnknownKeys({ maxAddresses });
 *   each worker:  const guard = createSharedUnknownKeyGuard(workerData.unknownKeys, { maxPerMinute });
 *
 * An address holds a slot for the minute it was counted in; a later minute may give the slot to another.
 * Memory: 30 bytes per address (24 bytes a slot), 3 MB at the default 100_000. A full table (more than
 * maxAddresses addresses counted within one minute) gives a new address the slot of its run with the
 * fewest unknown keys this minute (of those, the least recently seen: shared-table.ts), whose count starts
 * again, as an address evicted from the in-process guard's LRU does: no address goes uncounted, and a
 * flood of addresses guessing once each does not free a guesser near its limit.
 */
import { sharedNow } from './shared-clock.js';
import { allocateTable, FIRST_SLOT_INT, openTable, type SharedTableMemory, slotsFor } from './shared-table.js';
import type { UnknownKeyGuard } from './unknown-keys.js';

/** The memory of a shared guard: made once by allocateSharedUnknownKeys, given to every thread. */
export type SharedUnknownKeysMemory = SharedTableMemory;

export interface SharedUnknownKeysOptions {
  /** Addresses counted within one minute at most (default 100_000). */
  maxAddresses?: number;
}

export interface SharedUnknownKeyGuardOptions {
  /** Unknown keys an address may present per minute (default 20); every view should say the same. */
  maxPerMinute?: number;
  /** Monotonic clock in ms on a time line every view shares (default sharedNow, see shared-clock.ts). */
  now?: () => number;
  /** Called when this view evicts an address still counted this minute, to give its slot to another. */
  onEvict?: () => void;
}

const KIND = 0x554b_0001;
const MINUTE = FIRST_SLOT_INT;
const COUNT = FIRST_SLOT_INT + 1;

export function allocateSharedUnknownKeys(opts: SharedUnknownKeysOptions = {}): SharedUnknownKeysMemory {
  const slots = slotsFor(opts.maxAddresses ?? 100_000, 'maxAddresses');
  return allocateTable({ kind: KIND, slots, intsPerSlot: FIRST_SLOT_INT + 2, floatsPerSlot: 0 });
}

export function createSharedUnknownKeyGuard(memory: SharedUnknownKeysMemory, opts: SharedUnknownKeyGuardOptions = {}): UnknownKeyGuard {
  const max = opts.maxPerMinute ?? 20;
  const now = opts.now ?? sharedNow;
  const minuteNow = (): number => Math.floor(now() / 60_000);
  const table = openTable(
    memory,
    KIND,
    {
      isIdle: (slot, at) => table.ints[table.intsOf(slot) + MINUTE]! < Math.floor(at / 60_000),
      // Asked only of a slot not idle: its count is this minute's.
      weight: (slot) => table.ints[table.intsOf(slot) + COUNT]!,
      reset(slot) {
        table.ints[table.intsOf(slot) + MINUTE] = minuteNow();
        table.ints[table.intsOf(slot) + COUNT] = 0;
      },
      now,
      ...(opts.onEvict ? { onEvict: opts.onEvict } : {}),
    },
    'createSharedUnknownKeyGuard',
  );
  const ints = table.ints;
  return {
    refuse(ip) {
      const slot = table.acquire(ip, true);
      const i = table.intsOf(slot);
      // Read under the lock (by acquire), so the address's minutes follow one another whichever threads count it.
      const minute = Math.floor(table.at / 60_000);
      if (ints[i + MINUTE]! < minute) {
        ints[i + MINUTE] = minute;
        ints[i + COUNT] = 0;
      }
      const count = ints[i + COUNT]! + 1;
      ints[i + COUNT] = count;
      table.release(slot);
      return count > max;
    },
    throttled(ip) {
      const slot = table.acquire(ip, false);
      if (slot < 0) return false;
      const i = table.intsOf(slot);
      const over = ints[i + MINUTE] === Math.floor(table.at / 60_000) && ints[i + COUNT]! >= max;
      table.release(slot);
      return over;
    },
  };
}
