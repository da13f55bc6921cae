import type { FailureAnswer, UsageStats } from '../api-answers.js';
import type { PlanConfig } from '../config/schema.js';
import type { FenceOptions } from '../fences/fences.js';
import type { FenceSettings } from '../fences/settings.js';
import type { StatsQuery } from '../metering/stats.js';
import type { ManagementKeyRow } from '../store/statements.js';
import type {
  CreateEndpointResult,
  EndpointCursor,
  EndpointListRow,
  EndpointRecord,
  ManagementCaller,
  OwnerRecord,
} from '../tenancy/endpoints.js';
import type { KeyRole } from '../tenancy/roles.js';
import type { WebhookStore } from './webhook-store.js';
import type { EndpointAuth } from '../tenancy/key-cache.js';
import type { OwnerSummary, RevokeResult, TopUpResult } from '../tenancy/owners.js';

export type { StatsQuery } from '../metering/stats.js';
export type { ManagementKeyRow } from '../store/statements.js';
export type {
  CreateEndpointResult,
  EndpointCursor,
  EndpointListRow,
  EndpointRecord,
  ManagementCaller,
  OwnerRecord,
} from '../tenancy/endpoints.js';
export type { KeyRole } from '../tenancy/roles.js';
export type { EndpointAuth } from '../tenancy/key-cache.js';
export type { OwnerSummary, RevokeResult, TopUpResult } from '../tenancy/owners.js';

/**
 * Owners, their management keys and endpoints, and their usage, as the CLI, the management API and the
 * daemon's key lookup use them, in the embedded SQLite file or in the fleet's PostgreSQL: both answer
 * alike (test/accounts/account-store.test.ts runs one table of cases against each). Balances as the ledger
 * spends them, usage writes and roll-ups are the ledger's, not this store's.
 *
 * Every method answers with a Promise. Expected outcomes are results (null, false, an `error` member); a
 * RangeError rejects a name that `nameProblem` refuses or an RU amount out of range, before anything is
 * written; any other rejection is the store failing (SQLITE_BUSY, a lost connection), and then nothing
 * of the call was written. Deleted owners stay in the store (usage and credits keep their meaning) but
 * every call answers for one as for an unknown id. Times are unix seconds from the store's `now`.
 */
export interface AccountStore {
  readonly kind: 'sqlite' | 'postgres';

  /**
   * Creates the owner with `ru` as its first credit, and its first management key (shown once). Rejects
   * with a RangeError for a name `nameProblem` refuses or an `ru` that is not an integer from 0 to MAX_RU.
   */
  createOwner(name: string, plan: string, ru: number): Promise<{ id: number; managementKey: string }>;
  /** Live owners, by id. */
  listOwners(): Promise<OwnerSummary[]>;
  /** Credits `ru` (recorded in `credits`). Rejects with a RangeError for an `ru` that is not an integer from 1 to MAX_RU. */
  topUp(ownerId: number, ru: number): Promise<TopUpResult>;
  /** False for an unknown owner. Plans are checked by the caller, which has the configuration. */
  setPlan(ownerId: number, plan: string): Promise<boolean>;
  /** False for an unknown owner; true also when it already was as asked. */
  setSuspended(ownerId: number, suspended: boolean): Promise<boolean>;
  /** Deletes the owner, its endpoints and its management keys; the endpoints deleted, or null for an unknown owner. */
  deleteOwner(ownerId: number): Promise<{ endpoints: number } | null>;

  /** A new management key with `role` (default admin: tenancy/roles.ts), shown once; null for an unknown owner. */
  createManagementKey(ownerId: number, role?: KeyRole): Promise<string | null>;
  /** The owner's management keys by prefix, oldest first, revoked ones included; null for an unknown owner. */
  listManagementKeys(ownerId: number): Promise<ManagementKeyRow[] | null>;
  /** Revokes the owner's one live key starting with `prefix` (its KEY_PREFIX_LENGTH first characters). */
  revokeManagementKey(ownerId: number, prefix: string): Promise<RevokeResult>;
  /**
   * The owner a management key acts as, or null: malformed, unknown, revoked, or the owner deleted. A
   * suspended owner is answered with `suspended: true`: the management API answers it 403 `owner_suspended`.
   */
  ownerByManagementKey(key: string): Promise<ManagementCaller | null>;
  /** The owner, suspended or not; null when unknown or deleted. */
  owner(id: number): Promise<OwnerRecord | null>;

  /**
   * What an API key grants, or null: malformed (checked first, never looked up), unknown, deleted, its owner
   * deleted, or a previous key (kept after a rotation) past its end; a previous key before its end answers
   * with `keyExpiresAtMs`. A suspended owner's key answers with `suspended: true` (403, not 401). The
   * restrictions come compiled. Uncached: the daemon keeps its own cache in front.
   */
  endpointByKey(apiKey: string): Promise<EndpointAuth | null>;
  /**
   * What the endpoint's current key grants, found by its id, or null: unknown, deleted, or its owner deleted
   * (`suspended` as `endpointByKey` says). A fleet instance asks it to tell a real deletion from a forged
   * notice when it does not hold the endpoint's key (fleet-keys.ts).
   */
  endpointById(endpointId: string): Promise<EndpointAuth | null>;
  /**
   * A new endpoint and its API key (shown once). The owner's count and the insert are one transaction, so
   * writers racing (CLI, API, other instances) never take an owner past `maxEndpoints`. Rejects with a
   * RangeError for a `name` that `nameProblem` refuses.
   */
  createEndpoint(
    ownerId: number,
    network: string,
    name: string | undefined,
    maxEndpoints: number,
    fences?: FenceSettings,
  ): Promise<CreateEndpointResult>;
  /**
   * Changes the endpoint's restrictions: `patch` is given the stored settings and returns the new ones (or
   * problems, then nothing is written), read and written in one transaction so two PATCHes never lose one.
   * Null when the endpoint is unknown, deleted or another owner's. The change reaches every thread and
   * instance through the key-change log (endpoint_changed) within a second.
   */
  patchEndpointFences<P>(
    ownerId: number,
    endpointId: string,
    patch: (current: FenceSettings) => { ok: true; settings: FenceSettings } | { ok: false; problems: P },
  ): Promise<{ ok: true; endpoint: EndpointRecord } | { ok: false; problems: P } | null>;
  /**
   * A new key for the endpoint (shown once); the old one stays valid for `graceS` seconds (0: refused at
   * once). A key already in its grace from an earlier rotation ends now. Null for an unknown, deleted or
   * another owner's endpoint.
   */
  rotateEndpointKey(
    ownerId: number,
    endpointId: string,
    graceS: number,
  ): Promise<{ apiKey: string; endpoint: EndpointRecord; previousKeyExpiresAt: number | null } | null>;
  /** The owner's live endpoints, oldest first (created_at, then id). */
  listEndpoints(ownerId: number): Promise<EndpointRecord[]>;
  /** At most `limit` of the owner's live endpoints in the same order, after `after`, or from the first. */
  listEndpointsPage(ownerId: number, limit: number, after?: EndpointCursor): Promise<EndpointRecord[]>;
  /** Live endpoints of one owner, or of all, by owner then age (the operator's list). */
  listAllEndpoints(ownerId?: number): Promise<EndpointListRow[]>;
  /** False when the endpoint is unknown, already deleted or another owner's: the same answer for all. */
  deleteEndpoint(ownerId: number, endpointId: string): Promise<boolean>;

  /** The owner's webhooks, their deliveries and the claims of their alerts (webhook-store.ts). */
  readonly webhooks: WebhookStore;

  /** The owner's usage; an `endpointId` of another owner yields zeros. The caller bounds the range. */
  stats(ownerId: number, query: StatsQuery): Promise<UsageStats>;
  /** The endpoint's recent failures, newest first, at most `limit`; empty for another owner's endpoint. */
  failures(ownerId: number, endpointId: string, limit: number): Promise<FailureAnswer[]>;

  /** Closes the store this wraps (the SQLite connection, the PostgreSQL pool); a second call does nothing. */
  close(): Promise<void>;
}

/** The options both implementations take. */
export interface AccountStoreOptions {
  /** Clock in ms, for the times written (created_at, deleted_at, credits) and a previous key's end; default Date.now. */
  now?: () => number;
  /** How a grant's restrictions are compiled (config `fences.contracts_cover_balance`); default { balance: false }. */
  fences?: FenceOptions;
}

/** createEndpointWithinPlan's answer: the store's, a refusal also saying the plan's limit as its refusal words it. */
export type PlanEndpointResult =
  | Extract<CreateEndpointResult, { kind: 'created' }>
  | (Extract<CreateEndpointResult, { kind: 'refused' }> & { limit: string });

/**
 * Makes an endpoint for `owner` within its plan's `max_endpoints` (none for a plan no longer configured): the
 * one way the management API and the CLI make one.
 */
export async function createEndpointWithinPlan(
  accounts: AccountStore,
  plans: Readonly<Record<string, PlanConfig>>,
  owner: OwnerRecord,
  network: string,
  name: string | undefined,
  fences?: FenceSettings,
): Promise<PlanEndpointResult> {
  const max = plans[owner.plan]?.max_endpoints ?? 0;
  const made = await accounts.createEndpoint(owner.id, network, name, max, fences);
  if (made.kind === 'created') return made;
  return { ...made, limit: `Endpoint limit reached: plan '${owner.plan}' allows ${max} endpoints` };
}
