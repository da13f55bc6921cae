import { readUsageStats, type StatsQuery, type UsageStats } from '../metering/stats.js';
import type { StoreChanges } from '../store/changes.js';
import type { Store } from '../store/open.js';
import type { OwnerRow } from '../store/statements.js';
import { createKeyCache, type EndpointAuth } from './key-cache.js';
import { hashKey, looksLikeKey, newKey, randomString } from './keys.js';
import { assertValidName } from './names.js';

export type { EndpointAuth } from './key-cache.js';

/** An owner as the daemon sees it. `ruBalance` is the stored balance: the ledger's `available()` is the live one. */
export interface OwnerRecord {
  id: number;
  name: string;
  plan: string;
  ruBalance: number;
  suspended: boolean;
}

/** An endpoint as its owner sees it: never its key, only the key's first characters. */
export interface EndpointRecord {
  /** `ep_` and 16 base32 characters. */
  id: string;
  name: string | null;
  network: string;
  keyPrefix: string;
  /** Unix seconds. */
  createdAt: number;
}

export type CreateEndpointResult =
  | { endpoint: EndpointRecord; apiKey: string }
  /** `limit`: the owner has `maxEndpoints` live endpoints; `no_owner`: deleted or suspended meanwhile. */
  | { error: 'limit' | 'no_owner' };

export interface DirectoryOptions {
  /** Clock in ms; default Date.now. */
  now?: () => number;
  /** API keys found, remembered at most; default 50_000. */
  maxCached?: number;
  /** API keys not found, remembered at most; default 50_000. */
  negativeCached?: number;
  /**
   * The store's changes shared with the other threads of the process (store/changes.ts): a key deleted
   * through one worker is refused by every other from its next call.
   */
  changes?: StoreChanges;
}

/** The daemon's view of owners, endpoints and keys, on the store's one connection. */
export interface Directory {
  /** What an API key grants, or null: unknown, malformed, deleted, or its owner suspended or deleted. */
  endpointByKey(apiKey: string): EndpointAuth | null;
  /** The owner a management key acts as, or null: unknown, revoked, or the owner suspended or deleted. */
  ownerByManagementKey(key: string): OwnerRecord | null;
  /** The owner, suspended or not; null when unknown or deleted. */
  owner(id: number): OwnerRecord | null;
  /**
   * Whether another connection (the CLI) committed since the last call (`PRAGMA data_version`, about
   * a microsecond). When it did, the key caches are emptied so suspensions, plan changes and deletions
   * apply, and endpoints that stopped working are queued for `takeRevokedEndpointIds`.
   */
  refreshIfChanged(): boolean;
  /**
   * Ids of endpoints that stopped working since the last call: deleted here or by another process,
   * or whose owner another process suspended. Each id is returned once; the lead closes their sockets.
   */
  takeRevokedEndpointIds(): string[];
  /** Throws a RangeError for a `name` that `nameProblem` refuses (the management API answers 400 first). */
  createEndpoint(ownerId: number, network: string, name: string | undefined, maxEndpoints: number): CreateEndpointResult;
  /** The owner's live endpoints, oldest first. */
  listEndpoints(ownerId: number): EndpointRecord[];
  /**
   * At most `limit` of the owner's live endpoints in the same order, after the endpoint `after` names
   * (created_at and id of the previous page's last one), or from the first.
   */
  listEndpointsPage(ownerId: number, limit: number, after?: { createdAt: number; id: string }): EndpointRecord[];
  /** False when the endpoint is unknown, already deleted or another owner's: the same answer for all. */
  deleteEndpoint(ownerId: number, endpointId: string): boolean;
  /** The owner's usage; an `endpointId` of another owner yields zeros. The caller bounds the range. */
  stats(ownerId: number, query: StatsQuery): UsageStats;
  /** Cache sizes, for metrics and tests. */
  cacheSizes(): { found: number; missing: number };
}

const ENDPOINT_ID_ALPHABET = 'abcdefghijklmnopqrstuvwxyz234567';

function toOwner(row: OwnerRow): OwnerRecord {
  return { id: row.id, name: row.name, plan: row.plan, ruBalance: row.ruBalance, suspended: row.suspended !== 0 };
}

export function createDirectory(store: Store, options: DirectoryOptions = {}): Directory {
  const sql = store.sql.directory;
  const now = options.now ?? Date.now;
  const cache = createKeyCache(options.maxCached ?? 50_000, options.negativeCached ?? 50_000);
  const changes = options.changes;

  let dataVersion = sql.dataVersion.get()!;
  // Deletions are numbered (endpoints.deleted_seq). Everything up to lastSeq has been queued; our own
  // deletions that came after an unseen one are parked in ownSeqs so the next refresh skips them.
  let lastSeq = sql.maxDeletedSeq.get()!;
  const ownSeqs = new Set<number>();
  let suspended = new Set(sql.suspendedOwnerIds.all());
  let revoked: string[] = [];

  const createEndpointTx = store.db.transaction(
    (ownerId: number, network: string, name: string | null, maxEndpoints: number): CreateEndpointResult => {
      const owner = sql.ownerById.get(ownerId);
      if (owner === undefined || owner.suspended !== 0) return { error: 'no_owner' };
      if (sql.countLiveEndpoints.get(ownerId)! >= maxEndpoints) return { error: 'limit' };
      const id = `ep_${randomString(16, ENDPOINT_ID_ALPHABET)}`;
      const key = newKey('api');
      const createdAt = Math.floor(now() / 1000);
      sql.insertEndpoint.run(id, ownerId, network, name, key.hash, key.prefix, createdAt);
      return { endpoint: { id, name, network, keyPrefix: key.prefix, createdAt }, apiKey: key.key };
    },
  );

  const directory: Directory = {
    endpointByKey(apiKey) {
      if (changes?.changed()) directory.refreshIfChanged();
      const cached = cache.get(apiKey);
      if (cached !== undefined) return cached;
      if (!looksLikeKey(apiKey, 'api')) return null;
      const row = sql.endpointByKeyHash.get(hashKey(apiKey));
      const auth = row === undefined ? null : { endpointId: row.endpointId, ownerId: row.ownerId, network: row.network, plan: row.plan };
      cache.remember(apiKey, auth);
      return auth;
    },

    ownerByManagementKey(key) {
      if (!looksLikeKey(key, 'management')) return null;
      const row = sql.ownerByManagementKeyHash.get(hashKey(key));
      return row === undefined ? null : toOwner(row);
    },

    owner(id) {
      const row = sql.ownerById.get(id);
      return row === undefined ? null : toOwner(row);
    },

    refreshIfChanged() {
      const v = sql.dataVersion.get()!;
      if (v === dataVersion) return false;
      dataVersion = v;
      cache.clear();
      for (const { id, seq } of sql.deletedAfter.all(lastSeq)) {
        if (!ownSeqs.delete(seq)) revoked.push(id);
        lastSeq = seq;
      }
      const nowSuspended = new Set(sql.suspendedOwnerIds.all());
      for (const ownerId of nowSuspended) {
        if (!suspended.has(ownerId)) revoked.push(...sql.liveEndpointIds.all(ownerId));
      }
      suspended = nowSuspended;
      return true;
    },

    takeRevokedEndpointIds() {
      const ids = revoked;
      revoked = [];
      return ids;
    },

    createEndpoint(ownerId, network, name, maxEndpoints) {
      if (name !== undefined) assertValidName(name, 'endpoint name');
      // IMMEDIATE: the count and the insert must see the same state, even with the CLI writing.
      const result = createEndpointTx.immediate(ownerId, network, name ?? null, maxEndpoints);
      // A brand-new key cannot have been seen, but a remembered miss for it would hide it: be exact.
      if ('apiKey' in result) {
        cache.forget(result.apiKey);
        changes?.bump();
      }
      return result;
    },

    listEndpoints(ownerId) {
      return sql.listEndpoints.all(ownerId);
    },

    listEndpointsPage(ownerId, limit, after) {
      return sql.listEndpointsAfter.all(ownerId, after?.createdAt ?? -1, after?.id ?? '', limit);
    },

    deleteEndpoint(ownerId, endpointId) {
      const seq = sql.deleteEndpoint.get(Math.floor(now() / 1000), endpointId, ownerId);
      if (seq === undefined) return false;
      cache.forgetEndpoint(endpointId);
      revoked.push(endpointId);
      changes?.bump();
      if (seq === lastSeq + 1) lastSeq = seq;
      else ownSeqs.add(seq);
      return true;
    },

    stats(ownerId, query) {
      return readUsageStats(store.sql, ownerId, query);
    },

    cacheSizes() {
      return { found: cache.found, missing: cache.missing };
    },
  };
  return directory;
}
