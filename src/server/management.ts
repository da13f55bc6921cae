import type { Config } from '../config/schema.js';
import { type ErrorCode, ERRORS, managementErrorBody } from '../errors.js';
import { retryAfterSeconds, type SlidingWindowLimiter } from '../limits/sliding-window.js';
import type { UnknownKeyGuard } from '../limits/unknown-keys.js';
import { isStoreError } from '../store/faults.js';
import type { Directory, OwnerRecord } from '../tenancy/directory.js';
import { nameProblem } from '../tenancy/names.js';
import { readBody } from './body.js';
import { JSON_TYPE, type ResponseMeta, sendWhole } from './respond.js';
import type { HttpRequest, HttpResponse } from './uws.js';

/**
 * The management REST under /api/dashboard (spec E). Every success body is `{"data": ...}`, every
 * error `{"error": {"code", "message"}}`. An owner only ever sees its own endpoints: another owner's
 * id gets exactly the answer of an unknown id.
 */
export interface ManagementDeps {
  config: Config;
  directory: Directory;
  /** The owner's live balance (stored minus unflushed debits and open reservations). */
  balance: (ownerId: number) => number;
  /** Called after an endpoint is deleted, so its open sockets can be closed. */
  onEndpointDeleted: (endpointId: string) => void;
  /** The request-rate limiter and the unknown-key guard the JSON-RPC paths use too. */
  limiter: SlidingWindowLimiter;
  unknownKeys: UnknownKeyGuard;
  /** The client's IP, read as the JSON-RPC paths read it (`server.trust_proxy`). */
  clientIp: (res: HttpResponse, req: HttpRequest) => string;
  /** Called with a store fault a route answered 503 for (`during` names the route), to log it. */
  onStoreFault: (during: string, err: Error) => void;
}

/** Endpoints in one page of `GET /api/dashboard/endpoints`: the default, and the most a `limit` may ask. */
export const ENDPOINT_PAGE = { default: 100, max: 1000 } as const;

const MAX_MANAGEMENT_BODY = 65_536;

/** The management routes and the verbs each accepts (the value of an `Allow` header). */
export const ROUTE_VERBS: ReadonlyMap<string, string> = new Map([
  ['/api/dashboard/chains', 'GET'],
  ['/api/dashboard/endpoints', 'GET, POST, DELETE'],
  ['/api/dashboard/endpoints/stats', 'GET'],
  ['/api/dashboard/account', 'GET'],
]);

/** The verbs a management path serves, for its `Allow` header and its CORS preflight; undefined for no route. */
export function managementVerbs(path: string): string | undefined {
  return ROUTE_VERBS.get(path.replace(/\/+$/, ''));
}

/** The public URLs of a chain: `server.public_base_url` with `{chain}` filled, then the key path. */
export function chainUrls(config: Config, slug: string, keySegment: string): { https: string; wss: string | null } {
  const base = config.server.public_base_url.replace('{chain}', slug);
  const https = `${base}/v1/rpc/${keySegment}`;
  const wss = config.chains[slug]?.kind === 'evm' ? https.replace(/^http/, 'ws') : null;
  return { https, wss };
}

function send(res: HttpResponse, meta: ResponseMeta, status: number, data: unknown): void {
  sendWhole(res, status, meta, JSON_TYPE, JSON.stringify({ data }));
}

function fail(res: HttpResponse, meta: ResponseMeta, code: ErrorCode, message?: string, extra?: Array<[string, string]>): void {
  sendWhole(res, ERRORS[code].http, meta, JSON_TYPE, managementErrorBody(code, message), extra);
}

function endpointView(e: { id: string; name: string | null; network: string; keyPrefix: string; createdAt: number }) {
  return { id: e.id, name: e.name, network: e.network, key_prefix: e.keyPrefix, created_at: new Date(e.createdAt * 1000).toISOString() };
}

/** Reads `name` from a query string; undefined when absent, null when repeated (ambiguous). */
function queryParam(query: string, name: string): string | undefined | null {
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

/** Calls `onBody` once, outside any parse `try`: what the handler throws is its own error, never a parse error. */
function readJsonBody(res: HttpResponse, onBody: (body: Record<string, unknown> | null, error?: string) => void): void {
  readBody(
    res,
    MAX_MANAGEMENT_BODY,
    (buf) => {
      const parsed = parseJsonObject(buf);
      if (typeof parsed === 'string') onBody(null, parsed);
      else onBody(parsed);
    },
    () => onBody(null, `body is larger than ${MAX_MANAGEMENT_BODY} bytes`),
  );
}

/**
 * Runs one route; a store fault (SQLite busy past the busy timeout, disk full, an I/O error) is
 * answered 503 `store_unavailable`, reported, and goes no further: thrown out of a uWS callback it
 * would end the process. SQLite rolled the failed statement back, so nothing was changed.
 */
function answerStoreFaults(deps: ManagementDeps, res: HttpResponse, meta: ResponseMeta, during: string, route: () => void): void {
  try {
    route();
  } catch (err) {
    if (!isStoreError(err)) throw err;
    deps.onStoreFault(during, err);
    fail(res, meta, 'store_unavailable', 'The store is busy or full; nothing was changed, retry later');
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
function handleList(deps: ManagementDeps, owner: OwnerRecord, query: string, res: HttpResponse, meta: ResponseMeta): void {
  const limitText = queryParam(query, 'limit');
  const cursorText = queryParam(query, 'cursor');
  if (limitText === null) return fail(res, meta, 'bad_request', "'limit' is given more than once");
  if (cursorText === null) return fail(res, meta, 'bad_request', "'cursor' is given more than once");
  const limit = limitText === undefined ? ENDPOINT_PAGE.default : /^\d{1,4}$/.test(limitText) ? Number(limitText) : 0;
  if (limit < 1 || limit > ENDPOINT_PAGE.max) {
    return fail(res, meta, 'bad_request', `'limit' must be an integer from 1 to ${ENDPOINT_PAGE.max}`);
  }
  const after = cursorText === undefined ? undefined : decodeCursor(cursorText);
  if (after === null) return fail(res, meta, 'bad_request', "'cursor' is not one this API gave (use next_cursor as it is)");
  const rows = deps.directory.listEndpointsPage(owner.id, limit + 1, after);
  const page = rows.slice(0, limit).map((e) => endpointView(e));
  const body: { data: unknown[]; next_cursor?: string } = { data: page };
  if (rows.length > limit) body.next_cursor = encodeCursor(rows[limit - 1]!);
  sendWhole(res, 200, meta, JSON_TYPE, JSON.stringify(body));
}

/** 429 for the management API, with the limit it passed in the message and when to come back. */
function tooManyRequests(res: HttpResponse, meta: ResponseMeta, retryAfterMs: number, what: string): void {
  fail(res, meta, 'rate_limited', `Too many management requests (${what})`, [['retry-after', String(retryAfterSeconds(retryAfterMs))]]);
}

function handleStats(deps: ManagementDeps, owner: OwnerRecord, query: string, res: HttpResponse, meta: ResponseMeta): void {
  const id = queryParam(query, 'id');
  const interval = queryParam(query, 'interval') ?? 'hour';
  const now = Math.floor(Date.now() / 1000);
  const to = parseStatsTime(queryParam(query, 'to'), 'to') ?? now;
  const from = parseStatsTime(queryParam(query, 'from'), 'from') ?? (typeof to === 'number' ? to - 86_400 : 0);
  if (id === null) return fail(res, meta, 'bad_request', "'id' is given more than once");
  if (typeof to === 'string') return fail(res, meta, 'bad_request', to);
  if (typeof from === 'string') return fail(res, meta, 'bad_request', from);
  if (interval !== 'minute' && interval !== 'hour' && interval !== 'day') {
    return fail(res, meta, 'bad_request', "'interval' must be minute, hour or day");
  }
  if (from > to) return fail(res, meta, 'bad_request', "'from' is after 'to'");
  if (id !== undefined && !deps.directory.listEndpoints(owner.id).some((e) => e.id === id)) {
    return fail(res, meta, 'not_found', `No endpoint ${id}`);
  }
  const stats = deps.directory.stats(owner.id, { ...(id !== undefined ? { endpointId: id } : {}), from, to, interval });
  send(res, meta, 200, stats);
}

function handleCreate(deps: ManagementDeps, owner: OwnerRecord, res: HttpResponse, meta: ResponseMeta, aborted: () => boolean): void {
  readJsonBody(res, (body, error) => {
    if (aborted()) return;
    res.cork(() =>
      answerStoreFaults(deps, res, meta, 'POST /api/dashboard/endpoints', () => {
        if (body === null) return fail(res, meta, 'bad_request', error);
        const network = body.network;
        if (network === undefined) return fail(res, meta, 'bad_request', "'network' is required");
        if (typeof network !== 'string' || !Object.hasOwn(deps.config.chains, network)) {
          return fail(
            res,
            meta,
            'bad_request',
            `Unknown network ${JSON.stringify(network)}; networks: ${Object.keys(deps.config.chains).join(', ')}`,
          );
        }
        const name = body.name;
        const nameError = name === undefined || name === null ? null : typeof name === 'string' ? nameProblem(name) : 'must be a string';
        if (nameError !== null) return fail(res, meta, 'bad_request', `'name' ${nameError}`);
        const plan = deps.config.plans[owner.plan];
        const max = plan?.max_endpoints ?? 0;
        const made = deps.directory.createEndpoint(owner.id, network, typeof name === 'string' ? name : undefined, max);
        if ('error' in made) {
          return fail(res, meta, 'forbidden', `Endpoint limit reached: plan '${owner.plan}' allows ${max} endpoints`);
        }
        const urls = chainUrls(deps.config, network, made.apiKey);
        send(res, meta, 201, { ...endpointView(made.endpoint), api_key: made.apiKey, https_url: urls.https, wss_url: urls.wss });
      }),
    );
  });
}

function handleDelete(
  deps: ManagementDeps,
  owner: OwnerRecord,
  query: string,
  res: HttpResponse,
  meta: ResponseMeta,
  aborted: () => boolean,
): void {
  readJsonBody(res, (body, error) => {
    if (aborted()) return;
    res.cork(() =>
      answerStoreFaults(deps, res, meta, 'DELETE /api/dashboard/endpoints', () => {
        const fromQuery = queryParam(query, 'id');
        if (fromQuery === null) return fail(res, meta, 'bad_request', "'id' is given more than once");
        // The query wins over a body id, so a proxy that drops DELETE bodies changes nothing.
        const id = fromQuery ?? (body && typeof body.id === 'string' ? body.id : undefined);
        if (id === undefined) return fail(res, meta, 'bad_request', error ?? '\'id\' is required (query ?id= or body {"id": ...})');
        if (!deps.directory.deleteEndpoint(owner.id, id)) return fail(res, meta, 'not_found', `No endpoint ${id}`);
        deps.onEndpointDeleted(id);
        send(res, meta, 200, { id, deleted: true });
      }),
    );
  });
}

/** Routes one /api/dashboard request. `path` is the URL path; the caller has matched its prefix. */
export function handleManagement(
  deps: ManagementDeps,
  res: HttpResponse,
  req: HttpRequest,
  method: string,
  path: string,
  meta: ResponseMeta,
): void {
  answerStoreFaults(deps, res, meta, `${method.toUpperCase()} ${path}`, () => routeManagement(deps, res, req, method, path, meta));
}

function routeManagement(
  deps: ManagementDeps,
  res: HttpResponse,
  req: HttpRequest,
  method: string,
  path: string,
  meta: ResponseMeta,
): void {
  const query = req.getQuery() ?? '';
  const auth = req.getHeader('authorization');
  let aborted = false;
  res.onAborted(() => {
    aborted = true;
  });
  const route = path.replace(/\/+$/, '');
  const allowed = managementVerbs(route);
  if (allowed === undefined) return fail(res, meta, 'not_found', `No route for ${path}`);
  if (!allowed.split(', ').includes(method.toUpperCase())) {
    return fail(res, meta, 'method_not_allowed', `${route} accepts ${allowed}`, [['allow', allowed]]);
  }
  // Per IP first, valid key or not; then a wrong key counts toward the IP's unknown-key throttle, and a
  // right one toward its owner's rate (all its management keys together).
  const ip = deps.clientIp(res, req);
  const limits = deps.config.management_limits;
  const byIp = deps.limiter.take(`mgmt-ip:${ip}`, limits.rps_per_ip);
  if (!byIp.ok)
    return tooManyRequests(res, meta, byIp.retryAfterMs, `the limit is ${limits.rps_per_ip} per second per IP: management.rps_per_ip`);
  const m = /^Bearer\s+(\S+)$/i.exec(auth);
  const owner = m ? deps.directory.ownerByManagementKey(m[1]!) : null;
  if (owner === null) {
    if (deps.unknownKeys.refuse(ip)) return tooManyRequests(res, meta, 60_000, 'too many invalid keys from this IP; try again in a minute');
    return fail(res, meta, 'unauthorized', 'Missing or invalid management key');
  }
  const byKey = deps.limiter.take(`mgmt-owner:${owner.id}`, limits.rps_per_key);
  if (!byKey.ok)
    return tooManyRequests(res, meta, byKey.retryAfterMs, `the limit is ${limits.rps_per_key} per second per key: management.rps_per_key`);
  const verb = method.toUpperCase();
  if (route === '/api/dashboard/chains') {
    const chains = Object.values(deps.config.chains).map((c) => {
      const urls = chainUrls(deps.config, c.slug, 'public');
      return {
        slug: c.slug,
        name: c.name,
        kind: c.kind,
        chain_id: c.chain_id ?? null,
        public_https_url: urls.https,
        public_wss_url: urls.wss,
      };
    });
    return send(res, meta, 200, chains);
  }
  if (route === '/api/dashboard/account') {
    const plan = deps.config.plans[owner.plan];
    return send(res, meta, 200, {
      id: owner.id,
      name: owner.name,
      plan: { name: owner.plan, rps: plan?.rps ?? null, ru_per_second: plan?.ru_per_second ?? null },
      ru_balance: deps.balance(owner.id),
    });
  }
  if (route === '/api/dashboard/endpoints/stats') return handleStats(deps, owner, query, res, meta);
  if (verb === 'GET') return handleList(deps, owner, query, res, meta);
  if (verb === 'POST') return handleCreate(deps, owner, res, meta, () => aborted);
  return handleDelete(deps, owner, query, res, meta, () => aborted);
}
