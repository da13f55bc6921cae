/**
 * The table under the shared-memory limits (shared-window.ts, shared-unknown-keys.ts, shared-counts.ts): a
 * fixed number of slots in SharedArrayBuffers, found by a 64-bit hash of the key string, each slot guarded
 * by its own lock, so that worker threads holding views over the same memory keep one state per key.
 *
 * - Memory: made once (on the main thread) by `allocateTable` as two SharedArrayBuffers, which workerData
 *   shares rather than copies; each thread opens its own view with `openTable`. Nothing grows afterwards.
 * - Keys: a slot stores the key's hash, not the key: 64 bits (cyrb53's mixing, seeded with a random value
 *   per allocation so addresses cannot be picked offline to collide). Two live keys sharing a hash would
 *   share one state; among n live keys the chance that any two do is about n² / 2⁶⁵ (3 × 10⁻¹⁰ for 100,000).
 * - Placing: linear probing from the hash's home slot over at most PROBES slots. A slot is never emptied,
 *   only given to another key, so a never-used slot ends every search. A new key takes the first slot of
 *   its run the kind says holds nothing (`isIdle`: a rate window with no take in the last second, a count
 *   at 0); when every one still counts (more live keys than the table was sized for, a flood of
 *   addresses), it takes the one whose count is lowest (`weight`: the units a rate window holds, an
 *   address's unknown keys this minute, a key's open connections), and of those the least recently seen;
 *   that count starts again (`evictions` counts these). So a full table never switches a limit off, and a
 *   flood of new keys, each counting 1, only ever takes over keys counting as little as its own: a client
 *   near its limit keeps its count however long ago it was last seen. (By recency alone, two threads
 *   placing 80,000 keys a second turned a 10,000-key table over every 150 ms: a client seen less often
 *   than that lost its count each time, and got twice its limit.) A flood of keys counting n each can at
 *   worst reset keys counting n or less. "Seen" is the time of the slot's last acquire, in ms, kept as an
 *   Int32 and compared by wrapping difference (valid for 24 days; a key not seen for longer is idle
 *   anyway, except a count held open that long).
 * - Two threads placing the same new key must not take two slots: placing holds a stripe lock chosen by
 *   the home slot (the same for every thread placing that key) and searches again under it.
 * - Locks: an Int32 per slot, taken with Atomics.compareExchange. The kinds' critical sections are a few
 *   hundred nanoseconds of plain Int32Array/Float64Array reads and writes; Atomics operations are
 *   sequentially consistent, so what one thread wrote before releasing a lock is what the next holder
 *   reads. A waiter spins briefly, then sleeps in Atomics.wait until the holder's release wakes it.
 *   Lock order: stripe, then slot, then the kind's own lock; anything else is only tried (tryAcquire),
 *   never waited for, so no two threads can wait on each other.
 * - A thread that dies holding a lock (worker.terminate() lands between two statements) would stop every
 *   thread that needs that lock. The lock word holds its owner's thread id, and `releaseLocksHeldBy`, called
 *   by the main thread once that worker has exited, frees them marked damaged: the next holder of a damaged
 *   slot resets it (`reset`), as a key evicted from the in-process limiters starts empty.
 */
import { getRandomValues } from 'node:crypto';
import { DAMAGED, lock, MINE, unlock } from './shared-lock.js';

/** The memory of one shared table: plain SharedArrayBuffers, passed to workers in workerData. */
export interface SharedTableMemory {
  readonly ints: SharedArrayBuffer;
  readonly floats: SharedArrayBuffer;
}

/** Slots searched from a key's home slot before giving up. */
const PROBES = 64;
/** Most slots a table may have: slot indexes and Float64Array offsets stay far inside an Int32. */
const MAX_SLOTS = 1 << 24;
const MAX_STRIPES = 1024;

// Header ints.
const KIND = 0;
const SLOTS = 1;
const INTS_PER_SLOT = 2;
const FLOATS_PER_SLOT = 3;
const SEED = 4;
const USED = 5;
const STRIPES = 6;
const EXTRA_INTS_AT = 7;
const EXTRA_FLOATS_AT = 8;
/** A lock of the kind's own (e.g. its storage pool), freed by releaseLocksHeldBy like the others. */
export const KIND_LOCK = 9;
/** Header ints the kind may use as it likes: [KIND_HEADER, HEADER_INTS). */
export const KIND_HEADER = 10;
const HEADER_INTS = 32;

// A slot's first ints; the kind's own follow from FIRST_SLOT_INT.
const LOCK = 0;
const HASH_LO = 1;
const HASH_HI = 2;
/** When the slot was last acquired, on the kind's clock, in ms truncated to an Int32. */
const SEEN = 3;
export const FIRST_SLOT_INT = 4;

export interface TableShape {
  /** A number naming the kind, checked when a view is opened over the memory. */
  kind: number;
  slots: number;
  /** Ints per slot, FIRST_SLOT_INT included. */
  intsPerSlot: number;
  floatsPerSlot: number;
  /** Ints and floats after the slots for the kind's own use (extraIntsAt / extraFloatsAt). */
  extraInts?: number;
  extraFloats?: number;
}

/** Slots for a table that must hold `maxKeys` live keys: a quarter more, so probing stays short at maxKeys. */
export function slotsFor(maxKeys: number, option: string): number {
  if (!Number.isSafeInteger(maxKeys) || maxKeys < 1 || Math.ceil(maxKeys * 1.25) > MAX_SLOTS) {
    throw new RangeError(`${option} must be an integer from 1 to ${Math.floor(MAX_SLOTS / 1.25)}`);
  }
  return Math.ceil(maxKeys * 1.25);
}

export function allocateTable(shape: TableShape): SharedTableMemory {
  const stripes = Math.min(shape.slots, MAX_STRIPES);
  const slotsAt = HEADER_INTS + stripes;
  const extraIntsAt = slotsAt + shape.slots * shape.intsPerSlot;
  const extraFloatsAt = shape.slots * shape.floatsPerSlot;
  const ints = new SharedArrayBuffer(4 * (extraIntsAt + (shape.extraInts ?? 0)));
  const floats = new SharedArrayBuffer(8 * (extraFloatsAt + (shape.extraFloats ?? 0)));
  const header = new Int32Array(ints, 0, HEADER_INTS);
  header[KIND] = shape.kind;
  header[SLOTS] = shape.slots;
  header[INTS_PER_SLOT] = shape.intsPerSlot;
  header[FLOATS_PER_SLOT] = shape.floatsPerSlot;
  header[SEED] = getRandomValues(new Int32Array(1))[0]!;
  header[STRIPES] = stripes;
  header[EXTRA_INTS_AT] = extraIntsAt;
  header[EXTRA_FLOATS_AT] = extraFloatsAt;
  return { ints, floats };
}

/** What a kind says about its slots; isIdle, weight and reset are called with the slot's lock held. */
export interface SlotKind {
  /** Whether the slot holds nothing at `now` (the kind's clock), so it may be given to another key. */
  isIdle(slot: number, now: number): boolean;
  /**
   * What evicting a slot that still counts at `now` would cost its key: the count that would start again.
   * A full run gives up its lowest (then its least recently seen); without it, every slot weighs the same.
   */
  weight?(slot: number, now: number): number;
  /** Empties a slot given to a key: never used, idle, evicted, or found damaged. */
  reset(slot: number): void;
  /** Monotonic ms on a time line every view of the memory shares (the kind's clock: see shared-clock.ts); called without `this`. */
  now: () => number;
  /** Called when this view gives a slot that still counted to another key (for the evictions metric). */
  onEvict?(): void;
}

export interface SharedTable {
  readonly ints: Int32Array;
  readonly floats: Float64Array;
  /** Index in `ints` of a slot's first int: the kind's own are FIRST_SLOT_INT and on past it. */
  intsOf(slot: number): number;
  /** Index in `floats` of a slot's first float. */
  floatsOf(slot: number): number;
  readonly extraIntsAt: number;
  readonly extraFloatsAt: number;
  /**
   * The slot holding `key`, locked; when there is none and `place`, a slot given to it (reset), locked:
   * an idle one, or else the lowest weight of its run, least recently seen first (evicted). -1 when the
   * key has no slot and `place` is false. Sets `at`.
   */
  acquire(key: string, place: boolean): number;
  /** The kind's clock as read under the lock of the slot the last acquire returned: the time of that use. */
  at: number;
  /** Slots this view gave to another key while they still counted (a full run: see the top of this file). */
  readonly evictions: number;
  /** Tries to lock a slot without waiting: for a thread that already holds another. */
  tryAcquire(slot: number): boolean;
  release(slot: number): void;
  /** Locks an int of the kind's own (KIND_LOCK); true when its last holder died in it. */
  lock(index: number): boolean;
  unlock(index: number): void;
  /** Slots given to a key since the memory was made (each reused slot counts once). */
  readonly used: number;
}

/** One thread's view of a table's memory: its header read once into fields, and the key being looked up. */
class TableView implements SharedTable {
  readonly ints: Int32Array;
  readonly floats: Float64Array;
  at = 0;
  readonly extraIntsAt: number;
  readonly extraFloatsAt: number;
  readonly slots: number;
  readonly stride: number;
  readonly floatStride: number;
  readonly seed: number;
  readonly stripes: number;
  readonly slotsAt: number;
  readonly probes: number;
  readonly slotKind: SlotKind;
  // Called as a plain function: through slotKind, the call cost a take some 20 ns more (bench/shared-limits.mjs).
  readonly clock: () => number;
  /** The hash of the key being looked up (hashKey), in two Int32 halves. */
  hashLo = 0;
  hashHi = 0;
  evictionCount = 0;

  constructor(ints: Int32Array, floats: Float64Array, slotKind: SlotKind) {
    this.ints = ints;
    this.floats = floats;
    this.extraIntsAt = ints[EXTRA_INTS_AT]!;
    this.extraFloatsAt = ints[EXTRA_FLOATS_AT]!;
    this.slots = ints[SLOTS]!;
    this.stride = ints[INTS_PER_SLOT]!;
    this.floatStride = ints[FLOATS_PER_SLOT]!;
    this.seed = ints[SEED]!;
    this.stripes = ints[STRIPES]!;
    this.slotsAt = HEADER_INTS + this.stripes;
    this.probes = Math.min(PROBES, this.slots);
    this.slotKind = slotKind;
    this.clock = slotKind.now;
  }

  intsOf(slot: number): number {
    return this.slotsAt + slot * this.stride;
  }

  floatsOf(slot: number): number {
    return slot * this.floatStride;
  }

  acquire(key: string, placing: boolean): number {
    hashKey(this, key);
    const lo = this.hashLo;
    const hi = this.hashHi;
    const ints = this.ints;
    // The high bits of lo × slots: a uniform slot without a division.
    const home = Math.floor(((lo >>> 0) / 4294967296) * this.slots);
    let slot = find(this, lo, hi, home);
    if (slot < 0) {
      if (!placing) return -1;
      const stripe = HEADER_INTS + (home % this.stripes);
      lock(ints, stripe);
      try {
        slot = find(this, lo, hi, home);
        if (slot < 0) slot = place(this, lo, hi, home);
      } finally {
        unlock(ints, stripe);
      }
    }
    const clock = this.clock;
    const at = clock();
    this.at = at;
    ints[this.slotsAt + slot * this.stride + SEEN] = at | 0;
    return slot;
  }

  tryAcquire(slot: number): boolean {
    return Atomics.compareExchange(this.ints, this.slotsAt + slot * this.stride + LOCK, 0, MINE) === 0;
  }

  release(slot: number): void {
    unlock(this.ints, this.slotsAt + slot * this.stride + LOCK);
  }

  lock(index: number): boolean {
    return lock(this.ints, index);
  }

  unlock(index: number): void {
    unlock(this.ints, index);
  }

  get used(): number {
    return Atomics.load(this.ints, USED);
  }

  get evictions(): number {
    return this.evictionCount;
  }
}

/** cyrb53's mixing (public domain, bryc), kept at 64 bits in two Int32 halves. */
function hashKey(t: TableView, key: string): void {
  const seed = t.seed;
  let h1 = 0xdeadbeef ^ seed;
  let h2 = 0x41c6ce57 ^ seed;
  for (let i = 0; i < key.length; i++) {
    const ch = key.charCodeAt(i);
    h1 = Math.imul(h1 ^ ch, 2654435761);
    h2 = Math.imul(h2 ^ ch, 1597334677);
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507);
  h1 ^= Math.imul(h2 ^ (h2 >>> 13), 3266489909);
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507);
  h2 ^= Math.imul(h1 ^ (h1 >>> 13), 3266489909);
  t.hashLo = h1;
  // (0, 0) marks a never-used slot.
  t.hashHi = h1 === 0 && h2 === 0 ? 1 : h2;
}

function lockSlot(t: TableView, slot: number): void {
  if (lock(t.ints, t.slotsAt + slot * t.stride + LOCK)) t.slotKind.reset(slot);
}

function find(t: TableView, lo: number, hi: number, home: number): number {
  const ints = t.ints;
  let slot = home;
  for (let p = 0; p < t.probes; p++) {
    const at = t.slotsAt + slot * t.stride;
    const l = Atomics.load(ints, at + HASH_LO);
    if (l === lo) {
      lockSlot(t, slot);
      // Read under the lock: the slot may have been given to another key meanwhile.
      if (ints[at + HASH_LO] === lo && ints[at + HASH_HI] === hi) return slot;
      t.release(slot);
    } else if (l === 0 && Atomics.load(ints, at + HASH_HI) === 0) {
      // Keys are placed in the first usable slot and slots are never emptied: the key is not further on.
      return -1;
    }
    if (++slot === t.slots) slot = 0;
  }
  return -1;
}

/** Gives `slot` (locked) to the key (lo, hi), emptied. */
function give(t: TableView, slot: number, lo: number, hi: number): number {
  const at = t.slotsAt + slot * t.stride;
  Atomics.store(t.ints, at + HASH_LO, lo);
  Atomics.store(t.ints, at + HASH_HI, hi);
  t.slotKind.reset(slot);
  return slot;
}

/**
 * A slot for the new key (lo, hi), locked: the first idle one of its run, or else the one whose count is
 * lowest, of those the least recently seen (see the top of this file). Runs only for a key not found.
 */
function place(t: TableView, lo: number, hi: number, home: number): number {
  const { ints, slotKind } = t;
  const clock = t.clock;
  const now = clock();
  let slot = home;
  let victim = home;
  let victimWeight = Infinity;
  let victimAge = -1;
  for (let p = 0; p < t.probes; p++) {
    const at = t.slotsAt + slot * t.stride;
    lockSlot(t, slot);
    const unused = ints[at + HASH_LO] === 0 && ints[at + HASH_HI] === 0;
    if (unused || slotKind.isIdle(slot, now)) {
      if (unused) Atomics.add(ints, USED, 1);
      return give(t, slot, lo, hi);
    }
    const weight = slotKind.weight?.(slot, now) ?? 0;
    const age = ((now | 0) - ints[at + SEEN]!) | 0;
    if (weight < victimWeight || (weight === victimWeight && age > victimAge)) {
      victimWeight = weight;
      victimAge = age;
      victim = slot;
    }
    t.release(slot);
    if (++slot === t.slots) slot = 0;
  }
  // Every slot of the run still counts: the lightest starts again for the new key. (Used since it was
  // weighed, by another thread, it is given all the same: one more count started again.)
  lockSlot(t, victim);
  t.evictionCount++;
  slotKind.onEvict?.();
  return give(t, victim, lo, hi);
}

export function openTable(memory: SharedTableMemory, kind: number, slotKind: SlotKind, what: string): SharedTable {
  if (!(memory?.ints instanceof SharedArrayBuffer) || !(memory.floats instanceof SharedArrayBuffer)) {
    throw new TypeError(`${what}: memory must be the object its allocate function returned`);
  }
  const ints = new Int32Array(memory.ints);
  const floats = new Float64Array(memory.floats);
  if (ints.length < HEADER_INTS || ints[KIND] !== kind) throw new TypeError(`${what}: memory was allocated for another kind of table`);
  return new TableView(ints, floats, slotKind);
}

/**
 * Frees the locks a thread held when it died, marking them damaged (see the top of this file). Call it on
 * the main thread once the worker has exited (its 'exit' event), with the worker's `threadId`; never for a
 * thread that still runs. Returns how many locks were freed.
 */
export function releaseLocksHeldBy(memory: SharedTableMemory, deadThreadId: number): number {
  const ints = new Int32Array(memory.ints);
  const tag = deadThreadId + 1;
  const slotsAt = HEADER_INTS + ints[STRIPES]!;
  const stride = ints[INTS_PER_SLOT]!;
  let freed = 0;
  const free = (index: number): void => {
    const v = Atomics.load(ints, index);
    if (v > 0 && v >> 1 === tag && Atomics.compareExchange(ints, index, v, DAMAGED) === v) {
      freed++;
      Atomics.notify(ints, index);
    }
  };
  free(KIND_LOCK);
  for (let index = HEADER_INTS; index < slotsAt; index++) free(index);
  for (let slot = 0; slot < ints[SLOTS]!; slot++) free(slotsAt + slot * stride + LOCK);
  return freed;
}
