import { beaconCost } from '../beacon/costs.js';
import { EVENTS_TEMPLATE } from '../beacon/paths.js';
import { parseTopics } from '../beacon/topics.js';
import { ERRORS, beaconErrorBody } from '../errors.js';
import { createSseHub, SSE_RESPONSE_HEADERS, type SseClient, type SseHub } from '../fanout/sse-hub.js';
import { admitRu, type Caller, countRefusal, settleCall } from '../pipeline/admission.js';
import type { ChainRuntime } from '../upstreams/chain.js';
import { createHttpUpstream, type HttpUpstream } from '../upstreams/http-client.js';
import { openSseLink } from '../upstreams/sse-link.js';
import type { GatewayContext } from './context.js';
import { type Exchange, finish, reply } from './exchange.js';
import { writeHead } from './respond.js';
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

interface StreamClient extends SseClient {
  readonly endpointId: string | null;
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
      return (upstreams[index] ??= createHttpUpstream({ url: u.url, headers: u.headers, maxConnections: 64, pipelining: 1, ...(opts.ca !== undefined ? { ca: opts.ca } : {}) }));
    };
    const hub = createSseHub({
      heartbeatMs: ctx.config.sse.heartbeat_s * 1000,
      maxBufferedBytes: ctx.config.sse.max_buffered_bytes,
      openLink: (topic, onFrame) => openSseLink({
        upstream: nodeFor, topic, onFrame,
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
        reply(x, 429, beaconErrorBody('rate_limited', `Too many open event streams: the limit is ${limit} (${which})`), [['retry-after', '1']], true);
        return;
      }
      const admission = admitRu(t, caller, beaconCost(EVENTS_TEMPLATE, ctx.config.ru.beacon.paths, ctx.config.ru.beacon.default));
      if (!admission.ok) {
        countRefusal(t, caller, EVENTS_TEMPLATE, ERRORS[admission.error].http);
        reply(x, ERRORS[admission.error].http, beaconErrorBody(admission.error), undefined, true);
        return;
      }
      settleCall(t, caller, EVENTS_TEMPLATE, admission, { ok: true, bytes: 0 });
      // A stream is not a request in flight: a graceful stop ends it rather than waiting for it.
      finish(x);
      if (x.aborted) return;
      const res = x.res;
      let open = true;
      const client: StreamClient = {
        endpointId: caller.auth?.endpointId ?? null,
        write(bytes) {
          if (!open || x.aborted) return true;
          let ok = true;
          res.cork(() => {
            ok = res.write(bytes);
          });
          if (!ok) {
            res.onWritable(() => {
              listener.drained();
              return true;
            });
          }
          return ok;
        },
        close(reason) {
          if (!open) return;
          open = false;
          leave();
          if (x.aborted) return;
          // A slow client is cut; a stop ends the stream cleanly.
          if (reason === 'slow') res.close();
          else res.cork(() => res.end());
        },
      };
      res.cork(() => {
        writeHead(res, 200, x.meta, null);
        for (const [k, v] of SSE_RESPONSE_HEADERS) res.writeHeader(k, v);
        // The head goes out now, so the client knows the stream is open before the first event. uWS ends
        // the head (its own headers and the blank line) only with the first body bytes, so an empty write
        // would hold it back until the first event or heartbeat: the first bytes are a comment, which
        // clients ignore.
        res.write(STREAM_OPEN);
      });
      counts.open(countKey);
      clients.add(client);
      const perEvent = ctx.config.ru.beacon.per_event;
      const listener = hubFor(x.chain).add(client, parsed.topics);
      let left = false;
      function leave(): void {
        if (left) return;
        left = true;
        listener.remove();
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
            client.close('shutdown');
            return true;
          }
          return write(bytes);
        };
      }
      x.calls.push({ abort: () => { open = false; leave(); }, resume: () => {} });
    },
    closeEndpoint(endpointId) {
      for (const c of [...clients]) if (c.endpointId === endpointId) c.close('shutdown');
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
