/**
 * A chain's upstream subscriptions: one per kind (per filter for logs), shared by every client
 * subscribed to it, kept alive across the loss of the upstream. One upstream node is used at a
 * time; when its WebSocket drops the feeds reconnect with backoff, to the next healthy node, and
 * each feed makes up for what it missed from that node's HTTP before live notifications resume.
 */
import { openWsLink, realTimers, type Timers, type WsLink, WsLinkError } from '../upstreams/ws-link.js';
import { createHeadFeed, type HeadFeed, type HeadMark } from './head-feed.js';
import { createLiveWaits } from './live-waits.js';
import { createLogFeed, logFilterKey } from './log-feed.js';
import { createPendingFeed } from './pending-feed.js';
import { errorText } from '../log.js';

export type FeedKind = 'newHeads' | 'logs' | 'newPendingTransactions';

export interface FeedListener {
  /** One notification's `result`, as JSON text, in delivery order. */
  notify(resultJson: string): void;
  /** The chain's upstream stayed away past maxOutageMs, or refused the subscription: the listener is dropped. */
  lost(reason: string): void;
  /**
   * Optional: the feed's upstream subscription opened (true: FeedHold.live() turned true) or was lost with its
   * link (false). A relay to another thread passes it on, so its holds tell live() without asking.
   */
  liveChanged?(live: boolean): void;
}

/** One upstream node of the chain, as the feeds use it. */
export interface UpstreamNode {
  /** ws(s) URL; may hold credentials, so only `label` is logged. */
  wsUrl: string;
  /** Sent with the WebSocket handshake. */
  headers?: Record<string, string>;
  /** Names the node in the log: its configured name, never its URL. */
  label: string;
  /** JSON-RPC over the node's HTTP: resolves with `result`, rejects on error. */
  call(method: string, params: unknown[]): Promise<unknown>;
}

export type FeedsLog = (level: 'info' | 'warn', msg: string, fields?: Record<string, string | number>) => void;

/** What the feeds ask of the chain about its nodes. */
export interface FeedChain {
  /**
   * Node `node` (an index in FeedsOptions.nodes) reports head `head`, below everything a feed remembers: true
   * when that node went onto a new chain (a reset, a resync) and no node in rotation is ahead of it, so the
   * chain follows it and the feeds start over from there; false when it is only behind the chain.
   */
  followsNewChain(node: number, head: number): boolean;
}

export interface FeedsOptions {
  /** The chain's nodes with a WebSocket URL, in round-robin order; at least one. */
  nodes: UpstreamNode[];
  /** How long the chain may be without its upstream subscriptions before every listener is lost, in ms
   *  (config websocket.max_upstream_outage_s, default 60 s). */
  maxOutageMs: number;
  /** How long a feed without listeners keeps its upstream subscription, so a quick resubscribe reuses it, in ms. Default 2_000. */
  lingerMs?: number;
  /** Reconnect delay: initialMs doubling per failed attempt up to maxMs, each drawn from [d/2, d]. Default 100 / 5_000 ms. */
  backoff?: { initialMs: number; maxMs: number };
  /** Most heads one backfill fetches; a wider gap skips its oldest blocks (logged). Default 1_024. */
  maxBackfillBlocks?: number;
  /** How long one HTTP call of a backfill may take, in ms. Default 10_000. */
  httpTimeoutMs?: number;
  /** Passed to each upstream WebSocket link. */
  link?: { callTimeoutMs?: number; connectTimeoutMs?: number; pingIntervalMs?: number; ca?: string | Buffer };
  /** Nodes it says false for are skipped when choosing the next one (unless all are). Default: all healthy.
   *  With it, a link whose node it says false for while another is in rotation moves (see rotationCheckMs). */
  isHealthy?(index: number): boolean;
  /** How often a serving link checks that its node is still in rotation, in ms. Default 1_000. */
  rotationCheckMs?: number;
  /** Judges a node whose head went back below what the feeds remember. Default: the node is followed. */
  chain?: FeedChain;
  log: FeedsLog;
  /** Backoff, linger, outage and backfill timers. Default: the real clock. */
  timers?: Timers;
  /** Jitter source in [0, 1). Default Math.random. */
  random?: () => number;
}

/** A listener's registration on a feed. */
export interface FeedHold {
  /** Removes the listener. Idempotent. */
  remove(): void;
  /** Whether the feed has its upstream subscription open on the current link. */
  live(): boolean;
  /**
   * Resolves with null once the feed's upstream subscription is open (at once when it is), else with why
   * not, fit for a client: `ms` passed, every upstream node failed a link since the call, or the feed was
   * refused or lost. The listener stays registered either way.
   */
  whenLive(ms: number): Promise<string | null>;
}

export interface Feeds {
  /**
   * Registers `listener` on the feed of `kind` and `params` (the second eth_subscribe parameter: the
   * logs filter, already validated and normalized, or newPendingTransactions' fullTransactions flag;
   * else undefined), opening its upstream subscription if it has none. The listener gets the
   * notifications that come after this call; one registered while the upstream is away also gets
   * what the feed makes up for when it is back.
   */
  subscribe(kind: FeedKind, params: unknown, listener: FeedListener): FeedHold;
  /** Feeds with an open upstream subscription on the current link. */
  upstreamSubscriptions(): number;
  /** The latest head the newHeads feed delivered; null while there is no newHeads feed or before its first head. */
  head(): HeadMark | null;
  /** Drops every feed and the link; listeners are not told (the server is closing their sockets). */
  close(): void;
}

/** What a feed step may use: the node the step's data came from, and that node's HTTP. */
export interface NodeAccess {
  readonly node: number;
  call(method: string, params: unknown[]): Promise<unknown>;
  sleep(ms: number): Promise<void>;
}

/** Hands one notification's result to the feed's listeners. */
export type Deliver = (result: unknown) => void;

/**
 * One kind of feed. Its steps run one at a time, in arrival order, so a step that waits on HTTP
 * (a backfill) holds back the live notifications behind it. A step that throws makes the feeds
 * drop the link and start over: the next link's resume step makes up for whatever was lost.
 */
export interface FeedHandler {
  /** The upstream eth_subscribe params. */
  readonly subscribeParams: unknown[];
  /** Runs once before the feed's first upstream subscription. */
  prepare?(via: NodeAccess): Promise<void>;
  /** One live notification's result. */
  live(result: unknown, via: NodeAccess, deliver: Deliver): void | Promise<void>;
  /** The upstream subscription was (re)opened on `via.node`: deliver what was missed since the last delivery. */
  resume(via: NodeAccess, deliver: Deliver): Promise<void>;
}

interface Entry {
  listener: FeedListener;
  /** The first step this listener gets. */
  since: number;
}

interface Step {
  seq: number;
  session: number;
  run(deliver: Deliver): void | Promise<void>;
}

interface Feed {
  key: string;
  kind: FeedKind;
  handler: FeedHandler;
  entries: Set<Entry>;
  seq: number;
  queue: Step[];
  running: boolean;
  prepared: boolean;
  /** The upstream subscription, on the session that opened it. */
  sub: { session: number; id: string } | null;
  attachIn: number;
  readyIn: number;
  linger: unknown;
  dropped: boolean;
}

interface Session {
  id: number;
  node: number;
  link: WsLink;
  open: boolean;
  healthy: boolean;
  via: NodeAccess;
  /** The rotation check's timer while the link serves. */
  watch: unknown;
}

const NO_TIMER: unknown = null;

/** Which feed a subscribe of `kind` and `params` shares: one upstream subscription per key. */
export function feedKey(kind: FeedKind, params: unknown): string {
  switch (kind) {
    case 'newHeads':
      return 'newHeads';
    case 'newPendingTransactions':
      return params === true ? 'newPendingTransactions:full' : 'newPendingTransactions';
    case 'logs':
      return `logs:${logFilterKey(params ?? {})}`;
  }
}

export function createFeeds(opts: FeedsOptions): Feeds {
  if (opts.nodes.length === 0) throw new Error('feeds: nodes must hold at least one upstream with a ws URL');
  if (!(opts.maxOutageMs > 0)) throw new Error('feeds: maxOutageMs must be a positive number');
  const timers = opts.timers ?? realTimers;
  const random = opts.random ?? Math.random;
  const lingerMs = opts.lingerMs ?? 2_000;
  const backoff = opts.backoff ?? { initialMs: 100, maxMs: 5_000 };
  const httpTimeoutMs = opts.httpTimeoutMs ?? 10_000;
  const maxBackfillBlocks = opts.maxBackfillBlocks ?? 1_024;
  const rotationCheckMs = opts.rotationCheckMs ?? 1_000;
  const nodes = opts.nodes;

  const feeds = new Map<string, Feed>();
  const waits = createLiveWaits<Feed>(nodes.length, timers);
  let session: Session | null = null;
  let sessionCount = 0;
  /** The node the next link tries first. */
  let preferred = 0;
  let failures = 0;
  let retryTimer: unknown = NO_TIMER;
  let outageTimer: unknown = NO_TIMER;
  let outageSince = 0;
  let closed = false;

  const labelOf = (node: number): string => nodes[node]!.label;
  const sleep = (ms: number): Promise<void> => new Promise((resolve) => void timers.setTimeout(resolve, ms));

  function withTimeout<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
    return new Promise((resolve, reject) => {
      const timer = timers.setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
      work.then(
        (v) => {
          timers.clearTimeout(timer);
          resolve(v);
        },
        (err: unknown) => {
          timers.clearTimeout(timer);
          reject(err);
        },
      );
    });
  }

  function pickNode(): number {
    for (let k = 0; k < nodes.length; k++) {
      const i = (preferred + k) % nodes.length;
      if (!opts.isHealthy || opts.isHealthy(i)) return i;
    }
    return preferred % nodes.length;
  }

  function backoffDelay(attempt: number): number {
    const full = Math.min(backoff.maxMs, backoff.initialMs * 2 ** (attempt - 1));
    return full / 2 + (random() * full) / 2;
  }

  function connect(): void {
    retryTimer = NO_TIMER;
    const node = pickNode();
    const spec = nodes[node]!;
    const link = openWsLink({
      url: spec.wsUrl,
      label: spec.label,
      ...(spec.headers ? { headers: spec.headers } : {}),
      ...opts.link,
    });
    const s: Session = {
      id: ++sessionCount,
      node,
      link,
      open: false,
      healthy: false,
      watch: NO_TIMER,
      via: {
        node,
        call: (method, params) => withTimeout(spec.call(method, params), httpTimeoutMs, `${spec.label} ${method}`),
        sleep,
      },
    };
    session = s;
    link.onClose((reason) => linkLost(s, reason));
    link.opened.then(
      () => {
        if (session !== s) return;
        s.open = true;
        for (const feed of feeds.values()) attach(feed, s);
      },
      () => {}, // onClose reports it.
    );
  }

  function linkLost(s: Session, reason: string): void {
    if (session !== s) return;
    session = null;
    unwatch(s);
    waits.nodeFailed(s.node);
    for (const feed of feeds.values()) {
      if (feed.sub?.session !== s.id) continue;
      feed.sub = null;
      tellLive(feed, false);
    }
    preferred = (s.node + 1) % nodes.length;
    if (feeds.size === 0 || closed) return;
    failures++;
    startOutageClock();
    const delay = backoffDelay(failures);
    opts.log('warn', 'upstream subscription link lost', {
      upstream: labelOf(s.node),
      reason: reason.slice(0, 200),
      retry_ms: Math.round(delay),
      feeds: feeds.size,
    });
    retryTimer = timers.setTimeout(connect, delay);
  }

  /** Closes the link on purpose: a step could not make up for what was missed on it. */
  function dropLink(s: Session, reason: string): void {
    linkLost(s, reason);
    s.link.close();
  }

  function stopLink(): void {
    if (retryTimer !== NO_TIMER) timers.clearTimeout(retryTimer);
    retryTimer = NO_TIMER;
    clearOutage();
    failures = 0;
    const s = session;
    session = null;
    if (s) unwatch(s);
    s?.link.close();
  }

  /**
   * While a link serves, its node is checked every rotationCheckMs: a node that lags or fails with its socket
   * still open would go on feeding stale heads or none, so once it is out of rotation while another node is
   * in, the link is dropped on purpose and the feeds move as after a loss (backfill by number included).
   */
  function watchRotation(s: Session): void {
    const inRotation = opts.isHealthy;
    if (inRotation === undefined || s.watch !== NO_TIMER) return;
    s.watch = timers.setTimeout(() => {
      s.watch = NO_TIMER;
      if (session !== s || closed) return;
      if (!inRotation(s.node) && nodes.some((_, i) => i !== s.node && inRotation(i))) {
        opts.log('info', 'upstream out of rotation: subscriptions move', { upstream: labelOf(s.node) });
        dropLink(s, 'node out of rotation');
        return;
      }
      watchRotation(s);
    }, rotationCheckMs);
  }

  function unwatch(s: Session): void {
    if (s.watch !== NO_TIMER) timers.clearTimeout(s.watch);
    s.watch = NO_TIMER;
  }

  function startOutageClock(): void {
    if (outageTimer !== NO_TIMER) return;
    outageSince = timers.now();
    outageTimer = timers.setTimeout(loseEverything, opts.maxOutageMs);
  }

  function clearOutage(): void {
    if (outageTimer !== NO_TIMER) timers.clearTimeout(outageTimer);
    outageTimer = NO_TIMER;
  }

  function loseEverything(): void {
    outageTimer = NO_TIMER;
    const lost = [...feeds.values()];
    let listeners = 0;
    for (const feed of lost) {
      retire(feed);
      listeners += feed.entries.size;
    }
    feeds.clear();
    const upstream = labelOf(session?.node ?? preferred);
    stopLink();
    opts.log('warn', 'upstream outage: subscriptions dropped', {
      upstream,
      feeds: lost.length,
      listeners,
      outage_ms: Math.round(timers.now() - outageSince),
    });
    const reason = `upstream unavailable for more than ${opts.maxOutageMs / 1000} s`;
    waits.fail(undefined, reason);
    for (const feed of lost) loseListeners(feed, reason);
  }

  function loseListeners(feed: Feed, reason: string): void {
    const entries = [...feed.entries];
    feed.entries.clear();
    for (const e of entries) {
      try {
        e.listener.lost(reason);
      } catch (err) {
        opts.log('warn', 'feed listener threw', { kind: feed.kind, error: String(err).slice(0, 200) });
      }
    }
  }

  function retire(feed: Feed): void {
    feed.dropped = true;
    feed.queue.length = 0;
    if (feed.linger !== NO_TIMER) timers.clearTimeout(feed.linger);
    feed.linger = NO_TIMER;
  }

  /** The feed's last listener left and the linger ran out: its upstream subscription goes. */
  function dropFeed(feed: Feed): void {
    retire(feed);
    feeds.delete(feed.key);
    const s = session;
    const sub = feed.sub;
    feed.sub = null;
    if (s && sub && sub.session === s.id) {
      const unsubscribed = s.link.unsubscribe(sub.id).catch(() => {});
      if (feeds.size === 0) {
        // The node hears the eth_unsubscribe before the link closes.
        void unsubscribed.then(() => {
          if (feeds.size === 0 && session === s) stopLink();
        });
      }
    } else if (feeds.size === 0) {
      stopLink();
    }
    if (s) markHealthyIfReady(s);
  }

  function enqueue(feed: Feed, sessionId: number, run: Step['run']): void {
    feed.queue.push({ seq: ++feed.seq, session: sessionId, run });
    if (!feed.running) void drain(feed);
  }

  async function drain(feed: Feed): Promise<void> {
    feed.running = true;
    while (!feed.dropped) {
      const step = feed.queue.shift();
      if (!step) break;
      try {
        const pending = step.run((result) => fanOut(feed, step.seq, result));
        if (pending) await pending;
      } catch (err) {
        stepFailed(feed, step, err);
      }
    }
    feed.running = false;
  }

  function fanOut(feed: Feed, seq: number, result: unknown): void {
    const json = JSON.stringify(result);
    for (const e of feed.entries) {
      if (e.since > seq) continue;
      try {
        e.listener.notify(json);
      } catch (err) {
        opts.log('warn', 'feed listener threw', { kind: feed.kind, error: String(err).slice(0, 200) });
      }
    }
  }

  function tellLive(feed: Feed, live: boolean): void {
    for (const e of feed.entries) {
      try {
        e.listener.liveChanged?.(live);
      } catch (err) {
        opts.log('warn', 'feed listener threw', { kind: feed.kind, error: String(err).slice(0, 200) });
      }
    }
  }

  function stepFailed(feed: Feed, step: Step, err: unknown): void {
    // What the failed session still had queued is made up for by the next session's resume.
    feed.queue = feed.queue.filter((x) => x.session !== step.session);
    const s = session;
    const message = errorText(err);
    if (err instanceof WsLinkError && err.kind === 'closed') return; // linkLost already logged it.
    opts.log('warn', 'upstream subscription step failed', {
      upstream: s ? labelOf(s.node) : labelOf(preferred),
      kind: feed.kind,
      error: message.slice(0, 200),
    });
    if (s && s.id === step.session) dropLink(s, `${feed.kind} could not catch up: ${message}`);
  }

  function attach(feed: Feed, s: Session): void {
    if (feed.dropped || feed.attachIn === s.id) return;
    feed.attachIn = s.id;
    enqueue(feed, s.id, async (deliver) => {
      if (session !== s || feed.dropped) return;
      if (!feed.prepared) {
        await feed.handler.prepare?.(s.via);
        feed.prepared = true;
      }
      let id: string;
      try {
        id = await s.link.subscribe(feed.handler.subscribeParams, (result) => {
          enqueue(feed, s.id, (d) => feed.handler.live(result, s.via, d));
        });
      } catch (err) {
        if (err instanceof WsLinkError && err.kind === 'rpc') return refuse(feed, s, err.message);
        throw err;
      }
      if (feed.dropped) {
        void s.link.unsubscribe(id).catch(() => {});
        return;
      }
      feed.sub = { session: s.id, id };
      waits.opened(feed);
      tellLive(feed, true);
      await feed.handler.resume(s.via, deliver);
      feed.readyIn = s.id;
      markHealthyIfReady(s);
    });
  }

  /** The node answered eth_subscribe with an error: retrying would get the same answer. */
  function refuse(feed: Feed, s: Session, message: string): void {
    opts.log('warn', 'upstream refused a subscription', { upstream: labelOf(s.node), kind: feed.kind, error: message });
    retire(feed);
    feeds.delete(feed.key);
    if (feeds.size === 0) stopLink();
    else markHealthyIfReady(s);
    const reason = `upstream refused the subscription: ${message}`;
    waits.fail(feed, reason);
    loseListeners(feed, reason);
  }

  function markHealthyIfReady(s: Session): void {
    if (session !== s || !s.open || s.healthy) return;
    for (const feed of feeds.values()) if (feed.readyIn !== s.id) return;
    s.healthy = true;
    watchRotation(s);
    if (failures > 0) {
      opts.log('info', 'upstream subscriptions restored', {
        upstream: labelOf(s.node),
        feeds: feeds.size,
        outage_ms: Math.round(timers.now() - outageSince),
      });
    }
    failures = 0;
    clearOutage();
  }

  function feedFor(kind: FeedKind, params: unknown): { key: string; make: () => FeedHandler } {
    const key = feedKey(kind, params);
    switch (kind) {
      case 'newHeads':
        return { key, make: () => createHeadFeed({ maxBackfillBlocks, log: opts.log, chain: opts.chain }) };
      case 'newPendingTransactions':
        return { key, make: () => createPendingFeed(params === true) };
      case 'logs': {
        const filter = (params ?? {}) as Record<string, unknown>;
        return { key, make: () => createLogFeed(filter, { log: opts.log, chain: opts.chain }) };
      }
    }
  }

  return {
    subscribe(kind, params, listener) {
      if (closed) throw new Error('feeds: subscribe after close');
      const { key, make } = feedFor(kind, params);
      let feed = feeds.get(key);
      if (!feed) {
        feed = {
          key,
          kind,
          handler: make(),
          entries: new Set(),
          seq: 0,
          queue: [],
          running: false,
          prepared: false,
          sub: null,
          attachIn: 0,
          readyIn: 0,
          linger: NO_TIMER,
          dropped: false,
        };
        feeds.set(key, feed);
        if (session?.open) {
          attach(feed, session);
        } else if (!session && retryTimer === NO_TIMER) {
          startOutageClock();
          connect();
        }
      } else if (feed.linger !== NO_TIMER) {
        timers.clearTimeout(feed.linger);
        feed.linger = NO_TIMER;
      }
      const entry: Entry = { listener, since: feed.seq + 1 };
      feed.entries.add(entry);
      const f = feed;
      let removed = false;
      const live = (): boolean => !f.dropped && session !== null && f.sub?.session === session.id;
      return {
        remove() {
          if (removed) return;
          removed = true;
          f.entries.delete(entry);
          if (f.entries.size === 0 && !f.dropped) f.linger = timers.setTimeout(() => dropFeed(f), lingerMs);
        },
        live,
        whenLive(ms) {
          if (live()) return Promise.resolve(null);
          // A dropped feed was refused or lost: its listeners were told, and so is this caller.
          if (f.dropped) return Promise.resolve('upstream subscription lost');
          return waits.wait(f, ms);
        },
      };
    },
    upstreamSubscriptions() {
      const s = session;
      if (!s) return 0;
      let n = 0;
      for (const feed of feeds.values()) if (feed.sub?.session === s.id) n++;
      return n;
    },
    head() {
      const feed = feeds.get('newHeads');
      return feed ? (feed.handler as HeadFeed).head() : null;
    },
    close() {
      if (closed) return;
      closed = true;
      waits.fail(undefined, 'subscriptions closed');
      for (const feed of feeds.values()) retire(feed);
      feeds.clear();
      stopLink();
    },
  };
}
