import { failureAnswer } from '../metering/failure-ring.js';
import type { PgStore } from '../store/pg-open.js';
import { FAILURES_SQL, type FailureDbRow } from '../store/statements.js';
import type { AccountStore, AccountStoreOptions } from './account-store.js';
import { createPgEndpointTable } from './pg-endpoints.js';
import { createPgOwnerAdmin } from './pg-owners.js';
import { createPgWebhooks } from './pg-webhooks.js';

/**
 * The account store of a fleet, in the PostgreSQL database every instance shares. Writes are transactions
 * that lock the owner's row where SQLite takes its write lock, and a write that changes what a key grants
 * tells every instance when it commits (pg-changes.ts). Values are always bound as parameters.
 */
export function createPostgresAccounts(pg: PgStore, options: AccountStoreOptions = {}): AccountStore {
  const now = options.now ?? Date.now;
  const seconds = (): number => Math.floor(now() / 1000);
  return {
    kind: 'postgres',
    ...createPgOwnerAdmin(pg.pool, seconds),
    ...createPgEndpointTable(pg.pool, seconds, options.fences),
    webhooks: createPgWebhooks(pg.pool, seconds),
    failures: async (ownerId, endpointId, limit) =>
      (await pg.pool.query<FailureDbRow>(FAILURES_SQL, [endpointId, ownerId, limit])).rows.map(failureAnswer),
    async close() {
      if (!pg.pool.ending) await pg.close();
    },
  };
}
