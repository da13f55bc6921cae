import { type ErrorCode, ERRORS, rpcErrorBody } from '../errors.js';
import type { ForwardCall } from '../pipeline/forward.js';
import type { ChainRuntime } from '../chain/runtime.js';
import { type GatewayContext, requestDone } from '../pipeline/context.js';
import type { Caller } from '../pipeline/admission.js';
import { type CallerRefusal, type PeerAddress, resolveCaller } from '../pipeline/caller.js';
import type { Transport } from '../metrics/registry.js';
import { clientLimitAddress } from './peer-address.js';
import { JSON_TYPE, type ResponseMeta, sendWhole } from './respond.js';
import type { RpcTarget } from './routes.js';
import type { HttpRequest, HttpResponse } from './uws.js';

/** One HTTP request's state, shared by its callbacks; `aborted` means the client is gone and res is dead. */
export interface Exchange {
  ctx: GatewayContext;
  res: HttpResponse;
  /**
   * The request's head. uWS discards it once the handler returns: read it at once, before any callback or
   * await (the handlers copy what they need first).
   */
  readonly req: HttpRequest;
  meta: ResponseMeta;
  /** The chain the route named, then the caller's (admitCaller). */
  chain: ChainRuntime;
  /** Where the request goes: its key, whether the Host or path named the chain, the path after the key. */
  readonly target: RpcTarget;
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
}

/** An Exchange as a class: its methods serve as the callbacks a request needs, with no closure made per request. */
class HttpExchange implements Exchange, PeerAddress {
  aborted = false;
  finished = false;
  calls: ForwardCall[] = [];

  constructor(
    public ctx: GatewayContext,
    public res: HttpResponse,
    readonly req: HttpRequest,
    public meta: ResponseMeta,
    public chain: ChainRuntime,
    readonly target: RpcTarget,
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
): Exchange {
  const x = new HttpExchange(ctx, res, req, meta, chain, target);
  ctx.inFlight++;
  res.onAborted(x.clientLeft.bind(x));
  return x;
}

/**
 * Who calls (pipeline/caller.ts): the caller, its chain set on the exchange; or null once the refusal is
 * answered in the road's shape. Called while the request's head is still readable (the client's address).
 */
export function admitCaller(x: Exchange, route: ExchangeRoute): Caller | null {
  const { ctx, target } = x;
  // The peer address costs a system call: a keyed request that resolves needs none, so it is asked for only then.
  const resolved = resolveCaller(ctx, x.chain, target.key, target.named, x, route.transport);
  if (resolved.kind === 'refused') {
    route.refuseCaller(x, resolved);
    return null;
  }
  x.chain = resolved.chain;
  return resolved.caller;
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
