import { createIdRewriter, rewriteId } from '../jsonrpc/id-rewrite.js';
import type { HttpUpstream, RequestHandle, ResponseSink, UpstreamError, UpstreamErrorKind } from '../upstreams/http-client.js';

/**
 * Why a forwarded call failed, for the choice of retrying it elsewhere: the upstream client's error kinds,
 * `status` for an HTTP answer outside 2xx (with its status), `invalid` for an answer that is not a JSON-RPC
 * object. None of them is a JSON-RPC answer: the node itself did not answer the call.
 */
export type ForwardFailure = { kind: UpstreamErrorKind | 'invalid' } | { kind: 'status'; status: number };

/**
 * Where one forwarded call's answer goes: an HTTP response streamed to the client, or a collector for
 * a batch item or a WebSocket message. Exactly one of whole / end / fail closes a call.
 */
export interface AnswerSink {
  /** The whole answer, id restored: small answers (the usual case) arrive and are checked whole. */
  whole(body: Buffer): void;
  /** A large answer starts; `length` is its exact size in bytes when the node declared one. */
  begin(length: number | undefined): void;
  /** The next piece of a large answer; false means the client is full: call resume() once it drains. */
  chunk(buf: Buffer): boolean;
  end(): void;
  /** The call failed. When `started`, begin() was called and the client's answer must be cut, never completed.
   *  `failure` says why, when an upstream was reached at all (absent for 'no healthy upstream'). */
  fail(started: boolean, reason: string, failure?: ForwardFailure): void;
}

/** A sink whose `failedUpstream` is set to the label of the upstream whose failure it is told, for the log. */
export type RoutedSink = AnswerSink & { failedUpstream?: string };

/** What the log names as the upstream when no upstream was tried at all. */
export const NO_UPSTREAM_LABEL = 'none-in-rotation';

/** Answers up to this size are held whole, so a garbled one is a clean 502 instead of a cut stream. */
export const WHOLE_ANSWER_BYTES = 65_536;

const JSON_HEADERS: Array<[string, string]> = [['content-type', 'application/json']];
const INVALID: ForwardFailure = { kind: 'invalid' };

/**
 * Calls whose repetition has an effect, so neither the upstream client (moving or re-sending) nor the
 * gateway's failover (route-call.ts) ever sends one twice: a transaction, filter creation and removal,
 * and filter polls (a poll consumes the changes it returns).
 */
export const NOT_IDEMPOTENT: ReadonlySet<string> = new Set([
  'eth_sendRawTransaction', 'eth_newFilter', 'eth_newBlockFilter', 'eth_newPendingTransactionFilter',
  'eth_getFilterChanges', 'eth_uninstallFilter',
]);

let nextGatewayId = 1;

/**
 * The gateway's own id for an upstream call. Clients' ids never reach a node: a 30-digit id or an odd
 * string cannot confuse it, and the client gets back exactly the text it sent.
 */
function gatewayId(): number {
  const id = nextGatewayId;
  nextGatewayId = nextGatewayId >= 0x7fffffff ? 1 : nextGatewayId + 1;
  return id;
}

export interface ForwardCall {
  abort(): void;
  resume(): void;
}

/** Sends one JSON-RPC call upstream and delivers its answer, with the client's id, to `sink`. */
export function forwardCall(
  upstream: HttpUpstream, timeoutMs: number, method: string, paramsJson: string, clientIdText: string, sink: AnswerSink,
): ForwardCall {
  const body = `{"jsonrpc":"2.0","id":${gatewayId()},"method":${JSON.stringify(method)},"params":${paramsJson}}`;
  let held: Buffer[] | null = [];
  let heldBytes = 0;
  let declared: number | undefined;
  let rewriter: ReturnType<typeof createIdRewriter> | null = null;
  let started = false;
  let done = false;
  const finish = (): boolean => {
    if (done) return false;
    done = true;
    return true;
  };
  const startStreaming = (): boolean => {
    rewriter = createIdRewriter(clientIdText);
    const parts = held!.flatMap((b) => rewriter!.push(b));
    held = null;
    if (rewriter.invalid) {
      handle.abort();
      if (finish()) sink.fail(false, 'upstream answer is not a JSON-RPC object', INVALID);
      return true;
    }
    started = true;
    // The rewriter may hold bytes until it has seen the id; the size change is known only then, so a
    // declared length is passed on only when the id has been replaced in what is already here.
    sink.begin(declared !== undefined && rewriter.replaced ? declared + rewriter.delta : undefined);
    let ok = true;
    for (const p of parts) ok = sink.chunk(p) && ok;
    return ok;
  };
  const upstreamSink: ResponseSink = {
    onHead(status, _headers, contentLength) {
      if (status < 200 || status > 299) {
        handle.abort();
        if (finish()) sink.fail(false, `upstream answered HTTP ${status}`, { kind: 'status', status });
        return;
      }
      declared = contentLength;
    },
    onData(chunk) {
      if (done) return true;
      if (held !== null) {
        held.push(chunk);
        heldBytes += chunk.length;
        if (heldBytes <= WHOLE_ANSWER_BYTES) return true;
        return startStreaming();
      }
      let ok = true;
      for (const p of rewriter!.push(chunk)) ok = sink.chunk(p) && ok;
      return ok;
    },
    onEnd() {
      if (!finish()) return;
      if (held !== null) {
        const whole = held.length === 1 ? held[0]! : Buffer.concat(held, heldBytes);
        const out = rewriteId(whole, clientIdText);
        if (out === null || !isJson(out)) sink.fail(false, 'upstream answer is not a JSON-RPC object', INVALID);
        else sink.whole(out);
        return;
      }
      if (!rewriter!.replaced) sink.fail(true, 'upstream answer has no id', INVALID);
      else sink.end();
    },
    onError(err: UpstreamError) {
      if (finish()) sink.fail(started, `${err.kind}: ${err.message}`, { kind: err.kind });
    },
  };
  const handle: RequestHandle = upstream.request(
    // A write is never pipelined behind or ahead of other calls: it must never be re-sent elsewhere.
    { method: 'POST', headers: JSON_HEADERS, body, timeoutMs, exclusive: NOT_IDEMPOTENT.has(method) },
    upstreamSink,
  );
  return {
    abort() {
      if (finish()) handle.abort();
    },
    resume() {
      handle.resume();
    },
  };
}

function isJson(buf: Buffer): boolean {
  try {
    JSON.parse(buf.toString());
    return true;
  } catch {
    return false;
  }
}

/** An answer the gateway gives without an upstream, delivered after the caller holds its ForwardCall (as
 *  upstream answers are) and not at all once that call is aborted. */
export function answerSoon(sink: RoutedSink, deliver: (sink: RoutedSink) => void): ForwardCall {
  let aborted = false;
  queueMicrotask(() => {
    if (!aborted) deliver(sink);
  });
  return {
    abort() {
      aborted = true;
    },
    resume() {},
  };
}

/** No upstream of the chain is in rotation: the call fails at once, before any upstream is tried. */
export function noHealthyUpstream(sink: RoutedSink): ForwardCall {
  sink.failedUpstream = NO_UPSTREAM_LABEL;
  return answerSoon(sink, (s) => s.fail(false, 'no healthy upstream'));
}
