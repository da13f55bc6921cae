/**
 * One feed's upstream subscription on the chain's link: its steps (subscribe and resume, each live
 * notification) queued and run one at a time, a step that fails dropping the link, a refusal losing the
 * feed's listeners, and the feed dropped once its last listener left and the linger ran out.
 */
import { WsLinkError } from '../upstreams/ws-link.js';
import { openFilter } from './delivered-logs.js';
import { errorText } from '../log.js';
import { fanOut, loseListeners, tellLive } from './feed-delivery.js';
import { connect, dropLink, markHealthyIfReady, startOutageClock, stopLink } from './feed-link.js';
import type { FeedHandler, FeedHold, FeedKind, FeedListener } from './feeds.js';
import { type Entry, type Feed, type FeedsState, labelOf, NO_TIMER, retire, type Session, type Step } from './feeds-state.js';

/**
 * Registers `listener` on the feed of `key`, made by `make` when there is none: a new feed subscribes on
 * the open link, or opens one.
 */
export function holdFeed(state: FeedsState, key: string, kind: FeedKind, make: () => FeedHandler, listener: FeedListener): FeedHold {
  const { feeds, timers } = state;
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
      memory: kind === 'logs' && state.deliveredLogs !== null ? openFilter(state.deliveredLogs, key) : null,
    };
    feeds.set(key, feed);
    if (state.session?.open) {
      attach(state, feed, state.session);
    } else if (!state.session && state.retryTimer === NO_TIMER) {
      startOutageClock(state);
      connect(state);
    }
  } else if (feed.linger !== NO_TIMER) {
    timers.clearTimeout(feed.linger);
    feed.linger = NO_TIMER;
  }
  const entry: Entry = { listener, since: feed.seq + 1 };
  feed.entries.add(entry);
  const f = feed;
  let removed = false;
  const live = (): boolean => !f.dropped && state.session !== null && f.sub?.session === state.session.id;
  return {
    remove() {
      if (removed) return;
      removed = true;
      f.entries.delete(entry);
      if (f.entries.size === 0 && !f.dropped) f.linger = timers.setTimeout(() => dropFeed(state, f), state.lingerMs);
    },
    live,
    whenLive(ms) {
      if (live()) return Promise.resolve(null);
      // A dropped feed was refused or lost: its listeners were told, and so is this caller.
      if (f.dropped) return Promise.resolve('upstream subscription lost');
      return state.waits.wait(f, ms);
    },
  };
}

/** The feed's last listener left and the linger ran out: its upstream subscription goes. */
function dropFeed(state: FeedsState, feed: Feed): void {
  const feeds = state.feeds;
  retire(state, feed);
  feeds.delete(feed.key);
  const s = state.session;
  const sub = feed.sub;
  feed.sub = null;
  if (s && sub && sub.session === s.id) {
    const unsubscribed = s.link.unsubscribe(sub.id).catch(() => {});
    if (feeds.size === 0) {
      // The node hears the eth_unsubscribe before the link closes.
      void unsubscribed.then(() => {
        if (feeds.size === 0 && state.session === s) stopLink(state);
      });
    }
  } else if (feeds.size === 0) {
    stopLink(state);
  }
  if (s) markHealthyIfReady(state, s);
  if (feed.kind === 'logs') endLogCheck(state);
}

/**
 * The last logs feed went: the completeness check (log-completeness.ts) lets the newHeads feed go, at once when
 * nothing else listens to it (its linger is for clients that resubscribe, and it was held for the check only).
 */
function endLogCheck(state: FeedsState): void {
  const check = state.logCheck;
  if (check === null) return;
  for (const f of state.feeds.values()) if (f.kind === 'logs') return;
  state.logCheck = null;
  check.hold?.remove();
  const heads = state.feeds.get('newHeads');
  if (heads !== undefined && heads.entries.size === 0 && heads.linger !== NO_TIMER) {
    state.timers.clearTimeout(heads.linger);
    heads.linger = NO_TIMER;
    dropFeed(state, heads);
  }
}

/** Queues a step of the feed on session `sessionId`: run after the steps queued before it. */
export function enqueue(state: FeedsState, feed: Feed, sessionId: number, run: Step['run']): void {
  feed.queue.push({ seq: ++feed.seq, session: sessionId, run });
  if (!feed.running) void drain(state, feed);
}

async function drain(state: FeedsState, feed: Feed): Promise<void> {
  feed.running = true;
  while (!feed.dropped) {
    const step = feed.queue.shift();
    if (!step) break;
    try {
      const pending = step.run((result) => fanOut(state, feed, step.seq, result));
      if (pending) await pending;
    } catch (err) {
      stepFailed(state, feed, step, err);
    }
  }
  feed.running = false;
}

function stepFailed(state: FeedsState, feed: Feed, step: Step, err: unknown): void {
  // What the failed session still had queued is made up for by the next session's resume.
  feed.queue = feed.queue.filter((x) => x.session !== step.session);
  const s = state.session;
  const message = errorText(err);
  if (err instanceof WsLinkError && err.kind === 'closed') return; // linkLost already logged it.
  state.opts.log('warn', 'upstream subscription step failed', {
    upstream: s ? labelOf(state, s.node) : labelOf(state, state.preferred),
    kind: feed.kind,
    error: message.slice(0, 200),
  });
  if (s && s.id === step.session) dropLink(state, s, `${feed.kind} could not catch up: ${message}`);
}

/** Queues the feed's subscribe on link `s`: prepare once, eth_subscribe, then resume what was missed. */
export function attach(state: FeedsState, feed: Feed, s: Session): void {
  if (feed.dropped || feed.attachIn === s.id) return;
  feed.attachIn = s.id;
  enqueue(state, feed, s.id, async (deliver) => {
    if (state.session !== s || feed.dropped) return;
    if (!feed.prepared) {
      await feed.handler.prepare?.(s.via);
      feed.prepared = true;
    }
    let id: string;
    try {
      id = await s.link.subscribe(feed.handler.subscribeParams, (result) => {
        enqueue(state, feed, s.id, (d) => feed.handler.live(result, s.via, d));
      });
    } catch (err) {
      if (err instanceof WsLinkError && err.kind === 'rpc') return refuse(state, feed, s, err.message);
      throw err;
    }
    if (feed.dropped) {
      void s.link.unsubscribe(id).catch(() => {});
      return;
    }
    feed.sub = { session: s.id, id };
    state.waits.opened(feed);
    tellLive(state, feed, true);
    await feed.handler.resume(s.via, deliver);
    feed.readyIn = s.id;
    markHealthyIfReady(state, s);
  });
}

/** The node answered eth_subscribe with an error: retrying would get the same answer. */
function refuse(state: FeedsState, feed: Feed, s: Session, message: string): void {
  state.opts.log('warn', 'upstream refused a subscription', { upstream: labelOf(state, s.node), kind: feed.kind, error: message });
  retire(state, feed);
  state.feeds.delete(feed.key);
  if (state.feeds.size === 0) stopLink(state);
  else markHealthyIfReady(state, s);
  const reason = `upstream refused the subscription: ${message}`;
  state.waits.fail(feed, reason);
  loseListeners(state, feed, reason);
}
