import type { AccountAnswer, ChainAnswer, CreatedEndpointAnswer, FieldProblem } from '../api-answers.js';
import type { Config } from '../config/schema.js';
import { applyFencePatch, NO_FENCES } from '../fences/settings.js';
import { retryAfterSeconds, type SlidingWindowLimiter } from '../limits/sliding-window.js';
import type { UnknownKeyGuard } from '../limits/unknown-keys.js';
import { type AccountStore, createEndpointWithinPlan, type OwnerRecord } from '../accounts/account-store.js';
import { nameProblem } from '../tenancy/names.js';
import { handleFailures } from './management-failures.js';
import { endpointView, handlePatch, handleRotate } from './management-fences.js';
import { roleRefusal } from './management-roles.js';
import { handleWebhooks } from './management-webhooks.js';
import {
  fail,
  fromStore,
  ownEndpoint,
  queryParam,
  readJsonBody,
  type Reply,
  refuseFields,
  send,
  sendRaw,
  StoreFault,
} from './management-io.js';
import { planView } from './plan-view.js';
import { chainUrls } from './public-urls.js';
import type { ResponseMeta } from './respond.js';
import type { HttpRequest, HttpResponse } from './uws.js';

export { chainUrls } from './public-urls.js';

/**
 * The management REST under /api/dashboard (spec E). Every success body is `{"data": ...}`, every
 * error `{"error": {"code", "message"}}`. An owner only ever sees its own endpoints: another owner's
 * id gets exactly the answer of an unknown id.
 */
export interface ManagementDeps {
  config: Config;
  /** Owners, keys, endpoints and usage: the SQLite file's, or the fleet's PostgreSQL (gateway-thread.ts picks). */
  accounts: AccountStore;
  /**
   * The owner's live balance: on one machine the ledger's (stored minus unflushed debits and open
   * reservations), in a fleet the shared store's less this instance's unflushed spend (a promise).
   */
  balance: (ownerId: number) => number | Promise<number>;
  /** Called after an endpoint is deleted, so its open sockets can be closed. */
  onEndpointDeleted: (endpointId: string) => void;
  /** The request-rate limiter and the unknown-key guard the JSON-RPC paths use too. */
  limiter: SlidingWindowLimiter;
  unknownKeys: UnknownKeyGuard;
  /** The address the client's per-IP limits count under, read as the JSON-RPC paths read it (peer-address.ts). */
  clientIp: (res: HttpResponse, req: HttpRequest) => string;
  /** Called with a store fault a route answered 503 for (`during` names the route), to log it (and repair SQLite's WAL). */
  onStoreFault: (during: string, err: Error) => void;
}

/** Endpoints in one page of `GET /api/dashboard/endpoints`: the default, and the most a `limit` may ask. */
export const ENDPOINT_PAGE = { default: 100, max: 1000 } as const;

/** The management routes and the verbs each accepts (the value of an `Allow` header). */
export const ROUTE_VERBS: ReadonlyMap<string, string> = new Map([
  ['/api/dashboard/chains', 'GET'],
  ['/api/dashboard/endpoints', 'GET, POST, PATCH, DELETE'],
  ['/api/dashboard/endpoints/rotate', 'POST'],
  ['/api/dashboard/endpoints/stats', 'GET'],
  ['/api/dashboard/endpoints/failures', 'GET'],
  ['/api/dashboard/account', 'GET'],
  ['/api/dashboard/webhooks', 'GET, POST, DELETE'],
  ['/api/dashboard/webhooks/deliveries', 'GET'],
]);

/** The verbs a management path serves, for its `Allow` header and its CORS preflight; undefined for no route. */
export function managementVerbs(path: string): string | undefined {
  return ROUTE_VERBS.get(path.replace(/\/+$/, ''));
}

/**
 * Runs one route; a store fault (SQLite busy past the busy timeout, disk full, an I/O error; PostgreSQL
 * unreachable or failing) is answered 503 `store_unavailable`, reported, and goes no further. Any other
 * error is a bug and is thrown on, as it was when the routes were synchronous.
 */
async function answerStoreFaults(deps: ManagementDeps, reply: Reply, during: string, route: () => Promise<void>): Promise<void> {
  try {
    await route();
  } catch (err) {
    if (!(err instanceof StoreFault)) throw err;
    deps.onStoreFault(during, err.fault);
    fail(
      reply,
      'store_unavailable',
      deps.accounts.kind === 'sqlite'
        ? 'The store is busy or full; nothing was changed, retry later'
        : 'The store is unreachable or failing; retry later',
    );
  }
}

/** An ISO 8601 date, or date and time; a time without a zone is UTC, as `created_at` is written. */
const ISO_8601 = /^(\d{4}-\d{2}-\d{2})(?:T(\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?)(Z|[+-]\d{2}:?\d{2})?)?$/i;

/**
 * A `from` or `to` in unix seconds, or an ISO 8601 time (what `created_at` shows, so users copy one into
 * the other); sub-second parts are cut to the second. A string is the refusal's message.
 */
export function parseStatsTime(v: string | undefined | null, name: string): number | string | undefined {
  if (v === undefined) return undefined;
  if (v === null) return `'${name}' is given more than once`;
  if (/^\d{1,12}$/.test(v)) return Number(v);
  const m = ISO_8601.exec(v);
  const ms = m === null ? NaN : Date.parse(m[2] === undefined ? `${m[1]}T00:00:00Z` : `${m[1]}T${m[2]}${m[3] ?? 'Z'}`);
  if (Number.isNaN(ms) || ms < 0) {
    return `'${name}' must be a unix time in seconds or an ISO 8601 time such as 2026-01-31T12:00:00Z`;
  }
  return Math.floor(ms / 1000);
}

/** A page cursor: the last endpoint's created_at and id, opaque to clients (base64url). */
function encodeCursor(e: { createdAt: number; id: string }): string {
  return Buffer.from(`${e.createdAt}:${e.id}`).toString('base64url');
}

function decodeCursor(cursor: string): { createdAt: number; id: string } | null {
  const m = /^(\d{1,12}):(ep_[a-z2-7]{1,64})$/.exec(Buffer.from(cursor, 'base64url').toString('latin1'));
  return m === null ? null : { createdAt: Number(m[1]), id: m[2]! };
}

/**
 * `GET /api/dashboard/endpoints`: pages of `limit` endpoints (default 100), oldest first. The answer is
 * `{"data": [...]}` as before, with `next_cursor` beside it when more follow; `cursor` asks for that page.
 */
async function handleList(deps: ManagementDeps, owner: OwnerRecord, query: string, reply: Reply): Promise<void> {
  const limitText = queryParam(query, 'limit');
  const cursorText = queryParam(query, 'cursor');
  if (limitText === null) return fail(reply, 'bad_request', "'limit' is given more than once");
  if (cursorText === null) return fail(reply, 'bad_request', "'cursor' is given more than once");
  const limit = limitText === undefined ? ENDPOINT_PAGE.default : /^\d{1,4}$/.test(limitText) ? Number(limitText) : 0;
  if (limit < 1 || limit > ENDPOINT_PAGE.max) {
    return fail(reply, 'bad_request', `'limit' must be an integer from 1 to ${ENDPOINT_PAGE.max}`);
  }
  const after = cursorText === undefined ? undefined : decodeCursor(cursorText);
  if (after === null) return fail(reply, 'bad_request', "'cursor' is not one this API gave (use next_cursor as it is)");
  const rows = await fromStore(() => deps.accounts.listEndpointsPage(owner.id, limit + 1, after));
  const page = rows.slice(0, limit).map((e) => endpointView(e));
  const body: { data: unknown[]; next_cursor?: string } = { data: page };
  if (rows.length > limit) body.next_cursor = encodeCursor(rows[limit - 1]!);
  sendRaw(reply, 200, JSON.stringify(body));
}

/** 429 for the management API, with the limit it passed in the message and when to come back. */
function tooManyRequests(reply: Reply, retryAfterMs: number, what: string): void {
  fail(reply, 'rate_limited', `Too many management requests (${what})`, [['retry-after', String(retryAfterSeconds(retryAfterMs))]]);
}

async function handleStats(deps: ManagementDeps, owner: OwnerRecord, query: string, reply: Reply): Promise<void> {
  const id = queryParam(query, 'id');
  const method = queryParam(query, 'method');
  const interval = queryParam(query, 'interval') ?? 'hour';
  // `to` is exclusive and rows count by the start of their period: the default ends after the current
  // second, so a call made in a minute's first second is counted by a query in that same second.
  const now = Math.floor(Date.now() / 1000) + 1;
  const to = parseStatsTime(queryParam(query, 'to'), 'to') ?? now;
  const from = parseStatsTime(queryParam(query, 'from'), 'from') ?? (typeof to === 'number' ? to - 86_400 : 0);
  if (id === null) return fail(reply, 'bad_request', "'id' is given more than once");
  if (typeof to === 'string') return fail(reply, 'bad_request', to);
  if (typeof from === 'string') return fail(reply, 'bad_request', from);
  if (interval !== 'minute' && interval !== 'hour' && interval !== 'day') {
    return fail(reply, 'bad_request', "'interval' must be minute, hour or day");
  }
  if (from > to) return fail(reply, 'bad_request', "'from' is after 'to'");
  if (id !== undefined && !(await ownEndpoint(deps.accounts, owner.id, id, reply))) return;
  if (method === null || (method !== undefined && !/^[\x21-\x7e]{1,200}$/.test(method)))
    return fail(reply, 'bad_request', "'method' must be given once, a method name of 1 to 200 printable characters");
  const range = {
    ...(id !== undefined ? { endpointId: id } : {}),
    ...(method !== undefined ? { method } : {}),
    from,
    to,
    interval,
  } as const;
  send(reply, 200, await fromStore(() => deps.accounts.stats(owner.id, range)));
}

/**
 * `POST /api/dashboard/endpoints`: `network` (required), `name`, and the settings beside them (issue 31);
 * every problem in one 400, each naming its field. Other fields are ignored, as before the settings.
 */
async function handleCreate(deps: ManagementDeps, owner: OwnerRecord, body: Record<string, unknown> | string, reply: Reply): Promise<void> {
  if (typeof body === 'string') return fail(reply, 'bad_request', body);
  const network = body.network;
  const problems: FieldProblem[] = [];
  // Each problem of network and name in the words these refusals had before settings came beside them.
  const texts: string[] = [];
  if (network === undefined) {
    problems.push({ field: 'network', message: 'is required' });
    texts.push("'network' is required");
  } else if (typeof network !== 'string' || !Object.hasOwn(deps.config.chains, network)) {
    const message = `Unknown network ${JSON.stringify(network)}; networks: ${Object.keys(deps.config.chains).join(', ')}`;
    problems.push({ field: 'network', message });
    texts.push(message);
  }
  const name = body.name;
  const nameError = name === undefined || name === null ? null : typeof name === 'string' ? nameProblem(name) : 'must be a string';
  if (nameError !== null) {
    problems.push({ field: 'name', message: nameError });
    texts.push(`'name' ${nameError}`);
  }
  const fences = applyFencePatch(NO_FENCES, body);
  if (!fences.ok) problems.push(...fences.problems);
  if (!fences.ok && texts.length === 0) return refuseFields(reply, problems);
  if (problems.length > 0) {
    const rest = fences.ok ? [] : fences.problems.map((p) => `${p.field}: ${p.message}`);
    return refuseFields(reply, problems, [...texts, ...rest].join('; '));
  }
  const chain = network as string;
  const settings = fences.ok ? fences.settings : NO_FENCES;
  const made = await fromStore(() =>
    createEndpointWithinPlan(deps.accounts, deps.config.plans, owner, chain, typeof name === 'string' ? name : undefined, settings),
  );
  if (made.kind === 'refused') return fail(reply, 'forbidden', made.limit);
  const urls = chainUrls(deps.config, chain, made.apiKey);
  const created: CreatedEndpointAnswer = { ...endpointView(made.endpoint), api_key: made.apiKey, https_url: urls.https, wss_url: urls.wss };
  send(reply, 201, created);
}

async function handleDelete(
  deps: ManagementDeps,
  owner: OwnerRecord,
  query: string,
  body: Record<string, unknown> | string,
  reply: Reply,
): Promise<void> {
  const fromQuery = queryParam(query, 'id');
  if (fromQuery === null) return fail(reply, 'bad_request', "'id' is given more than once");
  // The query wins over a body id, so a proxy that drops DELETE bodies changes nothing.
  const id = fromQuery ?? (typeof body !== 'string' && typeof body.id === 'string' ? body.id : undefined);
  if (id === undefined) {
    return fail(reply, 'bad_request', typeof body === 'string' ? body : '\'id\' is required (query ?id= or body {"id": ...})');
  }
  if (!(await fromStore(() => deps.accounts.deleteEndpoint(owner.id, id)))) return fail(reply, 'not_found', `No endpoint ${id}`);
  deps.onEndpointDeleted(id);
  send(reply, 200, { id, deleted: true });
}

/**
 * Routes one /api/dashboard request. `path` is the URL path; the caller has matched its prefix. What is
 * needed of `req` is read here, and a body is asked for here, before the first await (uWS's rules); the
 * route, verb and IP limit are answered at once, the rest once the store has answered.
 */
export function handleManagement(
  deps: ManagementDeps,
  res: HttpResponse,
  req: HttpRequest,
  method: string,
  path: string,
  meta: ResponseMeta,
): void {
  const reply: Reply = { res, meta, aborted: false };
  res.onAborted(() => {
    reply.aborted = true;
  });
  const query = req.getQuery() ?? '';
  const auth = req.getHeader('authorization');
  const route = path.replace(/\/+$/, '');
  const verb = method.toUpperCase();
  const allowed = managementVerbs(route);
  if (allowed === undefined) return fail(reply, 'not_found', `No route for ${path}`);
  if (!allowed.split(', ').includes(verb)) {
    return fail(reply, 'method_not_allowed', `${route} accepts ${allowed}`, [['allow', allowed]]);
  }
  // Per IP first, valid key or not; then a wrong key counts toward the IP's unknown-key throttle, and a
  // right one toward its owner's rate (all its management keys together).
  const ip = deps.clientIp(res, req);
  const limits = deps.config.management_limits;
  const byIp = deps.limiter.take(`mgmt-ip:${ip}`, limits.rps_per_ip);
  if (!byIp.ok)
    return tooManyRequests(reply, byIp.retryAfterMs, `the limit is ${limits.rps_per_ip} per second per IP: management.rps_per_ip`);
  const body = verb === 'GET' ? null : readJsonBody(res, meta);
  const key = /^Bearer\s+(\S+)$/i.exec(auth)?.[1];
  void answerStoreFaults(deps, reply, `${verb} ${route}`, async () => {
    const owner = key === undefined ? null : await fromStore(() => deps.accounts.ownerByManagementKey(key));
    if (owner === null) {
      if (deps.unknownKeys.refuse(ip)) return tooManyRequests(reply, 60_000, 'too many invalid keys from this IP; try again in a minute');
      return fail(reply, 'unauthorized', 'Missing or invalid management key');
    }
    // A suspended owner's key is known: 403 says what to fix, where the 401 of a typo would not (issue 31 §5).
    if (owner.suspended) return fail(reply, 'owner_suspended', 'Owner suspended: its keys are refused until the operator resumes it');
    const byKey = deps.limiter.take(`mgmt-owner:${owner.id}`, limits.rps_per_key);
    if (!byKey.ok) {
      return tooManyRequests(reply, byKey.retryAfterMs, `the limit is ${limits.rps_per_key} per second per key: management.rps_per_key`);
    }
    // What the key's role may not do is refused before anything is read or written (issue 36 §4).
    const refusal = roleRefusal(owner.role, verb, route);
    if (refusal !== null) return fail(reply, 'role_refused', refusal);
    if (route === '/api/dashboard/chains') return send(reply, 200, chainList(deps.config));
    if (route === '/api/dashboard/account') {
      const balance = await fromStore(() => deps.balance(owner.id));
      const plan = planView(deps.config, owner.plan);
      const account: AccountAnswer = { id: owner.id, name: owner.name, plan, ru_balance: balance, role: owner.role };
      return send(reply, 200, account);
    }
    if (route.startsWith('/api/dashboard/webhooks'))
      return handleWebhooks(deps.config, deps.accounts, owner, route, verb, query, body, reply);
    if (route === '/api/dashboard/endpoints/stats') return handleStats(deps, owner, query, reply);
    if (route === '/api/dashboard/endpoints/failures') return handleFailures(deps.accounts, owner, query, reply);
    if (body === null) return handleList(deps, owner, query, reply);
    if (route === '/api/dashboard/endpoints/rotate') return handleRotate(deps.config, deps.accounts, owner, query, await body, reply);
    if (verb === 'POST') return handleCreate(deps, owner, await body, reply);
    if (verb === 'PATCH') return handlePatch(deps.accounts, owner, query, await body, reply);
    return handleDelete(deps, owner, query, await body, reply);
  });
}

/** `GET /api/dashboard/chains`: every configured chain and its keyless public URLs. */
function chainList(config: Config): ChainAnswer[] {
  return Object.values(config.chains).map((c) => {
    const urls = chainUrls(config, c.slug, 'public');
    return {
      slug: c.slug,
      name: c.name,
      kind: c.kind,
      chain_id: c.chain_id ?? null,
      public_https_url: urls.https,
      public_wss_url: urls.wss,
    };
  });
}
