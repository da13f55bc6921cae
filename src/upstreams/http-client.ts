import { UpstreamPool } from './http-pool.js';
import type { UpstreamError } from './upstream-error.js';

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
  /**
   * Asked each time a request is about to be written to the node a second time (moved off a stalled socket, or
   * re-sent after its socket was lost): the node may have read the first copy, so a provider's quota counts both.
   * true lets it go, and is then counted against the node's budget; false keeps a move from happening (the request
   * waits on its socket) and fails a re-send with reset. `stillOnItsSocket`: the first copy is still in flight (a
   * move), so the node holds one call more. Default: always true.
   */
  sendAgain?: (stillOnItsSocket: boolean) => boolean;
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
  /** Deadline in ms for the whole response (UpstreamOptions.answerTimeoutMs) for this request alone; default the
   *  client's. */
  answerTimeoutMs?: number;
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
  /**
   * Optional: a body that arrived whole in one read, handed over without a copy: called instead of onData. The
   * bytes are borrowed (the read buffer shared by every socket): valid only until onEnd, which follows before any
   * other read, returns; whatever is kept past it must be copied.
   */
  onWholeBody?(body: Buffer): void;
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
 * head stalls, times out or fails to parse, or its response says the server closes. Every such second write
 * asks UpstreamOptions.sendAgain first (the node's budget: rps, max_in_flight, a 429's cooldown).
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

export function createHttpUpstream(opts: UpstreamOptions): HttpUpstream {
  return new UpstreamPool(opts);
}
