import type { HttpUpstream, RequestHandle, ResponseSink, UpstreamOptions, UpstreamRequest } from './http-client.js';
import { place } from './http-placement.js';
import {
  abortExchange,
  connected,
  connectionLost,
  deliverBody,
  deliverHead,
  distrustExchange,
  endOfStream,
  parseFrom,
  resumeExchange,
} from './http-response.js';
import { closePool, refuseClosed, startSweep } from './http-sweep.js';
import { createPipeliningGuard, type PipeliningGuard } from './pipelining-guard.js';
import { createRequestEncoder, type RequestEncoder } from './request-head.js';
import { type Connection, type ConnectionEvents, headOf } from './upstream-connection.js';
import { REFUSED, UpstreamExchange } from './upstream-exchange.js';
import { type UpstreamSocketConfig, upstreamSocketConfig } from './upstream-socket.js';
import { parseUpstreamUrl } from './upstream-url.js';

const DEFAULT_MAX_CONNECTIONS = 64;
const DEFAULT_IDLE_SOCKET_TIMEOUT_MS = 30_000;
const DEFAULT_PIPELINING = 8;
const DEFAULT_STALL_MS = 50;
/** sendAgain without a budget: every re-send goes. */
const ALWAYS = (): boolean => true;

function positiveOption(value: number | undefined, fallback: number, name: string, integer: boolean): number {
  if (value === undefined) return fallback;
  if (!(value > 0) || !Number.isFinite(value) || (integer && !Number.isInteger(value))) {
    throw new TypeError(`${name} must be a positive ${integer ? 'integer' : 'number'}`);
  }
  return value;
}

/**
 * The pool behind one HttpUpstream (see HttpUpstream for how it places, retries and moves requests). Its
 * state is in these fields, declared in one order so that every pool has one shape; its steps are module
 * functions that take it, by what they own: http-placement.ts (which socket takes a request, the pool's
 * membership), http-response.ts (the parser's reports to the sinks, and the handles' abort, distrust and
 * resume) and http-sweep.ts (deadlines, stalls, idle sockets, close). It is its connections' events and
 * its exchanges' owner, so neither a connection nor a request makes closures to reach it.
 */
export class UpstreamPool implements HttpUpstream, ConnectionEvents {
  readonly label: string;
  readonly encoder: RequestEncoder;
  readonly maxConnections: number;
  readonly idleTimeoutMs: number;
  readonly pipelining: number;
  readonly stallMs: number;
  readonly answerTimeoutMs: number;
  readonly socketConfig: UpstreamSocketConfig;
  readonly guard: PipeliningGuard;
  readonly now: () => number;
  /** UpstreamOptions.sendAgain. */
  readonly sendAgain: (stillOnItsSocket: boolean) => boolean;
  readonly connections: Set<Connection>;
  readonly idle: Connection[];
  /** Waiting requests, oldest first; entries no longer QUEUED (aborted) are skipped and dropped as met. */
  queue: UpstreamExchange[];
  /** The requests in `queue` still QUEUED. */
  queued: number;
  sweepTimer: NodeJS.Timeout | undefined;
  /** Coarse clock for idle sockets, which need no finer time than the sweep's. */
  lastSweepAt: number;
  closed: boolean;
  /** The socket that took the latest request: while its write is pending, the next request joins it. */
  batchConn: Connection | null;
  /**
   * How long an answer usually takes from write to end, in ms (-1 until known). A remote node's round trip
   * is no stall, so the stall threshold sits this far above stallMs. It falls fast and rises slowly, so a
   * few slow calls do not make a stalled socket look normal.
   */
  usualMs: number;

  constructor(opts: UpstreamOptions) {
    const target = parseUpstreamUrl(opts.url);
    this.encoder = createRequestEncoder(target, opts.headers);
    this.maxConnections = positiveOption(opts.maxConnections, DEFAULT_MAX_CONNECTIONS, 'maxConnections', true);
    this.idleTimeoutMs = positiveOption(opts.idleSocketTimeoutMs, DEFAULT_IDLE_SOCKET_TIMEOUT_MS, 'idleSocketTimeoutMs', false);
    this.pipelining = positiveOption(opts.pipelining, DEFAULT_PIPELINING, 'pipelining', true);
    this.stallMs = positiveOption(opts.stallMs, DEFAULT_STALL_MS, 'stallMs', false);
    this.answerTimeoutMs = positiveOption(opts.answerTimeoutMs, Infinity, 'answerTimeoutMs', false);
    this.socketConfig = upstreamSocketConfig(target, opts.ca);
    this.label = opts.name ?? target.label;
    this.guard = createPipeliningGuard(this.pipelining);
    this.now = opts.now ?? Date.now;
    this.sendAgain = opts.sendAgain ?? ALWAYS;
    this.connections = new Set();
    this.idle = [];
    this.queue = [];
    this.queued = 0;
    this.sweepTimer = undefined;
    this.lastSweepAt = this.now();
    this.closed = false;
    this.batchConn = null;
    this.usualMs = -1;
  }

  request(req: UpstreamRequest, sink: ResponseSink): RequestHandle {
    const timeoutMs = req.timeoutMs;
    if (!(timeoutMs > 0) || !Number.isFinite(timeoutMs)) throw new TypeError('timeoutMs must be a positive number');
    const at = this.now();
    const ex = new UpstreamExchange(
      this,
      sink,
      this.encoder.encode(req),
      timeoutMs,
      at,
      req.answerTimeoutMs ?? this.answerTimeoutMs,
      req.exclusive === true,
    );
    if (this.closed) {
      ex.state = REFUSED;
      process.nextTick(refuseClosed, this, ex);
      return ex;
    }
    place(this, ex, at);
    startSweep(this, at);
    return ex;
  }

  stats(): { open: number; busy: number; queued: number } {
    return { open: this.connections.size, busy: this.connections.size - this.idle.length, queued: this.queued };
  }

  close(): void {
    closePool(this);
  }

  // The exchange's RequestHandle methods land here.

  abort(ex: UpstreamExchange): void {
    abortExchange(this, ex);
  }

  distrust(ex: UpstreamExchange): void {
    distrustExchange(this, ex);
  }

  resume(ex: UpstreamExchange): void {
    resumeExchange(this, ex);
  }

  // ConnectionEvents: what each connection's socket and parser report.

  onConnect(conn: Connection): void {
    connected(this, conn);
  }

  onHead(conn: Connection, status: number, headers: Array<[string, string]>, contentLength: number | undefined): void {
    deliverHead(conn, status, headers, contentLength);
  }

  wantsHeaders(conn: Connection): boolean {
    return headOf(conn)?.sink.ignoresHeaders !== true;
  }

  onBody(conn: Connection, chunk: Buffer, start: number, end: number): boolean {
    return deliverBody(this, conn, chunk, start, end);
  }

  onBytes(conn: Connection, chunk: Buffer, length: number, borrowed: boolean): void {
    if (!conn.dead) parseFrom(this, conn, chunk, 0, length, borrowed);
  }

  onEnd(conn: Connection): void {
    endOfStream(this, conn);
  }

  onGone(conn: Connection, err: Error | undefined): void {
    connectionLost(this, conn, err);
  }
}
