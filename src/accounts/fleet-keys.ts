import { createKeyCache, type EndpointAuth, type KeyCache } from '../tenancy/key-cache.js';
import type { AccountStore } from './account-store.js';
import type { ChangeNotice } from './pg-changes.js';

export interface FleetKeysOptions {
  /** API keys found, remembered at most; default 50_000. */
  maxCached?: number;
  /** API keys not found, remembered at most; default 50_000. */
  negativeCached?: number;
  /**
   * Called with each endpoint that stopped working (deleted, its owner suspended or deleted) or whose key or
   * restrictions changed, to close its sockets (their clients reconnect under the new grant).
   */
  onRevoked?: (endpointId: string) => void;
  /**
   * Called with a store failure met while re-reading keys after a change (they stay forgotten: asked again
   * at their next call), or an endpoint by its id (asked again at the next resync).
   */
  onError?: (err: unknown) => void;
  /** Called each time every known key is read again (chaingate_change_resyncs_total). */
  onResync?: () => void;
  /** A resync comes at most once per this many ms, and so many notices re-read keys in it at most (RECHECKS_PER_WINDOW); default 5000. */
  resyncMinMs?: number;
  /** Clock in ms; default Date.now. */
  now?: () => number;
}

/**
 * Notices that re-read keys, per resync window: past them, the keys they name wait for the next resync
 * (forgotten meanwhile, so their calls read the store), and a flood of notices costs one resync.
 */
const RECHECKS_PER_WINDOW = 100;

/**
 * Endpoints that wait for the next resync to be read by id, at most (their ids, up to 200 characters, from
 * notices past the budget): a flood of forged ids must not grow memory. Past it, further ids are dropped,
 * and a real deletion among them leaves the sockets of its key open here (the key itself, not held, is
 * refused at its next call, which reads the store).
 */
const DEFERRED_ENDPOINTS_MAX = 10_000;

/**
 * The API keys an instance of a fleet knows, kept current by the change feed. The hot path asks `cached`
 * (a Map lookup); only a key it has never met, or one a change made it forget, takes `lookUp`, one query
 * to the shared store however many calls wait for the same key. Remembered misses are what keep a flood
 * of random keys off PostgreSQL, as on one machine (the per-IP unknown-key throttle bounds the rest).
 *
 * The feed tells every instance within a moment of a commit (pg-changes.ts):
 * - `endpoint_created`: every remembered miss is forgotten (the new key may be among them; the feed
 *   carries no key);
 * - `endpoint_deleted` and `endpoint_changed` (restrictions changed, key rotated): the endpoint's keys (the
 *   current one and a previous one in its grace) are forgotten and read again, and its endpoint revoked if
 *   what a key grants is no longer what it granted (not found, its owner suspended, another grant: the
 *   end of a rotated-out key, other restrictions)
 *   (any role that can connect may send a notice: it is a hint, never believed on its word); a key this
 *   instance does not hold (never met, or pushed out of the LRU while a socket of it stays open) is read
 *   by the endpoint's id instead, the notice's owner id ignored, and revoked likewise;
 * - `owner_changed` (suspended, resumed, plan changed, deleted): the owner's keys are forgotten and read
 *   again, and the endpoints of those no longer found are revoked; so are the remembered misses (a miss
 *   does not say whose key it was, and a resumed owner's may be among them);
 * - `resync` (the feed was down, notifications were lost): every key known is read again, likewise, at
 *   most once per `resyncMinMs` (one asked for sooner comes at the end of that time);
 * and past RECHECKS_PER_WINDOW notices that re-read keys or an endpoint in that time, the rest wait for
 * such a resync.
 * A lookup under way when a change arrives answers its call but is not remembered.
 */
export interface FleetKeys {
  /** What an API key grants as far as this instance knows: the grant, null for a known miss, undefined: ask `lookUp`. */
  cached(apiKey: string): EndpointAuth | null | undefined;
  /** Asks the store and remembers the answer; rejects when the store fails (answer 503). */
  lookUp(apiKey: string): Promise<EndpointAuth | null>;
  /** Applies a notice of the change feed. */
  apply(notice: ChangeNotice): void;
  /** Resolves once the re-reads the notices so far started are done (for tests and a clean stop). */
  settled(): Promise<void>;
  /** Cache sizes, for metrics and tests. */
  cacheSizes(): { found: number; missing: number };
  /** Drops a resync waiting for its time (a clean stop). */
  close(): void;
}

/** Whether `notice` may have changed what a lookup answered (`auth`: a grant, or null for a miss). */
function mayHaveChanged(notice: ChangeNotice, auth: EndpointAuth | null): boolean {
  switch (notice.kind) {
    case 'endpoint_created':
      return auth === null;
    case 'endpoint_deleted':
      return auth?.endpointId === notice.endpointId;
    case 'endpoint_changed':
      // A rotation's new key may have been looked up (and missed) before it committed.
      return auth === null || auth.endpointId === notice.endpointId;
    case 'owner_changed':
      return auth === null || auth.ownerId === notice.ownerId;
    case 'resync':
      return true;
  }
}

/** When re-reads may run: notices within a budget per window, resyncs at most one per window. */
interface Pace {
  /** Whether a notice may re-read now: RECHECKS_PER_WINDOW per window. */
  take(): boolean;
  /** Runs the resync now, or at the end of the window since the last one (one, however many ask). */
  resync(): void;
  /** Drops a resync waiting for its time. */
  close(): void;
}

function createPace(windowMs: number, now: () => number, run: () => void): Pace {
  let lastResyncAt = Number.NEGATIVE_INFINITY;
  let resyncTimer: NodeJS.Timeout | null = null;
  let windowAt = Number.NEGATIVE_INFINITY;
  let rechecks = 0;
  const pace: Pace = {
    take() {
      if (now() - windowAt >= windowMs) {
        windowAt = now();
        rechecks = 0;
      }
      return ++rechecks <= RECHECKS_PER_WINDOW;
    },
    resync() {
      if (resyncTimer !== null) return;
      const wait = lastResyncAt + windowMs - now();
      if (wait > 0) {
        resyncTimer = setTimeout(() => {
          resyncTimer = null;
          pace.resync();
        }, wait);
        resyncTimer.unref();
        return;
      }
      lastResyncAt = now();
      run();
    },
    close() {
      if (resyncTimer !== null) clearTimeout(resyncTimer);
      resyncTimer = null;
    },
  };
  return pace;
}

/**
 * Whether a key read again grants what it granted: a forged notice (any role that may connect can send one)
 * re-reads the key and finds the same grant, which is then not revoked.
 */
function sameGrant(read: EndpointAuth | null, was: EndpointAuth): boolean {
  return (
    read !== null &&
    !read.suspended &&
    read.endpointId === was.endpointId &&
    read.network === was.network &&
    read.keyExpiresAtMs === was.keyExpiresAtMs &&
    JSON.stringify(read.fences?.settings ?? null) === JSON.stringify(was.fences?.settings ?? null)
  );
}

/** The cached answer for `apiKey`; a previous key past its end is forgotten and asked again (the store no longer finds it). */
function unexpired(cache: KeyCache, apiKey: string, nowMs: number): EndpointAuth | null | undefined {
  const auth = cache.get(apiKey);
  if (auth == null || auth.keyExpiresAtMs === null || nowMs < auth.keyExpiresAtMs) return auth;
  cache.forget(apiKey);
  return undefined;
}

export function createFleetKeys(accounts: Pick<AccountStore, 'endpointByKey' | 'endpointById'>, options: FleetKeysOptions = {}): FleetKeys {
  const now = options.now ?? Date.now;
  const cache = createKeyCache(options.maxCached ?? 50_000, options.negativeCached ?? 50_000);
  const inFlight = new Map<string, Promise<EndpointAuth | null>>();
  // The notices heard while lookups were under way, numbered: a lookup does not remember an answer that
  // a notice heard since it began may have made stale.
  let heard = 0;
  let notices: Array<{ n: number; notice: ChangeNotice }> = [];
  let rereads: Promise<void> = Promise.resolve();

  function lookUp(apiKey: string): Promise<EndpointAuth | null> {
    const pending = inFlight.get(apiKey);
    if (pending !== undefined) return pending;
    const began = heard;
    const settle = (): void => {
      if (inFlight.get(apiKey) === asked) inFlight.delete(apiKey);
      if (inFlight.size === 0) notices = [];
    };
    const asked: Promise<EndpointAuth | null> = accounts.endpointByKey(apiKey).then(
      (auth) => {
        if (!notices.some((h) => h.n > began && mayHaveChanged(h.notice, auth))) cache.remember(apiKey, auth);
        settle();
        return auth;
      },
      (err: unknown) => {
        settle();
        throw err;
      },
    );
    inFlight.set(apiKey, asked);
    return asked;
  }

  /** Reads `entries` again; revokes the endpoints no longer found. */
  function reread(entries: Array<[string, EndpointAuth]>): void {
    track(
      entries.map(([key, auth]) =>
        lookUp(key).then(
          (read) => {
            if (!sameGrant(read, auth)) options.onRevoked?.(auth.endpointId);
          },
          (err: unknown) => options.onError?.(err),
        ),
      ),
    );
  }

  /** Reads endpoints whose key this instance does not hold by their ids; revokes those no longer found. */
  function rereadEndpoints(endpointIds: string[]): void {
    track(
      endpointIds.map((endpointId) =>
        accounts.endpointById(endpointId).then(
          (read) => {
            if (read === null || read.suspended) options.onRevoked?.(endpointId);
          },
          (err: unknown) => {
            // Unchecked, its sockets stay open: the next resync (the store back, the feed with it) asks again.
            deferEndpoint(endpointId);
            options.onError?.(err);
          },
        ),
      ),
    );
  }

  /** Makes `settled` wait for `reads` too. */
  function track(reads: Array<Promise<void>>): void {
    const done = Promise.all(reads).then(() => {});
    rereads = rereads.then(() => done);
  }

  /** Keys forgotten by notices past the window's budget: the next resync reads them again. */
  const deferred = new Map<string, EndpointAuth>();
  /** Endpoints of keys not held, named by notices past the budget (or whose read failed): the next resync reads them by id. */
  const deferredEndpoints = new Set<string>();
  const deferEndpoint = (endpointId: string): void => {
    if (deferredEndpoints.size < DEFERRED_ENDPOINTS_MAX) deferredEndpoints.add(endpointId);
  };

  /** Every known key read again, and the endpoints deferred by id. */
  const pace = createPace(options.resyncMinMs ?? 5000, now, () => {
    options.onResync?.();
    const known = [...cache.foundEntries(), ...deferred];
    const endpointIds = [...deferredEndpoints];
    deferred.clear();
    deferredEndpoints.clear();
    cache.clear();
    reread(known);
    rereadEndpoints(endpointIds);
  });

  /** Reads keys a notice named again, within the window's budget; past it, at the next resync. */
  function recheck(entries: Array<[string, EndpointAuth]>): void {
    if (entries.length === 0) return;
    if (pace.take()) return reread(entries);
    for (const [key, auth] of entries) deferred.set(key, auth);
    pace.resync();
  }

  /** Reads a deleted endpoint whose key is not held by its id, within the same budget; past it, at the next resync. */
  function recheckEndpoint(endpointId: string): void {
    if (pace.take()) return rereadEndpoints([endpointId]);
    deferEndpoint(endpointId);
    pace.resync();
  }

  return {
    cached: (apiKey) => unexpired(cache, apiKey, now()),
    lookUp,
    apply(notice) {
      heard++;
      if (inFlight.size > 0) notices.push({ n: heard, notice });
      // A lookup under way may have read the store before the change: later calls ask again.
      if (notice.kind !== 'endpoint_created') inFlight.clear();
      switch (notice.kind) {
        case 'endpoint_created':
          cache.forgetMisses();
          return;
        case 'endpoint_deleted':
        case 'endpoint_changed': {
          if (notice.kind === 'endpoint_changed') cache.forgetMisses();
          // Revoked only once the store no longer finds its key; a key not held (pushed out of the LRU, its
          // socket still open) by the endpoint's id, whatever owner the notice names (that may be forged too).
          const held = cache.forgetEndpoint(notice.endpointId);
          if (held.length > 0) recheck(held);
          else recheckEndpoint(notice.endpointId);
          return;
        }
        case 'owner_changed':
          // A miss does not say whose key it was: a resumed owner's key may be among them.
          cache.forgetMisses();
          recheck(cache.forgetOwner(notice.ownerId));
          return;
        case 'resync':
          pace.resync();
          return;
      }
    },
    settled: () => rereads,
    cacheSizes: () => ({ found: cache.found, missing: cache.missing }),
    close: () => pace.close(),
  };
}
