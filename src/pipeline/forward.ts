import { createIdRewriter, rewriteId } from '../jsonrpc/id-rewrite.js';
import type { HttpUpstream, RequestHandle, ResponseSink, UpstreamError } from '../upstreams/http-client.js';

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
  /** The call failed. When `started`, begin() was called and the client's answer must be cut, never completed. */
  fail(started: boolean, reason: string): void;
}

/** Answers up to this size are held whole, so a garbled one is a clean 502 instead of a cut stream. */
export const WHOLE_ANSWER_BYTES = 65_536;

const JSON_HEADERS: Array<[string, string]> = [['content-type', 'application/json']];

/**
 * Calls whose repetition has an effect, so the upstream client never moves or re-sends them: a
 * transaction, filter creation and removal, and filter polls (a poll consumes the changes it returns).
 */
const NOT_IDEMPOTENT: ReadonlySet<string> = new Set([
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
      if (finish()) sink.fail(false, 'upstream answer is not a JSON-RPC object');
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
        if (finish()) sink.fail(false, `upstream answered HTTP ${status}`);
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
        if (out === null || !isJson(out)) sink.fail(false, 'upstream answer is not a JSON-RPC object');
        else sink.whole(out);
        return;
      }
      if (!rewriter!.replaced) sink.fail(true, 'upstream answer has no id');
      else sink.end();
    },
    onError(err: UpstreamError) {
      if (finish()) sink.fail(started, `${err.kind}: ${err.message}`);
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
