/**
 * The WebSocket handshake of `/v1/rpc/<key>` (or `/v1/rpc` with the key in a header or subprotocol): the
 * caller, the key's restrictions, the connection limits, then the socket (ws-rpc.ts serves its messages).
 */
import { type ErrorCode, ERRORS, rpcErrorBody } from '../errors.js';
import { takeRequest } from '../pipeline/admission.js';
import { type CallerRefusal, type ResolvedCaller, resolveCaller } from '../pipeline/caller.js';
import { tallyFor } from '../pipeline/answers.js';
import type { GatewayContext } from '../pipeline/context.js';
import { fenceRequest, type KeyFacts } from '../pipeline/request-fences.js';
import { atKeyEnd } from '../pipeline/regrant.js';
import { admitConnection, connectionRefusal, type ConnectionCounts } from '../pipeline/stream-limits.js';
import type { ChainRuntime } from '../chain/runtime.js';
import type { ConnectionGate } from './connection-gate.js';
import { holdRequest } from './held-request.js';
import { clientLimitAddress, requestSide } from './peer-address.js';
import { JSON_TYPE, type ResponseMeta, retryAfterHeader, sendWhole } from './respond.js';
import type { RpcTarget } from './routes.js';
import type { HttpRequest, HttpResponse } from './uws.js';
import { WsConn, type WsServer, type WsUserData } from './ws-rpc.js';

/** An upgrade refused with the error table's status and a JSON-RPC error (id null); the connection closes. */
export function refuseUpgrade(res: HttpResponse, meta: ResponseMeta, code: ErrorCode, message?: string, retryAfterMs?: number): void {
  sendWhole(res, ERRORS[code].http, meta, JSON_TYPE, rpcErrorBody(code, 'null', message), retryAfterHeader(retryAfterMs), true);
}

/** The WebSocket road's fixed parts, made once with its behavior (ws-route.ts), never per upgrade. */
export interface WsUpgradeRoute {
  readonly ctx: GatewayContext;
  readonly server: WsServer;
  /** Open connections per key and per IP, shared by every worker thread. */
  readonly counts: ConnectionCounts;
  readonly gate: ConnectionGate;
}

/** One upgrade request: uWS's handles, its CORS, the chain the route named (or the key's) and where it goes. */
export interface UpgradeExchange {
  readonly res: HttpResponse;
  /** Readable only until the upgrade handler returns (uWS discards it then). */
  readonly req: HttpRequest;
  readonly context: unknown;
  readonly meta: ResponseMeta;
  readonly chain: ChainRuntime;
  readonly target: RpcTarget;
  /** Where the key came from and the signed token sent (request-key.ts). */
  readonly keyFacts: KeyFacts;
  /** The subprotocol to answer with (`chaingate`), or undefined to echo what the client offered. */
  readonly protocol: string | undefined;
}

/** What upgradeWs read of the handshake before it could wait: uWS discards the request when its handler returns. */
interface Handshake {
  secKey: string;
  secProtocol: string;
  secExtensions: string;
}

/**
 * The upgrade of `/v1/rpc/<key>`: the key is checked here, so a bad key gets its HTTP 401 and never a
 * socket. Then the connection limits (per key, or per IP on the public path) and, on the public path,
 * the per-IP request rate, which an upgrade counts against like a request.
 */
export function upgradeWs(up: UpgradeExchange, route: WsUpgradeRoute): void {
  const { res, req, meta, chain } = up;
  const { ctx } = route;
  const shake: Handshake = {
    secKey: req.getHeader('sec-websocket-key'),
    secProtocol: req.getHeader('sec-websocket-protocol'),
    secExtensions: req.getHeader('sec-websocket-extensions'),
  };
  const ipOf = (): string => clientLimitAddress(res, req, ctx.config.server);
  if (ctx.stopping) {
    tallyFor(ctx, chain, 'ws', null).refused('shutting_down');
    refuseUpgrade(res, meta, 'shutting_down');
    return;
  }
  const resolved = resolveCaller(ctx, chain, up.target.key, up.target.named, ipOf, 'ws');
  if (resolved.kind === 'refused') {
    refuseResolved(ctx, up, resolved);
    return;
  }
  const auth = resolved.caller.auth;
  // The key's restrictions on the handshake (key place, address, Origin, token), before any socket or count.
  const fenced =
    auth === null || auth.fences === null ? undefined : fenceRequest(auth, up.keyFacts, requestSide(res, req, ctx.config.server));
  if (fenced === undefined) openSocket(up, route, resolved, shake);
  else if (!(fenced instanceof Promise)) refuseResolved(ctx, up, fenced);
  else {
    // A token met for the first time: the handshake waits for its check (uWS upgrades later, corked).
    const held = holdRequest(res, req, 0, false);
    void fenced.then((refusal) =>
      held.resume((r, q) => {
        const later = { ...up, res: r, req: q };
        if (refusal === undefined) openSocket(later, route, resolved, shake);
        else refuseResolved(ctx, later, refusal);
      }),
    );
  }
}

/** An upgrade whose caller was refused: counted on the route's chain, answered in JSON-RPC's shape. */
function refuseResolved(ctx: GatewayContext, up: UpgradeExchange, refusal: CallerRefusal): void {
  tallyFor(ctx, up.chain, 'ws', null).refused(refusal.error);
  refuseUpgrade(up.res, up.meta, refusal.error, refusal.message, refusal.error === 'rate_limited' ? 60_000 : undefined);
}

/**
 * The last steps of an upgrade whose caller passed: the connection limits (per key, or per IP on the public
 * path) and the public path's request rate, then the socket, answered with the `chaingate` subprotocol when
 * the client's credentials came as subprotocols. A key in its grace after a rotation closes its socket then.
 */
function openSocket(up: UpgradeExchange, route: WsUpgradeRoute, resolved: ResolvedCaller, shake: Handshake): void {
  const { res, meta } = up;
  const { ctx, counts, gate } = route;
  const { caller } = resolved;
  const { countKey, limit, refusal } = admitConnection(counts, caller, ctx.config.websocket, 'websocket', 'WebSocket connections');
  if (refusal !== null) {
    caller.tally.refused('too_many_connections');
    refuseUpgrade(res, meta, 'rate_limited', refusal, 1000);
    return;
  }
  if (caller.auth === null) {
    const taken = takeRequest(ctx.tenancy, caller);
    if (!taken.ok) {
      caller.tally.refused('rate_limited');
      refuseUpgrade(res, meta, 'rate_limited', undefined, taken.retryAfterMs);
      return;
    }
  }
  // Counted here, in one step with the check, as the last refusals: another worker thread may admit the same
  // key, or take the process's last place, at the same moment. The upgrade opens the socket at once (the open
  // handler runs within it), and its close gives both back (handleWsClose).
  const full = gate.cap.tryHold();
  if (full !== null) {
    gate.refused(full);
    refuseUpgrade(res, meta, 'too_many_connections', gate.answer(full).message, 1000);
    return;
  }
  if (!counts.tryOpen(countKey, limit)) {
    gate.cap.release();
    caller.tally.refused('too_many_connections');
    refuseUpgrade(res, meta, 'rate_limited', connectionRefusal(caller, limit, 'websocket', 'WebSocket connections'), 1000);
    return;
  }
  const conn = new WsConn(route.server, resolved.chain, caller, countKey);
  const protocol = up.protocol ?? shake.secProtocol;
  res.upgrade<WsUserData>({ conn }, shake.secKey, protocol, shake.secExtensions, up.context as never);
  const expiresAt = caller.auth?.keyExpiresAtMs ?? null;
  if (expiresAt !== null) closeAtKeyEnd(ctx, conn, expiresAt);
}

/** Closes a socket opened with a rotated-out key when its grace ends (1008, saying why); a close before clears it. */
export function closeAtKeyEnd(ctx: GatewayContext, conn: WsConn, expiresAt: number): void {
  atKeyEnd(ctx, conn, expiresAt, () => conn.close(1008, 'API key expired: it was rotated and its grace period ended'));
}
