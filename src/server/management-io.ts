/**
 * What the management routes (management.ts, management-fences.ts) share to read a request and write its
 * answer: the reply of one request, its query and JSON body, a store call's failure told apart from a bug, and
 * the check that an endpoint named in a request is the caller's.
 */
import type { AccountStore } from '../accounts/account-store.js';
import { type ErrorCode, ERRORS, managementErrorBody } from '../errors.js';
import { readBody } from './body.js';
import { JSON_TYPE, type ResponseMeta, sendWhole } from './respond.js';
import type { HttpResponse } from './uws.js';

const MAX_MANAGEMENT_BODY = 65_536;

/**
 * One request's answer: written corked (it is mostly written after an await, outside uWS's handler), and
 * not at all once the client has gone.
 */
export interface Reply {
  readonly res: HttpResponse;
  readonly meta: ResponseMeta;
  aborted: boolean;
}

/**
 * Said of every management answer: none may be kept by a browser or a proxy, the 201 that shows a new
 * `api_key` least of all.
 */
const NO_STORE: readonly [string, string] = ['cache-control', 'no-store'];
const NO_STORE_ONLY: ReadonlyArray<readonly [string, string]> = [NO_STORE];

export function send(reply: Reply, status: number, data: unknown): void {
  sendRaw(reply, status, JSON.stringify({ data }));
}

export function sendRaw(reply: Reply, status: number, body: string): void {
  if (!reply.aborted) sendWhole(reply.res, status, reply.meta, JSON_TYPE, body, NO_STORE_ONLY);
}

export function fail(reply: Reply, code: ErrorCode, message?: string, extra?: Array<[string, string]>): void {
  if (reply.aborted) return;
  const headers = extra === undefined ? NO_STORE_ONLY : [NO_STORE, ...extra];
  sendWhole(reply.res, ERRORS[code].http, reply.meta, JSON_TYPE, managementErrorBody(code, message), headers);
}

/** 400 for a body with problems: each names its field, in `error.fields`, and `message` says them all. */
export function refuseFields(reply: Reply, problems: ReadonlyArray<{ field: string; message: string }>, text?: string): void {
  if (reply.aborted) return;
  const message = text ?? problems.map((p) => `${p.field}: ${p.message}`).join('; ');
  sendWhole(reply.res, 400, reply.meta, JSON_TYPE, managementErrorBody('bad_request', message, problems), NO_STORE_ONLY);
}

/** Reads `name` from a query string; undefined when absent, null when repeated (ambiguous). */
export function queryParam(query: string, name: string): string | undefined | null {
  const values = new URLSearchParams(query).getAll(name);
  if (values.length > 1) return null;
  return values[0];
}

/** A request body as a JSON object ({} when empty), or what is wrong with it. */
function parseJsonObject(buf: Buffer): Record<string, unknown> | string {
  if (buf.length === 0) return {};
  let v: unknown;
  try {
    v = JSON.parse(buf.toString('utf8'));
  } catch {
    return 'body is not valid JSON';
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return 'body must be a JSON object';
  return v as Record<string, unknown>;
}

/**
 * The request body as a JSON object, or what is wrong with it. Started in uWS's handler: a body not
 * asked for there is lost. Never settles when the client goes first, which is then unanswered anyway.
 */
export function readJsonBody(res: HttpResponse, meta: ResponseMeta): Promise<Record<string, unknown> | string> {
  return new Promise((resolve) =>
    readBody(
      res,
      meta,
      MAX_MANAGEMENT_BODY,
      (buf) => resolve(parseJsonObject(buf)),
      () => resolve(`body is larger than ${MAX_MANAGEMENT_BODY} bytes`),
    ),
  );
}

/** A store call that failed: the cause is the store's error (SQLite's, PostgreSQL's, a lost connection). */
export class StoreFault extends Error {
  constructor(readonly fault: Error) {
    super(fault.message);
  }
}

/**
 * Awaits a store call. By AccountStore's contract every rejection but a RangeError (a value the caller
 * should have refused first: a bug, thrown on) is the store failing, and nothing of the call was written.
 */
export async function fromStore<T>(call: () => T | Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    if (err instanceof RangeError) throw err;
    throw new StoreFault(err instanceof Error ? err : new Error(String(err)));
  }
}

/**
 * True when owner `ownerId` has endpoint `id`; else false, the 404 of an unknown endpoint sent (another owner's
 * endpoint is answered as one that does not exist).
 */
export async function ownEndpoint(accounts: AccountStore, ownerId: number, id: string, reply: Reply): Promise<boolean> {
  if ((await fromStore(() => accounts.listEndpoints(ownerId))).some((e) => e.id === id)) return true;
  fail(reply, 'not_found', `No endpoint ${id}`);
  return false;
}
