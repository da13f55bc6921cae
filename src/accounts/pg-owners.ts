import type pg from 'pg';
import { inPgTransaction } from '../store/pg-transaction.js';
import type { ManagementKeyRow } from '../store/statements.js';
import type { OwnerRecord } from '../tenancy/endpoints.js';
import { newKey } from '../tenancy/keys.js';
import { assertValidName } from '../tenancy/names.js';
import { DEFAULT_KEY_ROLE, type KeyRole } from '../tenancy/roles.js';
import { assertValidRu, MAX_RU, type OwnerSummary, type RevokeResult, type TopUpResult } from '../tenancy/owners.js';
import type { AccountStore } from './account-store.js';
import { notifyChange } from './pg-changes.js';

// Owner ids are compared as `$n::bigint` where a caller's id meets the INTEGER column: an id past 2^31 - 1
// (any positive safe integer passes the CLI) is then an unknown owner, as in SQLite, not a range error.

/** The columns of an OwnerRecord read from `table`; quoted aliases, since PostgreSQL folds unquoted ones to lower case. */
export function ownerColumns(table = 'owners'): string {
  return `${table}.id, ${table}.name, ${table}.plan, ${table}.ru_balance AS "ruBalance", ${table}.suspended`;
}

/**
 * The live owner `ownerId`, its row locked until the transaction of `client` ends, or null when unknown
 * or deleted. Every write that depends on the owner's state takes this first, so writers of one owner
 * take turns; a deletion committed while waiting is seen (the row is read again under the lock).
 */
export async function lockOwner(client: pg.ClientBase, ownerId: number): Promise<OwnerRecord | null> {
  const { rows } = await client.query<OwnerRecord>(
    `SELECT ${ownerColumns()} FROM owners WHERE id = $1::bigint AND deleted_at IS NULL FOR UPDATE`,
    [ownerId],
  );
  return rows[0] ?? null;
}

/** The operator's actions on owners and management keys: tenancy/owners.ts's, in PostgreSQL. */
export type PgOwnerAdmin = Pick<
  AccountStore,
  | 'createOwner'
  | 'listOwners'
  | 'topUp'
  | 'setPlan'
  | 'setSuspended'
  | 'deleteOwner'
  | 'createManagementKey'
  | 'listManagementKeys'
  | 'revokeManagementKey'
>;

export function createPgOwnerAdmin(pool: pg.Pool, seconds: () => number): PgOwnerAdmin {
  const exists = async (ownerId: number): Promise<boolean> =>
    (await pool.query('SELECT 1 FROM owners WHERE id = $1::bigint AND deleted_at IS NULL', [ownerId])).rowCount === 1;

  const insertManagementKey = async (client: pg.ClientBase, ownerId: number, at: number, role: KeyRole): Promise<string> => {
    const key = newKey('management');
    await client.query('INSERT INTO management_keys (key_hash, owner_id, key_prefix, created_at, role) VALUES ($1, $2, $3, $4, $5)', [
      key.hash,
      ownerId,
      key.prefix,
      at,
      role,
    ]);
    return key.key;
  };

  /** Changes one column of a live owner and tells the fleet, in one transaction; false for an unknown owner. */
  const updateOwner = (ownerId: number, column: 'plan' | 'suspended', value: string | boolean): Promise<boolean> =>
    inPgTransaction(pool, async (client) => {
      const { rowCount } = await client.query(`UPDATE owners SET ${column} = $1 WHERE id = $2::bigint AND deleted_at IS NULL`, [
        value,
        ownerId,
      ]);
      if (rowCount !== 1) return false;
      await notifyChange(client, { kind: 'owner_changed', ownerId });
      return true;
    });

  return {
    async createOwner(name, plan, ru) {
      assertValidName(name, 'owner name');
      assertValidRu(ru, 0);
      return inPgTransaction(pool, async (client) => {
        const at = seconds();
        const { rows } = await client.query<{ id: number }>(
          'INSERT INTO owners (name, plan, ru_balance, created_at) VALUES ($1, $2, $3, $4) RETURNING id',
          [name, plan, ru, at],
        );
        const id = rows[0]!.id;
        // The opening balance is a credit like any other, so the ledger invariant holds from the start.
        if (ru > 0) await client.query('INSERT INTO credits (owner_id, ru, at) VALUES ($1, $2, $3)', [id, ru, at]);
        return { id, managementKey: await insertManagementKey(client, id, at, DEFAULT_KEY_ROLE) };
      });
    },

    async listOwners() {
      const { rows } = await pool.query<OwnerSummary>(`
        SELECT o.id, o.name, o.plan, o.ru_balance AS "ruBalance", o.suspended, o.created_at AS "createdAt",
          (SELECT count(*) FROM endpoints e WHERE e.owner_id = o.id AND e.deleted_at IS NULL) AS endpoints
        FROM owners o WHERE o.deleted_at IS NULL ORDER BY o.id`);
      return rows;
    },

    async topUp(ownerId, ru) {
      assertValidRu(ru, 1);
      return inPgTransaction(pool, async (client): Promise<TopUpResult> => {
        const owner = await lockOwner(client, ownerId);
        if (owner === null) return { kind: 'refused', error: 'no_owner' };
        // As in SQLite: both are safe integers, so the sum is exact up to MAX_RU and at least MAX_RU + 1 beyond it.
        const balance = owner.ruBalance;
        if (balance + ru > MAX_RU) return { kind: 'refused', error: 'over_max', balance };
        await client.query('UPDATE owners SET ru_balance = ru_balance + $1 WHERE id = $2', [ru, ownerId]);
        await client.query('INSERT INTO credits (owner_id, ru, at) VALUES ($1, $2, $3)', [ownerId, ru, seconds()]);
        return { kind: 'credited', balance: balance + ru };
      });
    },

    setPlan: (ownerId, plan) => updateOwner(ownerId, 'plan', plan),
    setSuspended: (ownerId, suspended) => updateOwner(ownerId, 'suspended', suspended),

    deleteOwner: (ownerId) =>
      inPgTransaction(pool, async (client) => {
        const at = seconds();
        const owner = await client.query('UPDATE owners SET deleted_at = $1 WHERE id = $2::bigint AND deleted_at IS NULL', [at, ownerId]);
        if (owner.rowCount !== 1) return null;
        await client.query('UPDATE management_keys SET revoked_at = $1 WHERE owner_id = $2 AND revoked_at IS NULL', [at, ownerId]);
        // Each deletion its own number, as when deleted one by one.
        const endpoints = await client.query(
          `UPDATE endpoints SET deleted_at = $1, deleted_seq = nextval('endpoint_deletions') WHERE owner_id = $2 AND deleted_at IS NULL`,
          [at, ownerId],
        );
        // One notice for the owner covers its endpoints: every key of the owner is to be read again.
        await notifyChange(client, { kind: 'owner_changed', ownerId });
        return { endpoints: endpoints.rowCount ?? 0 };
      }),

    createManagementKey: (ownerId, role = DEFAULT_KEY_ROLE) =>
      inPgTransaction(pool, async (client) =>
        (await lockOwner(client, ownerId)) === null ? null : insertManagementKey(client, ownerId, seconds(), role),
      ),

    async listManagementKeys(ownerId) {
      if (!(await exists(ownerId))) return null;
      const { rows } = await pool.query<ManagementKeyRow>(
        `SELECT key_prefix AS "keyPrefix", created_at AS "createdAt", revoked_at AS "revokedAt", role
        FROM management_keys WHERE owner_id = $1 ORDER BY created_at, key_prefix COLLATE "C"`,
        [ownerId],
      );
      return rows;
    },

    revokeManagementKey: (ownerId, prefix) =>
      inPgTransaction(pool, async (client): Promise<RevokeResult> => {
        if ((await lockOwner(client, ownerId)) === null) return 'no_owner';
        const { rows } = await client.query<{ n: number }>(
          'SELECT count(*) AS n FROM management_keys WHERE owner_id = $1 AND key_prefix = $2 AND revoked_at IS NULL',
          [ownerId, prefix],
        );
        const matches = rows[0]!.n;
        if (matches === 0) return 'no_key';
        if (matches > 1) return 'ambiguous';
        await client.query('UPDATE management_keys SET revoked_at = $1 WHERE owner_id = $2 AND key_prefix = $3 AND revoked_at IS NULL', [
          seconds(),
          ownerId,
          prefix,
        ]);
        return 'revoked';
      }),
  };
}
