import { type ErrorCode, ERRORS, rpcErrorBody, rpcErrorBodyFor } from '../errors.js';
import { type ParsedBody, parseBody, type ParsedItem, requestIds } from '../jsonrpc/parse.js';
import { abandonCall, type Caller, settleCall } from '../pipeline/admission.js';
import type { AnswerSink, ForwardCall } from '../pipeline/forward.js';
import { sharedCall } from '../pipeline/shared-call.js';
import { tracing } from '../pipeline/tracing.js';
import {
  batchRefusal,
  collectCall,
  failedCallAnswer,
  type Forward,
  logUpstreamFailure,
  planItem,
  settleUpstreamFailure,
} from '../pipeline/plan.js';
import { askFleetForItems } from '../pipeline/fleet-gate.js';
import { type RequestTally, tallyFor } from '../pipeline/answers.js';
import { BodyRead, readBody } from './body.js';
import { admitCaller, type Exchange, type ExchangeRoute, finish, reply, replyError, replySoon } from './exchange.js';
import { createStreamOut, type StreamOut } from './stream-out.js';
import { JSON_TYPE, retryAfterHeader, writeHead } from './respond.js';
import { errorText } from '../log.js';

const JSON_CONTENT_TYPE = /^application\/json\s*(?:;|$)/i;

/** A single call: small answers go out whole, large ones stream with backpressure. */
function forwardSingle(x: Exchange, caller: Caller, f: Forward): void {
  const answer = new SingleAnswer(x, caller, f);
  if (tracing !== null) tracing.beginCall(f.admission, f.method, caller.tally.startedAt);
  answer.call = sharedCall(x.ctx, x.chain, f, answer);
  if (tracing !== null) tracing.leave();
  x.calls.push(answer);
}

/**
 * Where a single forwarded call's answer goes: the client's HTTP response. It is also what the exchange
 * holds to stop the call when its client leaves, so a call costs one object here.
 */
class SingleAnswer implements AnswerSink, ForwardCall {
  call: ForwardCall | null = null;
  failedUpstream?: string;
  private out: StreamOut | null = null;
  private bytes = 0;

  constructor(
    private readonly x: Exchange,
    private readonly caller: Caller,
    private readonly f: Forward,
  ) {}

  whole(body: Buffer): void {
    settleCall(this.x.ctx.tenancy, this.caller, this.f.method, this.f.admission, { ok: true, bytes: body.length });
    replySoon(this.x, 200, body);
  }

  begin(length: number | undefined): void {
    const x = this.x;
    if (x.aborted) return;
    x.res.cork(() => writeHead(x.res, 200, x.meta, JSON_TYPE));
    this.out = createStreamOut(
      x.res,
      length,
      () => x.aborted,
      () => this.call?.resume(),
    );
  }

  chunk(buf: Buffer): boolean {
    this.bytes += buf.length;
    return this.out === null ? true : this.out.write(buf);
  }

  end(): void {
    settleCall(this.x.ctx.tenancy, this.caller, this.f.method, this.f.admission, { ok: true, bytes: this.bytes });
    this.out?.end();
    finish(this.x);
  }

  /** The client left: the call stops and the RU set aside for it go back (unless its answer settled them). */
  abort(): void {
    this.call?.abort();
    abandonCall(this.x.ctx.tenancy, this.caller, this.f.admission);
  }

  resume(): void {
    this.call?.resume();
  }

  fail(started: boolean, reason: string): void {
    const { x, f } = this;
    logUpstreamFailure(x.ctx, x.chain, this.failedUpstream ?? '', reason);
    // A cut stream was partly delivered: it is charged for what was sent, like any started answer.
    if (started) settleCall(x.ctx.tenancy, this.caller, f.method, f.admission, { ok: true, bytes: this.bytes });
    else settleUpstreamFailure(x.ctx, this.caller, f, reason, this.failedUpstream);
    if (started) {
      this.out?.cut();
      finish(x);
    } else {
      const failed = failedCallAnswer(reason, f.idText);
      reply(x, ERRORS[failed.code].http, failed.body);
    }
  }
}

/**
 * The batch's HTTP status: 200 when any item got a normal answer; when every item was refused for
 * the same gateway reason (429, 402, 502, 503), that reason's status, so a client's retry logic sees it.
 */
function batchStatus(outcomes: ReadonlyArray<ErrorCode | 'ok'>): number {
  const first = outcomes[0];
  if (
    first === 'rate_limited' ||
    first === 'insufficient_balance' ||
    first === 'upstream_error' ||
    first === 'no_quorum' ||
    first === 'upstream_answer_invalid' ||
    first === 'upstream_budget' ||
    first === 'store_unavailable' ||
    first === 'limits_unavailable'
  ) {
    if (outcomes.every((o) => o === first)) return ERRORS[first].http;
  }
  return 200;
}

const EMPTY = Buffer.alloc(0);
const COMMA = Buffer.from(',');

function answerBatch(x: Exchange, caller: Caller, items: ParsedItem[]): void {
  const refused = batchRefusal(x.ctx, caller, items);
  if (refused !== null) {
    caller.tally.refusedWhole('batch_too_large', items.length);
    reply(x, ERRORS.batch_too_large.http, refused);
    return;
  }
  const answers: Array<string | Buffer> = new Array(items.length);
  const outcomes: Array<ErrorCode | 'ok'> = new Array(items.length);
  let retryAfterMs: number | undefined;
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
    const status = batchStatus(outcomes);
    reply(x, status, body, status === 429 ? retryAfterHeader(retryAfterMs) : undefined);
  };
  items.forEach((item, i) => {
    const plan = planItem(x.ctx, x.chain, caller, item, 'http');
    switch (plan.kind) {
      case 'answer':
        if (plan.retryAfterMs !== undefined) retryAfterMs = Math.max(retryAfterMs ?? 0, plan.retryAfterMs);
        settle(i, plan.answer, plan.outcome);
        break;
      case 'forward':
        x.calls.push(collectCall(x.ctx, x.chain, caller, plan.forward, (a, o) => settle(i, a, o)));
        break;
      case 'pending':
        if (plan.call !== undefined) x.calls.push(plan.call);
        void plan.pending.then((r) => settle(i, r.answer, r.outcome));
        break;
      case 'local':
        // Planned for WebSocket only (subscriptions): never over HTTP.
        break;
      default:
        unplanned(plan);
    }
  });
}

function answerBody(x: Exchange, caller: Caller, body: Buffer): void {
  const parsed = parseBody(body);
  if (parsed.kind === 'error') {
    caller.tally.refusedWhole(parsed.error, 1);
    reply(x, 200, rpcErrorBody(parsed.error, 'null', parsed.message));
    return;
  }
  const t = x.ctx.tenancy;
  if (t.fleet === null) {
    planBody(x, caller, parsed);
    return;
  }
  const items = parsed.kind === 'batch' ? parsed.items : [parsed.item];
  // A batch over the limit is refused whole before anything is asked of a fleet's shared limits.
  if (items.length > caller.maxBatch) {
    planBody(x, caller, parsed);
    return;
  }
  // A fault after the await, which on one machine would have been thrown to uWS: logged and answered.
  const failed = (err: unknown): void => {
    x.ctx.log.error('a request failed after its fleet grant', { error: errorText(err) });
    if (!x.aborted && !x.finished) replyError(x, 'store_unavailable', undefined, true);
  };
  askFleetForItems(x.ctx, x.chain, caller, items).then((grant) => {
    if (x.aborted) return;
    caller.grant = grant;
    try {
      planBody(x, caller, parsed);
    } catch (err) {
      failed(err);
    }
  }, failed);
}

function planBody(x: Exchange, caller: Caller, parsed: Exclude<ParsedBody, { kind: 'error' }>): void {
  if (parsed.kind === 'batch') {
    answerBatch(x, caller, parsed.items);
    return;
  }
  const plan = planItem(x.ctx, x.chain, caller, parsed.item, 'http');
  switch (plan.kind) {
    case 'forward':
      forwardSingle(x, caller, plan.forward);
      break;
    case 'answer':
      reply(x, plan.outcome === 'ok' ? 200 : ERRORS[plan.outcome].http, plan.answer, retryAfterHeader(plan.retryAfterMs));
      break;
    case 'pending':
      if (plan.call !== undefined) x.calls.push(plan.call);
      void plan.pending.then((r) => reply(x, r.outcome === 'ok' ? 200 : ERRORS[r.outcome].http, r.answer));
      break;
    case 'local':
      // Planned for WebSocket only (subscriptions): never over HTTP.
      break;
    default:
      unplanned(plan);
  }
}

/** The default of a switch over every ItemPlan: a new kind fails to compile until it is handled. */
function unplanned(plan: never): never {
  throw new Error(`unknown item plan ${JSON.stringify(plan)}`);
}

/**
 * POST /v1/rpc/<key>: the JSON-RPC pipeline over HTTP. Everything needed from `req` is copied out
 * before the first return to uWS. Checks run in the documented order: key (401; 403 owner_suspended) →
 * the key's restrictions on the request (403: key place, address, Origin, token) → body type and size
 * (415, 413) → parse and shape → per item: rate limit, method (the plan's, then the key's) and params,
 * the key's contracts, RU → forward.
 */
export function handleHttpRpc(x: Exchange, route: ExchangeRoute): void {
  admitCaller(x, route);
}

/** The JSON-RPC road once its caller is admitted: the body's type and size, then the body. */
function readRpcBody(x: Exchange, caller: Caller): void {
  const contentType = x.req.getHeader('content-type');
  const contentLength = x.req.getHeader('content-length');
  const tally = caller.tally;
  const max = x.ctx.config.server.max_body_bytes;
  if (!JSON_CONTENT_TYPE.test(contentType)) {
    refuseWholeBody(x, tally, 'unsupported_media_type', contentLength);
    return;
  }
  if (contentLength !== '' && Number(contentLength) > max) {
    tally.refusedWhole('body_too_large', 1);
    replyError(
      x,
      'body_too_large',
      `Request body of ${contentLength} bytes is larger than the limit of ${max} bytes (server.max_body_bytes)`,
      true,
    );
    return;
  }
  new RpcBodyRead(x, caller, max).start();
}

/** A JSON-RPC request's body on its way in: the request's state and its body's, one object. */
class RpcBodyRead extends BodyRead {
  constructor(
    private readonly x: Exchange,
    private readonly caller: Caller,
    private readonly max: number,
  ) {
    super(x.res, x.meta, max);
  }

  protected body(body: Buffer): void {
    answerBody(this.x, this.caller, body);
  }

  protected tooLarge(): void {
    this.caller.tally.refusedWhole('body_too_large', 1);
    replyError(this.x, 'body_too_large', `Request body is larger than the limit of ${this.max} bytes (server.max_body_bytes)`, true);
  }
}

/** The JSON-RPC road over HTTP: a caller refused gets its answer with its request's ids (refuseWholeBody). */
export const HTTP_RPC_ROUTE: ExchangeRoute = {
  transport: 'http',
  admitted: readRpcBody,
  refuseCaller(x, refusal) {
    const headers = refusal.error === 'rate_limited' ? retryAfterHeader(60_000) : undefined;
    const tally = tallyFor(x.ctx, x.chain, 'http', null);
    refuseWholeBody(x, tally, refusal.error, x.req.getHeader('content-length'), refusal.message, headers);
  },
};

/**
 * A refusal of the whole request made before its body is checked (401, 429 for key guessing, 415): the
 * body, bounded by server.max_body_bytes, is read only for its ids, so each answer carries its caller's
 * id. Every caller with a key that does not exist takes this same road, so their 401s are byte-identical
 * for the same body. A body over the limit is not read: its refusal has id null and closes the connection.
 */
function refuseWholeBody(
  x: Exchange,
  tally: RequestTally,
  code: ErrorCode,
  contentLength: string,
  message?: string,
  headers?: ReadonlyArray<readonly [string, string]>,
): void {
  const max = x.ctx.config.server.max_body_bytes;
  const unread = (): void => {
    tally.refusedWhole(code, 1, message);
    reply(x, ERRORS[code].http, rpcErrorBody(code, 'null', message), headers, true);
  };
  if (contentLength !== '' && Number(contentLength) > max) {
    unread();
    return;
  }
  readBody(
    x.res,
    x.meta,
    max,
    (body) => {
      const ids = requestIds(body);
      tally.refusedWhole(code, Array.isArray(ids) ? ids.length : 1, message);
      reply(x, ERRORS[code].http, rpcErrorBodyFor(code, ids, message), headers);
    },
    unread,
  );
}
