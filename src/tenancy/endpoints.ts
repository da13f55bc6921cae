import type { FenceSettings } from '../fences/settings.js';
import type { Store } from '../store/open.js';
import type { EndpointAuthRow, OwnerRow } from '../store/statements.js';
import type { EndpointAuth } from './key-cache.js';
import { hashKey, looksLikeKey, newKey, randomString } from './keys.js';
import { assertValidName } from './names.js';

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
  /** The restrictions as the owner set them (fences/settings.ts); NO_FENCES when none. */
  fences: FenceSettings;
  /** After a rotation with a grace period: the previous key's first characters and its end (unix s); else null. */
  previousKeyPrefix: string | null;
  previousKeyExpiresAt: number | null;
}

export type CreateEndpointResult =
  | { kind: 'created'; endpoint: EndpointRecord; apiKey: string }
  /** `limit`: the owner has `maxEndpoints` live endpoints; `no_owner`: deleted or suspended meanwhile. */
  | { kind: 'refused'; error: 'limit' | 'no_owner' };

/** Where a page of an owner's endpoints starts: after the endpoint with this creation time and id. */
export interface EndpointCursor {
  createdAt: number;
  id: string;
}

const ENDPOINT_ID_ALPHABET = 'abcdefghijklmnopqrstuvwxyz234567';

/** A new endpoint id: `ep_` and 16 base32 characters (80 bits), so ids never collide in practice. */
export function newEndpointId(): string {
  return `ep_${randomString(16, ENDPOINT_ID_ALPHABET)}`;
}

export function toOwnerRecord(row: OwnerRow): OwnerRecord {
  return { id: row.id, name: row.name, plan: row.plan, ruBalance: row.ruBalance, suspended: row.suspended !== 0 };
}

function toEndpointAuth(row: EndpointAuthRow | undefined): EndpointAuth | null {
  return row === undefined ? null : { endpointId: row.endpointId, ownerId: row.ownerId, network: row.network, plan: row.plan };
}

/**
 * Owners and their endpoints as the key lookup and the management API read and write them, on one SQLite
 * connection and without a cache: the daemon's directory caches on top of it, the account store wraps it.
 */
export interface EndpointTable {
  /** What an API key grants, or null: malformed (never looked up), unknown, deleted, or its owner suspended or deleted. */
  endpointByKey(apiKey: string): EndpointAuth | null;
  /** What the endpoint grants, found by its id, or null: unknown, deleted, or its owner suspended or deleted. */
  endpointById(endpointId: string): EndpointAuth | null;
  /** The owner a management key acts as, or null: malformed, unknown, revoked, or the owner suspended or deleted. */
  ownerByManagementKey(key: string): OwnerRecord | null;
  /** The owner, suspended or not; null when unknown or deleted. */
  owner(id: number): OwnerRecord | null;
  /**
   * Counts and inserts in one IMMEDIATE transaction, so a concurrent writer cannot take the owner past
   * `maxEndpoints`. Throws a RangeError for a `name` that `nameProblem` refuses.
   */
  createEndpoint(ownerId: number, network: string, name: string | undefined, maxEndpoints: number): CreateEndpointResult;
  /** The owner's live endpoints, oldest first (created_at, then id). */
  listEndpoints(ownerId: number): EndpointRecord[];
  /** At most `limit` of the owner's live endpoints in the same order, after `after`, or from the first. */
  listEndpointsPage(ownerId: number, limit: number, after?: EndpointCursor): EndpointRecord[];
  /**
   * The deletion's sequence number (endpoints.deleted_seq), or null when the endpoint is unknown, already
   * deleted or another owner's: the same answer for all.
   */
  deleteEndpoint(ownerId: number, endpointId: string): number | null;
}

export function createEndpointTable(store: Store, now: () => number = Date.now): EndpointTable {
  const sql = store.sql.directory;
  const createTx = store.writeTransaction(
    (ownerId: number, network: string, name: string | null, maxEndpoints: number): CreateEndpointResult => {
      const owner = sql.ownerById.get(ownerId);
      if (owner === undefined || owner.suspended !== 0) return { kind: 'refused', error: 'no_owner' };
      if (sql.countLiveEndpoints.get(ownerId)! >= maxEndpoints) return { kind: 'refused', error: 'limit' };
      const id = newEndpointId();
      const key = newKey('api');
      const createdAt = Math.floor(now() / 1000);
      sql.insertEndpoint.run(id, ownerId, network, name, key.hash, key.prefix, createdAt);
      return { kind: 'created', endpoint: { id, name, network, keyPrefix: key.prefix, createdAt }, apiKey: key.key };
    },
  );

  return {
    endpointByKey(apiKey) {
      if (!looksLikeKey(apiKey, 'api')) return null;
      return toEndpointAuth(sql.endpointByKeyHash.get(hashKey(apiKey)));
    },
    endpointById(endpointId) {
      return toEndpointAuth(sql.endpointById.get(endpointId));
    },
    ownerByManagementKey(key) {
      if (!looksLikeKey(key, 'management')) return null;
      const row = sql.ownerByManagementKeyHash.get(hashKey(key));
      return row === undefined ? null : toOwnerRecord(row);
    },
    owner(id) {
      const row = sql.ownerById.get(id);
      return row === undefined ? null : toOwnerRecord(row);
    },
    createEndpoint(ownerId, network, name, maxEndpoints) {
      if (name !== undefined) assertValidName(name, 'endpoint name');
      // IMMEDIATE: the count and the insert must see the same state, even with the CLI writing.
      return createTx(ownerId, network, name ?? null, maxEndpoints);
    },
    listEndpoints: (ownerId) => sql.listEndpoints.all(ownerId),
    listEndpointsPage: (ownerId, limit, after) => sql.listEndpointsAfter.all(ownerId, after?.createdAt ?? -1, after?.id ?? '', limit),
    deleteEndpoint: (ownerId, endpointId) =>
      store.write(() => sql.deleteEndpoint.get(Math.floor(now() / 1000), endpointId, ownerId)) ?? null,
  };
}
