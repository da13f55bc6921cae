import type { ChainRuntime } from '../chain/runtime.js';
import type { GatewayContext } from '../pipeline/context.js';
import { tallyFor } from '../pipeline/answers.js';
import { type ResponseMeta, sendRouteError } from './respond.js';
import { requestKey } from './request-key.js';
import { KEY_IN_PATH } from '../pipeline/request-fences.js';
import { kindRefusal, resolveRoute, type RouteTable } from './routes.js';
import { chainOfKey } from '../pipeline/caller.js';
import { holdForKey } from './held-request.js';
import { uws, type WebSocketBehavior } from './uws.js';
import type { ConnectionGate } from './connection-gate.js';
import { handleWsClose, handleWsMessage, type WsServer, type WsUserData } from './ws-rpc.js';
import { closeAtKeyEnd, refuseUpgrade, upgradeWs, type WsUpgradeRoute } from './ws-upgrade.js';
import { regrant } from '../pipeline/regrant.js';

/** The close reason of each way a changed endpoint ends a socket (docs/api.md's table of close codes). */
const CLOSE_REASONS = Object.freeze({
  revoked: 'API key revoked',
  expired: 'API key expired: it was rotated and its grace period ended',
  restricted: 'API key restrictions changed',
});

export interface WsRoute {
  readonly behavior: WebSocketBehavior<WsUserData>;
  readonly server: WsServer;
  /** Closes every socket (graceful stop: 1001 after what is queued). */
  closeAll(code: number, reason: string): void;
  /** Closes the sockets of an endpoint whose key stopped working. */
  closeEndpoint(endpointId: string, code: number, reason: string): void;
  /**
   * The endpoint changed (a key rotated, restrictions set, its owner suspended): each of its sockets is
   * closed, kept until its key's grace ends, or kept, as its key's answer now says (pipeline/regrant.ts).
   */
  endpointChanged(endpointId: string): void;
  /** Closes the sockets open on `chain` (a chain a reload removed). */
  closeChain(chain: ChainRuntime, code: number, reason: string): void;
  /** Whether a socket is open on `chain` (a chain a reload changed stays until none is). */
  usesChain(chain: ChainRuntime): boolean;
}

/** A notification's RU: the configured price per started 250 bytes (each chain's hub is priced by it, see gateway-thread.ts). */
export function notificationRu(perStarted250: number, bytes: number): number {
  return perStarted250 * Math.ceil(bytes / 250);
}

/**
 * JSON-RPC over WebSocket on the same paths as HTTP. uWS's own payload cut would show the client a
 * bare 1006, so its limit sits above `max_message_bytes` and the handler closes with 1009 instead.
 * Sends are never dropped by uWS (its backpressure cap is above anything the gateway lets queue):
 * the slow-consumer rule is the gateway's own, so it can be counted and explained.
 */
export function createWsRoute(ctx: GatewayContext, table: RouteTable, gate: ConnectionGate): WsRoute {
  const limits = ctx.config.websocket;
  // Shared by every worker thread: the per-key and per-IP limits hold for the process.
  const counts = ctx.tenancy.connections.websocket;
  const server: WsServer = {
    maxBufferedBytes: limits.max_buffered_bytes,
    slowConsumers: 0,
    conns: new Set(),
  };
  const upgradeRoute: WsUpgradeRoute = { ctx, server, counts, gate };
  const behavior: WebSocketBehavior<WsUserData> = {
    compression: uws().DISABLED,
    maxPayloadLength: Math.max(2 * limits.max_message_bytes, limits.max_message_bytes + 65_536),
    idleTimeout: limits.idle_timeout_s,
    sendPingsAutomatically: true,
    maxBackpressure: limits.max_answer_bytes + 4 * limits.max_buffered_bytes,
    upgrade(res, req, context) {
      // Refused before any other work while the process takes no more connections.
      if (gate.refuseRequest(res)) return;
      const meta: ResponseMeta = { allowOrigin: ctx.corsOrigin(req.getHeader('origin')) };
      const route = resolveRoute('upgrade', req.getUrl(), req.getHeader('host'), table);
      if (route.kind !== 'rpc') {
        if (route.kind === 'error') sendRouteError(res, meta, route.code, route.message, route.allow);
        else sendRouteError(res, meta, 'not_found', 'WebSocket is served on /v1/rpc/<key>');
        return;
      }
      const found = requestKey(req, route, true);
      if (found?.ok === false) {
        tallyFor(ctx, ctx.chains.get(route.chain.slug)!, 'ws', null).refused('unauthorized');
        refuseUpgrade(res, meta, 'unauthorized', found.message);
        return;
      }
      const target = found?.target ?? route;
      if (ctx.tenancy.fleet !== null && target.key !== null && ctx.tenancy.keys.cached(target.key) === undefined) {
        // A fleet's key not met yet: the upgrade waits for the store's answer (uWS upgrades later, corked).
        holdForKey(ctx, res, req, target.key, false, (r, q) => behavior.upgrade!(r, q, context), {
          chain: route.chain.slug,
          transport: 'ws',
          meta,
        });
        return;
      }
      let chain = ctx.chains.get(route.chain.slug)!;
      if (target.key !== null && !route.named) {
        const own = chainOfKey(ctx, target.key);
        // A key that does not exist gets its 401 from the upgrade itself, whatever the default chain's kind.
        chain = own ?? chain;
        const refusal = own === undefined ? null : kindRefusal(chain.config, 'upgrade', route.rest, req.getUrl());
        if (refusal !== null) {
          sendRouteError(res, meta, refusal.code, refusal.message, refusal.allow);
          return;
        }
      }
      upgradeWs({ res, req, context, meta, chain, target, keyFacts: found?.facts ?? KEY_IN_PATH, protocol: found?.protocol }, upgradeRoute);
    },
    open(ws) {
      const conn = ws.getUserData().conn;
      conn.ws = ws;
      server.conns.add(conn);
      conn.chain.metrics.wsConnection(1);
    },
    message(ws, message, isBinary) {
      handleWsMessage(ctx, ws.getUserData().conn, message, isBinary);
    },
    drain(ws) {
      const conn = ws.getUserData().conn;
      if (ws.getBufferedAmount() === 0) conn.answerAllowance = 0;
      conn.drained();
    },
    close(ws) {
      handleWsClose(ctx, ws.getUserData().conn, counts);
    },
  };
  return {
    behavior,
    server,
    closeAll(code, reason) {
      for (const conn of [...server.conns]) conn.close(code, reason);
    },
    closeEndpoint(endpointId, code, reason) {
      for (const conn of [...server.conns]) if (conn.endpointId === endpointId) conn.close(code, reason);
    },
    endpointChanged(endpointId) {
      for (const conn of [...server.conns]) {
        if (conn.endpointId !== endpointId) continue;
        const next = regrant(ctx, conn.caller);
        if (next.kind === 'close') conn.close(1008, CLOSE_REASONS[next.why]);
        else if (next.kind === 'close_at') closeAtKeyEnd(ctx, conn, next.atMs);
      }
    },
    closeChain(chain, code, reason) {
      for (const conn of [...server.conns]) if (conn.chain === chain) conn.close(code, reason);
    },
    usesChain(chain) {
      for (const conn of server.conns) if (conn.chain === chain) return true;
      return false;
    },
  };
}
