import { createHash } from 'node:crypto';
import { LRUCache } from 'lru-cache';

/** Counters of a response cache since it was made. */
export interface ResponseCacheStats {
  /** Entries held now. */
  entries: number;
  /** Sum of the entries' sizes (result bytes + ENTRY_OVERHEAD_BYTES each), never above max_bytes. */
  bytes: number;
  hits: number;
  misses: number;
}

/**
 * The gateway's one store of final answers, shared by every chain and client: config cache.max_bytes is
 * one budget for the whole gateway, so one LRU holds every chain's entries and a busy chain may take the
 * room an idle one does not use. Each chain reads and writes it through its own view (ChainCache,
 * ChainRuntime.cache), which keys entries by the chain's cacheScope; whoever builds the chains makes the
 * store once and hands it to each (server/gateway-thread.ts). It holds the JSON bytes
 * of an answer's `result` only: the id differs per client and is put around it by the caller. What may
 * enter is decided by cacheability.ts; answers about final blocks never change, so entries have no
 * lifetime and leave only when the least recently used must make room.
 *
 * So that max_bytes bounds what the process holds, not just what it counts:
 * - results are kept as Buffers of their own (outside V8's heap, which grows to well over its live
 *   size between collections, and never a slice of a shared pool that would hold the rest of it);
 * - a call of up to RAW_KEY_CHARS characters (chain and canonical JSON: a block, a receipt, a balance)
 *   is its own key, copied flat when kept; a longer one is keyed by its SHA-256 (base64, 44 characters).
 *   A call's canonical JSON is built by concatenation, and such a string kept whole would hold every
 *   piece of it (a 2,000-address eth_getLogs key is ~90 KB of text in thousands of pieces); a digest is
 *   the same size whatever the call. Short keys skip the digest, which cost as much as the rest of a hit;
 * - each entry counts ENTRY_OVERHEAD_BYTES besides its result, for the key, the Buffer and the LRU's slots.
 */
export interface ResponseCache {
  /** False when config cache.max_bytes is 0: callers then skip working out keys at all. */
  readonly enabled: boolean;
  /** The cached `result` JSON of the call `key` on `chain` (a chain's cacheScope), or undefined (a miss). */
  get(chain: string, key: string): Buffer | undefined;
  /** Keeps `resultJson` (text, or bytes that are copied) unless the cache is disabled or the entry is over an eighth of max_bytes. */
  set(chain: string, key: string, resultJson: string | Buffer): void;
  stats(): ResponseCacheStats;
}

/** What an entry holds besides its result's bytes: the key (at most RAW_KEY_CHARS), the Buffer object and its backing store's header, the LRU's slots. */
export const ENTRY_OVERHEAD_BYTES = 352;

/** Calls whose key (the chain's JSON string and the call's canonical JSON) is at most this long are their own key. */
export const RAW_KEY_CHARS = 128;

/**
 * Makes the cache. `maxBytes` is config `cache.max_bytes` (default 67108864); 0 disables caching.
 * Sizes are counted in bytes.
 */
export function createResponseCache(maxBytes: number): ResponseCache {
  if (!Number.isSafeInteger(maxBytes) || maxBytes < 0) {
    throw new RangeError('cache.max_bytes must be a non-negative integer');
  }
  let hits = 0;
  let misses = 0;
  if (maxBytes === 0) {
    return {
      enabled: false,
      get() {
        misses++;
        return undefined;
      },
      set() {},
      stats: () => ({ entries: 0, bytes: 0, hits, misses }),
    };
  }
  const entries = new LRUCache<string, Buffer>({
    maxSize: maxBytes,
    // One huge answer (a block with full transactions, a wide eth_getLogs) must not flush the many
    // small ones that make the hits; lru-cache refuses such an entry (and drops an older value under it).
    maxEntrySize: Math.max(1, Math.floor(maxBytes / 8)),
    sizeCalculation: (result) => result.length + ENTRY_OVERHEAD_BYTES,
  });
  // The chain slug as a JSON string ends at its closing quote, so no slug/key pair can spell another's; a
  // raw key starts with that quote and a digest (base64) never does, so neither can spell the other.
  const entryKey = (chain: string, key: string): string => {
    const prefix = JSON.stringify(chain);
    if (prefix.length + key.length <= RAW_KEY_CHARS) return prefix + key;
    return createHash('sha256').update(prefix).update(key).digest('base64');
  };
  // A raw key is concatenated from pieces: the copy kept holds its characters only (see above).
  const kept = (k: string): string => (k.charCodeAt(0) === 0x22 ? Buffer.from(k).toString() : k);
  return {
    enabled: true,
    get(chain, key) {
      const hit = entries.get(entryKey(chain, key));
      if (hit === undefined) misses++;
      else hits++;
      return hit;
    },
    set(chain, key, resultJson) {
      const bytes = typeof resultJson === 'string' ? Buffer.byteLength(resultJson) : resultJson.length;
      const k = entryKey(chain, key);
      if (bytes + ENTRY_OVERHEAD_BYTES > entries.maxEntrySize) {
        // As lru-cache does with an entry too large: the value the key held goes too.
        entries.delete(k);
        return;
      }
      const result = Buffer.allocUnsafeSlow(bytes);
      if (typeof resultJson === 'string') result.write(resultJson);
      else resultJson.copy(result);
      entries.set(kept(k), result);
    },
    stats: () => ({ entries: entries.size, bytes: entries.calculatedSize, hits, misses }),
  };
}

/** One chain's view of the shared store: its entries under the chain's cacheScope. */
export interface ChainCache {
  /** False when config cache.max_bytes is 0: callers then skip working out keys at all. */
  readonly enabled: boolean;
  /** The cached `result` JSON of the call `key` on the chain as it is now (its cacheScope), or undefined. */
  get(key: string): Buffer | undefined;
  /**
   * Keeps a result under `scope`: the chain's cacheScope read when the call started, so an answer about
   * the chain before a reset (see ChainRuntime.cacheScope) is kept where nothing reads it.
   */
  set(scope: string, key: string, resultJson: string | Buffer): void;
  /** The shared store's counters: every chain's entries, hits and misses. */
  stats(): ResponseCacheStats;
}

/** Where a chain's view counts its hits and misses, and the bytes the store holds. */
export interface CacheMeters {
  readonly cacheHits: { inc(): void };
  readonly cacheMisses: { inc(): void };
  readonly cacheBytes: { set(value: number): void };
}

/**
 * The view of `store` for the chain whose current cacheScope `scope()` tells. Each look is a hit or a miss of
 * the chain's; the bytes are the whole store's (one budget shared by every chain, whose LRU evicts any
 * chain's entries), set after each of the chain's writes.
 */
export function chainCacheView(store: ResponseCache, scope: () => string, meters?: CacheMeters): ChainCache {
  if (meters === undefined) {
    return {
      enabled: store.enabled,
      get: (key) => store.get(scope(), key),
      set: (at, key, resultJson) => store.set(at, key, resultJson),
      stats: () => store.stats(),
    };
  }
  return {
    enabled: store.enabled,
    get(key) {
      const hit = store.get(scope(), key);
      (hit === undefined ? meters.cacheMisses : meters.cacheHits).inc();
      return hit;
    },
    set(at, key, resultJson) {
      store.set(at, key, resultJson);
      meters.cacheBytes.set(store.stats().bytes);
    },
    stats: () => store.stats(),
  };
}

/** The gateway's cache with a size a reload may change (config cache.max_bytes). */
export interface SwappableCache extends ResponseCache {
  /** A new size: the cache starts again empty at it (an LRU cannot shrink in place); the same size keeps it. */
  resize(maxBytes: number): void;
}

/**
 * A ResponseCache whose store a reload may replace: every chain keeps the one object it was given, and
 * each call goes to the store of the moment.
 */
export function createSwappableCache(maxBytes: number): SwappableCache {
  let size = maxBytes;
  let store = createResponseCache(maxBytes);
  return {
    get enabled() {
      return store.enabled;
    },
    get: (chain, key) => store.get(chain, key),
    set: (chain, key, resultJson) => store.set(chain, key, resultJson),
    stats: () => store.stats(),
    resize(next) {
      if (next === size) return;
      size = next;
      store = createResponseCache(next);
    },
  };
}
