/**
 * A Beacon REST request after its caller is known: the path, verb and parameters, the request rate, the RU, then
 * the forward on the chain's nodes and the settling of what it cost. The server reads the request and writes
 * what this decides (server/beacon.ts).
 */
import { beaconCost } from '../beacon/costs.js';
import { matchBeaconPath } from '../beacon/paths.js';
import { Attempts, failureOutcome, NO_RETRY, NodeAttempt, RETRY_WITHIN_DEADLINE } from '../chain/attempts.js';
import type { ChainRuntime } from '../chain/runtime.js';
import { type ErrorCode, ERRORS } from '../errors.js';
import type { Reservation } from '../metering/ledger.js';
import type { UpstreamOutcome } from '../metrics/registry.js';
import type { RequestHandle, ResponseSink, UpstreamError } from '../upstreams/http-client.js';
import { admitRu, type Caller, countRefusal, settleCall, takeRequest } from './admission.js';
import type { GatewayContext } from './context.js';
import type { ForwardCall } from './forward.js';
import { logUpstreamFailure } from './plan.js';

/** Request headers a Beacon call carries upstream: the format asked for, the body's type and fork. */
export const FORWARDED_REQUEST_HEADERS = ['accept', 'content-type', 'eth-consensus-version'] as const;

/** Response headers that describe the body (format, fork, block values) and pass through untouched. */
const FORWARDED_RESPONSE_HEADERS: ReadonlySet<string> = new Set([
  'content-type',
  'eth-consensus-version',
  'eth-execution-payload-blinded',
  'eth-execution-payload-value',
  'eth-consensus-block-value',
  'eth-execution-payload-included',
]);

/**
 * The only body formats a Beacon answer is passed in: JSON, SSZ and the event stream. Whatever else a node (or a
 * proxy in front of it) sends, an HTML page above all, would be served from the gateway's origin with its CORS
 * header, where a browser could run it: such an answer is 502 instead.
 */
const PASSED_CONTENT_TYPES: ReadonlySet<string> = new Set(['application/json', 'application/octet-stream', 'text/event-stream']);

/**
 * Why a node's answer may not be passed on (a message for the client), or undefined when it may: its body is
 * in one of PASSED_CONTENT_TYPES (parameters such as charset aside), or it has no body at all.
 */
export function contentTypeRefusal(
  headers: ReadonlyArray<readonly [string, string]>,
  contentLength: number | undefined,
): string | undefined {
  if (contentLength === 0) return undefined;
  const header = headers.find(([k]) => k === 'content-type')?.[1];
  if (header !== undefined && PASSED_CONTENT_TYPES.has(header.split(';', 1)[0]!.trim().toLowerCase())) return undefined;
  const shown = header === undefined ? 'no Content-Type' : `Content-Type ${JSON.stringify(header.slice(0, 64))}`;
  return `The node answered with ${shown}; the gateway passes only application/json, application/octet-stream and text/event-stream`;
}

/** A Beacon request admitted and charged for: where it goes and what it set aside. */
export interface BeaconCall {
  method: 'GET' | 'POST';
  /** Beacon path plus the client's query string, as the upstream gets it. */
  target: string;
  template: string;
  headers: Array<[string, string]>;
  admission: { reservation: Reservation | null; ru: number };
}

/** A refusal in the Beacon shape: the error, its message, an Allow list or a wait (Retry-After). */
export interface BeaconRefusal {
  kind: 'refused';
  refused: ErrorCode;
  message?: string;
  allow?: string;
  retryAfterMs?: number;
}

/** Admission's verdict: a refusal, the event stream (handed over as it is), or a call to forward. */
export type BeaconAdmission = BeaconRefusal | { kind: 'events' } | { kind: 'call'; call: BeaconCall };

const EVENTS: BeaconAdmission = Object.freeze({ kind: 'events' });

/**
 * After the key: path, verb and parameters (404, 405, 400: nothing malformed reaches the node) → request rate
 * (429) → the event stream, handed over as it is (its own limits and price, event-streams.ts) → RU (429, 402).
 * Every refusal is counted in the caller's usage.
 */
export function admitBeacon(
  ctx: GatewayContext,
  caller: Caller,
  method: string,
  path: string,
  query: string,
  headers: Array<[string, string]>,
): BeaconAdmission {
  const t = ctx.tenancy;
  const match = matchBeaconPath(method, path);
  if (!match.ok) {
    const code: ErrorCode = match.status === 404 ? 'not_found' : match.status === 405 ? 'method_not_allowed' : 'bad_request';
    countRefusal(t, caller, path.slice(0, 64), match.status, code, 'other');
    return { kind: 'refused', refused: code, message: match.message, ...(match.allow !== undefined ? { allow: match.allow } : {}) };
  }
  const taken = takeRequest(t, caller);
  if (!taken.ok) {
    const code = taken.error ?? 'rate_limited';
    countRefusal(t, caller, match.template, ERRORS[code].http, code);
    return { kind: 'refused', refused: code, retryAfterMs: taken.retryAfterMs };
  }
  if (match.events) {
    // An event stream is counted as one, once it opens or is refused (event-streams.ts).
    caller.tally.transport = 'sse';
    return EVENTS;
  }
  const admission = admitRu(t, caller, beaconCost(match.template, ctx.config.ru.beacon.paths, ctx.config.ru.beacon.default));
  if (!admission.ok) {
    countRefusal(t, caller, match.template, ERRORS[admission.error].http, admission.error);
    return admission.error === 'rate_limited'
      ? {
          kind: 'refused',
          refused: admission.error,
          ...(admission.retryAfterMs !== undefined ? { retryAfterMs: admission.retryAfterMs } : {}),
        }
      : { kind: 'refused', refused: admission.error };
  }
  return {
    kind: 'call',
    call: {
      method: method as 'GET' | 'POST',
      target: query === '' ? path : `${path}?${query}`,
      template: match.template,
      headers,
      admission,
    },
  };
}

/** A POST whose body is over server.max_body_bytes: nothing is charged, the refusal is counted. */
export function refuseBeaconBody(ctx: GatewayContext, caller: Caller, call: BeaconCall): void {
  caller.tally.refused('body_too_large');
  settleCall(ctx.tenancy, caller, call.template, call.admission, {
    ok: false,
    status: 413,
    reason: ERRORS.body_too_large.message,
    code: 'body_too_large',
  });
}

/** Where a forwarded Beacon answer goes: the server's writes (server/beacon.ts). */
export interface BeaconOut {
  /** The client left: nothing more is written. */
  readonly gone: boolean;
  /** The node's status and the headers that pass through; a contentLength of 0 is a complete answer. */
  head(status: number, headers: ReadonlyArray<readonly [string, string]>, contentLength: number | undefined): void;
  /** Body bytes; false when the client is backpressured (the server calls the call's resume() on drain). */
  data(chunk: Buffer): boolean;
  /** The answer is complete. */
  end(): void;
  /** The node failed after the head went out: the answer is cut. */
  cut(): void;
  /** The gateway's answer in the Beacon shape, before anything went out. */
  error(code: ErrorCode, message?: string): void;
}

const NOTHING: ForwardCall = { abort() {}, resume() {} };

/**
 * Forwards one admitted Beacon call and passes the upstream's answer back untouched: its status, body and
 * format headers. Only a node that cannot be reached, times out, does not speak HTTP or answers a body in a
 * format outside PASSED_CONTENT_TYPES makes a 502. The node is chosen, counted and retried on the chain's one
 * road (chain/attempts.ts): a GET whose node fails before its status line, or answers such a format, is tried
 * once more on another node in rotation within the same deadline (timeout_s from the first attempt,
 * RETRY_WITHIN_DEADLINE); a POST (a submission) never is. An answer from the node is charged
 * whatever its status; a 5xx or a failure to reach it is not.
 */
export function forwardBeacon(
  ctx: GatewayContext,
  chain: ChainRuntime,
  caller: Caller,
  call: BeaconCall,
  body: Buffer | undefined,
  out: BeaconOut,
): ForwardCall {
  const health = chain.health;
  const tries = new Attempts(health, chain.timeoutMs, call.method === 'GET' ? RETRY_WITHIN_DEADLINE : NO_RETRY);
  const first = tries.nextNode();
  const settle = (ok: boolean, reason?: string): void =>
    settleCall(
      ctx.tenancy,
      caller,
      call.template,
      call.admission,
      ok && status < 500
        ? { ok: true, bytes, status }
        : // A node's own status passed on is none of the error table's rows; no status: the gateway's 502.
          {
            ok: false,
            status: status || 502,
            reason: reason ?? `the node answered ${status}`,
            code: status === 0 ? 'upstream_error' : null,
          },
    );
  let status = 0;
  let bytes = 0;
  let headSent = false;
  let attempt: NodeAttempt;
  let handle: RequestHandle;

  /**
   * An attempt that failed: counted, logged (`logged`), then tried on another node when nothing went out yet and
   * the rule allows, else settled uncharged (`reason`) and answered 502 (with `message`, when there is more to say
   * than the default), or cut when the head went out.
   */
  const failed = (a: NodeAttempt, outcome: UpstreamOutcome, logged: string, reason: string, message?: string): void => {
    a.streamEnded();
    a.settle('failed', outcome);
    logUpstreamFailure(ctx, chain, chain.upstreams[a.index]!.label, logged);
    const next = headSent || out.gone ? null : tries.nextNode();
    if (next !== null) {
      send(next);
      return;
    }
    settle(false, reason);
    if (headSent) out.cut();
    else out.error('upstream_error', message);
  };

  const send = (index: number): void => {
    const upstream = chain.upstreams[index]!;
    const a = (attempt = tries.hold(new NodeAttempt(health, index)));
    const sink: ResponseSink = {
      onHead(s, headers, contentLength) {
        const refusal = contentTypeRefusal(headers, contentLength);
        if (refusal !== undefined) {
          // Not passed on, and not the node's answer either: a failed attempt, tried once more as a failure to reach it is.
          handle.abort();
          failed(a, 'http_error', `status ${s}: ${refusal}`, refusal, refusal);
          return;
        }
        status = s;
        // Counted in the node's health as JSON-RPC calls are: answered below 500, else failed.
        a.settle(s < 500 ? 'ok' : 'failed', s < 500 ? 'ok' : 'http_error');
        if (out.gone) return;
        headSent = true;
        a.streamBegan();
        out.head(
          s,
          headers.filter(([k]) => FORWARDED_RESPONSE_HEADERS.has(k)),
          contentLength,
        );
      },
      onData(chunk) {
        bytes += chunk.length;
        return headSent ? out.data(chunk) : true;
      },
      onEnd() {
        a.streamEnded();
        settle(true);
        out.end();
      },
      onError(err: UpstreamError) {
        failed(a, failureOutcome(err.kind), `${err.kind}: ${err.message}`, `${err.kind}: the node failed`);
      },
    };
    handle = upstream.request(
      {
        method: call.method,
        path: call.target,
        headers: call.headers,
        ...(body !== undefined ? { body } : {}),
        timeoutMs: tries.attemptTimeoutMs(),
      },
      sink,
    );
  };

  if (first === null) {
    caller.tally.refused('no_upstream');
    settle(false, 'no healthy upstream');
    out.error('upstream_error', 'No healthy upstream for this chain');
    return NOTHING;
  }
  send(first);
  return {
    abort() {
      // A client that left says nothing about the node.
      attempt.drop();
      attempt.streamEnded();
      handle.abort();
    },
    resume: () => handle.resume(),
  };
}
