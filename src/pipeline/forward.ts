import { createIdRewriter, type IdRewriter } from '../jsonrpc/id-rewrite.js';
import type { MethodRow } from '../jsonrpc/method-rule.js';
import { rewriteWholeAnswer, WRONG_ID } from '../jsonrpc/whole-answer.js';
import { gatewayIdText } from '../upstreams/call-ids.js';
import { retryAfterMs } from '../upstreams/node-budget.js';
import type {
  HttpUpstream,
  RequestHandle,
  ResponseSink,
  UpstreamError,
  UpstreamErrorKind,
  UpstreamRequest,
} from '../upstreams/http-client.js';

/**
 * Why a forwarded call failed, for the choice of retrying it elsewhere: the upstream client's error kinds,
 * `status` for an HTTP answer outside 2xx (with its status), `invalid` for an answer that is not a JSON-RPC
 * object, `wrong_id` for one that is another call's (its id is not the one sent, or it has two). None of them
 * is a JSON-RPC answer to the call: the node itself did not answer it.
 */
export type ForwardFailure =
  | { kind: UpstreamErrorKind | 'invalid' | 'wrong_id' }
  /** `retryAfterMs`: a 429's Retry-After, in ms (upstreams/node-budget.ts), null without one. */
  | { kind: 'status'; status: number; retryAfterMs?: number | null };

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

// Frozen, so the upstream client renders its header line once (request-head.ts).
const JSON_HEADERS: ReadonlyArray<readonly [string, string]> = Object.freeze([
  Object.freeze(['content-type', 'application/json'] as const),
]);
const INVALID: ForwardFailure = { kind: 'invalid' };
const WRONG_ID_FAILURE: ForwardFailure = { kind: 'wrong_id' };
const NOT_JSON_RPC = 'upstream answer is not a JSON-RPC object';
/** Why a call failed whose answer was another call's (wrong_id): the log tells it apart by this text. */
export const WRONG_ID_REASON = "upstream answer carries another call's id";

export { GATEWAY_IDS } from '../upstreams/call-ids.js';

export interface ForwardCall {
  abort(): void;
  resume(): void;
}

/** Sends one JSON-RPC call of method `row` upstream and delivers its answer, with the client's id, to `sink`. */
export function forwardCall(
  upstream: HttpUpstream,
  timeoutMs: number,
  row: MethodRow,
  paramsJson: string,
  clientIdText: string,
  sink: AnswerSink,
  answerTimeoutMs?: number,
): ForwardCall {
  return new UpstreamCall(upstream, timeoutMs, row, paramsJson, clientIdText, sink, answerTimeoutMs);
}

/**
 * One call on its way to a node. It is the upstream client's sink itself, and its state lives in fields:
 * every forwarded call makes one of these, so it costs one object instead of a dozen closures.
 */
class UpstreamCall implements ResponseSink, ForwardCall {
  /** The answer's first chunk while it may still be held whole; `more` holds the rest (rarely any). */
  private first: Buffer | null = null;
  private more: Buffer[] | null = null;
  private heldBytes = 0;
  /** Set once the answer outgrew WHOLE_ANSWER_BYTES and streams through the id rewriter. */
  private rewriter: IdRewriter | null = null;
  /** The id this call was sent upstream with: the answer must carry it, once. */
  private readonly sentIdText: string;
  private declared: number | undefined = undefined;
  private started = false;
  private done = false;
  /** `first` is the upstream client's read buffer (onWholeBody): what is kept of it must be copied. */
  private lent = false;
  private readonly handle: RequestHandle;
  /** Only the status and the length of an answer matter here. */
  readonly ignoresHeaders = true;

  constructor(
    upstream: HttpUpstream,
    timeoutMs: number,
    row: MethodRow,
    paramsJson: string,
    private readonly clientIdText: string,
    private readonly sink: AnswerSink,
    answerTimeoutMs: number | undefined,
  ) {
    this.sentIdText = gatewayIdText();
    const body = `{"jsonrpc":"2.0","id":${this.sentIdText}${row.bodyMiddle}${paramsJson}}`;
    // A write is never pipelined behind or ahead of other calls: it must never be re-sent elsewhere.
    // answerTimeoutMs: a method's own answer deadline (its failover policy's answer_timeout_s), undefined when it is
    // the chain's. Always written, so every request has one shape for the client to read.
    const req: UpstreamRequest = { method: 'POST', headers: JSON_HEADERS, body, timeoutMs, exclusive: !row.repeatable, answerTimeoutMs };
    this.handle = upstream.request(req, this);
  }

  private finish(): boolean {
    if (this.done) return false;
    this.done = true;
    return true;
  }

  /**
   * The answer is not this call's or not JSON-RPC: the upstream request is dropped (with its socket, for an
   * answer that is another call's: the socket's answers are out of step) and the call fails.
   */
  private refuse(wrongId: boolean): void {
    if (wrongId) this.handle.distrust();
    else this.handle.abort();
    if (this.finish()) this.sink.fail(this.started, wrongId ? WRONG_ID_REASON : NOT_JSON_RPC, wrongId ? WRONG_ID_FAILURE : INVALID);
  }

  private startStreaming(): boolean {
    const rewriter = createIdRewriter(this.clientIdText, this.sentIdText);
    this.rewriter = rewriter;
    const parts = rewriter.push(this.first!);
    if (this.more !== null) for (const b of this.more) parts.push(...rewriter.push(b));
    this.first = null;
    this.more = null;
    if (rewriter.invalid) {
      this.refuse(rewriter.wrongId);
      return true;
    }
    this.started = true;
    // The rewriter may hold bytes until it has seen the id; the size change is known only then, so a
    // declared length is passed on only when the id has been replaced in what is already here.
    this.sink.begin(this.declared !== undefined && rewriter.replaced ? this.declared + rewriter.delta : undefined);
    let ok = true;
    for (const p of parts) ok = this.sink.chunk(p) && ok;
    return ok;
  }

  onHead(status: number, headers: Array<[string, string]>, contentLength: number | undefined): void {
    if (status < 200 || status > 299) {
      this.handle.abort();
      // The head of an answer outside 2xx keeps its headers (http-head.ts): a 429 may say when to come back.
      const retryAfter = status === 429 ? retryAfterMs(headers.find(([name]) => name === 'retry-after')?.[1], Date.now()) : null;
      if (this.finish()) this.sink.fail(false, `upstream answered HTTP ${status}`, { kind: 'status', status, retryAfterMs: retryAfter });
      return;
    }
    this.declared = contentLength;
  }

  onWholeBody(body: Buffer): void {
    // Borrowed until onEnd returns: onEnd's rewrite copies it into the client's answer.
    if (this.done) return;
    // Too large to be held whole (a TLS read may hold more than WHOLE_ANSWER_BYTES): streamed, from a copy.
    if (body.length > WHOLE_ANSWER_BYTES) {
      this.onData(Buffer.from(body));
      return;
    }
    this.first = body;
    this.heldBytes = body.length;
    this.lent = true;
  }

  onData(chunk: Buffer): boolean {
    if (this.done) return true;
    const rewriter = this.rewriter;
    if (rewriter === null) {
      if (this.first === null) this.first = chunk;
      else (this.more ??= []).push(chunk);
      this.heldBytes += chunk.length;
      if (this.heldBytes <= WHOLE_ANSWER_BYTES) return true;
      return this.startStreaming();
    }
    const parts = rewriter.push(chunk);
    if (rewriter.invalid) {
      // Bytes were sent already: the client's answer is cut, never completed.
      this.refuse(rewriter.wrongId);
      return true;
    }
    let ok = true;
    for (const p of parts) ok = this.sink.chunk(p) && ok;
    return ok;
  }

  onEnd(): void {
    if (!this.finish()) return;
    if (this.rewriter === null) {
      const first = this.first ?? EMPTY;
      const whole = this.more === null ? first : Buffer.concat([first, ...this.more], this.heldBytes);
      this.first = null;
      this.more = null;
      const out = rewriteWholeAnswer(whole, this.clientIdText, this.sentIdText);
      if (out === null) {
        this.sink.fail(false, NOT_JSON_RPC, INVALID);
      } else if (out === WRONG_ID) {
        this.handle.distrust();
        this.sink.fail(false, WRONG_ID_REASON, WRONG_ID_FAILURE);
      } else {
        // The same id both ways leaves the node's bytes as they are: lent ones are copied to be kept.
        this.sink.whole(out === whole && this.lent ? Buffer.from(out) : out);
      }
      return;
    }
    if (!this.rewriter.replaced) this.sink.fail(true, 'upstream answer has no id', INVALID);
    else if (!this.rewriter.closed) this.sink.fail(true, 'upstream answer is cut off', INVALID);
    else this.sink.end();
  }

  onError(err: UpstreamError): void {
    if (this.finish()) this.sink.fail(this.started, `${err.kind}: ${err.message}`, { kind: err.kind });
  }

  abort(): void {
    if (this.finish()) this.handle.abort();
  }

  resume(): void {
    this.handle.resume();
  }
}

const EMPTY = Buffer.alloc(0);

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

/** Why a call failed that every node able to take was left without for its budget (upstreams/node-budget.ts):
 *  the client is answered upstream_budget (upstream-failures.ts tells it by this text). */
export const NO_BUDGET_REASON = 'every node is at its rate budget (rps, max_in_flight) or cooling down after a 429';

/** No upstream of the chain is in rotation (or, `shortOfBudget`, none has room in its budget): the call fails at
 *  once, before any upstream is tried. */
export function noHealthyUpstream(sink: RoutedSink, shortOfBudget = false): ForwardCall {
  sink.failedUpstream = NO_UPSTREAM_LABEL;
  return answerSoon(sink, (s) => s.fail(false, shortOfBudget ? NO_BUDGET_REASON : 'no healthy upstream'));
}
