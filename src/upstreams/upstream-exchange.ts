import type { RequestHandle, ResponseSink } from './http-client.js';
import type { UpstreamPool } from './http-pool.js';
import type { Connection } from './upstream-connection.js';

/** Waiting in the pool's FIFO queue for a connection with room. */
export const QUEUED = 0;
/** Written (or about to be, at the end of this event-loop turn) to `connection`. */
export const ACTIVE = 1;
/** Its sink got onEnd or onError, or it was aborted: nothing more happens to it. */
export const SETTLED = 2;
/** Issued after close(), or refused a second write by the node's budget (http-placement.ts resend): its onError is
 *  still to be delivered, unless it is aborted first. */
export const REFUSED = 3;

/**
 * One request from request() until its sink is settled. It is also the caller's RequestHandle: its methods
 * hand it to the pool that owns it, so a request makes one object and no closure. Fields are set in the
 * constructor in one order, so every exchange has one shape.
 */
export class UpstreamExchange implements RequestHandle {
  readonly pool: UpstreamPool;
  readonly sink: ResponseSink;
  /** Encoded head and body; kept until a response byte arrives, for a re-send on another socket. */
  payload: Buffer | null;
  readonly timeoutMs: number;
  /** Head deadline, then extended by the sweep whenever `progressed`. */
  deadline: number;
  /** The whole response's deadline (UpstreamOptions.answerTimeoutMs from request()); moved on only by the time the
   *  consumer held the body paused, which is not the node's. */
  answerDeadline: number;
  /** When the consumer last paused the body, in ms from the client's clock; read at resume(). */
  pausedAt: number;
  /** Response bytes were delivered since the last sweep; saves a clock read per chunk. */
  progressed: boolean;
  state: number;
  paused: boolean;
  headReceived: boolean;
  /** The response's declared body length (Content-Length), -1 when it has none or no head came yet. */
  bodyLength: number;
  /** Sent once more after its socket was lost: the next loss fails it. */
  retried: boolean;
  /** Never pipelined: it goes only to a socket with nothing in flight, and nothing joins it there. */
  readonly exclusive: boolean;
  /** It was the first request written to a new socket: a close before its answer is then no sign of a stale
   *  keep-alive socket, and it is not re-sent. */
  firstOnSocket: boolean;
  /** When it was last written to a socket, in ms since the epoch. */
  sentAt: number;
  connection: Connection | null;
  /** The socket whose complete response is being handed to onEnd, for distrust(); null otherwise. */
  endingOn: Connection | null;

  /** `at` is request()'s time, from which both deadlines count. */
  constructor(
    pool: UpstreamPool,
    sink: ResponseSink,
    payload: Buffer,
    timeoutMs: number,
    at: number,
    answerTimeoutMs: number,
    exclusive: boolean,
  ) {
    this.pool = pool;
    this.sink = sink;
    this.payload = payload;
    this.timeoutMs = timeoutMs;
    this.deadline = at + timeoutMs;
    this.answerDeadline = at + answerTimeoutMs;
    this.pausedAt = 0;
    this.progressed = false;
    this.state = QUEUED;
    this.paused = false;
    this.headReceived = false;
    this.bodyLength = -1;
    this.retried = false;
    this.exclusive = exclusive;
    this.firstOnSocket = false;
    this.sentAt = 0;
    this.connection = null;
    this.endingOn = null;
  }

  abort(): void {
    this.pool.abort(this);
  }

  distrust(): void {
    this.pool.distrust(this);
  }

  resume(): void {
    this.pool.resume(this);
  }
}

/** Nothing more happens to ex: it lets go of its socket and its encoded request. */
export function settle(ex: UpstreamExchange): void {
  ex.state = SETTLED;
  ex.connection = null;
  ex.payload = null;
}
