/**
 * The arithmetic of one key's entry log, shared by the in-process limiter (sliding-window.ts) and the
 * shared-memory one (shared-window.ts): the promises it keeps are stated at the top of sliding-window.ts.
 * It only reads and writes the log it is given; where the log's storage comes from, and what happens when
 * it is full, is the caller's (`makeRoom`).
 */
import type { Take } from './sliding-window.js';

export const WINDOW_MS = 1000;
/** Largest share of the limit one entry may gather: the bound on units counted after they left. */
export const MERGE_SHARE = 0.02;
/** ≥ 2 / MERGE_SHARE live entries + the one being opened; reached only by keys near their limit. */
export const MAX_ENTRIES = 128;

export const ADMITTED: Take = Object.freeze({ ok: true });

/**
 * One key's log: `capacity` entries as (time, units) pairs in a ring stored in `ring` from `base`: entry i
 * at ring[base + 2i], ring[base + 2i + 1]. `base` lets many logs share one array (the shared-memory table).
 */
export interface EntryLog {
  ring: Float64Array;
  base: number;
  capacity: number;
  head: number;
  length: number;
  /** Units in the live entries, kept so a take costs O(1) amortized. */
  sum: number;
}

/** Throws RangeError unless `limit` and `units` are positive finite numbers (the interface's contract). */
export function checkTake(limit: number, units: number): void {
  if (!(limit > 0 && limit < Infinity)) throw new RangeError(`limit must be a positive finite number, got ${limit}`);
  if (!(units > 0 && units < Infinity)) throw new RangeError(`units must be a positive finite number, got ${units}`);
}

/** Drops the entries whose latest take is a full second old (at or before `horizon`). */
export function expire(log: EntryLog, horizon: number): void {
  const ring = log.ring;
  const base = log.base;
  let head = log.head;
  let length = log.length;
  while (length > 0 && ring[base + 2 * head]! <= horizon) {
    log.sum -= ring[base + 2 * head + 1]!;
    head = head + 1 === log.capacity ? 0 : head + 1;
    length--;
  }
  log.head = head;
  log.length = length;
  // Fractional units leave rounding residue in a running sum; an empty log holds exactly nothing.
  if (length === 0) log.sum = 0;
}

/** Time until the oldest entries holding at least `excess` units have all left the window. */
function waitFor(log: EntryLog, excess: number, at: number): number {
  const ring = log.ring;
  const base = log.base;
  let slot = log.head;
  let freed = 0;
  let time = at;
  for (let i = 0; i < log.length; i++) {
    time = ring[base + 2 * slot]!;
    freed += ring[base + 2 * slot + 1]!;
    if (freed >= excess) break;
    slot = slot + 1 === log.capacity ? 0 : slot + 1;
  }
  return Math.max(1, Math.ceil(time + WINDOW_MS - at));
}

/** Moves the log's entries, oldest first, to `capacity` entries of new storage at ring[base]. */
export function moveEntries(log: EntryLog, ring: Float64Array, base: number, capacity: number): void {
  const old = log.ring;
  for (let i = 0, slot = log.head; i < log.length; i++) {
    ring[base + 2 * i] = old[log.base + 2 * slot]!;
    ring[base + 2 * i + 1] = old[log.base + 2 * slot + 1]!;
    slot = slot + 1 === log.capacity ? 0 : slot + 1;
  }
  log.ring = ring;
  log.base = base;
  log.capacity = capacity;
  log.head = 0;
}

/**
 * Frees one entry by folding the oldest into the next. Folding keeps the later time, so the units stay
 * counted at least as long as they are in the window: the limit still holds, while the oldest units may be
 * counted a little past their second. Only a log that cannot grow (a limit cut, or no storage left) folds.
 */
export function foldOldest(log: EntryLog): void {
  const ring = log.ring;
  const base = log.base;
  const second = log.head + 1 === log.capacity ? 0 : log.head + 1;
  ring[base + 2 * second + 1] = ring[base + 2 * second + 1]! + ring[base + 2 * log.head + 1]!;
  log.head = second;
  log.length--;
}

function record(log: EntryLog, at: number, units: number, mergeLimit: number, makeRoom: (log: EntryLog) => void): void {
  log.sum += units;
  if (log.length > 0) {
    let newest = log.head + log.length - 1;
    if (newest >= log.capacity) newest -= log.capacity;
    const entry = log.base + 2 * newest;
    const gathered = log.ring[entry + 1]! + units;
    if (gathered <= mergeLimit) {
      log.ring[entry + 1] = gathered;
      // The max only matters for a clock that steps back; the contract needs a monotonic one.
      if (at > log.ring[entry]!) log.ring[entry] = at;
      return;
    }
  }
  if (log.length === log.capacity) makeRoom(log);
  let slot = log.head + log.length;
  if (slot >= log.capacity) slot -= log.capacity;
  log.ring[log.base + 2 * slot] = at;
  log.ring[log.base + 2 * slot + 1] = units;
  log.length++;
}

/**
 * Takes `units` at time `at` against `limit` (both checked, units ≤ limit): 0 when admitted and recorded,
 * else the retryAfterMs of the refusal (≥ 1), having recorded nothing. A number rather than a Take so the
 * shared-memory limiter allocates nothing while it holds a lock. `makeRoom` is called when a new entry must
 * be opened in a full log; it must leave at least one free entry (grow, or foldOldest).
 */
export function settle(log: EntryLog, at: number, limit: number, units: number, makeRoom: (log: EntryLog) => void): number {
  expire(log, at - WINDOW_MS);
  const excess = log.sum + units - limit;
  if (excess > 0) return waitFor(log, excess, at);
  record(log, at, units, limit * MERGE_SHARE, makeRoom);
  return 0;
}
