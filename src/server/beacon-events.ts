import { SSE_RESPONSE_HEADERS } from '../fanout/sse-hub.js';
import type { Caller } from '../pipeline/admission.js';
import type { GatewayContext } from '../pipeline/context.js';
import { createEventStreams, type EventStreamOut } from '../pipeline/event-streams.js';
import { type Exchange, finish, reply } from './exchange.js';
import { JSON_TYPE, sendWhole, writeHead } from './respond.js';

export interface BeaconEvents {
  /** Serves an admitted `GET /eth/v1/events` (key and request rate already checked). */
  serve(x: Exchange, caller: Caller, query: string): void;
  closeEndpoint(endpointId: string): void;
  /** The endpoint changed: its streams end, end with its key's grace, or go on (pipeline/regrant.ts). */
  endpointChanged(endpointId: string): void;
  stats(): { clients: number; slowClients: number };
}

/** The first bytes of every stream: an SSE comment, so never an event and never charged. */
const STREAM_OPEN = ':\n\n';

/**
 * The Beacon event stream's bytes: the pipeline admits, charges and ends streams (pipeline/event-streams.ts),
 * the chain's hub feeds them (ChainRuntime.events); this writes the head, the frames with backpressure and the
 * last line.
 */
export function createBeaconEvents(ctx: GatewayContext): BeaconEvents {
  const streams = createEventStreams(ctx);
  return {
    serve(x, caller, query) {
      const admitted = streams.admit(caller, query);
      if (admitted.kind === 'refused') {
        reply(x, admitted.status, admitted.body, admitted.headers, true);
        return;
      }
      // A stream is not a request in flight: a graceful stop ends it rather than waiting for it.
      finish(x);
      if (x.aborted) {
        streams.cancel(admitted);
        return;
      }
      const res = x.res;
      const out: EventStreamOut = {
        get gone() {
          return x.aborted;
        },
        open() {
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
        write(bytes, drained) {
          let ok = true;
          res.cork(() => {
            ok = res.write(bytes);
          });
          if (!ok) {
            res.onWritable(() => {
              drained();
              return true;
            });
          }
          return ok;
        },
        end(text) {
          // A slow client that never reads this is dropped by uWS.
          res.cork(() => {
            res.write(`: closed: ${text}\n\n`);
            res.end();
          });
        },
        refuse(status, body) {
          sendWhole(res, status, x.meta, JSON_TYPE, body, undefined, true);
        },
      };
      const stream = streams.start(x.chain, caller, admitted, out);
      x.calls.push({ abort: () => stream.leave(), resume: () => {} });
    },
    closeEndpoint: (endpointId) => streams.closeEndpoint(endpointId),
    endpointChanged: (endpointId) => streams.endpointChanged(endpointId),
    stats: () => streams.stats(),
  };
}
