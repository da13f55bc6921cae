/**
 * A chain's upstream subscriptions: one per kind (per filter for logs), shared by every client
 * subscribed to it, kept alive across the loss of the upstream. One upstream node is used at a
 * time; when its WebSocket drops the feeds reconnect with backoff, to the next healthy node, and
 * each feed makes up for what it missed from that node's HTTP before live notifications resume.
 */
import type { Timers } from '../upstreams/ws-link.js';
import { type DeliveredBlock, type DeliveredLogsOptions, deliveredSince } from './delivered-logs.js';
import { fanOut } from './feed-delivery.js';
import { stopLink } from './feed-link.js';
import { attach, holdFeed } from './feed-subscription.js';
import { FeedsState, retire } from './feeds-state.js';
import { createHeadFeed, type HeadFeed, type HeadMark } from './head-feed.js';
import { createFinalFeed, type FinalityView } from './final-feed.js';
import { checkLogFeeds, logCompleteness } from './log-completeness.js';
import { createLogFeed, logFilterKey } from './log-feed.js';
import { createPendingFeed } from './pending-feed.js';

export type FeedKind = 'newHeads' | 'logs' | 'newPendingTransactions' | 'newFinalizedHeads' | 'newSafeHeads' | 'transactionStatus';

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
  /** Node `node` sent head `head` live (not a backfill): the chain counts it as that node's head before the
   *  newHeads feed takes it in, so the served head it may be held for already knows it. */
  heard?(node: number, head: number): void;
}

/** The head the chain serves (chain/served-head.ts ServedHead), as the newHeads feed follows it. */
export interface ServedHeadView {
  /** The head served now; null while none is. */
  now(): number | null;
  /** Tells each new served head; returns the undo. */
  watch(listener: (head: number) => void): () => void;
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
  /** The head the chain serves: the newHeads feed sends no head above it (head-feed.ts). Default: none (a chain
   *  of one node, whose head is the one served). */
  servedHead?: ServedHeadView;
  /**
   * Turns on the logs feeds' completeness check (log-completeness.ts): each block whose bloom says a logs feed
   * missed logs is fetched with eth_getLogs; `backfilled` counts each block that gave some. Default: off.
   */
  logChecks?: { backfilled(): void };
  /**
   * Turns on the logs feeds' memory of what they delivered (delivered-logs.ts), which a resumed logs subscription
   * reads to retract the logs of blocks a reorg replaced (Feeds.deliveredLogs). Default: off (nothing retracted).
   */
  logMemory?: Omit<DeliveredLogsOptions, 'now'>;
  log: FeedsLog;
  /** The chain's finality, which newFinalizedHeads and newSafeHeads follow (final-feed.ts). Default: none known. */
  finality?: FinalityView;
  /** Where a transactionStatus subscription goes (chain/tx-watch.ts): no upstream subscription, the watch's own
   *  news. Default: none, and such a subscribe is lost at once. */
  transactionStatus?(hash: string, listener: FeedListener): FeedHold;
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
  /**
   * The blocks at or above `from` whose logs the logs feed of `params` (a filter as subscribe takes it) delivered
   * live and still remembers (FeedsOptions.logMemory), by number; none when nothing is remembered. Never rejects.
   */
  deliveredLogs(params: unknown, from: number): Promise<DeliveredBlock[]>;
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

/** Which feed a subscribe of `kind` and `params` shares: one upstream subscription per key. */
export function feedKey(kind: FeedKind, params: unknown): string {
  switch (kind) {
    case 'newHeads':
      return 'newHeads';
    case 'newPendingTransactions':
      return params === true ? 'newPendingTransactions:full' : 'newPendingTransactions';
    case 'logs':
      return `logs:${logFilterKey(params ?? {})}`;
    case 'newFinalizedHeads':
    case 'newSafeHeads':
      return kind;
    case 'transactionStatus':
      return `transactionStatus:${String(params).toLowerCase()}`;
  }
}

function makeHeadFeed(state: FeedsState): HeadFeed {
  const { opts, maxBackfillBlocks } = state;
  return createHeadFeed({
    maxBackfillBlocks,
    log: opts.log,
    chain: opts.chain,
    ...(opts.servedHead !== undefined ? { servedHead: opts.servedHead } : {}),
  });
}

/** The handler a new feed of `kind` and `params` gets, and the key it is shared by. */
function feedFor(state: FeedsState, kind: FeedKind, params: unknown): { key: string; make: () => FeedHandler } {
  const key = feedKey(kind, params);
  const { opts, maxBackfillBlocks } = state;
  switch (kind) {
    case 'newHeads':
      return { key, make: () => makeHeadFeed(state) };
    case 'newPendingTransactions':
      return { key, make: () => createPendingFeed(params === true) };
    case 'logs': {
      const filter = (params ?? {}) as Record<string, unknown>;
      return {
        key,
        make: () => createLogFeed(filter, { log: opts.log, chain: opts.chain, completeness: logCompleteness(state) }),
      };
    }
    case 'newFinalizedHeads':
    case 'newSafeHeads': {
      const finality = opts.finality ?? NO_FINALITY;
      const tag = kind === 'newFinalizedHeads' ? 'finalized' : 'safe';
      return { key, make: () => createFinalFeed(tag, { finality, maxBackfillBlocks, log: opts.log }) };
    }
    case 'transactionStatus':
      throw new Error('feeds: transactionStatus has no upstream subscription');
  }
}

const NO_FINALITY: FinalityView = { finalized: () => null, safe: () => null };

/** A hold whose listener was lost at once: what a transactionStatus subscribe gets on feeds without a watch. */
function lostHold(listener: FeedListener, reason: string): FeedHold {
  queueMicrotask(() => listener.lost(reason));
  return { remove() {}, live: () => false, whenLive: async () => reason };
}

export function createFeeds(opts: FeedsOptions): Feeds {
  if (opts.nodes.length === 0) throw new Error('feeds: nodes must hold at least one upstream with a ws URL');
  if (!(opts.maxOutageMs > 0)) throw new Error('feeds: maxOutageMs must be a positive number');
  const state = new FeedsState(opts, (feed, s) => attach(state, feed, s));
  // The served head moved: the newHeads feed sends what it held up to it, to every listener registered now.
  const unwatch = opts.servedHead?.watch(() => {
    const feed = state.feeds.get('newHeads');
    if (feed !== undefined && !feed.dropped) (feed.handler as HeadFeed).release((result) => fanOut(state, feed, feed.seq + 1, result));
  });
  return {
    subscribe(kind, params, listener) {
      if (state.closed) throw new Error('feeds: subscribe after close');
      if (kind === 'transactionStatus')
        return (
          opts.transactionStatus?.(String(params).toLowerCase(), listener) ??
          lostHold(listener, 'transactions are not watched on this chain')
        );
      const { key, make } = feedFor(state, kind, params);
      const hold = holdFeed(state, key, kind, make, listener);
      if (kind === 'logs') checkLogFeeds(state, () => makeHeadFeed(state));
      return hold;
    },
    upstreamSubscriptions() {
      const s = state.session;
      if (!s) return 0;
      let n = 0;
      for (const feed of state.feeds.values()) if (feed.sub?.session === s.id) n++;
      return n;
    },
    head() {
      const feed = state.feeds.get('newHeads');
      return feed ? (feed.handler as HeadFeed).head() : null;
    },
    async deliveredLogs(params, from) {
      const memory = state.deliveredLogs;
      return memory === null ? [] : deliveredSince(memory, feedKey('logs', params), from);
    },
    close() {
      if (state.closed) return;
      state.closed = true;
      unwatch?.();
      state.waits.fail(undefined, 'subscriptions closed');
      for (const feed of state.feeds.values()) retire(state, feed);
      state.feeds.clear();
      stopLink(state);
    },
  };
}
