import type { UsageStats } from '../api-answers.js';
import { readUsageStats, type StatsQuery } from '../metering/stats.js';
import type { StoreChanges } from '../store/changes.js';
import type { FenceOptions } from '../fences/fences.js';
import type { FenceSettings } from '../fences/settings.js';
import type { Store } from '../store/open.js';
import {
  type CreateEndpointResult,
  createEndpointTable,
  type EndpointCursor,
  type EndpointRecord,
  type FencePatcher,
  type ManagementCaller,
  type OwnerRecord,
  type PatchFencesResult,
  type RotateKeyResult,
} from './endpoints.js';
import { createKeyCache, type EndpointAuth } from './key-cache.js';
import { createKeyChangeReader } from './key-changes.js';
import { looksLikeKey } from './keys.js';

export type { EndpointAuth } from './key-cache.js';
export type { CreateEndpointResult, EndpointRecord, OwnerRecord } from './endpoints.js';

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
  /** How a grant's restrictions are compiled (config `fences.contracts_cover_balance`); default { balance: false }. */
  fences?: FenceOptions;
}

/** The daemon's view of owners, endpoints and keys, on the store's one connection. */
export interface Directory {
  /**
   * What an API key grants, or null: unknown, malformed, deleted, its owner deleted, or a previous key past
   * its end (`keyExpiresAtMs`: a cached grant is not answered from then on). A suspended owner's key is a
   * grant with `suspended` set.
   */
  endpointByKey(apiKey: string): EndpointAuth | null;
  /** The owner a management key acts as (`suspended` set for a suspended one), or null: unknown, revoked, or the owner deleted. */
  ownerByManagementKey(key: string): ManagementCaller | null;
  /** The owner, suspended or not; null when unknown or deleted. */
  owner(id: number): OwnerRecord | null;
  /**
   * Whether another connection (the CLI, another thread) committed since the last call (`PRAGMA
   * data_version`, about a microsecond). When it did, the key-change log is read from the last change seen
   * and only the keys it names are forgotten (an endpoint's, an owner's, the remembered misses for a new
   * key), so suspensions, plan changes and deletions apply; endpoints that stopped working are queued for
   * `takeRevokedEndpointIds`. A commit that changed no key (the ledger's flush of balances and usage) leaves
   * the cache as it was: true is still answered, for a caller that re-reads balances.
   */
  refreshIfChanged(): boolean;
  /** Deletes key-change rows older than `keepS` seconds before `nowMs` (the last one stays); the rows deleted. */
  pruneChanges(nowMs: number, keepS: number): number;
  /**
   * Ids of endpoints that stopped working since the last call: deleted here or by another process,
   * or whose owner another process suspended. Each id is returned once; the lead closes their sockets.
   */
  takeRevokedEndpointIds(): string[];
  /** Throws a RangeError for a `name` that `nameProblem` refuses (the management API answers 400 first). */
  createEndpoint(
    ownerId: number,
    network: string,
    name: string | undefined,
    maxEndpoints: number,
    fences?: FenceSettings,
  ): CreateEndpointResult;
  /**
   * AccountStore.patchEndpointFences. The endpoint's keys are forgotten here at once, and by every other
   * thread through the log's row; its sockets are closed (their clients reconnect under the new settings).
   */
  patchEndpointFences<P>(ownerId: number, endpointId: string, patch: FencePatcher<P>): PatchFencesResult<P>;
  /** AccountStore.rotateEndpointKey, its keys forgotten and its sockets closed as for patchEndpointFences. */
  rotateEndpointKey(ownerId: number, endpointId: string, graceS: number): RotateKeyResult;
  /** The owner's live endpoints, oldest first. */
  listEndpoints(ownerId: number): EndpointRecord[];
  /**
   * At most `limit` of the owner's live endpoints in the same order, after the endpoint `after` names
   * (created_at and id of the previous page's last one), or from the first.
   */
  listEndpointsPage(ownerId: number, limit: number, after?: EndpointCursor): EndpointRecord[];
  /** False when the endpoint is unknown, already deleted or another owner's: the same answer for all. */
  deleteEndpoint(ownerId: number, endpointId: string): boolean;
  /** The owner's usage; an `endpointId` of another owner yields zeros. The caller bounds the range. */
  stats(ownerId: number, query: StatsQuery): UsageStats;
  /** Cache sizes, for metrics and tests. */
  cacheSizes(): { found: number; missing: number };
}

export function createDirectory(store: Store, options: DirectoryOptions = {}): Directory {
  const sql = store.sql.directory;
  const now = options.now ?? Date.now;
  const cache = createKeyCache(options.maxCached ?? 50_000, options.negativeCached ?? 50_000);
  const changes = options.changes;
  const table = createEndpointTable(store, now, options.fences);

  let dataVersion = sql.dataVersion.get()!;
  const log = createKeyChangeReader(store, cache);

  /** This connection changed what the endpoint's keys grant: forgotten here through the log's row (or at once when its read fails). */
  const changedHere = (endpointId: string): void => {
    changes?.bump();
    if (!log.afterOwnWrite()) {
      cache.forgetEndpoint(endpointId);
      log.revoke(endpointId);
    }
  };

  const directory: Directory = {
    endpointByKey(apiKey) {
      if (changes?.changed()) directory.refreshIfChanged();
      const cached = cache.get(apiKey);
      if (cached === null || (cached !== undefined && (cached.keyExpiresAtMs === null || now() < cached.keyExpiresAtMs))) return cached;
      // A previous key past its end is read again (the store no longer finds it: remembered as a miss).
      if (cached !== undefined) cache.forget(apiKey);
      // Malformed keys are not remembered: a flood of them must not push real keys out of the cache.
      if (!looksLikeKey(apiKey, 'api')) return null;
      const auth = table.endpointByKey(apiKey);
      cache.remember(apiKey, auth);
      return auth;
    },

    ownerByManagementKey: table.ownerByManagementKey,
    owner: table.owner,

    refreshIfChanged() {
      const v = sql.dataVersion.get()!;
      if (v === dataVersion) return false;
      // Marked as read only once applied: a read that failed is tried again at the next call.
      log.apply();
      dataVersion = v;
      return true;
    },

    pruneChanges(nowMs, keepS) {
      return store.write(() => sql.pruneKeyChanges.run(Math.floor(nowMs / 1000) - keepS)).changes;
    },

    takeRevokedEndpointIds: log.takeRevoked,

    createEndpoint(ownerId, network, name, maxEndpoints, fences) {
      const result = table.createEndpoint(ownerId, network, name, maxEndpoints, fences);
      // A brand-new key cannot have been seen, but a remembered miss for it would hide it: be exact.
      switch (result.kind) {
        case 'created':
          cache.forget(result.apiKey);
          changes?.bump();
          log.afterOwnWrite(result.endpoint.id);
          return result;
        case 'refused':
          return result;
        default:
          return result satisfies never;
      }
    },

    patchEndpointFences(ownerId, endpointId, patch) {
      const result = table.patchEndpointFences(ownerId, endpointId, patch);
      if (result?.ok === true) changedHere(endpointId);
      return result;
    },

    rotateEndpointKey(ownerId, endpointId, graceS) {
      const result = table.rotateEndpointKey(ownerId, endpointId, graceS);
      if (result !== null) changedHere(endpointId);
      return result;
    },

    listEndpoints: table.listEndpoints,
    listEndpointsPage: table.listEndpointsPage,

    deleteEndpoint(ownerId, endpointId) {
      if (table.deleteEndpoint(ownerId, endpointId) === null) return false;
      // Refused from now on here, and its sockets closed, through its row of the log.
      changedHere(endpointId);
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
