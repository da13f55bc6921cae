import { matchBeaconPath } from '../beacon/paths.js';
import { beaconCost } from '../beacon/costs.js';
import { type ErrorCode, ERRORS, beaconErrorBody } from '../errors.js';
import { retryAfterSeconds } from '../limits/sliding-window.js';
import { admitRu, type Caller, countRefusal, settleCall, takeRequest } from '../pipeline/admission.js';
import { resolveCaller } from '../pipeline/caller.js';
import { clientIp } from './peer-address.js';
import { logUpstreamFailure } from '../pipeline/plan.js';
import type { ResponseSink, UpstreamError } from '../upstreams/http-client.js';
import type { ChainRuntime } from '../chain/runtime.js';
import { readBody } from './body.js';
import type { GatewayContext } from '../pipeline/context.js';
import { type Exchange, finish, reply } from './exchange.js';
import { type ResponseMeta, sendWhole, writeHead } from './respond.js';
import { createStreamOut, type StreamOut } from './stream-out.js';
import type { HttpRequest, HttpResponse } from './uws.js';

const JSON_TYPE = 'application/json';

/** Request headers a Beacon call carries upstream: the format asked for, the body's type and fork. */
const FORWARDED_REQUEST_HEADERS = ['accept', 'content-type', 'eth-consensus-version'] as const;

/** Response headers that describe the body (format, fork, block values) and pass through untouched. */
const FORWARDED_RESPONSE_HEADERS: ReadonlySet<string> = new Set([
  'content-type',
  'eth-consensus-version',
  'eth-execution-payload-blinded',
  'eth-execution-payload-value',
  'eth-consensus-block-value',
  'eth-execution-payload-included',
]);

function retryAfter(ms: number | undefined): Array<[string, string]> | undefined {
  if (ms === undefined) return undefined;
  return [['retry-after', String(Number.isFinite(ms) ? retryAfterSeconds(ms) : 60)]];
}

function replyBeaconError(
  x: Exchange,
  code: ErrorCode,
  message?: string,
  headers?: Array<[string, string]>,
  closeConnection = false,
): void {
  reply(x, ERRORS[code].http, beaconErrorBody(code, message), headers, closeConnection);
}

/** What a Beacon request needs once admitted: where it goes and what it set aside. */
export interface BeaconCall {
  method: 'GET' | 'POST';
  /** Beacon path plus the client's query string, as the upstream gets it. */
  target: string;
  template: string;
  headers: Array<[string, string]>;
}

/** A GET whose node failed before answering is tried once more on another node only with this much of its deadline left, in ms. */
const MIN_RETRY_MS = 100;

/**
 * Forwards one admitted Beacon call and streams the upstream's answer back untouched: its status,
 * body and format headers. Only a node that cannot be reached, times out or does not speak HTTP
 * makes a 502, in the Beacon error shape. A GET whose node fails before its status line is tried once
 * more on another node in rotation within the same deadline (timeout_s from the first attempt); a POST
 * (a submission) never is.
 */
function forwardBeacon(
  x: Exchange,
  caller: Caller,
  call: BeaconCall,
  body: Buffer | undefined,
  admission: { reservation: import('../metering/ledger.js').Reservation | null; ru: number },
  tried: Set<number> = new Set(),
  deadline = x.chain.health.now() + x.chain.timeoutMs,
): void {
  const t = x.ctx.tenancy;
  const picked = x.chain.pickHealthy(tried);
  if (picked === null) {
    settleCall(t, caller, call.template, admission, { ok: false, status: 502 });
    replyBeaconError(x, 'upstream_error', 'No healthy upstream for this chain');
    return;
  }
  const { upstream } = picked;
  tried.add(picked.index);
  // The call counts in the node's health as JSON-RPC calls do: in flight, then answered (below 500) or failed.
  const health = x.chain.health.upstreams[picked.index]!;
  const startedAt = x.chain.health.now();
  let counted = true;
  health.inflight++;
  const record = (outcome: 'ok' | 'failed'): void => {
    if (!counted) return;
    counted = false;
    health.inflight--;
    health.record(outcome, x.chain.health.now() - startedAt);
  };
  let out: StreamOut | null = null;
  let headSent = false;
  let status = 0;
  let bytes = 0;
  const settle = (ok: boolean): void => {
    // An answer from the node is charged whatever its status; a 5xx or a failure to reach it is not.
    settleCall(t, caller, call.template, admission, ok && status < 500 ? { ok: true, bytes } : { ok: false, status: status || 502 });
  };
  const sink: ResponseSink = {
    onHead(s, headers, contentLength) {
      status = s;
      record(s < 500 ? 'ok' : 'failed');
      if (x.aborted) return;
      headSent = true;
      x.res.cork(() => {
        writeHead(x.res, s, x.meta, null);
        for (const [k, v] of headers) if (FORWARDED_RESPONSE_HEADERS.has(k)) x.res.writeHeader(k, v);
        // An empty body (node/health's 200, 206 or 503) is complete with its head: a stream of zero declared
        // bytes never sees the write that would end it, and its end() would cut the connection instead.
        if (contentLength === 0) x.res.end();
      });
      if (contentLength !== 0)
        out = createStreamOut(
          x.res,
          contentLength,
          () => x.aborted,
          () => handle.resume(),
        );
    },
    onData(chunk) {
      bytes += chunk.length;
      return out === null ? true : out.write(chunk);
    },
    onEnd() {
      settle(true);
      out?.end();
      finish(x);
    },
    onError(err: UpstreamError) {
      record('failed');
      logUpstreamFailure(x.ctx, x.chain, upstream.label, `${err.kind}: ${err.message}`);
      const left = deadline - x.chain.health.now();
      if (
        !headSent &&
        !x.aborted &&
        call.method === 'GET' &&
        tried.size === 1 &&
        left >= MIN_RETRY_MS &&
        x.chain.pickHealthy(tried) !== null
      ) {
        forwardBeacon(x, caller, call, body, admission, tried, deadline);
        return;
      }
      settle(false);
      if (out !== null) {
        out.cut();
        finish(x);
      } else if (headSent) {
        finish(x);
      } else {
        replyBeaconError(x, 'upstream_error');
      }
    },
  };
  const handle = upstream.request(
    {
      method: call.method,
      path: call.target,
      headers: call.headers,
      ...(body !== undefined ? { body } : {}),
      timeoutMs: Math.max(1, deadline - x.chain.health.now()),
    },
    sink,
  );
  x.calls.push({
    abort: () => {
      // A client that left says nothing about the node.
      if (counted) {
        counted = false;
        health.inflight--;
      }
      handle.abort();
    },
    resume: () => handle.resume(),
  });
}

/**
 * `/v1/rpc/<key>/<beacon path>` on a beacon chain. Order: key (401) → path, verb and parameters (404,
 * 405, 400; nothing malformed reaches the node) → request rate (429) → RU (429, 402) → forward. The
 * event stream is handed to `events` once admitted.
 */
export function handleBeacon(
  ctx: GatewayContext,
  res: HttpResponse,
  req: HttpRequest,
  chain: ChainRuntime,
  key: string | null,
  named: boolean,
  path: string,
  meta: ResponseMeta,
  events: (x: Exchange, caller: Caller, query: string) => void,
): void {
  const method = req.getMethod().toUpperCase();
  const query = req.getQuery() ?? '';
  const headers: Array<[string, string]> = [];
  for (const h of FORWARDED_REQUEST_HEADERS) {
    const v = req.getHeader(h);
    if (v !== '') headers.push([h, v]);
  }
  const contentLength = req.getHeader('content-length');
  const ipOf = (): string => clientIp(res, req, ctx.config.server.trust_proxy);
  const x: Exchange = { ctx, res, meta, chain, aborted: false, finished: false, calls: [] };
  ctx.inFlight++;
  res.onAborted(() => {
    x.aborted = true;
    for (const c of x.calls) c.abort();
    finish(x);
  });
  const resolved = resolveCaller(ctx, chain, key, named, ipOf);
  if ('error' in resolved) {
    replyBeaconError(x, resolved.error, resolved.message, resolved.error === 'rate_limited' ? retryAfter(60_000) : undefined, true);
    return;
  }
  x.chain = resolved.chain;
  const { caller } = resolved;
  const match = matchBeaconPath(method, path);
  if (!match.ok) {
    countRefusal(ctx.tenancy, caller, path.slice(0, 64), match.status);
    const code: ErrorCode = match.status === 404 ? 'not_found' : match.status === 405 ? 'method_not_allowed' : 'bad_request';
    replyBeaconError(x, code, match.message, match.allow !== undefined ? [['allow', match.allow]] : undefined, true);
    return;
  }
  const taken = takeRequest(ctx.tenancy, caller);
  if (!taken.ok) {
    countRefusal(ctx.tenancy, caller, match.template, 429);
    replyBeaconError(x, 'rate_limited', undefined, retryAfter(taken.retryAfterMs), true);
    return;
  }
  if (match.events) {
    events(x, caller, query);
    return;
  }
  const ru = beaconCost(match.template, ctx.config.ru.beacon.paths, ctx.config.ru.beacon.default);
  const admission = admitRu(ctx.tenancy, caller, ru);
  if (!admission.ok) {
    countRefusal(ctx.tenancy, caller, match.template, ERRORS[admission.error].http);
    replyBeaconError(
      x,
      admission.error,
      undefined,
      admission.error === 'rate_limited' ? retryAfter(admission.retryAfterMs) : undefined,
      true,
    );
    return;
  }
  const call: BeaconCall = {
    method: method as 'GET' | 'POST',
    target: query === '' ? path : `${path}?${query}`,
    template: match.template,
    headers,
  };
  if (method === 'GET') {
    forwardBeacon(x, caller, call, undefined, admission);
    return;
  }
  const max = ctx.config.server.max_body_bytes;
  const tooLarge = (): void => {
    settleCall(ctx.tenancy, caller, match.template, admission, { ok: false, status: 413 });
    replyBeaconError(x, 'body_too_large', `Request body is larger than the limit of ${max} bytes (server.max_body_bytes)`, undefined, true);
  };
  if (contentLength !== '' && Number(contentLength) > max) {
    tooLarge();
    return;
  }
  readBody(res, max, (body) => forwardBeacon(x, caller, call, body, admission), tooLarge);
}

/** A Beacon refusal before any exchange exists (the route itself). */
export function sendBeaconError(res: HttpResponse, meta: ResponseMeta, code: ErrorCode, message: string): void {
  sendWhole(res, ERRORS[code].http, meta, JSON_TYPE, beaconErrorBody(code, message), undefined, true);
}
