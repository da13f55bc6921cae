import { compileFences, type FenceOptions } from '../fences/fences.js';
import { type FenceSettings, hasFences, NO_FENCES, storedFences } from '../fences/settings.js';
import type { Store } from '../store/open.js';
import type { EndpointAuthRow, EndpointRow, ManagementCallerRow, OwnerRow } from '../store/statements.js';
import { type KeyRole, storedRole } from './roles.js';
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

/** An endpoint of the operator's list (every owner's, or one's). */
export interface EndpointListRow extends EndpointRecord {
  ownerId: number;
}

/** What `patchEndpointFences` answers: the endpoint as changed, the patch's problems (nothing written), or null (no such endpoint). */
export type PatchFencesResult<P> = { ok: true; endpoint: EndpointRecord } | { ok: false; problems: P } | null;
/** How `patchEndpointFences` changes the stored settings (e.g. applyFencePatch with a request's body). */
export type FencePatcher<P> = (current: FenceSettings) => { ok: true; settings: FenceSettings } | { ok: false; problems: P };
/** What `rotateEndpointKey` answers: the new key (shown once), the endpoint, the old key's end (unix s; null: refused at once). */
export type RotateKeyResult = { apiKey: string; endpoint: EndpointRecord; previousKeyExpiresAt: number | null } | null;

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

/** The owner a management key acts as, and what the key may do there (tenancy/roles.ts). */
export interface ManagementCaller extends OwnerRecord {
  role: KeyRole;
}

export function toManagementCaller(row: ManagementCallerRow): ManagementCaller {
  return { ...toOwnerRecord(row), role: storedRole(row.role) };
}

/** The settings as both stores keep them: their JSON text, or null when they restrict and change nothing. */
export function fencesText(settings: FenceSettings): string | null {
  const text = JSON.stringify(settings);
  return text === NO_FENCES_TEXT ? null : text;
}
const NO_FENCES_TEXT = JSON.stringify(NO_FENCES);

/**
 * What a row of the key lookup grants, its restrictions compiled (once per lookup: the caches keep the
 * grant). A suspended owner's key is a grant with `suspended` set, answered 403 by the request path.
 * Throws when the stored restrictions are not valid (storedFences): the lookup fails as a store fault would.
 */
export function toEndpointAuth(row: EndpointAuthRow | null | undefined, fenceOptions: FenceOptions): EndpointAuth | null {
  if (row == null) return null;
  const settings = storedFences(row.fences);
  return {
    endpointId: row.endpointId,
    ownerId: row.ownerId,
    network: row.network,
    plan: row.plan,
    suspended: row.suspended === true || row.suspended === 1,
    fences: hasFences(settings) ? compileFences(settings, fenceOptions) : null,
    keyExpiresAtMs: row.keyExpiresAt === null ? null : row.keyExpiresAt * 1000,
  };
}

/** An endpoint's row as its owner sees it at `nowS` (unix s): a previous key past its end is no longer shown. */
export function toEndpointRecord(row: EndpointRow, nowS: number): EndpointRecord {
  const previous = row.previousKeyExpiresAt !== null && row.previousKeyExpiresAt > nowS;
  return {
    id: row.id,
    name: row.name,
    network: row.network,
    keyPrefix: row.keyPrefix,
    createdAt: row.createdAt,
    fences: storedFences(row.fences),
    previousKeyPrefix: previous ? row.previousKeyPrefix : null,
    previousKeyExpiresAt: previous ? row.previousKeyExpiresAt : null,
  };
}

/**
 * What a rotation answers, in either store: the new key (shown once), the endpoint as its owner now sees
 * it (the new key's prefix; the old one's, with `end`, while it has a grace) and the old key's end.
 */
export function rotatedKey(row: EndpointRow, key: { key: string; prefix: string }, end: number | null, nowS: number): RotateKeyResult {
  const rotated: EndpointRow = {
    ...row,
    keyPrefix: key.prefix,
    previousKeyPrefix: end === null ? null : row.keyPrefix,
    previousKeyExpiresAt: end,
  };
  return { apiKey: key.key, endpoint: toEndpointRecord(rotated, nowS), previousKeyExpiresAt: end };
}

/** Throws a RangeError unless `graceS` is a whole number of seconds, 0 or more. */
export function assertValidGrace(graceS: number): void {
  if (!Number.isSafeInteger(graceS) || graceS < 0)
    throw new RangeError(`grace_s must be a whole number of seconds, 0 or more, got ${graceS}`);
}

/**
 * Owners and their endpoints as the key lookup and the management API read and write them, on one SQLite
 * connection and without a cache: the daemon's directory caches on top of it, the account store wraps it.
 */
export interface EndpointTable {
  /**
   * What an API key grants, or null: malformed (never looked up), unknown, deleted, a previous key past its
   * end, or its owner deleted. A suspended owner's key is a grant with `suspended` set.
   */
  endpointByKey(apiKey: string): EndpointAuth | null;
  /** What the endpoint's current key grants, found by its id, or null: unknown, deleted, or its owner deleted. */
  endpointById(endpointId: string): EndpointAuth | null;
  /**
   * The owner a management key acts as, or null: malformed, unknown, revoked, or the owner deleted. A
   * suspended owner is answered (`suspended: true`), for the management API to tell it from an unknown key.
   */
  ownerByManagementKey(key: string): ManagementCaller | null;
  /** The owner, suspended or not; null when unknown or deleted. */
  owner(id: number): OwnerRecord | null;
  /**
   * Counts and inserts in one IMMEDIATE transaction, so a concurrent writer cannot take the owner past
   * `maxEndpoints`. Throws a RangeError for a `name` that `nameProblem` refuses.
   */
  createEndpoint(
    ownerId: number,
    network: string,
    name: string | undefined,
    maxEndpoints: number,
    fences?: FenceSettings,
  ): CreateEndpointResult;
  /** AccountStore.patchEndpointFences: read, patched and written in one IMMEDIATE transaction. */
  patchEndpointFences<P>(ownerId: number, endpointId: string, patch: FencePatcher<P>): PatchFencesResult<P>;
  /** AccountStore.rotateEndpointKey, in one IMMEDIATE transaction; throws a RangeError for a `graceS` below 0 or not whole. */
  rotateEndpointKey(ownerId: number, endpointId: string, graceS: number): RotateKeyResult;
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

export function createEndpointTable(
  store: Store,
  now: () => number = Date.now,
  fenceOptions: FenceOptions = { balance: false },
): EndpointTable {
  const sql = store.sql.directory;
  const seconds = (): number => Math.floor(now() / 1000);
  const createTx = store.writeTransaction(
    (ownerId: number, network: string, name: string | null, maxEndpoints: number, fences: FenceSettings): CreateEndpointResult => {
      const owner = sql.ownerById.get(ownerId);
      if (owner === undefined || owner.suspended !== 0) return { kind: 'refused', error: 'no_owner' };
      if (sql.countLiveEndpoints.get(ownerId)! >= maxEndpoints) return { kind: 'refused', error: 'limit' };
      const id = newEndpointId();
      const key = newKey('api');
      const createdAt = seconds();
      sql.insertEndpoint.run(id, ownerId, network, name, key.hash, key.prefix, createdAt, fencesText(fences));
      const endpoint: EndpointRecord = {
        id,
        name,
        network,
        keyPrefix: key.prefix,
        createdAt,
        fences,
        previousKeyPrefix: null,
        previousKeyExpiresAt: null,
      };
      return { kind: 'created', endpoint, apiKey: key.key };
    },
  );

  // The patch runs inside the transaction: what it is given is what is overwritten, whoever writes meanwhile.
  const patchTx = store.writeTransaction(<P>(ownerId: number, endpointId: string, patch: FencePatcher<P>): PatchFencesResult<P> => {
    const row = sql.liveEndpoint.get(endpointId, ownerId);
    if (row === undefined) return null;
    const next = patch(storedFences(row.fences));
    if (!next.ok) return next;
    const text = fencesText(next.settings);
    if (text !== row.fences) sql.setFences.run(text, endpointId);
    return { ok: true, endpoint: toEndpointRecord({ ...row, fences: text }, seconds()) };
  });

  const rotateTx = store.writeTransaction((ownerId: number, endpointId: string, graceS: number): RotateKeyResult => {
    const row = sql.liveEndpoint.get(endpointId, ownerId);
    if (row === undefined) return null;
    const key = newKey('api');
    const nowS = seconds();
    const end = graceS === 0 ? null : nowS + graceS;
    sql.rotateKey.run(end, end, end, key.hash, key.prefix, endpointId);
    return rotatedKey(row, key, end, nowS);
  });

  return {
    endpointByKey(apiKey) {
      if (!looksLikeKey(apiKey, 'api')) return null;
      const hash = hashKey(apiKey);
      return toEndpointAuth(sql.endpointByKeyHash.get(hash, hash, seconds()), fenceOptions);
    },
    endpointById(endpointId) {
      return toEndpointAuth(sql.endpointById.get(endpointId), fenceOptions);
    },
    ownerByManagementKey(key) {
      if (!looksLikeKey(key, 'management')) return null;
      const row = sql.ownerByManagementKeyHash.get(hashKey(key));
      return row === undefined ? null : toManagementCaller(row);
    },
    owner(id) {
      const row = sql.ownerById.get(id);
      return row === undefined ? null : toOwnerRecord(row);
    },
    createEndpoint(ownerId, network, name, maxEndpoints, fences = NO_FENCES) {
      if (name !== undefined) assertValidName(name, 'endpoint name');
      // IMMEDIATE: the count and the insert must see the same state, even with the CLI writing.
      return createTx(ownerId, network, name ?? null, maxEndpoints, fences);
    },
    patchEndpointFences: (ownerId, endpointId, patch) => patchTx(ownerId, endpointId, patch),
    rotateEndpointKey(ownerId, endpointId, graceS) {
      assertValidGrace(graceS);
      return rotateTx(ownerId, endpointId, graceS);
    },
    listEndpoints: (ownerId) => sql.listEndpoints.all(ownerId).map((row) => toEndpointRecord(row, seconds())),
    listEndpointsPage: (ownerId, limit, after) =>
      sql.listEndpointsAfter.all(ownerId, after?.createdAt ?? -1, after?.id ?? '', limit).map((row) => toEndpointRecord(row, seconds())),
    deleteEndpoint: (ownerId, endpointId) => store.write(() => sql.deleteEndpoint.get(seconds(), endpointId, ownerId)) ?? null,
  };
}
