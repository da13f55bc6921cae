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
 *
 * The log's arithmetic is in entry-log.ts, shared with the shared-memory limiter (shared-window.ts),
 * which keeps the same promises for several worker threads limiting a key together.
 */
import { performance } from 'node:perf_hooks';
import { ADMITTED, checkTake, type EntryLog, expire, foldOldest, MAX_ENTRIES, moveEntries, settle, WINDOW_MS } from './entry-log.js';

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
   * Keys tracked at most (default 100_000); beyond it a key is evicted: of the EVICTION_SAMPLE least
   * recently used, the one holding the fewest units in the last second (of those, the least recent).
   * That key is idle (it holds no units and evicting it changes nothing) unless more than maxKeys keys
   * took within one second: then it is evicted all the same and may take up to one more limit in that
   * second; a flood of keys taking once each thus only evicts its own, not a client near its limit.
   * Fail-open: memory stays bounded and no key is refused for want of a slot. Memory: about 400 bytes per key (key string and map slot included), up
   * to about 2.5 KB for a key whose log has grown to MAX_ENTRIES.
   */
  maxKeys?: number;
  /**
   * Called when a key evicted still held units of the last second (more than maxKeys keys took within one
   * second: a flood of keys), its count starting again; evicting an idle key changes nothing and is not told.
   */
  onEvict?: () => void;
}

const INITIAL_ENTRIES = 4;
/**
 * Least recently used keys weighed for eviction. Those passed over become the most recent, so a key holding
 * units is weighed again only after the others have gone round, and a flood of new keys sees its own next.
 */
const EVICTION_SAMPLE = 8;
const DEFAULT_MAX_KEYS = 100_000;

/** One key's window. Reused for another key when evicted, so a full limiter allocates nothing. */
interface KeyWindow extends EntryLog {
  key: string;
  /** LRU neighbours: toward the most recently used, toward the least. */
  newer: KeyWindow | null;
  older: KeyWindow | null;
}

/** Makes room for one more entry: doubles the ring, or at MAX_ENTRIES folds the two oldest entries. */
function makeRoom(w: EntryLog): void {
  if (w.capacity < MAX_ENTRIES) moveEntries(w, new Float64Array(4 * w.capacity), 0, 2 * w.capacity);
  else foldOldest(w);
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

  /** Whether `w`'s newest entry is still in the window at `at`. */
  function holdsUnits(w: KeyWindow, at: number): boolean {
    if (w.length === 0) return false;
    const newest = (w.head + w.length - 1) % w.capacity;
    return w.ring[w.base + 2 * newest]! > at - WINDOW_MS;
  }

  /** The key to evict: the lightest of the EVICTION_SAMPLE least recent, those before it made the most recent. */
  function evictee(from: KeyWindow, at: number): KeyWindow {
    let lightest = from;
    let units = Infinity;
    let w: KeyWindow | null = from;
    for (let n = 0; n < EVICTION_SAMPLE && w !== null; n++, w = w.newer) {
      // Dropping a key's expired entries is what its next take would do first: it changes nothing else.
      expire(w, at - WINDOW_MS);
      if (w.sum < units) {
        units = w.sum;
        lightest = w;
      }
    }
    while (leastRecent !== lightest && leastRecent !== null) {
      const kept: KeyWindow = leastRecent;
      unlink(kept);
      linkAsMostRecent(kept);
    }
    return lightest;
  }

  function track(key: string, at: number): KeyWindow {
    let w: KeyWindow;
    if (windows.size >= maxKeys && leastRecent !== null) {
      w = evictee(leastRecent, at);
      if (opts.onEvict !== undefined && holdsUnits(w, at)) opts.onEvict();
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
        base: 0,
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

  function take(key: string, limit: number, units = 1): Take {
    checkTake(limit, units);
    if (units > limit) return { ok: false, retryAfterMs: Infinity };
    const at = now();
    let w = windows.get(key);
    if (w === undefined) {
      w = track(key, at);
    } else if (w !== mostRecent) {
      // Refused takes count as use too: a key being refused still holds units, so it must not be
      // the one evicted.
      unlink(w);
      linkAsMostRecent(w);
    }
    const wait = settle(w, at, limit, units, makeRoom);
    return wait === 0 ? ADMITTED : { ok: false, retryAfterMs: wait };
  }

  return {
    take,
    get size() {
      return windows.size;
    },
  };
}
