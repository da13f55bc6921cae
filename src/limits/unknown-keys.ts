import { LRUCache } from 'lru-cache';
import { sharedNow } from './shared-clock.js';

/**
 * Slows key guessing: a client IP that presents more than `maxPerMinute` unknown keys within a
 * minute gets 429 for further unknown keys for the rest of that minute. Valid keys from the same IP
 * keep working, because many tenants may sit behind one backend proxy. The table is bounded, so a
 * flood from many addresses cannot grow memory; an evicted address simply starts counting again.
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
  /** Called when the table, full, evicts its least recently seen address while still counted this minute. */
  onEvict?: () => void;
}

export function createUnknownKeyGuard(opts: UnknownKeyOptions = {}): UnknownKeyGuard {
  const max = opts.maxPerMinute ?? 20;
  const now = opts.now ?? sharedNow;
  const onEvict = opts.onEvict;
  const seen = new LRUCache<string, { minute: number; count: number }>({
    max: opts.maxAddresses ?? 100_000,
    ...(onEvict === undefined
      ? {}
      : {
          dispose: (entry, _ip, reason) => {
            if (reason === 'evict' && entry.minute === Math.floor(now() / 60_000)) onEvict();
          },
        }),
  });
  return {
    refuse(ip) {
      const minute = Math.floor(now() / 60_000);
      let entry = seen.get(ip);
      if (entry === undefined || entry.minute !== minute) {
        entry = { minute, count: 0 };
        seen.set(ip, entry);
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
