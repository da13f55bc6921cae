/** `GET /api/dashboard/endpoints/failures?id=&limit=`: one endpoint's recent failed calls (metering/failure-ring.ts). */
import type { AccountStore, OwnerRecord } from '../accounts/account-store.js';
import { MAX_FAILURES_READ } from '../metering/failure-ring.js';
import { fail, fromStore, ownEndpoint, queryParam, type Reply, send } from './management-io.js';

/** Failures one answer holds when `limit` is not given. */
export const FAILURES_PAGE_DEFAULT = 100;

/**
 * Newest first, at most `limit` (1 to 1000, default 100; the ring keeps `usage.failures_kept` per endpoint).
 * Another owner's endpoint gets the 404 of an unknown one.
 */
export async function handleFailures(accounts: AccountStore, owner: OwnerRecord, query: string, reply: Reply): Promise<void> {
  const id = queryParam(query, 'id');
  const limitText = queryParam(query, 'limit');
  if (id === null) return fail(reply, 'bad_request', "'id' is given more than once");
  if (id === undefined || id === '') return fail(reply, 'bad_request', "'id' is required: the endpoint whose failures to list");
  if (limitText === null) return fail(reply, 'bad_request', "'limit' is given more than once");
  const limit = limitText === undefined ? FAILURES_PAGE_DEFAULT : /^\d{1,4}$/.test(limitText) ? Number(limitText) : 0;
  if (limit < 1 || limit > MAX_FAILURES_READ)
    return fail(reply, 'bad_request', `'limit' must be an integer from 1 to ${MAX_FAILURES_READ}`);
  if (!(await ownEndpoint(accounts, owner.id, id, reply))) return;
  send(reply, 200, await fromStore(() => accounts.failures(owner.id, id, limit)));
}
