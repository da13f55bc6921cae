import { type ErrorCode, ERRORS, rpcErrorBody } from '../errors.js';
import type { ForwardCall } from '../pipeline/forward.js';
import type { ChainRuntime } from '../chain/runtime.js';
import { type GatewayContext, requestDone } from '../pipeline/context.js';
import type { Caller } from '../pipeline/admission.js';
import { type CallerRefusal, type PeerAddress, resolveCaller } from '../pipeline/caller.js';
import type { Transport } from '../metrics/registry.js';
import { fenceRequest, KEY_IN_PATH, type KeyFacts } from '../pipeline/request-fences.js';
import { holdRequest } from './held-request.js';
import { clientLimitAddress, requestSide } from './peer-address.js';
import { JSON_TYPE, type ResponseMeta, sendWhole } from './respond.js';
import type { RpcTarget } from './routes.js';
import type { HttpRequest, HttpResponse } from './uws.js';

/** One HTTP request's state, shared by its callbacks; `aborted` means the client is gone and res is dead. */
export interface Exchange {
  ctx: GatewayContext;
  res: HttpResponse;
  /**
   * The request's head. uWS discards it once the handler returns: read it at once, before any callback or
   * await (the handlers copy what they need first). A request held for its signed token's check gets a copy
   * (held-request.ts), readable when it resumes, as `res` then is the held one.
   */
  req: HttpRequest;
  meta: ResponseMeta;
  /** The chain the route named, then the caller's (admitCaller). */
  chain: ChainRuntime;
  /** Where the request goes: its key, whether the Host or path named the chain, the path after the key. */
  readonly target: RpcTarget;
  /** Where its key came from and the signed token it brought (request-key.ts). */
  readonly keyFacts: KeyFacts;
  aborted: boolean;
  finished: boolean;
  calls: ForwardCall[];
  /** The address the client's per-IP limits count under (peer-address.ts); the head must still be readable. */
  clientIp(): string;
}

/**
 * A road's fixed parts, made once when the routes are (main-app.ts), never per request: its transport and
 * how it answers a caller refused, in its own error shape.
 */
export interface ExchangeRoute {
  readonly transport: Extract<Transport, 'http' | 'beacon'>;
  refuseCaller(x: Exchange, refusal: CallerRefusal): void;
  /** The road once its caller is admitted (admitCaller): now, or once a held request's token is checked. */
  admitted(x: Exchange, caller: Caller): void;
}

/** An Exchange as a class: its methods serve as the callbacks a request needs, with no closure made per request. */
class HttpExchange implements Exchange, PeerAddress {
  aborted = false;
  finished = false;
  calls: ForwardCall[] = [];

  constructor(
    public ctx: GatewayContext,
    public res: HttpResponse,
    public req: HttpRequest,
    public meta: ResponseMeta,
    public chain: ChainRuntime,
    readonly target: RpcTarget,
    readonly keyFacts: KeyFacts,
  ) {}

  /** The client left: every call the request started stops. */
  clientLeft(): void {
    this.aborted = true;
    for (const c of this.calls) c.abort();
    finish(this);
  }

  /** The address the client's per-IP limits count under; the head must still be readable. */
  clientIp(): string {
    return clientLimitAddress(this.res, this.req, this.ctx.config.server);
  }
}

/**
 * The preamble of every HTTP road: the request counts as in flight until it is finished, and the calls it
 * started stop when its client leaves (onAborted, attached before anything can wait).
 */
export function openExchange(
  ctx: GatewayContext,
  res: HttpResponse,
  req: HttpRequest,
  meta: ResponseMeta,
  chain: ChainRuntime,
  target: RpcTarget,
  keyFacts: KeyFacts = KEY_IN_PATH,
): Exchange {
  const x = new HttpExchange(ctx, res, req, meta, chain, target, keyFacts);
  ctx.inFlight++;
  res.onAborted(x.clientLeft.bind(x));
  return x;
}

/**
 * Who calls (pipeline/caller.ts), then the key's restrictions on the whole request (request-fences.ts:
 * key place, address, Origin, signed token), before its body is read: the road goes on with
 * `route.admitted`, its chain set on the exchange; or the refusal is answered in the road's shape. Called
 * while the request's head is still readable. A token met for the first time is checked while the request
 * is held (its body buffered, held-request.ts), and the road goes on when the check is in.
 */
export function admitCaller(x: Exchange, route: ExchangeRoute): void {
  const { ctx, target } = x;
  // The peer address costs a system call: a keyed request that resolves needs none, so it is asked for only then.
  const resolved = resolveCaller(ctx, x.chain, target.key, target.named, x, route.transport);
  if (resolved.kind === 'refused') {
    route.refuseCaller(x, resolved);
    return;
  }
  x.chain = resolved.chain;
  const caller = resolved.caller;
  if (caller.auth === null || caller.auth.fences === null) {
    route.admitted(x, caller);
    return;
  }
  const { res, req } = x;
  const fenced = fenceRequest(caller.auth, x.keyFacts, requestSide(res, req, ctx.config.server));
  if (fenced === undefined) route.admitted(x, caller);
  else if (!(fenced instanceof Promise)) route.refuseCaller(x, fenced);
  else holdForToken(x as HttpExchange, route, caller, fenced);
}

/** A request waiting for its token's first check: its head copied and its body buffered, then resumed. */
function holdForToken(x: HttpExchange, route: ExchangeRoute, caller: Caller, fenced: Promise<CallerRefusal | undefined>): void {
  const method = x.req.getMethod();
  const held = holdRequest(x.res, x.req, x.ctx.config.server.max_body_bytes, method !== 'get' && method !== 'head', () => x.clientLeft());
  void fenced.then((refusal) =>
    held.resume((res, req) => {
      x.res = res;
      x.req = req;
      if (refusal === undefined) route.admitted(x, caller);
      else route.refuseCaller(x, refusal);
    }),
  );
}

export function finish(x: Exchange): void {
  if (x.finished) return;
  x.finished = true;
  requestDone(x.ctx);
}

/** Answers whole and finishes. During a stop every answer closes its connection. */
export function reply(
  x: Exchange,
  status: number,
  body: string | Buffer,
  headers?: ReadonlyArray<readonly [string, string]>,
  closeConnection = false,
): void {
  if (!x.aborted) sendWhole(x.res, status, x.meta, JSON_TYPE, body, headers, closeConnection || x.ctx.stopping);
  finish(x);
}

// Answers held for the end of this event-loop turn (see replySoon), as parallel lists: no record per answer.
const heldExchanges: Exchange[] = [];
const heldStatuses: number[] = [];
const heldBodies: Array<string | Buffer> = [];

function sendHeld(): void {
  for (let i = 0; i < heldExchanges.length; i++) reply(heldExchanges[i]!, heldStatuses[i]!, heldBodies[i]!);
  heldExchanges.length = 0;
  heldStatuses.length = 0;
  heldBodies.length = 0;
}

/**
 * Answers whole at the end of this event-loop turn: a single call's whole answer, whether it came off an
 * upstream read, a shared flight or the cache. Written as each read delivers it, every answer wakes the
 * client's process on its own, and a socket write that wakes a sleeping reader costs several times one that
 * does not. Held to the check phase (after every read of the turn, as the upstream client's writes), the
 * turn's answers go out back to back. A client that leaves
 * meanwhile gets nothing, as with reply(); the request counts as in flight until its answer is written.
 */
export function replySoon(x: Exchange, status: number, body: string | Buffer): void {
  if (heldExchanges.push(x) === 1) setImmediate(sendHeld);
  heldStatuses.push(status);
  heldBodies.push(body);
}

/** A gateway refusal as a JSON-RPC error with the table's status. */
export function replyRpcError(
  x: Exchange,
  code: ErrorCode,
  idText: string,
  headers?: ReadonlyArray<readonly [string, string]>,
  closeConnection = false,
): void {
  reply(x, ERRORS[code].http, rpcErrorBody(code, idText), headers, closeConnection);
}

/** A refusal of the whole request (id null) with a message naming the limit or rule. */
export function replyError(x: Exchange, code: ErrorCode, message?: string, closeConnection = false): void {
  reply(x, ERRORS[code].http, rpcErrorBody(code, 'null', message), undefined, closeConnection);
}
