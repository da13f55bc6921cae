import { type ErrorCode, ERRORS, rpcErrorBody } from '../errors.js';
import { checkCall } from '../jsonrpc/methods.js';
import { parseBody, type ParsedItem } from '../jsonrpc/parse.js';
import { type AnswerSink, forwardCall, type ForwardCall } from '../pipeline/forward.js';
import type { ChainRuntime } from '../upstreams/chain.js';
import { readBody } from './body.js';
import { type GatewayContext, requestDone } from './context.js';
import { JSON_TYPE, type ResponseMeta, sendWhole, writeHead } from './respond.js';
import { createStreamOut, type StreamOut } from './stream-out.js';
import type { HttpRequest, HttpResponse } from './uws.js';

const JSON_CONTENT_TYPE = /^application\/json\s*(?:;|$)/i;

/** One request's state, shared by its callbacks; `aborted` means the client is gone and res is dead. */
interface Exchange {
  ctx: GatewayContext;
  res: HttpResponse;
  meta: ResponseMeta;
  chain: ChainRuntime;
  aborted: boolean;
  finished: boolean;
  calls: ForwardCall[];
}

function finish(x: Exchange): void {
  if (x.finished) return;
  x.finished = true;
  requestDone(x.ctx);
}

function reply(x: Exchange, status: number, body: string | Buffer, closeConnection = false): void {
  if (!x.aborted) sendWhole(x.res, status, x.meta, JSON_TYPE, body, undefined, closeConnection || x.ctx.stopping);
  finish(x);
}

function replyError(x: Exchange, code: ErrorCode, message?: string, closeConnection = false): void {
  reply(x, ERRORS[code].http, rpcErrorBody(code, 'null', message), closeConnection);
}

function resultBody(idText: string, resultJson: string): string {
  return `{"jsonrpc":"2.0","id":${idText},"result":${resultJson}}`;
}

/**
 * One item's fate before any upstream call: an answer the gateway gives itself (error or local
 * result), or the normalized params to forward.
 */
type ItemPlan =
  | { answer: string; outcome: ErrorCode | 'ok' }
  | { forward: { method: string; paramsJson: string; idText: string } };

function planItem(item: ParsedItem, x: Exchange): ItemPlan {
  if (!item.ok) return { answer: rpcErrorBody(item.error, item.idText, item.message), outcome: item.error };
  const check = checkCall(item.method, item.params, { chainId: x.chain.config.chain_id ?? 0, transport: 'http' });
  switch (check.kind) {
    case 'error':
      return { answer: rpcErrorBody(check.error, item.idText, check.message), outcome: check.error };
    case 'local':
      return { answer: resultBody(item.idText, check.resultJson), outcome: 'ok' };
    default:
      return { forward: { method: item.method, paramsJson: JSON.stringify(check.params), idText: item.idText } };
  }
}

function logUpstreamFailure(x: Exchange, upstreamLabel: string, reason: string): void {
  x.ctx.log.warn('upstream call failed', { chain: x.chain.config.slug, upstream: upstreamLabel, reason });
}

/** A single call: small answers go out whole, large ones stream with backpressure. */
function forwardSingle(x: Exchange, f: { method: string; paramsJson: string; idText: string }): void {
  const upstream = x.chain.pickUpstream();
  let out: StreamOut | null = null;
  const sink: AnswerSink = {
    whole(body) {
      reply(x, 200, body);
    },
    begin(length) {
      if (!x.aborted) {
        x.res.cork(() => writeHead(x.res, 200, x.meta, JSON_TYPE));
        out = createStreamOut(x.res, length, () => x.aborted, () => call.resume());
      }
    },
    chunk(buf) {
      return out === null ? true : out.write(buf);
    },
    end() {
      out?.end();
      finish(x);
    },
    fail(started, reason) {
      logUpstreamFailure(x, upstream.label, reason);
      if (started) {
        out?.cut();
        finish(x);
      } else {
        reply(x, 502, rpcErrorBody('upstream_error', f.idText));
      }
    },
  };
  const call = forwardCall(upstream, x.chain.timeoutMs, f.method, f.paramsJson, f.idText, sink);
  x.calls.push(call);
}

/** A forwarded batch item's answer, collected whole so the batch can be answered in request order. */
function collectItem(x: Exchange, f: { method: string; paramsJson: string; idText: string }, done: (answer: string | Buffer, outcome: ErrorCode | 'ok') => void): void {
  const upstream = x.chain.pickUpstream();
  let parts: Buffer[] = [];
  const sink: AnswerSink = {
    whole: (body) => done(body, 'ok'),
    begin() {},
    chunk(buf) {
      parts.push(buf);
      return true;
    },
    end() {
      done(Buffer.concat(parts), 'ok');
      parts = [];
    },
    fail(_started, reason) {
      logUpstreamFailure(x, upstream.label, reason);
      done(rpcErrorBody('upstream_error', f.idText), 'upstream_error');
    },
  };
  x.calls.push(forwardCall(upstream, x.chain.timeoutMs, f.method, f.paramsJson, f.idText, sink));
}

/**
 * The batch's HTTP status: 200 when any item got a normal answer; when every item was refused for
 * the same gateway reason (429, 402, 502), that reason's status, so a client's retry logic sees it.
 */
function batchStatus(outcomes: ReadonlyArray<ErrorCode | 'ok'>): number {
  const first = outcomes[0];
  if (first === 'rate_limited' || first === 'insufficient_balance' || first === 'upstream_error') {
    if (outcomes.every((o) => o === first)) return ERRORS[first].http;
  }
  return 200;
}

function answerBatch(x: Exchange, items: ParsedItem[]): void {
  if (items.length > x.ctx.config.server.max_batch) {
    replyError(x, 'batch_too_large', `Batch of ${items.length} items is larger than the limit of ${x.ctx.config.server.max_batch} (server.max_batch)`);
    return;
  }
  const answers: Array<string | Buffer> = new Array(items.length);
  const outcomes: Array<ErrorCode | 'ok'> = new Array(items.length);
  let pending = items.length;
  const settle = (i: number, answer: string | Buffer, outcome: ErrorCode | 'ok'): void => {
    answers[i] = answer;
    outcomes[i] = outcome;
    if (--pending > 0) return;
    const body = Buffer.concat([
      Buffer.from('['),
      ...answers.flatMap((a, j) => [j === 0 ? EMPTY : COMMA, typeof a === 'string' ? Buffer.from(a) : a]),
      Buffer.from(']'),
    ]);
    reply(x, batchStatus(outcomes), body);
  };
  items.forEach((item, i) => {
    const plan = planItem(item, x);
    if ('answer' in plan) settle(i, plan.answer, plan.outcome);
    else collectItem(x, plan.forward, (a, o) => settle(i, a, o));
  });
}

const EMPTY = Buffer.alloc(0);
const COMMA = Buffer.from(',');

function answerBody(x: Exchange, body: Buffer): void {
  const parsed = parseBody(body);
  if (parsed.kind === 'error') {
    reply(x, 200, rpcErrorBody(parsed.error, 'null', parsed.message));
    return;
  }
  if (parsed.kind === 'batch') {
    answerBatch(x, parsed.items);
    return;
  }
  const plan = planItem(parsed.item, x);
  if ('answer' in plan) reply(x, 200, plan.answer);
  else forwardSingle(x, plan.forward);
}

/**
 * POST /v1/rpc/<key>: the JSON-RPC pipeline over HTTP. Runs synchronously inside the uWS handler up
 * to the body read, so every header is copied out of `req` first.
 */
export function handleHttpRpc(
  ctx: GatewayContext, res: HttpResponse, req: HttpRequest, chain: ChainRuntime, key: string | null, meta: ResponseMeta,
): void {
  const contentType = req.getHeader('content-type');
  const contentLength = req.getHeader('content-length');
  const x: Exchange = { ctx, res, meta, chain, aborted: false, finished: false, calls: [] };
  ctx.inFlight++;
  res.onAborted(() => {
    x.aborted = true;
    for (const c of x.calls) c.abort();
    finish(x);
  });
  const max = ctx.config.server.max_body_bytes;
  if (key !== null) {
    replyError(x, 'unauthorized', undefined, true);
    return;
  }
  if (!JSON_CONTENT_TYPE.test(contentType)) {
    replyError(x, 'unsupported_media_type', undefined, true);
    return;
  }
  if (contentLength !== '' && Number(contentLength) > max) {
    replyError(x, 'body_too_large', `Request body of ${contentLength} bytes is larger than the limit of ${max} bytes (server.max_body_bytes)`, true);
    return;
  }
  readBody(res, max, (body) => answerBody(x, body), () => {
    replyError(x, 'body_too_large', `Request body is larger than the limit of ${max} bytes (server.max_body_bytes)`, true);
  });
}
