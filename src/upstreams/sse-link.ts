import { createSseParser, DEFAULT_MAX_EVENT_BYTES, encodeSseEvent } from './sse-parser.js';
import type { HttpUpstream, RequestHandle } from './http-client.js';

/** The timers a link uses; tests pass fakes. Handles are opaque. */
export interface LinkTimers {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export interface SseLinkOptions {
  /** The node's client (in production one kept for streams, not the pool that serves calls: see openSseLink),
   *  or a function that names it at each (re)connection: a chain with several nodes gives the one in rotation,
   *  so a stream lost with its node reopens on another. */
  upstream: HttpUpstream | (() => HttpUpstream);
  /** The Beacon event topic this link streams, e.g. `head`. */
  topic: string;
  /** Each upstream event, already encoded as the frame clients receive (see encodeSseEvent). Must not throw. */
  onFrame(frame: Buffer): void;
  /** true each time the stream opens (a 2xx text/event-stream head arrived), false when an open one is lost
   *  (the link opens it again). Never called after close(). Must not throw. */
  onStatus?(open: boolean): void;
  /** Upstreams are named by their label only: their URL may hold a provider key. */
  log: (level: 'info' | 'warn', msg: string, fields?: Record<string, string | number>) => void;
  /** A stream silent this long is opened again, in ms. Beacon nodes send events every slot, so a long silence is
   *  a dead connection rather than a quiet chain; re-opening a live one loses nothing. Default 600_000. */
  silenceTimeoutMs?: number;
  /** The response head must arrive within this many ms, or the stream is opened again. Default 30_000. */
  headTimeoutMs?: number;
  /** Delay before the first reconnection, doubling up to maxMs, with jitter. Default 250 ms to 30_000 ms. */
  backoff?: { initialMs: number; maxMs: number };
  /** A stream that stayed open this long starts the backoff over when it ends, in ms. Default 30_000. */
  stableAfterMs?: number;
  /** Most bytes one event may take; a larger one makes the link reconnect. Default 16 MiB. */
  maxEventBytes?: number;
  timers?: LinkTimers;
  /** Monotonic clock in ms. Default performance.now. */
  now?: () => number;
  /** Uniform in [0, 1). Default Math.random. */
  random?: () => number;
}

export interface SseLink {
  /** Aborts the stream and any pending reconnection; no onFrame call follows. Idempotent. */
  close(): void;
}

const DEFAULT_SILENCE_TIMEOUT_MS = 600_000;
const DEFAULT_HEAD_TIMEOUT_MS = 30_000;
const DEFAULT_BACKOFF = { initialMs: 250, maxMs: 30_000 };
const DEFAULT_STABLE_AFTER_MS = 30_000;

const realTimers: LinkTimers = {
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

/**
 * Keeps one upstream `GET /eth/v1/events?topics=<topic>` open for as long as the link lives, and passes each of
 * its events on as a client-ready frame. A lost stream, a non-2xx answer, a body that is not text/event-stream,
 * an oversized event or a silent connection is logged and the stream opened again after an exponential backoff
 * with jitter; there is no end state but close().
 *
 * The request is exclusive, so no call is pipelined behind a response that never ends. It still holds one of
 * the client's sockets for as long as it lives, and a stream the node ends counts in the client's estimate of
 * how long answers take, so in production give streams an HttpUpstream of their own for the node.
 */
export function openSseLink(opts: SseLinkOptions): SseLink {
  const { upstream, topic, onFrame, onStatus, log } = opts;
  const silenceTimeoutMs = opts.silenceTimeoutMs ?? DEFAULT_SILENCE_TIMEOUT_MS;
  const headTimeoutMs = opts.headTimeoutMs ?? DEFAULT_HEAD_TIMEOUT_MS;
  const backoff = opts.backoff ?? DEFAULT_BACKOFF;
  const stableAfterMs = opts.stableAfterMs ?? DEFAULT_STABLE_AFTER_MS;
  const maxEventBytes = opts.maxEventBytes ?? DEFAULT_MAX_EVENT_BYTES;
  const timers = opts.timers ?? realTimers;
  const now = opts.now ?? (() => performance.now());
  const random = opts.random ?? Math.random;
  for (const [name, value] of [
    ['silenceTimeoutMs', silenceTimeoutMs],
    ['headTimeoutMs', headTimeoutMs],
    ['backoff.initialMs', backoff.initialMs],
    ['backoff.maxMs', backoff.maxMs],
    ['stableAfterMs', stableAfterMs],
  ] as const) {
    if (!(value > 0) || !Number.isFinite(value)) throw new TypeError(`${name} must be a positive number`);
  }
  const nodeFor = typeof upstream === 'function' ? upstream : () => upstream;
  let fields = { upstream: '', topic };
  const path = `/eth/v1/events?topics=${encodeURIComponent(topic)}`;

  let closed = false;
  // Each attempt's callbacks compare their number with this, so nothing from an abandoned attempt is acted on.
  let attempt = 0;
  let handle: RequestHandle | null = null;
  let headTimer: unknown;
  let retryTimer: unknown;
  let openedAt: number | undefined;
  let failures = 0;

  function connect(): void {
    retryTimer = undefined;
    if (closed) return;
    const mine = ++attempt;
    openedAt = undefined;
    const parser = createSseParser({
      maxEventBytes,
      onEvent(event) {
        // An event handler may close the link, or this attempt may have been dropped, with events of the chunk left.
        if (mine === attempt) onFrame(encodeSseEvent(event));
      },
      // The node's retry hint is for its own clients; how soon this link returns is the backoff's to decide.
    });
    headTimer = timers.setTimeout(() => {
      headTimer = undefined;
      if (mine === attempt) drop('warn', `no response head within ${headTimeoutMs} ms`);
    }, headTimeoutMs);
    const node = nodeFor();
    fields = { upstream: node.label, topic };
    handle = node.request(
      {
        method: 'GET',
        path,
        headers: [
          ['accept', 'text/event-stream'],
          ['cache-control', 'no-cache'],
        ],
        timeoutMs: silenceTimeoutMs,
        exclusive: true,
      },
      {
        onHead(status, headers) {
          if (mine !== attempt) return;
          timers.clearTimeout(headTimer);
          headTimer = undefined;
          if (status < 200 || status > 299) {
            drop('warn', `status ${status}`);
            return;
          }
          const type = headers.find(([name]) => name === 'content-type')?.[1] ?? '';
          if (!/^text\/event-stream\s*(;|$)/i.test(type)) {
            drop('warn', `content-type ${JSON.stringify(type)} is not text/event-stream`);
            return;
          }
          openedAt = now();
          log('info', 'sse stream open', fields);
          onStatus?.(true);
        },
        onData(chunk) {
          if (mine !== attempt) return true;
          if (!parser.push(chunk) && mine === attempt) drop('warn', `event over ${maxEventBytes} bytes`);
          return true;
        },
        onEnd() {
          if (mine === attempt) lost('info', 'stream ended');
        },
        onError(err) {
          if (mine === attempt) lost('warn', err.message);
        },
      },
    );
  }

  /** Gives up the current attempt on the gateway's side, then reconnects. */
  function drop(level: 'info' | 'warn', reason: string): void {
    const h = handle;
    handle = null;
    attempt++;
    h?.abort();
    scheduleReconnect(level, reason);
  }

  /** The upstream ended the current attempt (no abort needed: the client has settled it). */
  function lost(level: 'info' | 'warn', reason: string): void {
    handle = null;
    attempt++;
    scheduleReconnect(level, reason);
  }

  function scheduleReconnect(level: 'info' | 'warn', reason: string): void {
    timers.clearTimeout(headTimer);
    headTimer = undefined;
    const wasOpen = openedAt !== undefined;
    if (openedAt !== undefined && now() - openedAt >= stableAfterMs) failures = 0;
    openedAt = undefined;
    const ceiling = Math.min(backoff.maxMs, backoff.initialMs * 2 ** Math.min(failures, 30));
    failures++;
    // Equal jitter: links to one node that fell together do not all return in the same instant.
    const delay = Math.round(ceiling / 2 + (random() * ceiling) / 2);
    log(level, 'sse stream lost', { ...fields, reason, retry_ms: delay });
    retryTimer = timers.setTimeout(connect, delay);
    if (wasOpen) onStatus?.(false);
  }

  connect();
  return {
    close() {
      if (closed) return;
      closed = true;
      attempt++;
      timers.clearTimeout(headTimer);
      timers.clearTimeout(retryTimer);
      headTimer = retryTimer = undefined;
      const h = handle;
      handle = null;
      h?.abort();
    },
  };
}
