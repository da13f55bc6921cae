import { createPipeliningGuard } from './pipelining-guard.js';
import { createRequestEncoder } from './request-head.js';
import {
  type Connection,
  type ConnectionEvents,
  discardSlot,
  headOf,
  openConnection,
  pushSlot,
  queueWrite,
  shiftSlot,
  takeLive,
} from './upstream-connection.js';
import { errorCause, UpstreamError } from './upstream-error.js';
import { ACTIVE, type UpstreamExchange, QUEUED, REFUSED, SETTLED } from './upstream-exchange.js';
import { upstreamSocketConfig } from './upstream-socket.js';
import { parseUpstreamUrl } from './upstream-url.js';

export { UpstreamError, type UpstreamErrorKind } from './upstream-error.js';

/** How to reach one upstream node over HTTP/1.1. */
export interface UpstreamOptions {
  /** How errors and logs name the node (config `name`); default its "scheme://host:port". Never its URL. */
  name?: string;
  /** http(s)://[user:pass@]host[:port][/path][?query]. Path and query form the request target (providers put keys
   *  there); userinfo becomes `Authorization: Basic` unless `headers` sets Authorization. */
  url: string;
  /** Sent on every request. Host may be overridden; framing headers (Content-Length, Connection, …) may not. */
  headers?: Record<string, string>;
  /** Keep-alive sockets at most; further requests wait in a FIFO queue. Default 64. */
  maxConnections?: number;
  /** Extra CA trusted for https upstreams, on top of the built-in roots. */
  ca?: string | Buffer;
  /** Keep-alive sockets idle this long are closed, in ms. Default 30_000. */
  idleSocketTimeoutMs?: number;
  /** Requests in flight on one socket at most (HTTP/1.1 pipelining); requests placed in one event-loop turn go
   *  out at its end, in one write per socket. 1 turns pipelining off. Default 8. Suspended for five minutes when answers
   *  behind another come some 40 ms late, the mark of a node that leaves Nagle's algorithm on (anvil does). */
  pipelining?: number;
  /** A socket whose oldest request has waited this much longer than this upstream's usual answer takes no more
   *  requests, and those behind it are sent again elsewhere, in ms. Default 50. */
  stallMs?: number;
  /** Clock in ms for deadlines, stalls and idle sockets; default Date.now. */
  now?: () => number;
  /** Deadline in ms for a whole response, counted from request() like timeoutMs: a node that keeps sending a byte
   *  now and then never meets timeoutMs's silence limit, but meets this (a timeout error). Enforced by the same
   *  sweep; the time the consumer holds the body paused is not counted (resume() moves the deadline on by it): a
   *  slow client is not the node's fault. Default none (event streams never end). */
  answerTimeoutMs?: number;
}

/** One request to forward. */
export interface UpstreamRequest {
  method: 'GET' | 'POST';
  /** Appended to the URL's path (Beacon paths); its query string is joined to the URL's. Must start with '/'. */
  path?: string;
  /** Per-request headers on top of the configured ones (content-type, accept, …). */
  headers?: ReadonlyArray<readonly [string, string]>;
  /** Sent with Content-Length. */
  body?: Buffer | string;
  /** Deadline in ms for the response head, counted from the request() call (queueing included), and the longest
   *  silence between body chunks while not paused. Enforced by a 100 ms sweep: never early, up to 200 ms late. */
  timeoutMs: number;
  /** Never pipelined: sent only on a socket with nothing in flight, and nothing is sent behind it until it completes.
   *  Requests without it may be sent twice (moved off a stalled socket, or re-sent after the socket closed), so set
   *  it for every call that is not idempotent, such as eth_sendRawTransaction. Default false. */
  exclusive?: boolean;
}

/** Receives one response. Callbacks must not throw; they may call the handle's abort() and resume(). */
export interface ResponseSink {
  /** The final response head; header names are lower-case. contentLength is undefined for chunked or close-delimited bodies. */
  onHead(status: number, headers: Array<[string, string]>, contentLength: number | undefined): void;
  /** A body chunk; the consumer owns it. Return false when full: the socket is paused until handle.resume(). */
  onData(chunk: Buffer): boolean;
  /** The whole body arrived, its framing verified. */
  onEnd(): void;
  /** Exactly one of onEnd/onError is called per request, and neither after abort(). */
  onError(err: UpstreamError): void;
  /** Set when onHead's header list is never read: the response's headers are then not copied out at all. */
  readonly ignoresHeaders?: boolean;
}

export interface RequestHandle {
  /** Drops the request: a queued one is removed; an in-flight one alone on its socket closes the socket, one
   *  pipelined with others is discarded (its response is read and dropped). No sink call follows. */
  abort(): void;
  /** Continues a body paused by onData returning false (a call before that does nothing); may deliver held data synchronously. */
  resume(): void;
  /**
   * The response is not this request's (a JSON-RPC answer with another call's id): drops the request as abort()
   * does, and closes the socket it came on whatever else is in flight there, since that socket's responses are out
   * of step; requests behind it there got no byte and are sent again elsewhere. Works while the response is in
   * flight and inside onEnd; later it does nothing.
   */
  distrust(): void;
}

/**
 * A pool of keep-alive HTTP/1.1 connections to one upstream node, pipelining up to `pipelining` requests per
 * socket. A request is placed, in order of preference, on the socket that took this turn's requests (so
 * they share one write), an idle socket, a new socket, the least loaded socket whose oldest request is not
 * stalled, or else the FIFO queue.
 *
 * A request whose socket closes before any byte of its response is sent once more, on a fresh socket,
 * unless it was the first request written to a new socket (the server may have acted on it) or was already
 * sent once more that way. An exclusive request is always alone, so for it this is exactly the stale
 * keep-alive retry of a reused socket, and nothing else re-sends it. That keeps today's trade: a node that
 * read the request just before closing would see it twice (a second eth_sendRawTransaction is answered
 * "already known"), against a reset for every request that meets a keep-alive socket the node dropped.
 * Requests behind the head of a socket are sent again elsewhere, without counting as that retry, when the
 * head stalls, times out or fails to parse, or its response says the server closes.
 */
export interface HttpUpstream {
  /** The node's name (UpstreamOptions.name), else "scheme://host:port": never userinfo, path or query, which may hold provider keys. */
  readonly label: string;
  /** Throws a TypeError only for a malformed request (timeout, path or header); everything else goes to the sink. */
  request(req: UpstreamRequest, sink: ResponseSink): RequestHandle;
  /** open: sockets connecting, busy or idle; busy: those with a request in flight; queued: requests waiting for one. */
  stats(): { open: number; busy: number; queued: number };
  /** Destroys every socket; in-flight and queued requests get onError(reset), later ones too. */
  close(): void;
}

const DEFAULT_MAX_CONNECTIONS = 64;
const DEFAULT_IDLE_SOCKET_TIMEOUT_MS = 30_000;
const DEFAULT_PIPELINING = 8;
const DEFAULT_STALL_MS = 50;
// One coarse sweep per upstream enforces every deadline, instead of a timer per request.
const SWEEP_INTERVAL_MS = 100;

function positiveOption(value: number | undefined, fallback: number, name: string, integer: boolean): number {
  if (value === undefined) return fallback;
  if (!(value > 0) || !Number.isFinite(value) || (integer && !Number.isInteger(value))) {
    throw new TypeError(`${name} must be a positive ${integer ? 'integer' : 'number'}`);
  }
  return value;
}

export function createHttpUpstream(opts: UpstreamOptions): HttpUpstream {
  const target = parseUpstreamUrl(opts.url);
  const encoder = createRequestEncoder(target, opts.headers);
  const maxConnections = positiveOption(opts.maxConnections, DEFAULT_MAX_CONNECTIONS, 'maxConnections', true);
  const idleTimeoutMs = positiveOption(opts.idleSocketTimeoutMs, DEFAULT_IDLE_SOCKET_TIMEOUT_MS, 'idleSocketTimeoutMs', false);
  const pipelining = positiveOption(opts.pipelining, DEFAULT_PIPELINING, 'pipelining', true);
  const stallMs = positiveOption(opts.stallMs, DEFAULT_STALL_MS, 'stallMs', false);
  const answerTimeoutMs = positiveOption(opts.answerTimeoutMs, Infinity, 'answerTimeoutMs', false);
  const socketConfig = upstreamSocketConfig(target, opts.ca);
  const label = opts.name ?? target.label;
  const guard = createPipeliningGuard(pipelining);
  const now = opts.now ?? Date.now;

  const connections = new Set<Connection>();
  const idle: Connection[] = [];
  let queue: UpstreamExchange[] = [];
  let queued = 0;
  let sweepTimer: NodeJS.Timeout | undefined;
  // Coarse clock for idle sockets, which need no finer time than the sweep's.
  let lastSweepAt = now();
  let closed = false;
  // The socket that took the latest request: while its write is pending, the next request joins it.
  let batchConn: Connection | null = null;
  // How long an answer usually takes from write to end, in ms (-1 until known). A remote node's round trip
  // is no stall, so the stall threshold sits this far above stallMs. It falls fast and rises slowly, so a
  // few slow calls do not make a stalled socket look normal.
  let usualMs = -1;

  const events: ConnectionEvents = {
    onConnect: connected,
    onHead: deliverHead,
    wantsHeaders: (conn) => headOf(conn)?.sink.ignoresHeaders !== true,
    onBody: deliverBody,
    onBytes: (conn, chunk, length, borrowed) => {
      if (!conn.dead) parseFrom(conn, chunk, 0, length, borrowed);
    },
    onEnd: endOfStream,
    onGone: connectionLost,
  };

  function stallAfter(): number {
    return usualMs < 0 ? stallMs : stallMs + usualMs;
  }

  function settle(ex: UpstreamExchange): void {
    ex.state = SETTLED;
    ex.connection = null;
    ex.payload = null;
  }

  function hasRoom(conn: Connection): boolean {
    return conn.depth < guard.depth && !conn.exclusive && !conn.eofDeferred;
  }

  function sendOn(conn: Connection, ex: UpstreamExchange, now: number): void {
    ex.firstOnSocket = conn.depth === 0 && conn.completed === 0;
    if (conn.depth === 0) {
      conn.headSince = now;
      conn.pipelinedHead = false;
      conn.received = false;
    }
    pushSlot(conn, ex);
    if (ex.exclusive) conn.exclusive = true;
    ex.state = ACTIVE;
    ex.connection = conn;
    ex.sentAt = now;
    // Without pipelining too, the write waits for the end of the turn: the turn's writes then go out back
    // to back, and the node wakes once for them instead of once per call (bench/history/2026-11-25.md, evening).
    queueWrite(conn, ex.payload!);
    batchConn = conn;
  }

  function newConnection(ex: UpstreamExchange, now: number): Connection {
    const conn = openConnection(socketConfig, pipelining, events);
    connections.add(conn);
    sendOn(conn, ex, now);
    return conn;
  }

  /** Writes ex to the best socket for it; false when it has to wait in the queue. */
  function tryPlace(ex: UpstreamExchange, now: number): boolean {
    const stallLimit = stallAfter();
    const batch = batchConn;
    if (
      !ex.exclusive &&
      batch !== null &&
      batch.outgoing.length > 0 &&
      !batch.dead &&
      hasRoom(batch) &&
      now - batch.headSince < stallLimit
    ) {
      sendOn(batch, ex, now);
      return true;
    }
    const spare = idle.pop();
    if (spare !== undefined) {
      sendOn(spare, ex, now);
      return true;
    }
    if (connections.size < maxConnections) {
      newConnection(ex, now);
      return true;
    }
    if (ex.exclusive || guard.depth === 1) return false;
    let best: Connection | null = null;
    for (const conn of connections) {
      if (hasRoom(conn) && !conn.socketPaused && now - conn.headSince < stallLimit && (best === null || conn.depth < best.depth)) {
        best = conn;
      }
    }
    if (best === null) return false;
    sendOn(best, ex, now);
    return true;
  }

  /** Places exchanges taken off a socket, oldest first; those that find no room go to the front of the queue. */
  function resend(list: UpstreamExchange[]): void {
    if (list.length === 0) return;
    const at = now();
    for (let i = 0; i < list.length; i++) {
      const ex = list[i]!;
      ex.connection = null;
      // They were sent before anything queued now, so they go in front of it, and the caller's dispatchQueue()
      // places them in that order.
      if (queued > 0 || !tryPlace(ex, at)) {
        const rest = list.slice(i);
        for (const r of rest) {
          r.state = QUEUED;
          r.connection = null;
        }
        queue.unshift(...rest);
        queued += rest.length;
        return;
      }
    }
  }

  /** The retry after a lost socket: on one fresh socket, since the pool's other sockets may be as stale. */
  function retryOnFresh(list: UpstreamExchange[]): void {
    if (list.length === 0) return;
    const at = now();
    let fresh: Connection | null = null;
    for (const ex of list) {
      ex.retried = true;
      ex.connection = null;
      if (fresh !== null && !ex.exclusive && hasRoom(fresh)) sendOn(fresh, ex, at);
      else fresh = newConnection(ex, at);
    }
  }

  /** Removes the connection from the pool and destroys its socket; callers then run dispatchQueue(). */
  function dropConnection(conn: Connection): void {
    if (conn.dead) return;
    conn.dead = true;
    conn.remainder = null;
    connections.delete(conn);
    if (conn.depth === 0) {
      const i = idle.lastIndexOf(conn);
      if (i !== -1) idle.splice(i, 1);
    }
    if (batchConn === conn) batchConn = null;
    conn.socket.destroy();
  }

  function dispatchQueue(): void {
    if (queued === 0) return;
    const at = now();
    // Strictly in order: an exclusive request at the front waits for an idle socket, and the requests behind
    // it wait too, so busy sockets drain and it cannot starve.
    while (queued > 0) {
      const ex = queue[0]!;
      if (ex.state !== QUEUED) {
        queue.shift();
        continue;
      }
      if (!tryPlace(ex, at)) break;
      queue.shift();
      queued--;
    }
    if (queued === 0 && queue.length > 0) queue = [];
  }

  function connected(conn: Connection): void {
    conn.connected = true;
    const at = now();
    // The handshake is a first measure of the round trip, before any answer is.
    if (usualMs < 0) usualMs = at - conn.openedAt;
    if (conn.depth > 0) conn.headSince = at;
  }

  function deliverHead(conn: Connection, status: number, headers: Array<[string, string]>, length?: number): void {
    const ex = headOf(conn);
    if (ex === null) return;
    ex.headReceived = true;
    ex.progressed = true;
    ex.sink.onHead(status, headers, length);
  }

  function deliverBody(conn: Connection, chunk: Buffer, start: number, end: number): boolean {
    if (conn.dead) return false;
    const ex = headOf(conn);
    // A discarded head's body is read only to reach the next response.
    if (ex === null) return true;
    ex.progressed = true;
    let piece: Buffer;
    if (conn.borrowed) {
      piece = Buffer.allocUnsafe(end - start);
      chunk.copy(piece, 0, start, end);
    } else {
      piece = start === 0 && end === chunk.length ? chunk : chunk.subarray(start, end);
    }
    if (ex.sink.onData(piece)) return true;
    if (conn.dead) return false;
    // Aborted inside onData while others share the socket: the rest of its body is read and dropped.
    if (ex.state !== ACTIVE) return true;
    ex.paused = true;
    ex.pausedAt = now();
    return false;
  }

  /** Parses chunk[from, limit) on conn: one response per in-flight slot, in order. */
  function parseFrom(conn: Connection, chunk: Buffer, from: number, limit: number, borrowed: boolean): void {
    conn.borrowed = borrowed;
    const parser = conn.parser;
    for (;;) {
      if (conn.depth === 0) {
        // Bytes when nothing is in flight answer no request: the stream is out of step.
        dropConnection(conn);
        dispatchQueue();
        return;
      }
      if (!conn.received) {
        conn.received = true;
        const head = headOf(conn);
        if (head !== null) head.payload = null;
      }
      const stop = parser.execute(chunk, from, limit);
      if (conn.dead) return;
      if (parser.error !== undefined) {
        failHead(conn, new UpstreamError('protocol', `${label}: ${parser.error}`));
        return;
      }
      if (!parser.done) {
        // The parser stops short only when the consumer paused.
        if (stop < limit) conn.remainder = borrowed ? Buffer.from(chunk.subarray(stop, limit)) : chunk.subarray(stop, limit);
        const head = headOf(conn);
        if (head?.paused && !conn.socketPaused) {
          conn.socketPaused = true;
          conn.socket.pause();
        }
        return;
      }
      if (!completeHead(conn, stop < limit) || stop === limit) return;
      from = stop;
    }
  }

  /** The head's response is complete; returns whether conn reads on (the bytes after it are the next response). */
  function completeHead(conn: Connection, trailing: boolean): boolean {
    const ex = shiftSlot(conn);
    const keepAlive = conn.parser.keepAlive;
    conn.parser.reset();
    conn.completed++;
    conn.received = false;
    const at = now();
    if (ex !== null) {
      if (conn.pipelinedHead) guard.observe(at - conn.headSince, usualMs, at);
      const took = at - ex.sentAt;
      usualMs = usualMs < 0 ? took : usualMs + (took - usualMs) * (took < usualMs ? 0.25 : 0.03125);
      settle(ex);
    }
    // Bytes after the last owed response, or a FIN already seen, end the socket as well.
    if (!keepAlive || (conn.depth === 0 && (trailing || conn.eofDeferred))) {
      const behind = takeLive(conn, 0);
      dropConnection(conn);
      // The server said it closes: it reads nothing after this response, so those behind it are sent again.
      resend(behind);
      dispatchQueue();
      if (ex !== null) ex.sink.onEnd();
      return false;
    }
    if (conn.depth === 0) {
      conn.idleSince = lastSweepAt;
      idle.push(conn);
    } else {
      conn.headSince = at;
      conn.pipelinedHead = true;
    }
    dispatchQueue();
    if (ex !== null) {
      // The consumer may find the response is not its own (distrust) only once it has it whole.
      ex.endingOn = conn;
      ex.sink.onEnd();
      ex.endingOn = null;
    }
    return !conn.dead;
  }

  /** The head fails with err and the socket is dropped; requests behind it, which got no byte, go elsewhere. */
  function failHead(conn: Connection, err: UpstreamError): void {
    const head = headOf(conn);
    const behind = takeLive(conn, 1);
    dropConnection(conn);
    if (head !== null) settle(head);
    resend(behind);
    dispatchQueue();
    if (head !== null) head.sink.onError(err);
  }

  function endOfStream(conn: Connection): void {
    if (conn.dead) return;
    const head = headOf(conn);
    if (head?.paused) conn.eofDeferred = true;
    else connectionLost(conn, undefined);
  }

  function connectionLost(conn: Connection, err: Error | undefined): void {
    if (conn.dead || (conn.eofDeferred && err === undefined)) return;
    if (conn.depth === 0) {
      dropConnection(conn);
      dispatchQueue();
      return;
    }
    if (err === undefined && conn.parser.finish()) {
      // A close-delimited body ends here; it was not keep-alive, so those behind it are sent again.
      completeHead(conn, false);
      return;
    }
    const head = headOf(conn);
    const midResponse = conn.received;
    const wasConnected = conn.connected;
    const behind = takeLive(conn, 1);
    dropConnection(conn);
    const again: UpstreamExchange[] = [];
    const failed: UpstreamExchange[] = [];
    // Once per exchange: a server that closes again gets a reset. The head of a new socket is not re-sent: the
    // server may have acted on it. Those behind any head are idempotent, never exclusive.
    if (head !== null) (wasConnected && !midResponse && !head.retried && !head.firstOnSocket ? again : failed).push(head);
    for (const ex of behind) (wasConnected && !ex.retried ? again : failed).push(ex);
    for (const ex of failed) settle(ex);
    retryOnFresh(again);
    dispatchQueue();
    if (failed.length === 0) return;
    const reason = err === undefined ? 'connection closed' : errorCause(err);
    for (const ex of failed) {
      ex.sink.onError(
        wasConnected
          ? new UpstreamError('reset', `${label}: ${reason} before the response was complete`, { cause: err })
          : new UpstreamError('connect', `${label}: cannot connect (${reason})`, { cause: err }),
      );
    }
  }

  function abortExchange(ex: UpstreamExchange): void {
    if (ex.state === QUEUED) {
      settle(ex);
      queued--;
    } else if (ex.state === REFUSED) {
      settle(ex);
    } else if (ex.state === ACTIVE) {
      const conn = ex.connection!;
      const wasHead = headOf(conn) === ex;
      const paused = ex.paused;
      settle(ex);
      ex.paused = false;
      if (conn.live > 1 && discardSlot(conn, ex)) {
        // Others share the socket: it stays, and the response is read and dropped. A paused head held the socket;
        // reading resumes on the next tick, so abort() never runs another request's callbacks.
        if (wasHead && paused) process.nextTick(continueReading, conn);
      } else {
        dropConnection(conn);
        dispatchQueue();
      }
    }
  }

  function distrustExchange(ex: UpstreamExchange): void {
    const conn = ex.state === ACTIVE ? ex.connection : ex.endingOn;
    if (conn === null) {
      abortExchange(ex);
      return;
    }
    ex.endingOn = null;
    if (ex.state === ACTIVE) {
      settle(ex);
      ex.paused = false;
      discardSlot(conn, ex);
    }
    if (conn.dead) return;
    // Nothing behind it got a byte: whatever the socket owed them, they are sent again on another.
    const behind = takeLive(conn, 0);
    dropConnection(conn);
    resend(behind);
    dispatchQueue();
  }

  function resumeExchange(ex: UpstreamExchange): void {
    if (ex.state !== ACTIVE || !ex.paused) return;
    ex.paused = false;
    ex.progressed = true;
    // The sweep skips a paused body; without this its first look after the pause would count the pause too.
    ex.answerDeadline += Math.max(0, now() - ex.pausedAt);
    continueReading(ex.connection!);
  }

  /** Reads on after the head's consumer resumed or went away: held bytes first, then a held FIN, then the socket. */
  function continueReading(conn: Connection): void {
    if (conn.dead) return;
    let head = headOf(conn);
    if (head?.paused) return;
    const rest = conn.remainder;
    if (rest !== null) {
      conn.remainder = null;
      parseFrom(conn, rest, 0, rest.length, false);
      if (conn.dead || conn.remainder !== null) return;
      head = headOf(conn);
      if (head?.paused) return;
    }
    if (conn.eofDeferred) {
      conn.eofDeferred = false;
      connectionLost(conn, undefined);
    } else if (conn.socketPaused) {
      conn.socketPaused = false;
      conn.socket.resume();
    }
  }

  function timeoutError(ex: UpstreamExchange): UpstreamError {
    const what = ex.headReceived ? 'response body stalled for' : 'no response head within';
    return new UpstreamError('timeout', `${label}: ${what} ${ex.timeoutMs} ms`);
  }

  /** Requests behind the head past their deadline fail; their slots stay, to drop their late responses. */
  function expireBehind(conn: Connection, now: number): void {
    let expired: UpstreamExchange[] | undefined;
    const slots = conn.slots;
    for (let k = 1; k < conn.depth; k++) {
      const i = (conn.first + k) % slots.length;
      const ex = slots[i];
      if (ex == null || now < ex.deadline) continue;
      slots[i] = null;
      conn.live--;
      settle(ex);
      (expired ??= []).push(ex);
    }
    if (expired === undefined) return;
    if (conn.live === 0) dropConnection(conn);
    for (const ex of expired) ex.sink.onError(timeoutError(ex));
  }

  /** Moves the requests behind a stalled head to sockets with room, as many as have room now. */
  function moveBehind(conn: Connection, now: number): void {
    const slots = conn.slots;
    for (let k = 1; k < conn.depth; k++) {
      const i = (conn.first + k) % slots.length;
      const ex = slots[i];
      if (ex == null) continue;
      // Only where there is room now: when every socket is stalled the node is slow, not this socket, and
      // sending the work twice would slow it further.
      if (!tryPlace(ex, now)) return;
      slots[i] = null;
      conn.live--;
    }
  }

  function sweep(): void {
    const at = now();
    lastSweepAt = at;
    // Queued deadlines first, so an expired request is not handed a connection only to time out on it.
    if (queued > 0) {
      const expired = queue.filter((ex) => ex.state === QUEUED && at >= ex.deadline);
      if (expired.length > 0) {
        queue = queue.filter((ex) => ex.state === QUEUED && at < ex.deadline);
        queued = queue.length;
        for (const ex of expired) {
          settle(ex);
          ex.sink.onError(timeoutError(ex));
        }
      }
    }
    guard.review(at);
    const stallLimit = stallAfter();
    for (const conn of connections) {
      if (conn.depth === 0) {
        if (at - conn.idleSince >= idleTimeoutMs) dropConnection(conn);
        continue;
      }
      const head = headOf(conn);
      if (head !== null && !head.paused) {
        if (at >= head.answerDeadline) {
          failHead(conn, new UpstreamError('timeout', `${label}: response not complete within ${answerTimeoutMs} ms`));
          continue;
        }
        if (head.progressed) {
          // Progress happened at most one sweep ago, so the extended deadline is never early.
          head.progressed = false;
          head.deadline = at + head.timeoutMs;
        } else if (at >= head.deadline) {
          failHead(conn, timeoutError(head));
          continue;
        }
      }
      if (conn.depth > 1) expireBehind(conn, at);
      // A socket still connecting has no answer to be late with.
      if (conn.dead || !conn.connected || at - conn.headSince < stallLimit) continue;
      if (conn.live > (head === null ? 0 : 1)) moveBehind(conn, at);
      // Only discarded slots left: nobody waits for what this socket still owes.
      if (conn.live === 0) dropConnection(conn);
    }
    dispatchQueue();
    if (connections.size === 0 && queued === 0) {
      clearInterval(sweepTimer);
      sweepTimer = undefined;
    }
  }

  function refuseClosed(ex: UpstreamExchange): void {
    if (ex.state !== REFUSED) return;
    settle(ex);
    ex.sink.onError(new UpstreamError('reset', `${label}: upstream closed`));
  }

  return {
    label,
    request(req, sink) {
      const timeoutMs = req.timeoutMs;
      if (!(timeoutMs > 0) || !Number.isFinite(timeoutMs)) throw new TypeError('timeoutMs must be a positive number');
      const at = now();
      const ex: UpstreamExchange = {
        sink,
        payload: encoder.encode(req),
        timeoutMs,
        deadline: at + timeoutMs,
        answerDeadline: at + answerTimeoutMs,
        pausedAt: 0,
        progressed: false,
        state: QUEUED,
        paused: false,
        headReceived: false,
        retried: false,
        exclusive: req.exclusive === true,
        firstOnSocket: false,
        sentAt: 0,
        connection: null,
        endingOn: null,
        abort: () => abortExchange(ex),
        distrust: () => distrustExchange(ex),
        resume: () => resumeExchange(ex),
      };
      if (closed) {
        ex.state = REFUSED;
        process.nextTick(refuseClosed, ex);
        return ex;
      }
      if (queued > 0 || !tryPlace(ex, at)) {
        queue.push(ex);
        queued++;
      }
      if (sweepTimer === undefined) {
        lastSweepAt = at;
        sweepTimer = setInterval(sweep, SWEEP_INTERVAL_MS);
        sweepTimer.unref();
      }
      return ex;
    },
    stats() {
      return { open: connections.size, busy: connections.size - idle.length, queued };
    },
    close() {
      if (closed) return;
      closed = true;
      clearInterval(sweepTimer);
      sweepTimer = undefined;
      const orphans: UpstreamExchange[] = [];
      for (const conn of connections) {
        orphans.push(...takeLive(conn, 0));
        dropConnection(conn);
      }
      for (const ex of queue) if (ex.state === QUEUED) orphans.push(ex);
      queue = [];
      queued = 0;
      for (const ex of orphans) settle(ex);
      for (const ex of orphans) ex.sink.onError(new UpstreamError('reset', `${label}: upstream closed`));
    },
  };
}
