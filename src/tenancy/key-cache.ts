import { LRUCache } from 'lru-cache';
import type { EndpointFences } from '../fences/fences.js';

/** What an API key grants: the endpoint, its owner, its network and the owner's plan. */
export interface EndpointAuth {
  endpointId: string;
  ownerId: number;
  /** The configured chain slug the endpoint serves. */
  network: string;
  /** The owner's plan (a key of `config.plans`), so the rate limiter needs no second lookup. */
  plan: string;
  /**
   * The owner is suspended: the key is known, and answered 403 `owner_suspended` (not the 401 of a typo).
   * Every reader that asks whether a key works checks this as well as null.
   */
  suspended: boolean;
  /** The endpoint's restrictions, compiled in this thread from what the store keeps; null: none set. */
  fences: EndpointFences | null;
  /**
   * Set when the key is the endpoint's previous one, kept valid after a rotation until this time (unix ms):
   * from then on it is refused with the 401 of an unknown key, and sockets opened with it close.
   */
  keyExpiresAtMs: number | null;
}

/**
 * The daemon's memory of API-key lookups: keys that were found (with what they grant) and keys that
 * were not, each in its own bounded LRU. Remembering misses is what keeps a flood of random keys off
 * SQLite; bounding them is what keeps the same flood from growing memory.
 */
export interface KeyCache {
  /** The cached answer: an EndpointAuth, null for a remembered miss, undefined when not cached. */
  get(key: string): EndpointAuth | null | undefined;
  remember(key: string, auth: EndpointAuth | null): void;
  /** Drops whatever is cached for `key` (e.g. a new endpoint's key that was once a miss). */
  forget(key: string): void;
  /**
   * Drops the cached keys of an endpoint (its current one, and a previous one in its grace), so a deleted
   * endpoint stops working at once; returns them with what they granted.
   */
  forgetEndpoint(endpointId: string): Array<[key: string, auth: EndpointAuth]>;
  /** Forgets every remembered miss (a key made elsewhere may be among them). */
  forgetMisses(): void;
  /** Forgets the owner's keys; returns them with what they granted. */
  forgetOwner(ownerId: number): Array<[key: string, auth: EndpointAuth]>;
  /** Every key found, with what it grants (least recently used last). */
  foundEntries(): Array<[key: string, auth: EndpointAuth]>;
  clear(): void;
  readonly found: number;
  readonly missing: number;
}

export function createKeyCache(maxFound: number, maxMissing: number): KeyCache {
  // endpoint id -> its cached keys (two while a rotated-out key is in its grace): deleting an endpoint
  // knows only its id, the cache is keyed by key.
  const keysOfEndpoint = new Map<string, string[]>();
  const found = new LRUCache<string, EndpointAuth>({
    max: maxFound,
    dispose: (auth, key) => {
      const keys = keysOfEndpoint.get(auth.endpointId);
      if (keys === undefined) return;
      const rest = keys.filter((k) => k !== key);
      if (rest.length === 0) keysOfEndpoint.delete(auth.endpointId);
      else keysOfEndpoint.set(auth.endpointId, rest);
    },
  });
  const missing = new LRUCache<string, true>({ max: maxMissing });

  return {
    get(key) {
      const auth = found.get(key);
      if (auth !== undefined) return auth;
      return missing.get(key) === true ? null : undefined;
    },
    remember(key, auth) {
      if (auth === null) {
        missing.set(key, true);
        return;
      }
      found.set(key, auth);
      const keys = keysOfEndpoint.get(auth.endpointId);
      if (keys === undefined) keysOfEndpoint.set(auth.endpointId, [key]);
      else if (!keys.includes(key)) keys.push(key);
    },
    forget(key) {
      found.delete(key);
      missing.delete(key);
    },
    forgetEndpoint(endpointId) {
      const dropped: Array<[string, EndpointAuth]> = [];
      for (const key of keysOfEndpoint.get(endpointId) ?? []) {
        const auth = found.peek(key);
        if (auth !== undefined) dropped.push([key, auth]);
      }
      for (const [key] of dropped) found.delete(key);
      keysOfEndpoint.delete(endpointId);
      return dropped;
    },
    forgetMisses() {
      missing.clear();
    },
    forgetOwner(ownerId) {
      const dropped: Array<[string, EndpointAuth]> = [];
      for (const [key, auth] of found.entries()) if (auth.ownerId === ownerId) dropped.push([key, auth]);
      for (const [key] of dropped) found.delete(key);
      return dropped;
    },
    foundEntries() {
      return [...found.entries()];
    },
    clear() {
      found.clear();
      missing.clear();
      keysOfEndpoint.clear();
    },
    get found() {
      return found.size;
    },
    get missing() {
      return missing.size;
    },
  };
}
