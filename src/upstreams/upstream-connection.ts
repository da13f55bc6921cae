import type { Socket } from 'node:net';
import { createResponseParser, type ResponseParser } from './http-parser.js';
import type { UpstreamExchange } from './upstream-exchange.js';
import { openUpstreamSocket, type UpstreamSocketConfig } from './upstream-socket.js';

/**
 * One keep-alive socket to an upstream and the requests written to it that are not yet answered, oldest
 * first. HTTP/1.1 answers pipelined requests in order, so the oldest slot (the head) owns every response
 * byte until its response is complete; then the next slot becomes the head.
 */
export interface Connection {
  readonly socket: Socket;
  readonly parser: ResponseParser;
  /** In-flight slots as a ring of `pipelining` entries from `first`. A null slot inside the ring was discarded
   *  (aborted, timed out, or its request moved to another socket): its response is still read, and dropped. */
  readonly slots: Array<UpstreamExchange | null>;
  first: number;
  /** Slots in flight, discarded ones included: the responses this socket still owes. */
  depth: number;
  /** Slots in flight that still have an exchange waiting for them. */
  live: number;
  /** Responses read to their end on this socket. */
  completed: number;
  /** An exclusive exchange is in flight: nothing joins it. */
  exclusive: boolean;
  /** When the head slot began to wait for its response: written to an empty socket, the socket connected, or
   *  the response before it completed. */
  headSince: number;
  /** The head was written while another response was owed, and became the head when that one completed. */
  pipelinedHead: boolean;
  /** When the socket was opened, until it connects. */
  readonly openedAt: number;
  /** TCP (and TLS) established: failures before this are `connect` errors. */
  connected: boolean;
  /** A byte of the head's response has arrived: from then on the head is never re-sent. */
  received: boolean;
  idleSince: number;
  dead: boolean;
  socketPaused: boolean;
  /** The bytes being parsed live in the shared read buffer: body chunks must be copied out. */
  borrowed: boolean;
  /** Unparsed bytes held while the head's consumer is paused. */
  remainder: Buffer | null;
  /** The upstream's FIN arrived while the head's consumer was paused; acted on when the held bytes are read. */
  eofDeferred: boolean;
  /** Requests placed since the last flush, written together at the end of this event-loop turn. */
  readonly outgoing: Buffer[];
}

/** What a connection reports to its pool; every call names the connection. */
export interface ConnectionEvents {
  onConnect(conn: Connection): void;
  onHead(conn: Connection, status: number, headers: Array<[string, string]>, contentLength: number | undefined): void;
  /** chunk[start, end) is body data of the head's response; false stops the parser after it. */
  onBody(conn: Connection, chunk: Buffer, start: number, end: number): boolean;
  /** Whether the consumer of the head being parsed reads its headers (see ResponseEvents.wantsHeaders). */
  wantsHeaders(conn: Connection): boolean;
  onBytes(conn: Connection, chunk: Buffer, length: number, borrowed: boolean): void;
  onEnd(conn: Connection): void;
  onGone(conn: Connection, err: Error | undefined): void;
}

/** Opens a socket that can hold `pipelining` requests in flight. */
export function openConnection(config: UpstreamSocketConfig, pipelining: number, events: ConnectionEvents): Connection {
  // Parser and socket report only after this function returned, so `conn` is assigned by then.
  let conn!: Connection;
  const parser = createResponseParser({
    onHead: (status, headers, contentLength) => events.onHead(conn, status, headers, contentLength),
    onBody: (chunk, start, end) => events.onBody(conn, chunk, start, end),
    wantsHeaders: () => events.wantsHeaders(conn),
  });
  const socket = openUpstreamSocket(config, {
    onConnect: () => events.onConnect(conn),
    onBytes: (chunk, length, borrowed) => events.onBytes(conn, chunk, length, borrowed),
    onEnd: () => events.onEnd(conn),
    onGone: (err) => events.onGone(conn, err),
  });
  conn = {
    socket,
    parser,
    slots: new Array<UpstreamExchange | null>(pipelining).fill(null),
    first: 0,
    depth: 0,
    live: 0,
    completed: 0,
    exclusive: false,
    headSince: 0,
    pipelinedHead: false,
    openedAt: Date.now(),
    connected: false,
    received: false,
    idleSince: 0,
    dead: false,
    socketPaused: false,
    borrowed: false,
    remainder: null,
    eofDeferred: false,
    outgoing: [],
  };
  return conn;
}

/** The exchange being answered: null when nothing is in flight or the head slot was discarded. */
export function headOf(conn: Connection): UpstreamExchange | null {
  return conn.depth === 0 ? null : (conn.slots[conn.first] ?? null);
}

export function pushSlot(conn: Connection, ex: UpstreamExchange): void {
  const slots = conn.slots;
  let i = conn.first + conn.depth;
  if (i >= slots.length) i -= slots.length;
  slots[i] = ex;
  conn.depth++;
  conn.live++;
}

/** Removes the head slot once its response is complete; returns its exchange unless it was discarded. */
export function shiftSlot(conn: Connection): UpstreamExchange | null {
  const slots = conn.slots;
  const ex = slots[conn.first] ?? null;
  slots[conn.first] = null;
  conn.first = conn.first + 1 === slots.length ? 0 : conn.first + 1;
  conn.depth--;
  if (ex !== null) conn.live--;
  if (conn.depth === 0) conn.exclusive = false;
  return ex;
}

/** Turns ex's slot into a discarded one; false when ex is not in flight here. */
export function discardSlot(conn: Connection, ex: UpstreamExchange): boolean {
  const slots = conn.slots;
  for (let k = 0, i = conn.first; k < conn.depth; k++, i = i + 1 === slots.length ? 0 : i + 1) {
    if (slots[i] === ex) {
      slots[i] = null;
      conn.live--;
      return true;
    }
  }
  return false;
}

/** Discards the slots from position `from` (0 = the head) and returns their exchanges, oldest first. */
export function takeLive(conn: Connection, from: number): UpstreamExchange[] {
  const taken: UpstreamExchange[] = [];
  const slots = conn.slots;
  for (let k = from; k < conn.depth; k++) {
    const i = (conn.first + k) % slots.length;
    const ex = slots[i];
    if (ex == null) continue;
    taken.push(ex);
    slots[i] = null;
    conn.live--;
  }
  return taken;
}

// Requests placed during one event-loop turn go out in one write per socket. The flush runs in
// setImmediate, not process.nextTick: uWS drains the tick queue after every request handler it calls, so
// a tick would hold one client request, while the check phase comes after every read of this turn.
const pendingFlush: Connection[] = [];
let flushScheduled = false;

/** Queues an encoded request for this turn's write on conn. */
export function queueWrite(conn: Connection, payload: Buffer): void {
  if (conn.outgoing.push(payload) > 1) return;
  pendingFlush.push(conn);
  if (!flushScheduled) {
    flushScheduled = true;
    setImmediate(flushWrites);
  }
}

function flushWrites(): void {
  // Indexed, re-reading the length: a write that queues another (it cannot today) is still flushed.
  for (let i = 0; i < pendingFlush.length; i++) {
    const conn = pendingFlush[i]!;
    const out = conn.outgoing;
    if (!conn.dead) conn.socket.write(out.length === 1 ? out[0]! : Buffer.concat(out));
    out.length = 0;
  }
  pendingFlush.length = 0;
  flushScheduled = false;
}
