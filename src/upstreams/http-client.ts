import type { Socket } from 'node:net';
import { createResponseParser, type ResponseParser } from './http-parser.js';
import { createRequestEncoder } from './request-head.js';
import { UpstreamError } from './upstream-error.js';
import { openUpstreamSocket, upstreamSocketConfig } from './upstream-socket.js';
import { parseUpstreamUrl } from './upstream-url.js';

export { UpstreamError, type UpstreamErrorKind } from './upstream-error.js';

/** How to reach one upstream node over HTTP/1.1. */
export interface UpstreamOptions {
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
}

/** One request to forward. */
export interface UpstreamRequest {
  method: 'GET' | 'POST';
  /** Appended to the URL's path (Beacon paths); its query string is joined to the URL's. Must start with '/'. */
  path?: string;
  /** Per-request headers on top of the configured ones (content-type, accept, …). */
  headers?: Array<[string, string]>;
  /** Sent with Content-Length. */
  body?: Buffer | string;
  /** Deadline in ms for the response head, counted from the request() call (queueing included), and the longest
   *  silence between body chunks while not paused. Enforced by a 100 ms sweep: never early, up to 200 ms late. */
  timeoutMs: number;
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
}

export interface RequestHandle {
  /** Drops the request: a queued one is removed, an in-flight one closes its socket. No sink call follows. */
  abort(): void;
  /** Continues a body paused by onData returning false (a call before that does nothing); may deliver held data synchronously. */
  resume(): void;
}

/**
 * A pool of keep-alive HTTP/1.1 connections to one upstream node, one request per connection at a time.
 * A request written to a reused socket that then closes before any byte of its response is sent once
 * more, on a fresh socket: the server dropped an idle keep-alive connection without reading it.
 */
export interface HttpUpstream {
  /** "scheme://host:port" only: never userinfo, path or query, which may hold provider keys. */
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
// One coarse sweep per upstream enforces every deadline, instead of a timer per request.
const SWEEP_INTERVAL_MS = 100;

const QUEUED = 0;
const ACTIVE = 1;
const SETTLED = 2;
// Issued after close(): its onError(reset) is still to be delivered on the next tick.
const REFUSED = 3;

/** One request from request() until its sink is settled. It is also the caller's RequestHandle. */
interface Exchange extends RequestHandle {
  readonly sink: ResponseSink;
  /** Encoded head and body; kept until a response byte arrives, for the one retry on a fresh socket. */
  payload: Buffer | null;
  readonly timeoutMs: number;
  /** Head deadline, then extended by the sweep whenever `progressed`. */
  deadline: number;
  /** Response bytes were delivered since the last sweep; saves a clock read per chunk. */
  progressed: boolean;
  state: number;
  paused: boolean;
  headReceived: boolean;
  retried: boolean;
  connection: Connection | null;
}

interface Connection {
  socket: Socket;
  parser: ResponseParser;
  current: Exchange | null;
  /** TCP (and TLS) established: failures before this are `connect` errors. */
  connected: boolean;
  /** The current exchange was written to a socket that had already served one, so the server may have closed it. */
  reused: boolean;
  /** A byte of the current exchange's response has arrived: from then on it is never retried. */
  received: boolean;
  idleSince: number;
  dead: boolean;
  socketPaused: boolean;
  /** The bytes being parsed live in the shared read buffer: body chunks must be copied out. */
  borrowed: boolean;
  /** Unparsed bytes held while the consumer is paused. */
  remainder: Buffer | null;
  /** The upstream's FIN arrived while the consumer was paused; acted on at resume. */
  eofDeferred: boolean;
}

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
  const idleTimeoutMs = positiveOption(
    opts.idleSocketTimeoutMs,
    DEFAULT_IDLE_SOCKET_TIMEOUT_MS,
    'idleSocketTimeoutMs',
    false,
  );
  const socketConfig = upstreamSocketConfig(target, opts.ca);
  const label = target.label;

  const connections = new Set<Connection>();
  const idle: Connection[] = [];
  let queue: Exchange[] = [];
  let queued = 0;
  let sweepTimer: NodeJS.Timeout | undefined;
  // Coarse clock for idle sockets, which need no finer time than the sweep's.
  let lastSweepAt = Date.now();
  let closed = false;

  function settle(ex: Exchange): void {
    ex.state = SETTLED;
    ex.connection = null;
    ex.payload = null;
  }

  function openConnection(ex: Exchange): void {
    const conn: Connection = {
      socket: null as unknown as Socket,
      parser: null as unknown as ResponseParser,
      current: null,
      connected: false,
      reused: false,
      received: false,
      idleSince: 0,
      dead: false,
      socketPaused: false,
      borrowed: false,
      remainder: null,
      eofDeferred: false,
    };
    conn.parser = createResponseParser({
      onHead: (status, headers, contentLength) => deliverHead(conn, status, headers, contentLength),
      onBody: (chunk, start, end) => deliverBody(conn, chunk, start, end),
    });
    conn.socket = openUpstreamSocket(socketConfig, {
      onConnect: () => {
        conn.connected = true;
      },
      onBytes: (chunk, length, borrowed) => receive(conn, chunk, length, borrowed),
      onEnd: () => endOfStream(conn),
      onGone: (err) => connectionLost(conn, err),
    });
    connections.add(conn);
    startOn(conn, ex, false);
  }

  function startOn(conn: Connection, ex: Exchange, reused: boolean): void {
    conn.current = ex;
    conn.reused = reused;
    conn.received = false;
    ex.state = ACTIVE;
    ex.connection = conn;
    conn.socket.write(ex.payload!);
  }

  /** Removes the connection from the pool and destroys its socket; callers then run dispatchQueue(). */
  function dropConnection(conn: Connection): void {
    if (conn.dead) return;
    conn.dead = true;
    conn.current = null;
    conn.remainder = null;
    connections.delete(conn);
    const i = idle.lastIndexOf(conn);
    if (i !== -1) idle.splice(i, 1);
    conn.socket.destroy();
  }

  function nextQueued(): Exchange | undefined {
    while (queued > 0) {
      const ex = queue.shift()!;
      if (ex.state === QUEUED) {
        queued--;
        return ex;
      }
    }
    if (queue.length > 0) queue = [];
    return undefined;
  }

  function dispatchQueue(): void {
    while (queued > 0 && (idle.length > 0 || connections.size < maxConnections)) {
      const ex = nextQueued()!;
      const conn = idle.pop();
      if (conn !== undefined) startOn(conn, ex, true);
      else openConnection(ex);
    }
  }

  function releaseConnection(conn: Connection): void {
    conn.parser.reset();
    conn.received = false;
    if (conn.socketPaused) {
      conn.socketPaused = false;
      conn.socket.resume();
    }
    const next = nextQueued();
    if (next !== undefined) {
      startOn(conn, next, true);
    } else {
      conn.idleSince = lastSweepAt;
      idle.push(conn);
    }
  }

  function completeExchange(conn: Connection, ex: Exchange, trailingBytes: boolean): void {
    conn.current = null;
    settle(ex);
    // Bytes after a complete response answer nothing that was asked: the stream is out of step.
    if (conn.parser.keepAlive && !trailingBytes && !conn.eofDeferred && !conn.dead) {
      releaseConnection(conn);
    } else {
      dropConnection(conn);
      dispatchQueue();
    }
    ex.sink.onEnd();
  }

  function failExchange(conn: Connection, ex: Exchange, err: UpstreamError): void {
    settle(ex);
    dropConnection(conn);
    dispatchQueue();
    ex.sink.onError(err);
  }

  function deliverHead(conn: Connection, status: number, headers: Array<[string, string]>, length?: number): void {
    const ex = conn.current;
    if (ex === null) return;
    ex.headReceived = true;
    ex.progressed = true;
    ex.sink.onHead(status, headers, length);
  }

  function deliverBody(conn: Connection, chunk: Buffer, start: number, end: number): boolean {
    const ex = conn.current;
    if (ex === null) return false;
    ex.progressed = true;
    let piece: Buffer;
    if (conn.borrowed) {
      piece = Buffer.allocUnsafe(end - start);
      chunk.copy(piece, 0, start, end);
    } else {
      piece = start === 0 && end === chunk.length ? chunk : chunk.subarray(start, end);
    }
    if (ex.sink.onData(piece)) return true;
    if (conn.current === ex) ex.paused = true;
    return false;
  }

  /** Parses chunk[0, limit) for the connection's current exchange and acts on where the parser stopped. */
  function feed(conn: Connection, ex: Exchange, chunk: Buffer, limit: number, borrowed: boolean): void {
    conn.borrowed = borrowed;
    const parser = conn.parser;
    const stop = parser.execute(chunk, 0, limit);
    if (conn.current !== ex) return;
    if (parser.error !== undefined) {
      failExchange(conn, ex, new UpstreamError('protocol', `${label}: ${parser.error}`));
    } else if (parser.done) {
      completeExchange(conn, ex, stop < limit);
    } else {
      // The parser stops short only when the consumer paused.
      if (stop < limit) conn.remainder = borrowed ? Buffer.from(chunk.subarray(stop, limit)) : chunk.subarray(stop, limit);
      if (ex.paused && !conn.socketPaused) {
        conn.socketPaused = true;
        conn.socket.pause();
      }
    }
  }

  function receive(conn: Connection, chunk: Buffer, length: number, borrowed: boolean): void {
    if (conn.dead) return;
    const ex = conn.current;
    if (ex === null) {
      // Bytes on an idle socket answer no request.
      dropConnection(conn);
      dispatchQueue();
      return;
    }
    if (!conn.received) {
      conn.received = true;
      ex.payload = null;
    }
    feed(conn, ex, chunk, length, borrowed);
  }

  function endOfStream(conn: Connection): void {
    if (conn.dead) return;
    const ex = conn.current;
    if (ex !== null && ex.paused) conn.eofDeferred = true;
    else connectionLost(conn, undefined);
  }

  function connectionLost(conn: Connection, err: Error | undefined): void {
    if (conn.dead || (conn.eofDeferred && err === undefined)) return;
    const ex = conn.current;
    if (ex === null) {
      dropConnection(conn);
      dispatchQueue();
      return;
    }
    if (err === undefined && conn.parser.finish()) {
      completeExchange(conn, ex, false);
      return;
    }
    dropConnection(conn);
    if (conn.reused && !conn.received && !ex.retried) {
      // The server closed a keep-alive socket it had been idle on before reading this request: it saw
      // nothing, so one more try on a fresh socket is safe.
      ex.retried = true;
      openConnection(ex);
      dispatchQueue();
      return;
    }
    settle(ex);
    dispatchQueue();
    const reason = err === undefined ? 'connection closed' : ((err as NodeJS.ErrnoException).code ?? err.message);
    const error = conn.connected
      ? new UpstreamError('reset', `${label}: ${reason} before the response was complete`, { cause: err })
      : new UpstreamError('connect', `${label}: cannot connect (${reason})`, { cause: err });
    ex.sink.onError(error);
  }

  function abortExchange(ex: Exchange): void {
    if (ex.state === QUEUED) {
      settle(ex);
      queued--;
    } else if (ex.state === REFUSED) {
      settle(ex);
    } else if (ex.state === ACTIVE) {
      const conn = ex.connection!;
      settle(ex);
      dropConnection(conn);
      dispatchQueue();
    }
  }

  function resumeExchange(ex: Exchange): void {
    if (ex.state !== ACTIVE || !ex.paused) return;
    ex.paused = false;
    ex.progressed = true;
    const conn = ex.connection!;
    const rest = conn.remainder;
    if (rest !== null) {
      conn.remainder = null;
      feed(conn, ex, rest, rest.length, false);
      if (conn.current !== ex || ex.paused) return;
    }
    if (conn.eofDeferred) {
      conn.eofDeferred = false;
      connectionLost(conn, undefined);
    } else if (conn.socketPaused) {
      conn.socketPaused = false;
      conn.socket.resume();
    }
  }

  function timeoutError(ex: Exchange): UpstreamError {
    const what = ex.headReceived ? 'response body stalled for' : 'no response head within';
    return new UpstreamError('timeout', `${label}: ${what} ${ex.timeoutMs} ms`);
  }

  function sweep(): void {
    const now = Date.now();
    lastSweepAt = now;
    // Queued deadlines first, so an expired request is not handed a connection only to time out on it.
    if (queued > 0) {
      const expired = queue.filter((ex) => ex.state === QUEUED && now >= ex.deadline);
      if (expired.length > 0) {
        queue = queue.filter((ex) => ex.state === QUEUED && now < ex.deadline);
        queued = queue.length;
        for (const ex of expired) {
          settle(ex);
          ex.sink.onError(timeoutError(ex));
        }
      }
    }
    for (const conn of connections) {
      const ex = conn.current;
      if (ex === null) {
        if (now - conn.idleSince >= idleTimeoutMs) dropConnection(conn);
      } else if (ex.paused) {
        continue;
      } else if (ex.progressed) {
        // Progress happened at most one sweep ago, so the extended deadline is never early.
        ex.progressed = false;
        ex.deadline = now + ex.timeoutMs;
      } else if (now >= ex.deadline) {
        failExchange(conn, ex, timeoutError(ex));
      }
    }
    dispatchQueue();
    if (connections.size === 0 && queued === 0) {
      clearInterval(sweepTimer);
      sweepTimer = undefined;
    }
  }

  function refuseClosed(ex: Exchange): void {
    if (ex.state !== REFUSED) return;
    settle(ex);
    ex.sink.onError(new UpstreamError('reset', `${label}: upstream closed`));
  }

  return {
    label,
    request(req, sink) {
      const timeoutMs = req.timeoutMs;
      if (!(timeoutMs > 0) || !Number.isFinite(timeoutMs)) throw new TypeError('timeoutMs must be a positive number');
      const now = Date.now();
      const ex: Exchange = {
        sink,
        payload: encoder.encode(req),
        timeoutMs,
        deadline: now + timeoutMs,
        progressed: false,
        state: QUEUED,
        paused: false,
        headReceived: false,
        retried: false,
        connection: null,
        abort: () => abortExchange(ex),
        resume: () => resumeExchange(ex),
      };
      if (closed) {
        ex.state = REFUSED;
        process.nextTick(refuseClosed, ex);
        return ex;
      }
      const conn = idle.pop();
      if (conn !== undefined) startOn(conn, ex, true);
      else if (connections.size < maxConnections) openConnection(ex);
      else {
        queue.push(ex);
        queued++;
      }
      if (sweepTimer === undefined) {
        lastSweepAt = now;
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
      const orphans: Exchange[] = [];
      for (const conn of connections) {
        if (conn.current !== null) orphans.push(conn.current);
        dropConnection(conn);
      }
      for (const ex of queue) if (ex.state === QUEUED) orphans.push(ex);
      queue = [];
      queued = 0;
      for (const ex of orphans) {
        settle(ex);
        ex.sink.onError(new UpstreamError('reset', `${label}: upstream closed`));
      }
    },
  };
}
