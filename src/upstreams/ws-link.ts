/**
 * One WebSocket JSON-RPC connection to an upstream node: calls carry the link's own numeric ids,
 * subscription notifications are routed by the upstream's subscription id. The link never
 * reconnects; whoever owns it (the chain's feeds) opens a new one when it closes.
 */
import { createRequire } from 'node:module';
import type WebSocket from 'ws';
import { errorCause, shortageCause } from './upstream-error.js';

/**
 * ws, loaded when the first link opens: the upstream subscriptions are the main thread's, so a worker thread
 * starts without the library (80 ms of CPU less per worker start, measured).
 */
const loadWs = (): typeof WebSocket => createRequire(import.meta.url)('ws');

/** Timer functions, injectable so tests can drive time. */
export interface Timers {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
  /** Monotonic milliseconds. */
  now(): number;
}

export const realTimers: Timers = {
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
  now: () => performance.now(),
};

export type WsLinkErrorKind = 'closed' | 'timeout' | 'rpc';

/** Why a call failed: the link closed, no answer in time, or the node answered with a JSON-RPC error. */
export class WsLinkError extends Error {
  readonly kind: WsLinkErrorKind;
  /** The node's JSON-RPC error code, for kind 'rpc'. */
  readonly rpcCode: number | undefined;
  constructor(kind: WsLinkErrorKind, message: string, rpcCode?: number) {
    super(message);
    this.name = 'WsLinkError';
    this.kind = kind;
    this.rpcCode = rpcCode;
  }
}

export interface WsLinkOptions {
  /** ws(s) URL; may hold credentials, so it is never logged nor put in an error. */
  url: string;
  /** Sent with the opening handshake. */
  headers?: Record<string, string>;
  /** Names the node in errors (scheme, host, port). */
  label: string;
  /** How long a call waits for its answer, in ms. Default 10_000. */
  callTimeoutMs?: number;
  /** How long the opening handshake may take, in ms. Default 10_000. */
  connectTimeoutMs?: number;
  /** A ping goes out this often, in ms; a link whose pong has not come back by the next ping is closed,
   *  so a silently dead path is noticed. Default 15_000. */
  pingIntervalMs?: number;
  /** Extra CA trusted for wss nodes. */
  ca?: string | Buffer;
  timers?: Timers;
}

export interface WsLink {
  readonly label: string;
  /** Resolves once the socket is open; rejects with a WsLinkError('closed') if it closes first. */
  readonly opened: Promise<void>;
  readonly closed: boolean;
  /** One JSON-RPC call; resolves with `result`, rejects with a WsLinkError. Waits for the socket to open. */
  call(method: string, params: unknown[], timeoutMs?: number): Promise<unknown>;
  /**
   * eth_subscribe with `params`; resolves with the node's subscription id. Notifications for it go to
   * `onNotification(result)` from the moment the answer is read, including any the node sent just
   * before its answer. A subscription whose answer comes after the call timed out is unsubscribed.
   */
  subscribe(params: unknown[], onNotification: (result: unknown) => void): Promise<string>;
  /** Stops routing `id` and sends eth_unsubscribe; resolves with the node's answer. */
  unsubscribe(id: string): Promise<unknown>;
  /** `fn` runs once when the link closes, whichever side closed it, with a reason fit for the log. */
  onClose(fn: (reason: string) => void): void;
  close(): void;
}

interface PendingCall {
  resolve(result: unknown): void;
  reject(err: WsLinkError): void;
  timer: unknown;
  /** eth_subscribe: routes the id before anything after the answer is read. */
  onSubscribed?: (id: string) => void;
}

/** Notifications for ids not (yet) routed, kept this many at most. */
const MAX_ORPHANS = 256;

export function openWsLink(opts: WsLinkOptions): WsLink {
  let ws: WebSocket;
  try {
    ws = new (loadWs())(opts.url, {
      headers: opts.headers ?? {},
      // Compression costs CPU on both ends for small messages and hides the frames from a relay that counts them.
      perMessageDeflate: false,
      handshakeTimeout: opts.connectTimeoutMs ?? 10_000,
      followRedirects: false,
      ...(opts.ca !== undefined ? { ca: opts.ca } : {}),
    });
  } catch (err) {
    // ws throws a SyntaxError for a URL it cannot use, whose message would quote it, credentials included; a
    // system error (EMFILE: the process is out of file descriptors) is said as what it is, never as the URL.
    const code = (err as NodeJS.ErrnoException).code;
    return deadLink(opts.label, typeof code === 'string' ? `cannot open a WebSocket (${errorCause(err)})` : 'not a usable ws(s) URL');
  }
  return new OpenLink(ws, opts);
}

/** A link over an open (or opening) socket: its calls in flight, its routes and its close in fields. */
class OpenLink implements WsLink {
  readonly label: string;
  readonly opened: Promise<void>;
  closed = false;
  private readonly ws: WebSocket;
  private readonly timers: Timers;
  private readonly callTimeoutMs: number;
  private readonly pingIntervalMs: number;
  private readonly pending = new Map<number, PendingCall>();
  private readonly routes = new Map<string, (result: unknown) => void>();
  // A node may write a notification before the answer that names its id; hold it until the answer.
  private readonly orphans = new Map<string, unknown[]>();
  private orphanCount = 0;
  // eth_subscribe calls that timed out: if their answer still comes, that subscription is dropped.
  private readonly abandoned = new Set<number>();
  private readonly closeListeners: Array<(reason: string) => void> = [];
  private nextId = 0;
  private closeReason = '';
  private lastError = '';
  private awaitingPong = false;
  private pingTimer: unknown = null;
  private resolveOpened: () => void = noop;
  private rejectOpened: (err: WsLinkError) => void = noop;

  constructor(ws: WebSocket, opts: WsLinkOptions) {
    this.label = opts.label;
    this.ws = ws;
    this.timers = opts.timers ?? realTimers;
    this.callTimeoutMs = opts.callTimeoutMs ?? 10_000;
    this.pingIntervalMs = opts.pingIntervalMs ?? 15_000;
    this.opened = new Promise<void>((resolve, reject) => {
      this.resolveOpened = resolve;
      this.rejectOpened = reject;
    });
    // A caller that only listens to onClose must not see an unhandled rejection.
    this.opened.catch(() => {});
    ws.on('open', () => {
      if (this.closed) return;
      this.resolveOpened();
      this.schedulePing();
    });
    ws.on('pong', () => {
      this.awaitingPong = false;
    });
    ws.on('error', (err: Error) => {
      const shortage = shortageCause(err);
      this.lastError = shortage === null ? err.message : `cannot connect (${shortage})`;
    });
    ws.on('close', (code: number, reason: Buffer) => {
      const text = reason.length > 0 ? ` ${reason.toString().slice(0, 120)}` : '';
      this.finish(this.lastError !== '' ? this.lastError : `closed by the node (${code}${text})`);
    });
    ws.on('message', (data: Buffer, isBinary: boolean) => this.onMessage(data, isBinary));
  }

  private finish(reason: string): void {
    if (this.closed) return;
    this.closed = true;
    this.closeReason = reason;
    if (this.pingTimer !== null) this.timers.clearTimeout(this.pingTimer);
    this.rejectOpened(new WsLinkError('closed', `${this.label}: ${reason}`));
    for (const call of this.pending.values()) {
      this.timers.clearTimeout(call.timer);
      call.reject(new WsLinkError('closed', `${this.label}: ${reason}`));
    }
    this.pending.clear();
    this.routes.clear();
    this.orphans.clear();
    for (const fn of this.closeListeners.splice(0)) fn(reason);
  }

  private schedulePing(): void {
    this.pingTimer = this.timers.setTimeout(() => {
      if (this.closed) return;
      if (this.awaitingPong) {
        this.finish('no pong from the node');
        this.ws.terminate();
        return;
      }
      this.awaitingPong = true;
      try {
        this.ws.ping();
      } catch {
        return; // The node is closing the socket; its close event finishes the link.
      }
      this.schedulePing();
    }, this.pingIntervalMs);
  }

  private onMessage(data: Buffer, isBinary: boolean): void {
    if (this.closed || isBinary) return;
    let message: unknown;
    try {
      message = JSON.parse(data.toString());
    } catch {
      return; // Not JSON: nothing here can be matched to a call or a subscription.
    }
    if (typeof message !== 'object' || message === null || Array.isArray(message)) return;
    const m = message as Record<string, unknown>;
    if (m.method === 'eth_subscription') {
      this.routeNotification(m.params);
      return;
    }
    if (typeof m.id === 'number') this.settleCall(m.id, m);
  }

  private routeNotification(params: unknown): void {
    if (typeof params !== 'object' || params === null) return;
    const { subscription, result } = params as { subscription?: unknown; result?: unknown };
    if (typeof subscription !== 'string') return;
    const route = this.routes.get(subscription);
    if (route) {
      route(result);
      return;
    }
    const orphans = this.orphans;
    if (this.orphanCount >= MAX_ORPHANS) {
      // Notifications for ids nobody routes (late ones after an unsubscribe): drop the oldest id's.
      const [oldest, held] = orphans.entries().next().value as [string, unknown[]];
      orphans.delete(oldest);
      this.orphanCount -= held.length;
    }
    const held = orphans.get(subscription);
    if (held) held.push(result);
    else orphans.set(subscription, [result]);
    this.orphanCount++;
  }

  private settleCall(id: number, m: Record<string, unknown>): void {
    const call = this.pending.get(id);
    if (!call) {
      if (this.abandoned.delete(id) && typeof m.result === 'string') {
        void this.unsubscribe(m.result).catch(() => {});
      }
      return;
    }
    this.pending.delete(id);
    this.timers.clearTimeout(call.timer);
    if (m.error !== undefined) {
      const e = (typeof m.error === 'object' && m.error !== null ? m.error : {}) as { code?: unknown; message?: unknown };
      const msg = typeof e.message === 'string' ? e.message.slice(0, 200) : 'error';
      call.reject(new WsLinkError('rpc', msg, typeof e.code === 'number' ? e.code : undefined));
      return;
    }
    if (call.onSubscribed) {
      if (typeof m.result !== 'string') {
        call.reject(new WsLinkError('rpc', 'eth_subscribe answered without a subscription id'));
        return;
      }
      call.onSubscribed(m.result);
    }
    call.resolve(m.result);
  }

  private send(method: string, params: unknown[], timeoutMs: number, onSubscribed?: (id: string) => void): Promise<unknown> {
    if (this.closed) return Promise.reject(new WsLinkError('closed', `${this.label}: ${this.closeReason}`));
    const id = ++this.nextId;
    return new Promise((resolve, reject) => {
      const timer = this.timers.setTimeout(() => {
        if (!this.pending.delete(id)) return;
        if (onSubscribed) this.abandoned.add(id);
        reject(new WsLinkError('timeout', `${this.label}: no answer to ${method} within ${timeoutMs} ms`));
      }, timeoutMs);
      this.pending.set(id, { resolve, reject, timer, ...(onSubscribed ? { onSubscribed } : {}) });
      this.ws.send(JSON.stringify({ jsonrpc: '2.0', id, method, params }));
    });
  }

  async call(method: string, params: unknown[], timeoutMs = this.callTimeoutMs): Promise<unknown> {
    if (this.ws.readyState === this.ws.CONNECTING) await this.opened;
    return this.send(method, params, timeoutMs);
  }

  async subscribe(params: unknown[], onNotification: (result: unknown) => void): Promise<string> {
    if (this.ws.readyState === this.ws.CONNECTING) await this.opened;
    const id = await this.send('eth_subscribe', params, this.callTimeoutMs, (subId) => {
      this.routes.set(subId, onNotification);
      const held = this.orphans.get(subId);
      if (held) {
        this.orphans.delete(subId);
        this.orphanCount -= held.length;
        for (const result of held) onNotification(result);
      }
    });
    return id as string;
  }

  unsubscribe(id: string): Promise<unknown> {
    this.routes.delete(id);
    const held = this.orphans.get(id);
    if (held) {
      this.orphans.delete(id);
      this.orphanCount -= held.length;
    }
    return this.call('eth_unsubscribe', [id]);
  }

  onClose(fn: (reason: string) => void): void {
    if (this.closed) fn(this.closeReason);
    else this.closeListeners.push(fn);
  }

  close(): void {
    if (this.closed) return;
    this.finish('closed by chaingate');
    const ws = this.ws;
    if (ws.readyState === ws.CONNECTING) {
      ws.terminate();
      return;
    }
    // Queued frames (an eth_unsubscribe) go out before the close frame; a node that never
    // answers the close handshake is cut off rather than kept for ws's 30 s default.
    ws.close(1000);
    const force = setTimeout(() => ws.terminate(), 1000);
    force.unref();
    ws.once('close', () => clearTimeout(force));
  }
}

function noop(): void {}

/** A link that could not even be attempted: closed from the start, it reports why on the next tick. */
function deadLink(label: string, reason: string): WsLink {
  const error = (): WsLinkError => new WsLinkError('closed', `${label}: ${reason}`);
  const opened = Promise.reject(error());
  opened.catch(() => {});
  return {
    label,
    opened,
    closed: true,
    call: () => Promise.reject(error()),
    subscribe: () => Promise.reject(error()),
    unsubscribe: () => Promise.reject(error()),
    onClose(fn) {
      queueMicrotask(() => fn(reason));
    },
    close() {},
  };
}
