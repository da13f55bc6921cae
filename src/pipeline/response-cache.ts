import { LRUCache } from 'lru-cache';

/** Counters of a response cache since it was made. */
export interface ResponseCacheStats {
  /** Entries held now. */
  entries: number;
  /** Sum of the entries' sizes (key length + result length), never above max_bytes. */
  bytes: number;
  hits: number;
  misses: number;
}

/**
 * The gateway's one cache of final answers, shared by every chain and client. It holds the JSON text
 * of an answer's `result` only: the id differs per client and is put around it by the caller. What may
 * enter is decided by cacheability.ts; answers about final blocks never change, so entries have no
 * lifetime and leave only when the least recently used must make room.
 */
export interface ResponseCache {
  /** The cached `result` JSON text of the call `key` on `chain`, or undefined (a miss). */
  get(chain: string, key: string): string | undefined;
  /** Keeps `resultJson` unless the cache is disabled or the entry is over an eighth of max_bytes. */
  set(chain: string, key: string, resultJson: string): void;
  stats(): ResponseCacheStats;
}

/**
 * Makes the cache. `maxBytes` is config `cache.max_bytes` (default 67108864); 0 disables caching.
 * Sizes are counted in string length, which for the ASCII JSON nodes send is the bytes held.
 */
export function createResponseCache(maxBytes: number): ResponseCache {
  if (!Number.isSafeInteger(maxBytes) || maxBytes < 0) {
    throw new RangeError('cache.max_bytes must be a non-negative integer');
  }
  let hits = 0;
  let misses = 0;
  if (maxBytes === 0) {
    return {
      get() {
        misses++;
        return undefined;
      },
      set() {},
      stats: () => ({ entries: 0, bytes: 0, hits, misses }),
    };
  }
  const entries = new LRUCache<string, string>({
    maxSize: maxBytes,
    // One huge answer (a block with full transactions, a wide eth_getLogs) must not flush the many
    // small ones that make the hits; lru-cache refuses such an entry (and drops an older value under it).
    maxEntrySize: Math.max(1, Math.floor(maxBytes / 8)),
    sizeCalculation: (resultJson, key) => key.length + resultJson.length,
  });
  // The chain slug as a JSON string ends at its closing quote, so no slug/key pair can spell another's.
  const entryKey = (chain: string, key: string): string => JSON.stringify(chain) + key;
  return {
    get(chain, key) {
      const hit = entries.get(entryKey(chain, key));
      if (hit === undefined) misses++;
      else hits++;
      return hit;
    },
    set(chain, key, resultJson) {
      entries.set(entryKey(chain, key), resultJson);
    },
    stats: () => ({ entries: entries.size, bytes: entries.calculatedSize, hits, misses }),
  };
}
