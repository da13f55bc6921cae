import type { Store } from '../store/open.js';
import type { ManagementKeyRow } from '../store/statements.js';
import { type EndpointListRow, toEndpointRecord } from './endpoints.js';
import { newKey } from './keys.js';
import { assertValidName } from './names.js';
import { DEFAULT_KEY_ROLE, type KeyRole } from './roles.js';

/**
 * The largest RU amount and the largest balance: 2^53 - 1. better-sqlite3 binds JS numbers as doubles,
 * so the ledger's relative debit (`ru_balance - ?`) is computed in floating point; above this a balance
 * would round (the invariant drifted by whole RU) and read back inexactly. Top-ups that would take a
 * balance past it are refused.
 */
export const MAX_RU = Number.MAX_SAFE_INTEGER;

/** An owner as the operator lists it. */
export interface OwnerSummary {
  id: number;
  name: string;
  plan: string;
  ruBalance: number;
  suspended: boolean;
  /** Unix seconds. */
  createdAt: number;
  /** Live (not deleted) endpoints. */
  endpoints: number;
}

export type RevokeResult = 'revoked' | 'no_owner' | 'no_key' | 'ambiguous';

/** The new stored balance; `over_max`: the credit would take the balance (`balance`, unchanged) past MAX_RU. */
export type TopUpResult =
  | { kind: 'credited'; balance: number }
  | { kind: 'refused'; error: 'no_owner' }
  | { kind: 'refused'; error: 'over_max'; balance: number };

/**
 * The operator's actions on owners (the CLI), on their own connection next to the running daemon.
 * Each is one transaction; the daemon notices through `PRAGMA data_version`. Plans are checked by the
 * caller, which has the configuration. Deleted owners stay in the file (so usage and credits keep
 * their meaning) but are invisible here: every action on one answers as for an unknown id.
 */
export interface OwnerAdmin {
  /**
   * Creates the owner with `ru` as its first credit, and its first management key (shown once).
   * Throws a RangeError for a name `nameProblem` refuses or an `ru` that is not an integer from 0 to MAX_RU.
   */
  createOwner(name: string, plan: string, ru: number): { id: number; managementKey: string };
  listOwners(): OwnerSummary[];
  /** Credits `ru` (recorded in `credits`). Throws a RangeError for an `ru` that is not an integer from 1 to MAX_RU. */
  topUp(ownerId: number, ru: number): TopUpResult;
  setPlan(ownerId: number, plan: string): boolean;
  /** A new management key with `role` (default admin), shown once; null for an unknown owner. */
  createManagementKey(ownerId: number, role?: KeyRole): string | null;
  /** The owner's management keys by prefix, revoked ones included; null for an unknown owner. */
  listManagementKeys(ownerId: number): ManagementKeyRow[] | null;
  /** Revokes the owner's one live key starting with `prefix` (its KEY_PREFIX_LENGTH first characters). */
  revokeManagementKey(ownerId: number, prefix: string): RevokeResult;
  setSuspended(ownerId: number, suspended: boolean): boolean;
  /** Deletes the owner, its endpoints and its management keys; the endpoints deleted, or null for an unknown owner. */
  deleteOwner(ownerId: number): { endpoints: number } | null;
  /** Live endpoints, of one owner or of all. */
  listEndpoints(ownerId?: number): EndpointListRow[];
}

/** Throws a RangeError unless `ru` is an integer from `min` to MAX_RU. */
export function assertValidRu(ru: number, min: 0 | 1): void {
  if (!Number.isSafeInteger(ru) || ru < min) throw new RangeError(`RU amount must be an integer from ${min} to ${MAX_RU}, got ${ru}`);
}

export function createOwnerAdmin(store: Store, now: () => number = Date.now): OwnerAdmin {
  const sql = store.sql.admin;
  const dir = store.sql.directory;
  const seconds = (): number => Math.floor(now() / 1000);
  const exists = (ownerId: number): boolean => dir.ownerById.get(ownerId) !== undefined;

  const createOwnerTx = store.writeTransaction((name: string, plan: string, ru: number) => {
    const at = seconds();
    const id = Number(sql.insertOwner.run(name, plan, ru, at).lastInsertRowid);
    // The opening balance is a credit like any other, so the ledger invariant holds from the start.
    if (ru > 0) sql.insertCredit.run(id, ru, at);
    const key = newKey('management');
    sql.insertManagementKey.run(key.hash, id, key.prefix, at, DEFAULT_KEY_ROLE);
    return { id, managementKey: key.key };
  });

  const topUpTx = store.writeTransaction((ownerId: number, ru: number): TopUpResult => {
    const balance = dir.ownerById.get(ownerId)?.ruBalance;
    if (balance === undefined) return { kind: 'refused', error: 'no_owner' };
    // The stored balance is the most the owner can have (the daemon's unflushed debits only lower it).
    // Both are safe integers, so the sum is exact up to MAX_RU and at least MAX_RU + 1 beyond it.
    if (balance + ru > MAX_RU) return { kind: 'refused', error: 'over_max', balance };
    sql.credit.run(ru, ownerId);
    sql.insertCredit.run(ownerId, ru, seconds());
    return { kind: 'credited', balance: balance + ru };
  });

  const createKeyTx = store.writeTransaction((ownerId: number, role: KeyRole): string | null => {
    if (!exists(ownerId)) return null;
    const key = newKey('management');
    sql.insertManagementKey.run(key.hash, ownerId, key.prefix, seconds(), role);
    return key.key;
  });

  const revokeTx = store.writeTransaction((ownerId: number, prefix: string): RevokeResult => {
    if (!exists(ownerId)) return 'no_owner';
    const matches = sql.countLiveKeysWithPrefix.get(ownerId, prefix)!;
    if (matches === 0) return 'no_key';
    if (matches > 1) return 'ambiguous';
    sql.revokeKeysWithPrefix.run(seconds(), ownerId, prefix);
    return 'revoked';
  });

  const deleteOwnerTx = store.writeTransaction((ownerId: number): { endpoints: number } | null => {
    const at = seconds();
    if (sql.deleteOwner.run(at, ownerId).changes === 0) return null;
    sql.revokeAllKeys.run(at, ownerId);
    // One by one, so each deletion gets its own sequence number for the daemon to pick up.
    const ids = dir.liveEndpointIds.all(ownerId);
    for (const id of ids) dir.deleteEndpoint.get(at, id, ownerId);
    return { endpoints: ids.length };
  });

  return {
    createOwner: (name, plan, ru) => {
      assertValidName(name, 'owner name');
      assertValidRu(ru, 0);
      return createOwnerTx(name, plan, ru);
    },
    listOwners: () => sql.listOwners.all().map((o) => ({ ...o, suspended: o.suspended !== 0 })),
    topUp: (ownerId, ru) => {
      assertValidRu(ru, 1);
      return topUpTx(ownerId, ru);
    },
    setPlan: (ownerId, plan) => store.write(() => sql.setPlan.run(plan, ownerId)).changes === 1,
    createManagementKey: (ownerId, role = DEFAULT_KEY_ROLE) => createKeyTx(ownerId, role),
    listManagementKeys: (ownerId) => (exists(ownerId) ? sql.listManagementKeys.all(ownerId) : null),
    revokeManagementKey: (ownerId, prefix) => revokeTx(ownerId, prefix),
    setSuspended: (ownerId, suspended) => store.write(() => sql.setSuspended.run(suspended ? 1 : 0, ownerId)).changes === 1,
    deleteOwner: (ownerId) => deleteOwnerTx(ownerId),
    listEndpoints: (ownerId) =>
      sql.listAllEndpoints
        .all(ownerId ?? null, ownerId ?? null)
        .map((row) => ({ ownerId: row.ownerId, ...toEndpointRecord(row, seconds()) })),
  };
}
