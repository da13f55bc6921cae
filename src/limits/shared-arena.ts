/**
 * Storage for the entry logs of the shared limiter (shared-window.ts) that outgrow their slot: a buddy
 * allocator over a region of the table's floats. A log grows as the in-process one does, doubling from 8 to
 * MAX_ENTRIES entries, so blocks come in five sizes; a freed block merges with its free twin, so memory
 * given back by one size serves any other and nothing fragments for good.
 *
 * Why not a full log in every slot: MAX_ENTRIES entries are 2 KiB, and most keys never need more than a
 * few. Every live entry holds at least one take of the last second, so the entries in use are bounded by
 * the takes per second of the whole process, not by its keys: the arena is sized for throughput.
 *
 * All of it is guarded by the table's KIND_LOCK, taken with a slot lock held (the table's lock order).
 * When no block is free, blocks whose holder is idle (no take for a second) are taken back, looking at
 * RECLAIM_SCAN blocks at most; their holder is only tried, since this thread holds a slot lock already.
 *
 * A thread that died holding KIND_LOCK may have left the free lists half written. The arena then gives no
 * more blocks (logs that hold one keep it; the others fold, see shared-window.ts) rather than risk giving
 * one block to two logs.
 */
import { MAX_ENTRIES } from './entry-log.js';
import { KIND_HEADER, KIND_LOCK, type SharedTable } from './shared-table.js';

/** Entries in the smallest block (order 0); a block of order k holds UNIT_ENTRIES << k. */
export const UNIT_ENTRIES = 8;
const MAX_ORDER = Math.log2(MAX_ENTRIES / UNIT_ENTRIES);
const TOP_UNITS = 1 << MAX_ORDER;
/** Floats of one unit: (time, units) pairs. */
const UNIT_FLOATS = 2 * UNIT_ENTRIES;
/** Per unit: the slot holding the block that starts there; its state; free-list links. */
const INTS_PER_UNIT = 4;
const RECLAIM_SCAN = 64;

// Header ints: a free list per order, the reclaim hand, the number of units, whether it is out of use.
const HEADS = KIND_HEADER;
const HAND = HEADS + MAX_ORDER + 1;
const UNITS = HAND + 1;
const BROKEN = UNITS + 1;

/** Units for an arena of at least `entries` entries: whole blocks of MAX_ENTRIES. */
export function arenaUnits(entries: number): number {
  return Math.ceil(entries / MAX_ENTRIES) * TOP_UNITS;
}

export const arenaInts = (units: number): number => INTS_PER_UNIT * units;
export const arenaFloats = (units: number): number => UNIT_FLOATS * units;

/** Orders of a block of `capacity` entries (a power of two from UNIT_ENTRIES to MAX_ENTRIES). */
export const orderOf = (capacity: number): number => 31 - Math.clz32(capacity / UNIT_ENTRIES);

export interface Arena {
  /**
   * A block of `UNIT_ENTRIES << order` entries for `slot` (whose lock the caller holds), or -1 when none is
   * free and none could be taken back. `takeBack(holder, block)` is asked before a block is taken from an
   * idle holder: it must empty that holder's log (without freeing the block) and say whether it did.
   */
  allocate(order: number, slot: number): number;
  /** Frees the block `slot` holds at `block`; nothing if the arena does not say `slot` holds it. */
  free(block: number, slot: number): void;
  /** Index in the table's floats where a block's entries start. */
  floatsOf(block: number): number;
}

/** Writes an empty arena (every top block free) into memory the table just allocated. */
export function initArena(ints: Int32Array, intsAt: number, units: number): void {
  ints[UNITS] = units;
  for (let order = 0; order <= MAX_ORDER; order++) ints[HEADS + order] = -1;
  const holder = intsAt;
  for (let u = 0; u < units; u++) ints[holder + u] = -1;
  // Top blocks linked in order, so the first allocations come from the start of the region.
  for (let u = units - TOP_UNITS; u >= 0; u -= TOP_UNITS) push(ints, intsAt, units, MAX_ORDER, u);
}

function push(ints: Int32Array, intsAt: number, units: number, order: number, unit: number): void {
  const state = intsAt + units;
  const next = state + units;
  const prev = next + units;
  const head = ints[HEADS + order]!;
  ints[state + unit] = order + 1;
  ints[next + unit] = head;
  ints[prev + unit] = -1;
  if (head >= 0) ints[prev + head] = unit;
  ints[HEADS + order] = unit;
}

export function openArena(table: SharedTable, takeBack: (holder: number, block: number) => boolean): Arena {
  const ints = table.ints;
  const units = ints[UNITS]!;
  const holder = table.extraIntsAt;
  /** Per unit: order + 1 for the start of a free block, -(order + 1) for the start of a used one, else 0. */
  const state = holder + units;
  const next = state + units;
  const prev = next + units;

  function unlink(order: number, unit: number): void {
    const n = ints[next + unit]!;
    const p = ints[prev + unit]!;
    if (p >= 0) ints[next + p] = n;
    else ints[HEADS + order] = n;
    if (n >= 0) ints[prev + n] = p;
    ints[state + unit] = 0;
  }

  function take(order: number): number {
    let k = order;
    while (k <= MAX_ORDER && ints[HEADS + k]! < 0) k++;
    if (k > MAX_ORDER) return -1;
    const unit = ints[HEADS + k]!;
    unlink(k, unit);
    // Split down to the order asked for; the upper halves go to the free lists.
    while (k > order) {
      k--;
      push(ints, holder, units, k, unit + (1 << k));
    }
    ints[state + unit] = -(order + 1);
    return unit;
  }

  function release(unit: number): void {
    let order = -ints[state + unit]! - 1;
    let start = unit;
    ints[holder + unit] = -1;
    ints[state + unit] = 0;
    while (order < MAX_ORDER) {
      const twin = start ^ (1 << order);
      if (ints[state + twin] !== order + 1) break;
      unlink(order, twin);
      start = Math.min(start, twin);
      order++;
    }
    push(ints, holder, units, order, start);
  }

  function reclaim(order: number, slot: number): number {
    let hand = ints[HAND]!;
    let unit = -1;
    for (let n = 0; n < Math.min(RECLAIM_SCAN, units) && unit < 0; n++) {
      const block = hand;
      hand = hand + 1 === units ? 0 : hand + 1;
      const h = ints[holder + block]!;
      if (h < 0 || h === slot || !takeBack(h, block)) continue;
      release(block);
      unit = take(order);
    }
    ints[HAND] = hand;
    return unit;
  }

  return {
    allocate(order, slot) {
      if (units === 0 || ints[BROKEN] !== 0) return -1;
      if (table.lock(KIND_LOCK)) ints[BROKEN] = 1;
      let unit = ints[BROKEN] === 0 ? take(order) : -1;
      if (unit < 0 && ints[BROKEN] === 0) unit = reclaim(order, slot);
      if (unit >= 0) ints[holder + unit] = slot;
      table.unlock(KIND_LOCK);
      return unit;
    },
    free(block, slot) {
      if (table.lock(KIND_LOCK)) ints[BROKEN] = 1;
      if (ints[BROKEN] === 0 && ints[holder + block] === slot && ints[state + block]! < 0) release(block);
      table.unlock(KIND_LOCK);
    },
    floatsOf: (block) => table.extraFloatsAt + block * UNIT_FLOATS,
  };
}
