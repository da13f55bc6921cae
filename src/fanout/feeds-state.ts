/**
 * The state of one chain's feeds, in fields: the options resolved, the feeds by key, and the one upstream link
 * they share. Its steps are module functions that take it: feed-link.ts steps the link (which node, reconnect,
 * rotation, outage), feed-subscription.ts each feed's upstream subscription on it, feed-delivery.ts the
 * delivery to a feed's listeners.
 */
import { realTimers, type Timers, type WsLink } from '../upstreams/ws-link.js';
import type { Deliver, FeedHandler, FeedHold, FeedKind, FeedListener, FeedsOptions, NodeAccess, UpstreamNode } from './feeds.js';
import { DeliveredLogs, type FilterMemory, releaseFilter } from './delivered-logs.js';
import { createLiveWaits, type LiveWaits } from './live-waits.js';

export interface Entry {
  listener: FeedListener;
  /** The first step this listener gets. */
  since: number;
}

export interface Step {
  seq: number;
  session: number;
  run(deliver: Deliver): void | Promise<void>;
}

export interface Feed {
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
  /** A logs feed's memory of what it delivered (delivered-logs.ts); null for other kinds and without one. */
  memory: FilterMemory | null;
}

export interface Session {
  id: number;
  node: number;
  link: WsLink;
  open: boolean;
  healthy: boolean;
  via: NodeAccess;
  /** The rotation check's timer while the link serves. */
  watch: unknown;
}

export const NO_TIMER: unknown = null;

export class FeedsState {
  readonly opts: FeedsOptions;
  readonly nodes: UpstreamNode[];
  readonly timers: Timers;
  readonly random: () => number;
  readonly lingerMs: number;
  readonly backoff: { initialMs: number; maxMs: number };
  readonly httpTimeoutMs: number;
  readonly maxBackfillBlocks: number;
  readonly rotationCheckMs: number;
  /** Opens a feed's upstream subscription on a link that just opened (feed-subscription.ts's attach): passed
   *  in, so the link's steps call the feeds' steps without importing them. */
  readonly attach: (feed: Feed, s: Session) => void;
  readonly sleep: (ms: number) => Promise<void>;
  readonly feeds: Map<string, Feed>;
  readonly waits: LiveWaits<Feed>;
  session: Session | null;
  sessionCount: number;
  /** The node the next link tries first. */
  preferred: number;
  failures: number;
  retryTimer: unknown;
  outageTimer: unknown;
  outageSince: number;
  closed: boolean;
  /** The logs feeds' completeness check (log-completeness.ts) while it runs: its hold on the newHeads feed, and
   *  the recent heads' hashes and blooms by number. */
  logCheck: { hold: FeedHold | null; blocks: Map<number, { hash: string; bloom: Uint8Array | null }> } | null;
  /** The logs feeds' memory of what they delivered, for resumes' retractions; null without FeedsOptions.logMemory. */
  readonly deliveredLogs: DeliveredLogs | null;

  constructor(opts: FeedsOptions, attach: (feed: Feed, s: Session) => void) {
    const timers = opts.timers ?? realTimers;
    this.opts = opts;
    this.nodes = opts.nodes;
    this.timers = timers;
    this.random = opts.random ?? Math.random;
    this.lingerMs = opts.lingerMs ?? 2_000;
    this.backoff = opts.backoff ?? { initialMs: 100, maxMs: 5_000 };
    this.httpTimeoutMs = opts.httpTimeoutMs ?? 10_000;
    this.maxBackfillBlocks = opts.maxBackfillBlocks ?? 1_024;
    this.rotationCheckMs = opts.rotationCheckMs ?? 1_000;
    this.attach = attach;
    this.sleep = (ms) => new Promise((resolve) => void timers.setTimeout(resolve, ms));
    this.feeds = new Map();
    this.waits = createLiveWaits<Feed>(opts.nodes.length, timers);
    this.session = null;
    this.sessionCount = 0;
    this.preferred = 0;
    this.failures = 0;
    this.retryTimer = NO_TIMER;
    this.outageTimer = NO_TIMER;
    this.outageSince = 0;
    this.closed = false;
    this.logCheck = null;
    const memory = opts.logMemory;
    this.deliveredLogs = memory === undefined ? null : new DeliveredLogs({ ...memory, now: () => timers.now() });
  }
}

export function labelOf(state: FeedsState, node: number): string {
  return state.nodes[node]!.label;
}

/** The feed takes no more steps and no linger: it is being dropped. */
export function retire(state: FeedsState, feed: Feed): void {
  feed.dropped = true;
  feed.queue.length = 0;
  if (feed.memory !== null && state.deliveredLogs !== null) releaseFilter(state.deliveredLogs, feed.memory);
  feed.memory = null;
  if (feed.linger !== NO_TIMER) state.timers.clearTimeout(feed.linger);
  feed.linger = NO_TIMER;
}
