import { readFailures } from '../metering/failure-ring.js';
import { readUsageStats } from '../metering/stats.js';
import type { Store } from '../store/open.js';
import type { Directory } from '../tenancy/directory.js';
import { createEndpointTable } from '../tenancy/endpoints.js';
import { createOwnerAdmin } from '../tenancy/owners.js';
import type { AccountStore, AccountStoreOptions } from './account-store.js';
import { createSqliteWebhooks } from './sqlite-webhooks.js';

/**
 * The account store of the embedded SQLite file: the synchronous owner admin (tenancy/owners.ts) and
 * endpoint table (tenancy/endpoints.ts) on `store`'s connection, each answer in a settled Promise. A
 * thrown error (a RangeError, a SqliteError) becomes a rejection, never an exception of the call itself.
 */
export function createSqliteAccounts(store: Store, options: AccountStoreOptions = {}): AccountStore {
  const now = options.now ?? Date.now;
  const admin = createOwnerAdmin(store, now);
  const endpoints = createEndpointTable(store, now, options.fences);
  return {
    kind: 'sqlite',
    createOwner: async (name, plan, ru) => admin.createOwner(name, plan, ru),
    listOwners: async () => admin.listOwners(),
    topUp: async (ownerId, ru) => admin.topUp(ownerId, ru),
    setPlan: async (ownerId, plan) => admin.setPlan(ownerId, plan),
    setSuspended: async (ownerId, suspended) => admin.setSuspended(ownerId, suspended),
    deleteOwner: async (ownerId) => admin.deleteOwner(ownerId),
    createManagementKey: async (ownerId, role) => admin.createManagementKey(ownerId, role),
    listManagementKeys: async (ownerId) => admin.listManagementKeys(ownerId),
    revokeManagementKey: async (ownerId, prefix) => admin.revokeManagementKey(ownerId, prefix),
    ownerByManagementKey: async (key) => endpoints.ownerByManagementKey(key),
    owner: async (id) => endpoints.owner(id),
    endpointByKey: async (apiKey) => endpoints.endpointByKey(apiKey),
    endpointById: async (endpointId) => endpoints.endpointById(endpointId),
    createEndpoint: async (ownerId, network, name, maxEndpoints, fences) =>
      endpoints.createEndpoint(ownerId, network, name, maxEndpoints, fences),
    patchEndpointFences: async (ownerId, endpointId, patch) => endpoints.patchEndpointFences(ownerId, endpointId, patch),
    rotateEndpointKey: async (ownerId, endpointId, graceS) => endpoints.rotateEndpointKey(ownerId, endpointId, graceS),
    listEndpoints: async (ownerId) => endpoints.listEndpoints(ownerId),
    listEndpointsPage: async (ownerId, limit, after) => endpoints.listEndpointsPage(ownerId, limit, after),
    listAllEndpoints: async (ownerId) => admin.listEndpoints(ownerId),
    deleteEndpoint: async (ownerId, endpointId) => endpoints.deleteEndpoint(ownerId, endpointId) !== null,
    webhooks: createSqliteWebhooks(store, now),
    stats: async (ownerId, query) => readUsageStats(store.sql, ownerId, query),
    failures: async (ownerId, endpointId, limit) => readFailures(store.sql, ownerId, endpointId, limit),
    close: async () => store.close(),
  };
}

/**
 * The account store a single-machine daemon serves the management API from, on the connection its tenancy
 * owns: endpoints are made, found and deleted through `directory`, so its key cache and the sockets of a
 * deleted key follow at once (`refreshIfChanged` reads `data_version`, which a write on the same connection
 * does not move). Owner writes (suspend, plan, delete) are the CLI's, on a connection of its own, which the
 * directory sees. close() leaves the store open: the tenancy closes it. `options` should be the directory's
 * (its clock and how it compiles restrictions), so both answer a key alike.
 */
export function createDaemonSqliteAccounts(store: Store, directory: Directory, options: AccountStoreOptions = {}): AccountStore {
  return {
    ...createSqliteAccounts(store, options),
    endpointByKey: async (apiKey) => directory.endpointByKey(apiKey),
    createEndpoint: async (ownerId, network, name, maxEndpoints, fences) =>
      directory.createEndpoint(ownerId, network, name, maxEndpoints, fences),
    patchEndpointFences: async (ownerId, endpointId, patch) => directory.patchEndpointFences(ownerId, endpointId, patch),
    rotateEndpointKey: async (ownerId, endpointId, graceS) => directory.rotateEndpointKey(ownerId, endpointId, graceS),
    deleteEndpoint: async (ownerId, endpointId) => directory.deleteEndpoint(ownerId, endpointId),
    close: async () => {},
  };
}
