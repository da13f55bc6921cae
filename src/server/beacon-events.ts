import { beaconCost } from '../beacon/costs.js';
import { EVENTS_TEMPLATE } from '../beacon/paths.js';
import { parseTopics } from '../beacon/topics.js';
import { type ErrorCode, ERRORS, beaconErrorBody } from '../errors.js';
import { createSseHub, SSE_RESPONSE_HEADERS, type SseClient, type SseEnd, type SseHub, type SseListener } from '../fanout/sse-hub.js';
import { admitRu, type Caller, countRefusal, settleCall } from '../pipeline/admission.js';
import type { ChainRuntime } from '../chain/runtime.js';
import { createHttpUpstream, type HttpUpstream } from '../upstreams/http-client.js';
import { openSseLink } from '../upstreams/sse-link.js';
import type { GatewayContext } from '../pipeline/context.js';
import { type Exchange, finish, reply } from './exchange.js';
import { JSON_TYPE, sendWhole, writeHead } from './respond.js';
import { createConnectionCounts } from './ws-rpc.js';

export interface BeaconEvents {
  /** Serves an admitted `GET /eth/v1/events` (key and request rate already checked). */
  serve(x: Exchange, caller: Caller, query: string): void;
  closeEndpoint(endpointId: string): void;
  /** Ends every stream and upstream link (graceful stop). */
  closeAll(): void;
  stats(): { clients: number; topics: number; slowClients: number };
}

/** The first bytes of every stream: an SSE comment, so never an event and never charged. */
const STREAM_OPEN = ':\n\n';

/** Why the gateway ends a stream: the hub's reasons, an owner out of RU, a key that stopped working. */
type StreamEnd = SseEnd | 'balance' | 'revoked';

/**
 * How each end is told. A started stream gets `: closed: <text>` as its last line (a comment, so no
 * client takes it for an event) and then its end; one not started yet gets `error`'s status in the
 * Beacon shape instead. The texts are those of the WebSocket close reasons.
 */
const ENDS: Record<StreamEnd, { text: string; error: ErrorCode }> = {
  slow: { text: 'slow consumer', error: 'upstream_error' },
  shutdown: { text: 'Server shutting down', error: 'shutting_down' },
  unavailable: { text: 'upstream event stream unavailable', error: 'upstream_error' },
  balance: { text: ERRORS.insufficient_balance.message, error: 'insufficient_balance' },
  revoked: { text: 'API key revoked', error: 'unauthorized' },
};

interface StreamClient extends SseClient {
  readonly endpointId: string | null;
  close(reason: StreamEnd): void;
}

/**
 * The Beacon event stream: per chain, one upstream stream per topic shared by every client (see
 * sse-hub). Streams use an upstream client of their own per chain, so a stream that never ends does
 * not hold a socket of the pool that serves calls. A stream costs the events path's price when it
 * opens, and `ru.beacon.per_event` per event delivered; an owner out of RU has its streams ended.
 */
export function createBeaconEvents(ctx: GatewayContext, opts: { ca?: string | Buffer } = {}): BeaconEvents {
  const hubs = new Map<ChainRuntime, { hub: SseHub; upstreams: HttpUpstream[] }>();
  const counts = createConnectionCounts();
  const clients = new Set<StreamClient>();
  let slowClients = 0;

  function hubFor(chain: ChainRuntime): SseHub {
    let entry = hubs.get(chain);
    if (entry !== undefined) return entry.hub;
    // A stream client per node, made when a stream first goes to it.
    const upstreams: HttpUpstream[] = [];
    let turn = 0;
    /** The node a (re)connecting stream goes to: one in rotation, else the next in turn (which fails and retries). */
    const nodeFor = (): HttpUpstream => {
      const index = chain.health.pick() ?? turn++ % chain.config.upstreams.length;
      const u = chain.config.upstreams[index]!;
      return (upstreams[index] ??= createHttpUpstream({
        url: u.url,
        headers: u.headers,
        maxConnections: 64,
        pipelining: 1,
        ...(opts.ca !== undefined ? { ca: opts.ca } : {}),
      }));
    };
    const hub = createSseHub({
      heartbeatMs: ctx.config.sse.heartbeat_s * 1000,
      maxBufferedBytes: ctx.config.sse.max_buffered_bytes,
      openTimeoutMs: chain.config.timeout_s * 1000,
      openLink: (topic, onFrame, onStatus) =>
        openSseLink({
          upstream: nodeFor,
          topic,
          onFrame,
          onStatus,
          log: (level, msg, fields) => ctx.log[level](msg, { chain: chain.config.slug, topic, ...fields }),
        }),
      onSlowClient: () => void slowClients++,
    });
    entry = { hub, upstreams };
    hubs.set(chain, entry);
    return hub;
  }

  return {
    serve(x, caller, query) {
      const t = ctx.tenancy;
      const parsed = parseTopics(query);
      if (!parsed.ok) {
        countRefusal(t, caller, EVENTS_TEMPLATE, 400);
        reply(x, 400, beaconErrorBody('bad_request', parsed.message), undefined, true);
        return;
      }
      const limits = ctx.config.sse;
      const countKey = caller.auth === null ? caller.limitKey : `ep:${caller.auth.endpointId}`;
      const limit = caller.auth === null ? limits.max_connections_per_ip : limits.max_connections_per_key;
      if (counts.count(countKey) >= limit) {
        const which = caller.auth === null ? 'sse.max_connections_per_ip' : 'sse.max_connections_per_key';
        countRefusal(t, caller, EVENTS_TEMPLATE, 429);
        reply(
          x,
          429,
          beaconErrorBody('rate_limited', `Too many open event streams: the limit is ${limit} (${which})`),
          [['retry-after', '1']],
          true,
        );
        return;
      }
      const admission = admitRu(t, caller, beaconCost(EVENTS_TEMPLATE, ctx.config.ru.beacon.paths, ctx.config.ru.beacon.default));
      if (!admission.ok) {
        countRefusal(t, caller, EVENTS_TEMPLATE, ERRORS[admission.error].http);
        reply(x, ERRORS[admission.error].http, beaconErrorBody(admission.error), undefined, true);
        return;
      }
      // A stream is not a request in flight: a graceful stop ends it rather than waiting for it.
      finish(x);
      if (x.aborted) {
        if (admission.reservation !== null) t.ledger.refund(admission.reservation);
        return;
      }
      const res = x.res;
      let open = true;
      let started = false;
      const client: StreamClient = {
        endpointId: caller.auth?.endpointId ?? null,
        start() {
          if (!open || x.aborted) return;
          started = true;
          // Charged once the stream opens: one that never does is answered 502 and costs nothing.
          settleCall(t, caller, EVENTS_TEMPLATE, admission, { ok: true, bytes: 0 });
          res.cork(() => {
            writeHead(res, 200, x.meta, null);
            for (const [k, v] of SSE_RESPONSE_HEADERS) res.writeHeader(k, v);
            // The head goes out now, so the client knows the stream is open before the first event. uWS ends
            // the head (its own headers and the blank line) only with the first body bytes, so an empty write
            // would hold it back until the first event or heartbeat: the first bytes are a comment, which
            // clients ignore.
            res.write(STREAM_OPEN);
          });
        },
        write(bytes) {
          if (!open || x.aborted) return true;
          let ok = true;
          res.cork(() => {
            ok = res.write(bytes);
          });
          if (!ok) {
            res.onWritable(() => {
              listener?.drained();
              return true;
            });
          }
          return ok;
        },
        close(reason) {
          if (!open) return;
          open = false;
          leave();
          const end = ENDS[reason];
          if (!started) {
            const message =
              reason === 'unavailable'
                ? `${ERRORS.upstream_error.message}: no upstream event stream opened within ${x.chain.config.timeout_s} s (chains.${x.chain.config.slug}.timeout_s)`
                : end.text;
            settleCall(t, caller, EVENTS_TEMPLATE, admission, { ok: false, status: ERRORS[end.error].http });
            if (!x.aborted) sendWhole(res, ERRORS[end.error].http, x.meta, JSON_TYPE, beaconErrorBody(end.error, message), undefined, true);
            return;
          }
          if (x.aborted) return;
          // The reason goes after what is queued; a slow client that never reads it is dropped by uWS.
          res.cork(() => {
            res.write(`: closed: ${end.text}\n\n`);
            res.end();
          });
        },
      };
      counts.open(countKey);
      clients.add(client);
      const perEvent = ctx.config.ru.beacon.per_event;
      // Set once add() returns: the hub may start or end the client from within add().
      let listener: SseListener | null = null;
      let left = false;
      function leave(): void {
        if (left) return;
        left = true;
        listener?.remove();
        clients.delete(client);
        counts.close(countKey);
      }
      if (caller.auth !== null && perEvent > 0) {
        const { ownerId, endpointId } = caller.auth;
        const charge = (): boolean => t.ledger.chargeDeliveries(ownerId, perEvent, { endpointId, method: EVENTS_TEMPLATE, status: 0 }, 1);
        const write = client.write;
        client.write = (bytes) => {
          // Keep-alive comments are free; an event is charged before it is written.
          if (bytes[0] !== 0x3a && !charge()) {
            client.close('balance');
            return true;
          }
          return write(bytes);
        };
      }
      listener = hubFor(x.chain).add(client, parsed.topics);
      if (left) listener.remove();
      x.calls.push({
        abort: () => {
          if (!open) return;
          open = false;
          leave();
          if (!started && admission.reservation !== null) t.ledger.refund(admission.reservation);
        },
        resume: () => {},
      });
    },
    closeEndpoint(endpointId) {
      for (const c of [...clients]) if (c.endpointId === endpointId) c.close('revoked');
    },
    closeAll() {
      for (const { hub, upstreams } of hubs.values()) {
        hub.close();
        for (const u of upstreams) u?.close();
      }
      hubs.clear();
    },
    stats: () => {
      let topics = 0;
      for (const { hub } of hubs.values()) topics += hub.topicsOpen().length;
      return { clients: clients.size, topics, slowClients };
    },
  };
}
