import { readUsageStats } from '../metering/stats.js';
import type { Store } from '../store/open.js';
import { createEndpointTable } from '../tenancy/endpoints.js';
import { createOwnerAdmin } from '../tenancy/owners.js';
import type { AccountStore, AccountStoreOptions } from './account-store.js';

/**
 * The account store of the embedded SQLite file: the synchronous owner admin (tenancy/owners.ts) and
 * endpoint table (tenancy/endpoints.ts) on `store`'s connection, each answer in a settled Promise. A
 * thrown error (a RangeError, a SqliteError) becomes a rejection, never an exception of the call itself.
 */
export function createSqliteAccounts(store: Store, options: AccountStoreOptions = {}): AccountStore {
  const now = options.now ?? Date.now;
  const admin = createOwnerAdmin(store, now);
  const endpoints = createEndpointTable(store, now);
  return {
    kind: 'sqlite',
    createOwner: async (name, plan, ru) => admin.createOwner(name, plan, ru),
    listOwners: async () => admin.listOwners(),
    topUp: async (ownerId, ru) => admin.topUp(ownerId, ru),
    setPlan: async (ownerId, plan) => admin.setPlan(ownerId, plan),
    setSuspended: async (ownerId, suspended) => admin.setSuspended(ownerId, suspended),
    deleteOwner: async (ownerId) => admin.deleteOwner(ownerId),
    createManagementKey: async (ownerId) => admin.createManagementKey(ownerId),
    listManagementKeys: async (ownerId) => admin.listManagementKeys(ownerId),
    revokeManagementKey: async (ownerId, prefix) => admin.revokeManagementKey(ownerId, prefix),
    ownerByManagementKey: async (key) => endpoints.ownerByManagementKey(key),
    owner: async (id) => endpoints.owner(id),
    endpointByKey: async (apiKey) => endpoints.endpointByKey(apiKey),
    createEndpoint: async (ownerId, network, name, maxEndpoints) => endpoints.createEndpoint(ownerId, network, name, maxEndpoints),
    listEndpoints: async (ownerId) => endpoints.listEndpoints(ownerId),
    listEndpointsPage: async (ownerId, limit, after) => endpoints.listEndpointsPage(ownerId, limit, after),
    listAllEndpoints: async (ownerId) => admin.listEndpoints(ownerId),
    deleteEndpoint: async (ownerId, endpointId) => endpoints.deleteEndpoint(ownerId, endpointId) !== null,
    stats: async (ownerId, query) => readUsageStats(store.sql, ownerId, query),
    close: async () => store.close(),
  };
}
