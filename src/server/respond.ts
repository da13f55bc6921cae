import { ERRORS, managementErrorBody, statusLine } from '../errors.js';
import { retryAfterSeconds } from '../limits/sliding-window.js';
import type { HttpRequest, HttpResponse } from './uws.js';

/**
 * Everything the gateway writes about a response besides its body: CORS, so browser dApps can call
 * the public path. `allowOrigin` is the value for Access-Control-Allow-Origin, or undefined when the
 * request's origin is not allowed (the header is then left out and the browser refuses the answer).
 */
export interface ResponseMeta {
  allowOrigin: string | undefined;
  /**
   * The request's body is still arriving: declared, and not read to its end (readBody clears it). An answer
   * written meanwhile (a refusal above all) closes the connection, on every route: uWS would otherwise read
   * and drop the rest of the body, however long, to reach a next request. Absent: no body was declared.
   */
  bodyPending?: boolean;
}

/** Whether a request says a body follows: a Content-Length above 0, or a Transfer-Encoding (chunked). */
export function declaresBody(req: HttpRequest): boolean {
  // Content-Length first: a call's POST states one, and then the second look into uWS is not needed.
  const length = req.getHeader('content-length');
  if (length !== '' && length !== '0') return true;
  return req.getHeader('transfer-encoding') !== '';
}

/** The meta of one request: its CORS answer, and whether a body is on its way. */
export function responseMeta(req: HttpRequest, allowOrigin: string | undefined): ResponseMeta {
  return { allowOrigin, bodyPending: declaresBody(req) };
}

/** Whether an answer written now must close its connection: its body is not read (ResponseMeta.bodyPending). */
export function closesConnection(meta: ResponseMeta): boolean {
  return meta.bodyPending === true;
}

/** Decides the CORS answer for one request from the configured origins (`*` allows every origin). */
export function createCorsPolicy(origins: readonly string[]): (origin: string) => string | undefined {
  if (origins.includes('*')) return () => '*';
  const allowed = new Set(origins);
  return (origin) => (origin !== '' && allowed.has(origin) ? origin : undefined);
}

// Header names and the usual values as bytes: uWS copies them as they are, with no UTF-8 encoding per answer.
const CONTENT_TYPE = Buffer.from('content-type');
const JSON_TYPE_BYTES = Buffer.from('application/json');
const ALLOW_ORIGIN = Buffer.from('access-control-allow-origin');
const ANY_ORIGIN = Buffer.from('*');
const NO_SNIFF_NAME = Buffer.from('x-content-type-options');
const NO_SNIFF = Buffer.from('nosniff');

// The head of a JSON answer with no Origin to echo (the usual one), as one header whose value carries the
// other lines: uWS writes `name: value\r\n` as given, so one call into uWS writes the bytes two or three
// calls would (each call costs a crossing into C++ and a look at the Buffer's memory).
const JSON_HEAD_NAME = NO_SNIFF_NAME;
const JSON_HEAD = Buffer.from('nosniff\r\ncontent-type: application/json');
const JSON_HEAD_ANY_ORIGIN = Buffer.from('nosniff\r\ncontent-type: application/json\r\naccess-control-allow-origin: *');

/**
 * The head of every answer the gateway writes (whole, streamed or an event stream), on every listener. Every
 * answer says `nosniff`: a browser reads each body as its Content-Type says and never guesses a script or a
 * page out of it.
 */
export function writeHead(res: HttpResponse, status: number, meta: ResponseMeta, contentType: string | null): void {
  // uWS writes "200 OK" itself when no status is written.
  if (status !== 200) res.writeStatus(statusLine(status));
  const origin = meta.allowOrigin;
  if (contentType === JSON_TYPE && (origin === undefined || origin === '*')) {
    res.writeHeader(JSON_HEAD_NAME, origin === undefined ? JSON_HEAD : JSON_HEAD_ANY_ORIGIN);
    return;
  }
  res.writeHeader(NO_SNIFF_NAME, NO_SNIFF);
  if (contentType !== null) res.writeHeader(CONTENT_TYPE, contentType === JSON_TYPE ? JSON_TYPE_BYTES : contentType);
  if (origin !== undefined) {
    res.writeHeader(ALLOW_ORIGIN, origin === '*' ? ANY_ORIGIN : origin);
    if (origin !== '*') res.writeHeader('vary', 'Origin');
  }
}

// sendWhole's arguments, for the one function it corks: a closure per answer would be an allocation per call.
let wholeRes: HttpResponse | null = null;
let wholeStatus = 0;
let wholeMeta: ResponseMeta | null = null;
let wholeType: string | null = null;
let wholeBody: string | Buffer = '';
let wholeExtra: ReadonlyArray<readonly [string, string]> | undefined;
let wholeClose = false;

function writeWhole(): void {
  const res = wholeRes!;
  writeHead(res, wholeStatus, wholeMeta!, wholeType);
  const extra = wholeExtra;
  if (extra !== undefined) for (const [k, v] of extra) res.writeHeader(k, v);
  res.end(wholeBody, wholeClose);
}

/**
 * Writes a whole response in one corked write. It closes the connection when `closeConnection` says so (a
 * stop) or the request's body is not read to its end (ResponseMeta.bodyPending: the unread body must be
 * neither parsed as a next request nor read on).
 */
export function sendWhole(
  res: HttpResponse,
  status: number,
  meta: ResponseMeta,
  contentType: string | null,
  body: string | Buffer,
  extraHeaders?: ReadonlyArray<readonly [string, string]>,
  closeConnection = false,
): void {
  wholeRes = res;
  wholeStatus = status;
  wholeMeta = meta;
  wholeType = contentType;
  wholeBody = body;
  wholeExtra = extraHeaders;
  wholeClose = closeConnection || closesConnection(meta);
  try {
    res.cork(writeWhole);
  } finally {
    // Nothing of an answer is kept past its write.
    wholeRes = null;
    wholeMeta = null;
    wholeBody = '';
    wholeExtra = undefined;
  }
}

export const JSON_TYPE = 'application/json';

/**
 * Ends a HEAD answer whose head is written. No length is reported (this uWS build never completes an answer
 * whose reported length is neither absent nor 0), except when the connection closes behind it (`closeConnection`,
 * or a body pending): uWS takes that order only with a length, and 0 is the one it completes.
 */
export function endHead(res: HttpResponse, meta: ResponseMeta, closeConnection = false): void {
  if (closeConnection || closesConnection(meta)) res.endWithoutBody(0, true);
  else res.endWithoutBody();
}

/**
 * The CORS preflight answer: 204 with the verbs the path serves (`methods`, OPTIONS included) and the
 * headers asked for, always with Content-Type and Authorization (the management API's Bearer key).
 */
export function sendPreflight(res: HttpResponse, meta: ResponseMeta, requestHeaders: string, methods: string): void {
  res.cork(() => {
    writeHead(res, 204, meta, null);
    if (meta.allowOrigin !== undefined) {
      res.writeHeader('access-control-allow-methods', methods);
      res.writeHeader('access-control-allow-headers', allowedHeaders(requestHeaders));
      res.writeHeader('access-control-max-age', '86400');
    }
    res.endWithoutBody(0, closesConnection(meta));
  });
}

const ALWAYS_ALLOWED_HEADERS = ['Content-Type', 'Authorization'];

function allowedHeaders(requested: string): string {
  const names = requested
    .split(',')
    .map((h) => h.trim())
    .filter((h) => h !== '');
  for (const h of ALWAYS_ALLOWED_HEADERS) if (!names.some((n) => n.toLowerCase() === h.toLowerCase())) names.push(h);
  return names.join(', ');
}

/** A routing refusal, answered before any body is read, so the connection is closed behind it. */
export function sendRouteError(
  res: HttpResponse,
  meta: ResponseMeta,
  code: 'not_found' | 'method_not_allowed',
  message: string,
  allow?: string,
): void {
  sendWhole(res, ERRORS[code].http, meta, JSON_TYPE, managementErrorBody(code, message), allow ? [['allow', allow]] : undefined, true);
}

/**
 * The Retry-After header of a refusal that says how long to wait, in whole seconds; a wait that never ends (a
 * call costing more RU than the plan's whole RU/s never fits) tells the client to back off a minute.
 */
export function retryAfterHeader(ms: number | undefined): Array<[string, string]> | undefined {
  if (ms === undefined) return undefined;
  return [['retry-after', String(Number.isFinite(ms) ? retryAfterSeconds(ms) : 60)]];
}
