/**
 * Per-key rate limits over a sliding one-second window, checked on every request.
 *
 * Each key keeps a short log of its admitted takes, oldest first: entries of (time, units). A take
 * adds to the newest entry while that entry stays within MERGE_SHARE of the limit, and otherwise
 * opens a new one; an entry remembers the time of its LATEST take and is dropped only once that
 * take is a full second old. That gives, for any arrival pattern (even, bursty, single huge takes):
 *
 * - never over: every unit admitted in (now - 1000, now] is still counted at `now`, so no
 *   one-second window ever holds more than the limit in force when its last take was admitted;
 * - never refused below 98%: only the oldest live entry can hold units that have already left the
 *   window, and fewer than MERGE_SHARE × limit of them, so a key whose every one-second window
 *   (its new take included) stays at or under 98% of its limit is always admitted;
 * - bounded: two neighbouring live entries hold more than MERGE_SHARE × limit together and all live
 *   entries at most the limit, so a key needs at most 2 / MERGE_SHARE = 100 of them.
 *
 * Fixed 10 ms buckets would cost the same memory but cannot keep both promises for bursts: a
 * burst near a bucket edge either leaves the window too early (over-admission) or too late
 * (refusals well below the limit).
 */
import { performance } from 'node:perf_hooks';

/** A take's outcome: admitted, or refused with the time until enough units leave the window. */
export type Take = { ok: true } | { ok: false; retryAfterMs: number };

export interface SlidingWindowLimiter {
  /**
   * Takes `units` (default 1) for `key` against `limit` units per second, all or nothing. A refused
   * take takes nothing. `retryAfterMs` (≥ 1) is how long until this take would be admitted if the
   * key took nothing else meanwhile; it is Infinity when `units` exceeds `limit`, which no wait
   * can fix (the caller should answer that as a request too large for the plan, not as a 429).
   * `limit` may differ between calls (a plan change): units already taken count against the new one.
   * Throws RangeError when `limit` or `units` is not a positive finite number.
   */
  take(key: string, limit: number, units?: number): Take;
  /** Keys currently tracked (for memory tests). */
  readonly size: number;
}

export interface LimiterOptions {
  /**
   * Monotonic milliseconds (default: performance.now, which Node derives from the monotonic clock,
   * so wall-clock steps from NTP or an operator move nothing). A wall-clock jump must neither lock
   * anyone out nor free a burst, so never Date.now.
   */
  now?: () => number;
  /**
   * Keys tracked at most (default 100_000); the least recently used key is evicted beyond it. That
   * key is idle (no take in the last second, so it holds no units and evicting it changes nothing)
   * unless more than maxKeys keys took within one second: then it is evicted all the same and may
   * take up to one more limit in that second. Fail-open: memory stays bounded and no key is refused
   * for want of a slot. Memory: about 400 bytes per key (key string and map slot included), up
   * to about 2.5 KB for a key whose log has grown to MAX_ENTRIES.
   */
  maxKeys?: number;
}

const WINDOW_MS = 1000;
/** Largest share of the limit one entry may gather: the bound on units counted after they left. */
const MERGE_SHARE = 0.02;
const INITIAL_ENTRIES = 4;
/** ≥ 2 / MERGE_SHARE live entries + the one being opened; reached only by keys near their limit. */
const MAX_ENTRIES = 128;
const DEFAULT_MAX_KEYS = 100_000;

const ADMITTED: Take = Object.freeze({ ok: true });

/** One key's window. Reused for another key when evicted, so a full limiter allocates nothing. */
interface KeyWindow {
  key: string;
  /** Entries as [time, units] pairs in a ring: entry i at ring[2i], ring[2i + 1]. */
  ring: Float64Array;
  capacity: number;
  head: number;
  length: number;
  /** Units in the live entries, kept so a take costs O(1) amortized. */
  sum: number;
  /** LRU neighbours: toward the most recently used, toward the least. */
  newer: KeyWindow | null;
  older: KeyWindow | null;
}

/** Retry-After header value for a refusal: whole seconds, at least 1. */
export function retryAfterSeconds(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}

export function createSlidingWindowLimiter(opts: LimiterOptions = {}): SlidingWindowLimiter {
  const now = opts.now ?? (() => performance.now());
  const maxKeys = opts.maxKeys ?? DEFAULT_MAX_KEYS;
  if (typeof now !== 'function') throw new TypeError('now must be a function returning milliseconds');
  if (!Number.isSafeInteger(maxKeys) || maxKeys < 1) throw new RangeError('maxKeys must be a positive integer');

  const windows = new Map<string, KeyWindow>();
  let mostRecent: KeyWindow | null = null;
  let leastRecent: KeyWindow | null = null;

  function unlink(w: KeyWindow): void {
    if (w.newer === null) mostRecent = w.older;
    else w.newer.older = w.older;
    if (w.older === null) leastRecent = w.newer;
    else w.older.newer = w.newer;
    w.newer = null;
    w.older = null;
  }

  function linkAsMostRecent(w: KeyWindow): void {
    w.older = mostRecent;
    if (mostRecent === null) leastRecent = w;
    else mostRecent.newer = w;
    mostRecent = w;
  }

  function track(key: string): KeyWindow {
    let w: KeyWindow;
    if (windows.size >= maxKeys && leastRecent !== null) {
      w = leastRecent;
      windows.delete(w.key);
      unlink(w);
      w.key = key;
      w.head = 0;
      w.length = 0;
      w.sum = 0;
    } else {
      w = {
        key,
        ring: new Float64Array(2 * INITIAL_ENTRIES),
        capacity: INITIAL_ENTRIES,
        head: 0,
        length: 0,
        sum: 0,
        newer: null,
        older: null,
      };
    }
    windows.set(key, w);
    linkAsMostRecent(w);
    return w;
  }

  /** Drops the entries whose latest take is a full second old. */
  function expire(w: KeyWindow, horizon: number): void {
    const ring = w.ring;
    let head = w.head;
    let length = w.length;
    while (length > 0 && ring[2 * head]! <= horizon) {
      w.sum -= ring[2 * head + 1]!;
      head = head + 1 === w.capacity ? 0 : head + 1;
      length--;
    }
    w.head = head;
    w.length = length;
    // Fractional units leave rounding residue in a running sum; an empty log holds exactly nothing.
    if (length === 0) w.sum = 0;
  }

  /** Time until the oldest entries holding at least `excess` units have all left the window. */
  function waitFor(w: KeyWindow, excess: number, at: number): number {
    const ring = w.ring;
    let slot = w.head;
    let freed = 0;
    let time = at;
    for (let i = 0; i < w.length; i++) {
      time = ring[2 * slot]!;
      freed += ring[2 * slot + 1]!;
      if (freed >= excess) break;
      slot = slot + 1 === w.capacity ? 0 : slot + 1;
    }
    return Math.max(1, Math.ceil(time + WINDOW_MS - at));
  }

  /** Makes room for one more entry: grows the ring, or at MAX_ENTRIES folds the two oldest entries. */
  function makeRoom(w: KeyWindow): void {
    const old = w.ring;
    if (w.capacity < MAX_ENTRIES) {
      const capacity = w.capacity * 2;
      const ring = new Float64Array(2 * capacity);
      for (let i = 0, slot = w.head; i < w.length; i++) {
        ring[2 * i] = old[2 * slot]!;
        ring[2 * i + 1] = old[2 * slot + 1]!;
        slot = slot + 1 === w.capacity ? 0 : slot + 1;
      }
      w.ring = ring;
      w.capacity = capacity;
      w.head = 0;
      return;
    }
    // Only after a limit cut can a key outgrow its log. Folding keeps the later time, so the units
    // stay counted at least as long as they are in the window: the limit still holds, while the
    // oldest units may be counted a little past their second.
    const second = w.head + 1 === w.capacity ? 0 : w.head + 1;
    old[2 * second + 1] = old[2 * second + 1]! + old[2 * w.head + 1]!;
    w.head = second;
    w.length--;
  }

  function record(w: KeyWindow, at: number, units: number, mergeLimit: number): void {
    w.sum += units;
    if (w.length > 0) {
      let newest = w.head + w.length - 1;
      if (newest >= w.capacity) newest -= w.capacity;
      const gathered = w.ring[2 * newest + 1]! + units;
      if (gathered <= mergeLimit) {
        w.ring[2 * newest + 1] = gathered;
        // The max only matters for a clock that steps back; the contract needs a monotonic one.
        if (at > w.ring[2 * newest]!) w.ring[2 * newest] = at;
        return;
      }
    }
    if (w.length === w.capacity) makeRoom(w);
    let slot = w.head + w.length;
    if (slot >= w.capacity) slot -= w.capacity;
    w.ring[2 * slot] = at;
    w.ring[2 * slot + 1] = units;
    w.length++;
  }

  function take(key: string, limit: number, units = 1): Take {
    if (!(limit > 0 && limit < Infinity)) throw new RangeError(`limit must be a positive finite number, got ${limit}`);
    if (!(units > 0 && units < Infinity)) throw new RangeError(`units must be a positive finite number, got ${units}`);
    if (units > limit) return { ok: false, retryAfterMs: Infinity };
    const at = now();
    let w = windows.get(key);
    if (w === undefined) {
      w = track(key);
    } else if (w !== mostRecent) {
      // Refused takes count as use too: a key being refused still holds units, so it must not be
      // the one evicted.
      unlink(w);
      linkAsMostRecent(w);
    }
    expire(w, at - WINDOW_MS);
    const excess = w.sum + units - limit;
    if (excess > 0) return { ok: false, retryAfterMs: waitFor(w, excess, at) };
    record(w, at, units, limit * MERGE_SHARE);
    return ADMITTED;
  }

  return {
    take,
    get size() {
      return windows.size;
    },
  };
}
