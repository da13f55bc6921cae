/**
 * Beacon event streams (`GET /eth/v1/events`) after the key and request rate: the topics, the open-stream
 * limits, the price of opening one and of each event delivered, and why a stream ends. The streams themselves
 * are the chain's (ChainRuntime.events); the server writes the bytes this hands it (server/beacon-events.ts).
 */
import { atKeyEnd, type KeyEndHolder, regrant } from './regrant.js';
import { beaconCost } from '../beacon/costs.js';
import { EVENTS_TEMPLATE } from '../beacon/paths.js';
import { parseTopics } from '../beacon/topics.js';
import type { ChainRuntime } from '../chain/runtime.js';
import { beaconErrorBody, type ErrorCode, ERRORS } from '../errors.js';
import type { SseClient, SseEnd, SseListener } from '../fanout/sse-hub.js';
import type { Reservation } from '../metering/ledger.js';
import { admitRu, type Caller, countRefusal, settleCall } from './admission.js';
import type { GatewayContext } from './context.js';
import { admitConnection } from './stream-limits.js';

/** Why the gateway ends a stream: the hub's reasons, an owner out of RU, a key that stopped working or whose grace ended. */
type StreamEnd = SseEnd | 'balance' | 'revoked' | 'expired' | 'restricted';

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
  restricted: { text: 'API key restrictions changed', error: 'unauthorized' },
  expired: { text: 'API key expired: it was rotated and its grace period ended', error: 'unauthorized' },
};

/** Where a stream's bytes go: the server's writes. */
export interface EventStreamOut {
  /** The client left: nothing more is written. */
  readonly gone: boolean;
  /** The stream opens: its 200 head and first bytes go out now. */
  open(): void;
  /** Writes bytes; false when the socket is backpressured, and then `drained` runs once it drains. */
  write(bytes: Buffer, drained: () => void): boolean;
  /** Ends a started stream with a last comment line (`: closed: <text>`). */
  end(text: string): void;
  /** Answers a stream that never started with a Beacon error, closing the connection. */
  refuse(status: number, body: string): void;
}

/** A stream admitted and its opening price set aside; start() it, or cancel() it when the client left. */
export interface AdmittedStream {
  readonly kind: 'admitted';
  readonly topics: readonly string[];
  readonly countKey: string;
  readonly admission: { reservation: Reservation | null; ru: number };
}

/** A refusal of a stream, as status, Beacon body and headers. */
export interface StreamRefusal {
  kind: 'refused';
  status: number;
  body: string;
  headers?: Array<[string, string]>;
}

export interface EventStreams {
  /** The topics (400), the caller's open-stream limit (429), the opening price (429, 402). */
  admit(caller: Caller, query: string): StreamRefusal | AdmittedStream;
  /** The client left before its admitted stream began: the price set aside goes back. */
  cancel(admitted: AdmittedStream): void;
  /** Joins the chain's event hub; the stream is charged once it opens. The result ends it when the client leaves. */
  start(chain: ChainRuntime, caller: Caller, admitted: AdmittedStream, out: EventStreamOut): { leave(): void };
  /** Ends the streams of an endpoint whose key stopped working. */
  closeEndpoint(endpointId: string): void;
  /** The endpoint changed: each of its streams ends, ends with its key's grace, or goes on (regrant.ts). */
  endpointChanged(endpointId: string): void;
  stats(): { clients: number; slowClients: number };
}

interface StreamClient extends SseClient {
  readonly endpointId: string | null;
  readonly caller: Caller;
  /** Ends the stream at `atMs` (a rotated-out key's end), by the context's clock. */
  endAt(atMs: number): void;
  close(reason: StreamEnd): void;
}

/**
 * A stream costs the events path's price when it opens, and `ru.beacon.per_event` per event delivered (never
 * a keep-alive comment); an owner out of RU has its streams ended.
 */
export function createEventStreams(ctx: GatewayContext): EventStreams {
  const t = ctx.tenancy;
  const counts = t.connections.sse;
  const clients = new Set<StreamClient>();
  let slowClients = 0;

  function admit(caller: Caller, query: string): StreamRefusal | AdmittedStream {
    const parsed = parseTopics(query);
    if (!parsed.ok) {
      countRefusal(t, caller, EVENTS_TEMPLATE, 400, 'bad_request');
      return { kind: 'refused', status: 400, body: beaconErrorBody('bad_request', parsed.message) };
    }
    const { countKey, refusal } = admitConnection(counts, caller, ctx.config.sse, 'sse', 'event streams');
    if (refusal !== null) {
      countRefusal(t, caller, EVENTS_TEMPLATE, 429, 'too_many_connections');
      return { kind: 'refused', status: 429, body: beaconErrorBody('rate_limited', refusal), headers: [['retry-after', '1']] };
    }
    const admission = admitRu(t, caller, beaconCost(EVENTS_TEMPLATE, ctx.config.ru.beacon.paths, ctx.config.ru.beacon.default));
    if (!admission.ok) {
      countRefusal(t, caller, EVENTS_TEMPLATE, ERRORS[admission.error].http, admission.error);
      return { kind: 'refused', status: ERRORS[admission.error].http, body: beaconErrorBody(admission.error) };
    }
    return { kind: 'admitted', topics: parsed.topics, countKey, admission };
  }

  function start(chain: ChainRuntime, caller: Caller, admitted: AdmittedStream, out: EventStreamOut): { leave(): void } {
    const { admission, countKey } = admitted;
    const perEvent = ctx.config.ru.beacon.per_event;
    const auth = caller.auth;
    const charged = auth !== null && perEvent > 0;
    let open = true;
    let started = false;
    // Set once add() returns: the hub may start or end the client from within add().
    let listener: SseListener | null = null;
    let left = false;
    // A stream opened with a rotated-out key in its grace ends with the grace (by the context's clock).
    const ending: KeyEndHolder = { keyEnd: null };
    const closeAtKeyEnd = (at: number): void => atKeyEnd(ctx, ending, at, () => client.close('expired'));
    const drained = (): void => listener?.drained();
    const leave = (): void => {
      if (left) return;
      left = true;
      if (ending.keyEnd !== null) clearTimeout(ending.keyEnd);
      chain.metrics.sseClient(-1);
      listener?.remove();
      clients.delete(client);
      counts.close(countKey);
      ctx.connections.release();
    };
    const client: StreamClient = {
      endpointId: auth?.endpointId ?? null,
      caller,
      endAt: (atMs) => closeAtKeyEnd(atMs),
      start() {
        if (!open || out.gone) return;
        started = true;
        // Charged once the stream opens: one that never does is answered 502 and costs nothing.
        settleCall(t, caller, EVENTS_TEMPLATE, admission, { ok: true, bytes: 0 });
        out.open();
      },
      write(bytes) {
        // Keep-alive comments are free; an event is charged before it is written.
        if (charged && bytes[0] !== 0x3a) {
          if (!t.ledger.chargeDeliveries(auth.ownerId, perEvent, eventUsage(auth.endpointId), 1)) {
            client.close('balance');
            return true;
          }
          chain.metrics.ruCharged.inc(perEvent);
        }
        if (!open || out.gone) return true;
        return out.write(bytes, drained);
      },
      close(reason) {
        if (!open) return;
        open = false;
        if (reason === 'slow') {
          slowClients++;
          ctx.metrics.slowConsumer('sse');
        }
        leave();
        const end = ENDS[reason];
        if (!started) {
          const slug = chain.config.slug;
          const message =
            reason === 'unavailable'
              ? `${ERRORS.upstream_error.message}: no upstream event stream opened within ${chain.config.timeout_s} s (chains.${slug}.timeout_s)`
              : end.text;
          settleCall(t, caller, EVENTS_TEMPLATE, admission, {
            ok: false,
            status: ERRORS[end.error].http,
            reason: message,
            code: end.error,
          });
          if (!out.gone) out.refuse(ERRORS[end.error].http, beaconErrorBody(end.error, message));
          return;
        }
        // The reason goes after what is queued; a slow client that never reads it is dropped by the server.
        if (!out.gone) out.end(end.text);
      },
    };
    counts.open(countKey);
    // Its request was let in by the connection cap (server/connection-gate.ts); it holds a place while open.
    ctx.connections.hold();
    chain.metrics.sseClient(1);
    clients.add(client);
    if (chain.events === null) client.close('unavailable');
    else listener = chain.events.add(client, admitted.topics);
    if (left) listener?.remove();
    else if (auth?.keyExpiresAtMs != null) closeAtKeyEnd(auth.keyExpiresAtMs);
    return {
      leave() {
        if (!open) return;
        open = false;
        leave();
        if (!started && admission.reservation !== null) t.ledger.refund(admission.reservation);
      },
    };
  }

  return {
    admit,
    cancel(admitted) {
      if (admitted.admission.reservation !== null) t.ledger.refund(admitted.admission.reservation);
    },
    start,
    closeEndpoint(endpointId) {
      for (const c of [...clients]) if (c.endpointId === endpointId) c.close('revoked');
    },
    endpointChanged(endpointId) {
      for (const c of [...clients]) {
        if (c.endpointId !== endpointId) continue;
        const next = regrant(ctx, c.caller);
        if (next.kind === 'close') c.close(next.why);
        else if (next.kind === 'close_at') c.endAt(next.atMs);
      }
    },
    stats: () => ({ clients: clients.size, slowClients }),
  };
}

/** The usage row of one event delivered. */
function eventUsage(endpointId: string): { endpointId: string; method: string; status: number } {
  return { endpointId, method: EVENTS_TEMPLATE, status: 0 };
}
