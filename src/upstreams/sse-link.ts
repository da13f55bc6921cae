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
  const link = new EventStreamLink(opts);
  link.connect();
  return link;
}

/** One topic's stream: its settings, and the attempt in flight with its timers and backoff, in fields. */
class EventStreamLink implements SseLink {
  private readonly topic: string;
  private readonly onFrame: (frame: Buffer) => void;
  private readonly onStatus: ((open: boolean) => void) | undefined;
  private readonly log: SseLinkOptions['log'];
  private readonly silenceTimeoutMs: number;
  private readonly headTimeoutMs: number;
  private readonly backoff: { initialMs: number; maxMs: number };
  private readonly stableAfterMs: number;
  private readonly maxEventBytes: number;
  private readonly timers: LinkTimers;
  private readonly now: () => number;
  private readonly random: () => number;
  private readonly nodeFor: () => HttpUpstream;
  private readonly path: string;
  private fields: { upstream: string; topic: string };
  private closed = false;
  // Each attempt's callbacks compare their number with this, so nothing from an abandoned attempt is acted on.
  private attempt = 0;
  private handle: RequestHandle | null = null;
  private headTimer: unknown = undefined;
  private retryTimer: unknown = undefined;
  private openedAt: number | undefined = undefined;
  private failures = 0;

  constructor(opts: SseLinkOptions) {
    const { upstream, topic } = opts;
    this.topic = topic;
    this.onFrame = opts.onFrame;
    this.onStatus = opts.onStatus;
    this.log = opts.log;
    this.silenceTimeoutMs = opts.silenceTimeoutMs ?? DEFAULT_SILENCE_TIMEOUT_MS;
    this.headTimeoutMs = opts.headTimeoutMs ?? DEFAULT_HEAD_TIMEOUT_MS;
    this.backoff = opts.backoff ?? DEFAULT_BACKOFF;
    this.stableAfterMs = opts.stableAfterMs ?? DEFAULT_STABLE_AFTER_MS;
    this.maxEventBytes = opts.maxEventBytes ?? DEFAULT_MAX_EVENT_BYTES;
    this.timers = opts.timers ?? realTimers;
    this.now = opts.now ?? (() => performance.now());
    this.random = opts.random ?? Math.random;
    for (const [name, value] of [
      ['silenceTimeoutMs', this.silenceTimeoutMs],
      ['headTimeoutMs', this.headTimeoutMs],
      ['backoff.initialMs', this.backoff.initialMs],
      ['backoff.maxMs', this.backoff.maxMs],
      ['stableAfterMs', this.stableAfterMs],
    ] as const) {
      if (!(value > 0) || !Number.isFinite(value)) throw new TypeError(`${name} must be a positive number`);
    }
    this.nodeFor = typeof upstream === 'function' ? upstream : () => upstream;
    this.path = `/eth/v1/events?topics=${encodeURIComponent(topic)}`;
    this.fields = { upstream: '', topic };
  }

  connect(): void {
    this.retryTimer = undefined;
    if (this.closed) return;
    const mine = ++this.attempt;
    this.openedAt = undefined;
    const parser = createSseParser({
      maxEventBytes: this.maxEventBytes,
      onEvent: (event) => {
        // An event handler may close the link, or this attempt may have been dropped, with events of the chunk left.
        if (mine === this.attempt) this.onFrame(encodeSseEvent(event));
      },
      // The node's retry hint is for its own clients; how soon this link returns is the backoff's to decide.
    });
    this.headTimer = this.timers.setTimeout(() => {
      this.headTimer = undefined;
      if (mine === this.attempt) this.drop('warn', `no response head within ${this.headTimeoutMs} ms`);
    }, this.headTimeoutMs);
    const node = this.nodeFor();
    this.fields = { upstream: node.label, topic: this.topic };
    this.handle = node.request(
      {
        method: 'GET',
        path: this.path,
        headers: [
          ['accept', 'text/event-stream'],
          ['cache-control', 'no-cache'],
        ],
        timeoutMs: this.silenceTimeoutMs,
        exclusive: true,
      },
      {
        onHead: (status, headers) => {
          if (mine !== this.attempt) return;
          this.timers.clearTimeout(this.headTimer);
          this.headTimer = undefined;
          if (status < 200 || status > 299) {
            this.drop('warn', `status ${status}`);
            return;
          }
          const type = headers.find(([name]) => name === 'content-type')?.[1] ?? '';
          if (!/^text\/event-stream\s*(;|$)/i.test(type)) {
            this.drop('warn', `content-type ${JSON.stringify(type)} is not text/event-stream`);
            return;
          }
          this.openedAt = this.now();
          this.log('info', 'sse stream open', this.fields);
          this.onStatus?.(true);
        },
        onData: (chunk) => {
          if (mine !== this.attempt) return true;
          if (!parser.push(chunk) && mine === this.attempt) this.drop('warn', `event over ${this.maxEventBytes} bytes`);
          return true;
        },
        onEnd: () => {
          if (mine === this.attempt) this.lost('info', 'stream ended');
        },
        onError: (err) => {
          if (mine === this.attempt) this.lost('warn', err.message);
        },
      },
    );
  }

  /** Gives up the current attempt on the gateway's side, then reconnects. */
  private drop(level: 'info' | 'warn', reason: string): void {
    const h = this.handle;
    this.handle = null;
    this.attempt++;
    h?.abort();
    this.scheduleReconnect(level, reason);
  }

  /** The upstream ended the current attempt (no abort needed: the client has settled it). */
  private lost(level: 'info' | 'warn', reason: string): void {
    this.handle = null;
    this.attempt++;
    this.scheduleReconnect(level, reason);
  }

  private scheduleReconnect(level: 'info' | 'warn', reason: string): void {
    this.timers.clearTimeout(this.headTimer);
    this.headTimer = undefined;
    const openedAt = this.openedAt;
    const wasOpen = openedAt !== undefined;
    if (openedAt !== undefined && this.now() - openedAt >= this.stableAfterMs) this.failures = 0;
    this.openedAt = undefined;
    const backoff = this.backoff;
    const ceiling = Math.min(backoff.maxMs, backoff.initialMs * 2 ** Math.min(this.failures, 30));
    this.failures++;
    // Equal jitter: links to one node that fell together do not all return in the same instant.
    const delay = Math.round(ceiling / 2 + (this.random() * ceiling) / 2);
    this.log(level, 'sse stream lost', { ...this.fields, reason, retry_ms: delay });
    this.retryTimer = this.timers.setTimeout(() => this.connect(), delay);
    if (wasOpen) this.onStatus?.(false);
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.attempt++;
    this.timers.clearTimeout(this.headTimer);
    this.timers.clearTimeout(this.retryTimer);
    this.headTimer = this.retryTimer = undefined;
    const h = this.handle;
    this.handle = null;
    h?.abort();
  }
}
