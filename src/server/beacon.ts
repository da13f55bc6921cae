import { type ErrorCode, ERRORS, beaconErrorBody } from '../errors.js';
import type { Caller } from '../pipeline/admission.js';
import {
  admitBeacon,
  type BeaconCall,
  type BeaconOut,
  FORWARDED_REQUEST_HEADERS,
  forwardBeacon,
  refuseBeaconBody,
} from '../pipeline/beacon-call.js';
import { askFleet, beaconRu } from '../pipeline/fleet-gate.js';
import { tallyFor } from '../pipeline/answers.js';
import { readBody } from './body.js';
import { admitCaller, type Exchange, type ExchangeRoute, finish, reply } from './exchange.js';
import { closesConnection, type ResponseMeta, retryAfterHeader, sendWhole, writeHead } from './respond.js';
import { createStreamOut, type StreamOut } from './stream-out.js';
import type { HttpResponse } from './uws.js';
import { errorText } from '../log.js';

const JSON_TYPE = 'application/json';

function replyBeaconError(
  x: Exchange,
  code: ErrorCode,
  message?: string,
  headers?: Array<[string, string]>,
  closeConnection = false,
): void {
  reply(x, ERRORS[code].http, beaconErrorBody(code, message), headers, closeConnection);
}

/**
 * Sends one admitted Beacon call on the pipeline's road (forwardBeacon) and writes what comes back: the node's
 * head and body streamed with backpressure, or the gateway's Beacon error.
 */
function sendBeacon(x: Exchange, caller: Caller, call: BeaconCall, body: Buffer | undefined): void {
  let stream: StreamOut | null = null;
  const res = x.res;
  const out: BeaconOut = {
    get gone() {
      return x.aborted;
    },
    head(status, headers, contentLength) {
      res.cork(() => {
        writeHead(res, status, x.meta, null);
        for (const [k, v] of headers) res.writeHeader(k, v);
        // An empty body (node/health's 200, 206 or 503) is complete with its head: a stream of zero declared
        // bytes never sees the write that would end it, and its end() would cut the connection instead.
        if (contentLength === 0) res.end(undefined, closesConnection(x.meta));
      });
      if (contentLength !== 0)
        stream = createStreamOut(
          res,
          contentLength,
          () => x.aborted,
          () => forwarded.resume(),
        );
    },
    data: (chunk) => (stream === null ? true : stream.write(chunk)),
    end() {
      stream?.end();
      finish(x);
    },
    cut() {
      stream?.cut();
      finish(x);
    },
    error: (code, message) => replyBeaconError(x, code, message),
  };
  const forwarded = forwardBeacon(x.ctx, x.chain, caller, call, body, out);
  x.calls.push(forwarded);
}

/** The Beacon road: its event streams' server, and a caller refused answered in the Beacon shape. */
export interface BeaconRoute extends ExchangeRoute {
  /** Serves an admitted event stream (beacon-events.ts). */
  readonly events: (x: Exchange, caller: Caller, query: string) => void;
}

/** The Beacon road, made once with the routes. */
export function beaconRoute(events: BeaconRoute['events']): BeaconRoute {
  const route: BeaconRoute = {
    transport: 'beacon',
    events,
    admitted: (x, caller) => beaconAdmitted(x, route, caller),
    refuseCaller(x, refusal) {
      tallyFor(x.ctx, x.chain, 'beacon', null).refusedWhole(refusal.error, 1, refusal.message);
      replyBeaconError(x, refusal.error, refusal.message, refusal.error === 'rate_limited' ? retryAfterHeader(60_000) : undefined, true);
    },
  };
  return route;
}

/**
 * `/v1/rpc/<key>/<beacon path>` on a beacon chain: the key (401), then the pipeline's admission
 * (admitBeacon) and forward. The event stream is handed to `route.events` once admitted.
 */
export function handleBeacon(x: Exchange, route: BeaconRoute): void {
  if (x.req.getMethod() === 'get' && closesConnection(x.meta)) {
    // No Beacon GET takes a body, and its answer streams on a kept connection: uWS would read on, however long.
    tallyFor(x.ctx, x.chain, 'beacon', null).refusedWhole('bad_request', 1);
    replyBeaconError(x, 'bad_request', 'A GET request carries no body (Content-Length above 0 or Transfer-Encoding)');
    return;
  }
  admitCaller(x, route);
}

/** The Beacon road once its caller is admitted (the key's restrictions included): admission, then the node. */
function beaconAdmitted(x: Exchange, route: BeaconRoute, caller: Caller): void {
  const { ctx, req } = x;
  const method = req.getMethod().toUpperCase();
  const query = req.getQuery() ?? '';
  const headers: Array<[string, string]> = [];
  for (const h of FORWARDED_REQUEST_HEADERS) {
    const v = req.getHeader(h);
    if (v !== '') headers.push([h, v]);
  }
  const contentLength = req.getHeader('content-length');
  const request: BeaconRequest = { method, path: x.target.rest, query, headers, contentLength };
  const max = ctx.config.server.max_body_bytes;
  if (ctx.tenancy.fleet === null) {
    admitAndSend(x, route, caller, request);
    return;
  }
  const asked = askFleet(ctx.tenancy, caller, [beaconRu(ctx, method, request.path)]);
  // A fleet asks its shared limits first; a POST's body is read meanwhile (uWS hands it now or never).
  const body =
    method === 'POST' && !(contentLength !== '' && Number(contentLength) > max)
      ? new Promise<Buffer | null>((resolve) => readBody(x.res, x.meta, max, resolve, () => resolve(null)))
      : null;
  Promise.all([asked, body])
    .then(([grant, read]) => {
      if (x.aborted) return;
      caller.grant = grant;
      admitAndSend(x, route, caller, request, read);
    })
    .catch((err: unknown) => {
      // A fault of admission, which on one machine would have been thrown to uWS: logged and answered.
      ctx.log.error('a Beacon request failed after its fleet grant', { error: errorText(err) });
      if (!x.aborted && !x.finished) replyBeaconError(x, 'store_unavailable', undefined, undefined, true);
    });
}

/** What a Beacon request's head said, copied out of uWS's request. */
interface BeaconRequest {
  method: string;
  path: string;
  query: string;
  headers: Array<[string, string]>;
  contentLength: string;
}

/**
 * Admits the request and sends it on. `held` is a POST's body when it was read before admission (a
 * fleet's), null when it was over the limit; undefined reads it now.
 */
function admitAndSend(x: Exchange, route: BeaconRoute, caller: Caller, request: BeaconRequest, held?: Buffer | null): void {
  const { ctx } = x;
  const { method, path, query, headers, contentLength } = request;
  const admitted = admitBeacon(ctx, caller, method, path, query, headers);
  switch (admitted.kind) {
    case 'refused': {
      const extra: Array<[string, string]> | undefined =
        admitted.allow !== undefined
          ? [['allow', admitted.allow]]
          : admitted.refused === 'rate_limited'
            ? retryAfterHeader(admitted.retryAfterMs)
            : undefined;
      replyBeaconError(x, admitted.refused, admitted.message, extra, true);
      return;
    }
    case 'events':
      route.events(x, caller, query);
      return;
    case 'call':
      if (method === 'GET') sendBeacon(x, caller, admitted.call, undefined);
      else sendBeaconPost(x, caller, admitted.call, contentLength, held);
      return;
    default: {
      const unknown: never = admitted;
      throw new Error(`unknown admission ${JSON.stringify(unknown)}`);
    }
  }
}

/** A POST's body, read (or taken as held) within server.max_body_bytes, then sent on. */
function sendBeaconPost(x: Exchange, caller: Caller, call: BeaconCall, contentLength: string, held: Buffer | null | undefined): void {
  const { ctx, res } = x;
  const max = ctx.config.server.max_body_bytes;
  const tooLarge = (): void => {
    refuseBeaconBody(ctx, caller, call);
    replyBeaconError(x, 'body_too_large', `Request body is larger than the limit of ${max} bytes (server.max_body_bytes)`, undefined, true);
  };
  if (held === null || (contentLength !== '' && Number(contentLength) > max)) tooLarge();
  else if (held !== undefined) sendBeacon(x, caller, call, held);
  else readBody(res, x.meta, max, (body) => sendBeacon(x, caller, call, body), tooLarge);
}

/** A Beacon refusal before any exchange exists (the route itself). */
export function sendBeaconError(res: HttpResponse, meta: ResponseMeta, code: ErrorCode, message: string): void {
  sendWhole(res, ERRORS[code].http, meta, JSON_TYPE, beaconErrorBody(code, message), undefined, true);
}
