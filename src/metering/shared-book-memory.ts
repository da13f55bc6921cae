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

// Layout: a header (Int32 fields; the last flush time as a BigInt64 at byte 32), then per entry
// available and stored (Float64), then the hash index (owner id and entry number + 1 per slot; twice as
// many slots as entries), then per entry its lock and its owner id (set last: "the entry is complete").
const HEADER_BYTES = 64;
export const USED = 0; // entries handed out (may pass maxOwners: the claims that found the book full)
export const HEALTHY = 1;

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

/** One thread's views over a book's memory, in the layout above. */
export interface BookViews {
  readonly bits: number;
  readonly mask: number;
  readonly header: Int32Array;
  readonly lastFlush: BigInt64Array;
  readonly available: Float64Array;
  readonly stored: Float64Array;
  readonly keys: Int32Array;
  readonly refs: Int32Array;
  readonly locks: Int32Array;
  readonly owners: Int32Array;
}

export function bookViews({ buffer, maxOwners }: SharedBookMemory): BookViews {
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
  return { bits, mask, header, lastFlush, available, stored, keys, refs, locks, owners };
}
