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
  const timers = opts.timers ?? realTimers;
  const callTimeoutMs = opts.callTimeoutMs ?? 10_000;
  const pingIntervalMs = opts.pingIntervalMs ?? 15_000;
  const pending = new Map<number, PendingCall>();
  const routes = new Map<string, (result: unknown) => void>();
  // A node may write a notification before the answer that names its id; hold it until the answer.
  const orphans = new Map<string, unknown[]>();
  let orphanCount = 0;
  // eth_subscribe calls that timed out: if their answer still comes, that subscription is dropped.
  const abandoned = new Set<number>();
  const closeListeners: Array<(reason: string) => void> = [];
  let nextId = 0;
  let closed = false;
  let closeReason = '';
  let lastError = '';
  let awaitingPong = false;
  let pingTimer: unknown = null;

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

  let resolveOpened!: () => void;
  let rejectOpened!: (err: WsLinkError) => void;
  const opened = new Promise<void>((resolve, reject) => {
    resolveOpened = resolve;
    rejectOpened = reject;
  });
  // A caller that only listens to onClose must not see an unhandled rejection.
  opened.catch(() => {});

  const finish = (reason: string): void => {
    if (closed) return;
    closed = true;
    closeReason = reason;
    if (pingTimer !== null) timers.clearTimeout(pingTimer);
    rejectOpened(new WsLinkError('closed', `${opts.label}: ${reason}`));
    for (const call of pending.values()) {
      timers.clearTimeout(call.timer);
      call.reject(new WsLinkError('closed', `${opts.label}: ${reason}`));
    }
    pending.clear();
    routes.clear();
    orphans.clear();
    for (const fn of closeListeners.splice(0)) fn(reason);
  };

  const schedulePing = (): void => {
    pingTimer = timers.setTimeout(() => {
      if (closed) return;
      if (awaitingPong) {
        finish('no pong from the node');
        ws.terminate();
        return;
      }
      awaitingPong = true;
      try {
        ws.ping();
      } catch {
        return; // The node is closing the socket; its close event finishes the link.
      }
      schedulePing();
    }, pingIntervalMs);
  };

  ws.on('open', () => {
    if (closed) return;
    resolveOpened();
    schedulePing();
  });
  ws.on('pong', () => {
    awaitingPong = false;
  });
  ws.on('error', (err: Error) => {
    const shortage = shortageCause(err);
    lastError = shortage === null ? err.message : `cannot connect (${shortage})`;
  });
  ws.on('close', (code: number, reason: Buffer) => {
    const text = reason.length > 0 ? ` ${reason.toString().slice(0, 120)}` : '';
    finish(lastError !== '' ? lastError : `closed by the node (${code}${text})`);
  });
  ws.on('message', (data: Buffer, isBinary: boolean) => {
    if (closed || isBinary) return;
    let message: unknown;
    try {
      message = JSON.parse(data.toString());
    } catch {
      return; // Not JSON: nothing here can be matched to a call or a subscription.
    }
    if (typeof message !== 'object' || message === null || Array.isArray(message)) return;
    const m = message as Record<string, unknown>;
    if (m.method === 'eth_subscription') {
      routeNotification(m.params);
      return;
    }
    if (typeof m.id === 'number') settleCall(m.id, m);
  });

  function routeNotification(params: unknown): void {
    if (typeof params !== 'object' || params === null) return;
    const { subscription, result } = params as { subscription?: unknown; result?: unknown };
    if (typeof subscription !== 'string') return;
    const route = routes.get(subscription);
    if (route) {
      route(result);
      return;
    }
    if (orphanCount >= MAX_ORPHANS) {
      // Notifications for ids nobody routes (late ones after an unsubscribe): drop the oldest id's.
      const [oldest, held] = orphans.entries().next().value as [string, unknown[]];
      orphans.delete(oldest);
      orphanCount -= held.length;
    }
    const held = orphans.get(subscription);
    if (held) held.push(result);
    else orphans.set(subscription, [result]);
    orphanCount++;
  }

  function settleCall(id: number, m: Record<string, unknown>): void {
    const call = pending.get(id);
    if (!call) {
      if (abandoned.delete(id) && typeof m.result === 'string') {
        void unsubscribe(m.result).catch(() => {});
      }
      return;
    }
    pending.delete(id);
    timers.clearTimeout(call.timer);
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

  function send(method: string, params: unknown[], timeoutMs: number, onSubscribed?: (id: string) => void): Promise<unknown> {
    if (closed) return Promise.reject(new WsLinkError('closed', `${opts.label}: ${closeReason}`));
    const id = ++nextId;
    return new Promise((resolve, reject) => {
      const timer = timers.setTimeout(() => {
        if (!pending.delete(id)) return;
        if (onSubscribed) abandoned.add(id);
        reject(new WsLinkError('timeout', `${opts.label}: no answer to ${method} within ${timeoutMs} ms`));
      }, timeoutMs);
      pending.set(id, { resolve, reject, timer, ...(onSubscribed ? { onSubscribed } : {}) });
      ws.send(JSON.stringify({ jsonrpc: '2.0', id, method, params }));
    });
  }

  async function call(method: string, params: unknown[], timeoutMs = callTimeoutMs): Promise<unknown> {
    if (ws.readyState === ws.CONNECTING) await opened;
    return send(method, params, timeoutMs);
  }

  async function subscribe(params: unknown[], onNotification: (result: unknown) => void): Promise<string> {
    if (ws.readyState === ws.CONNECTING) await opened;
    const id = await send('eth_subscribe', params, callTimeoutMs, (subId) => {
      routes.set(subId, onNotification);
      const held = orphans.get(subId);
      if (held) {
        orphans.delete(subId);
        orphanCount -= held.length;
        for (const result of held) onNotification(result);
      }
    });
    return id as string;
  }

  function unsubscribe(id: string): Promise<unknown> {
    routes.delete(id);
    const held = orphans.get(id);
    if (held) {
      orphans.delete(id);
      orphanCount -= held.length;
    }
    return call('eth_unsubscribe', [id]);
  }

  return {
    label: opts.label,
    opened,
    get closed() {
      return closed;
    },
    call,
    subscribe,
    unsubscribe,
    onClose(fn) {
      if (closed) fn(closeReason);
      else closeListeners.push(fn);
    },
    close() {
      if (closed) return;
      finish('closed by chaingate');
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
    },
  };
}

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
