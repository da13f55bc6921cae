import { LRUCache } from 'lru-cache';
import { sharedNow } from './shared-clock.js';

/**
 * Slows key guessing: a client IP that presents more than `maxPerMinute` unknown keys within a
 * minute gets 429 for further unknown keys for the rest of that minute. Valid keys from the same IP
 * keep working, because many tenants may sit behind one backend proxy. The table is bounded, so a
 * flood from many addresses cannot grow memory; an evicted address simply starts counting again. The one
 * evicted is, of the EVICTION_SAMPLE least recently seen, the one with the fewest unknown keys this minute
 * (of those, the least recent): a flood of addresses guessing once each evicts its own, not a guesser
 * near its limit.
 */
export interface UnknownKeyGuard {
  /** Counts one unknown key from `ip`; true when the IP is over the limit (answer 429, not 401). */
  refuse(ip: string): boolean;
  /** Whether `ip` is over the limit this minute already, counting nothing (a fleet asks before it reads a key). */
  throttled(ip: string): boolean;
}

export interface UnknownKeyOptions {
  maxPerMinute?: number;
  maxAddresses?: number;
  /** Monotonic clock in ms; default sharedNow (its minutes are the shared guard's, see shared-clock.ts). */
  now?: () => number;
  /** Called when the table, full, evicts an address still counted this minute (see the top of this file). */
  onEvict?: () => void;
}

/** Least recently seen addresses weighed for eviction; those passed over become the most recent. */
const EVICTION_SAMPLE = 8;

export function createUnknownKeyGuard(opts: UnknownKeyOptions = {}): UnknownKeyGuard {
  const max = opts.maxPerMinute ?? 20;
  const now = opts.now ?? sharedNow;
  const maxAddresses = opts.maxAddresses ?? 100_000;
  const seen = new LRUCache<string, { minute: number; count: number }>({ max: maxAddresses });

  /** Evicts the address counting least this minute of the EVICTION_SAMPLE least recent (see the top). */
  function makeRoom(minute: number): void {
    const weighed: string[] = [];
    let lightest = '';
    let least = Infinity;
    for (const ip of seen.rkeys()) {
      const entry = seen.peek(ip);
      const count = entry?.minute === minute ? entry.count : 0;
      if (count < least) {
        least = count;
        lightest = ip;
      }
      weighed.push(ip);
      if (weighed.length === EVICTION_SAMPLE) break;
    }
    seen.delete(lightest);
    if (least > 0) opts.onEvict?.();
    for (const ip of weighed) {
      if (ip === lightest) break;
      seen.get(ip);
    }
  }

  return {
    refuse(ip) {
      const minute = Math.floor(now() / 60_000);
      let entry = seen.get(ip);
      if (entry === undefined) {
        if (seen.size >= maxAddresses) makeRoom(minute);
        entry = { minute, count: 0 };
        seen.set(ip, entry);
      } else if (entry.minute !== minute) {
        entry.minute = minute;
        entry.count = 0;
      }
      entry.count++;
      return entry.count > max;
    },
    throttled(ip) {
      const entry = seen.get(ip);
      return entry !== undefined && entry.minute === Math.floor(now() / 60_000) && entry.count >= max;
    },
  };
}
