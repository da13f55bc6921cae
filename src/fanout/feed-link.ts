/**
 * The one upstream link a chain's feeds share: which node it goes to, its loss and the reconnect with backoff
 * to the next healthy node, the rotation check while it serves, and the outage clock that drops every
 * listener once the chain has been without its upstream subscriptions past maxOutageMs.
 */
import { openWsLink } from '../upstreams/ws-link.js';
import { loseListeners, tellLive } from './feed-delivery.js';
import { type FeedsState, labelOf, NO_TIMER, retire, type Session } from './feeds-state.js';

function withTimeout<T>(state: FeedsState, work: Promise<T>, ms: number, what: string): Promise<T> {
  const timers = state.timers;
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

function pickNode(state: FeedsState): number {
  const { nodes, preferred, opts } = state;
  for (let k = 0; k < nodes.length; k++) {
    const i = (preferred + k) % nodes.length;
    if (!opts.isHealthy || opts.isHealthy(i)) return i;
  }
  return preferred % nodes.length;
}

function backoffDelay(state: FeedsState, attempt: number): number {
  const { backoff } = state;
  const full = Math.min(backoff.maxMs, backoff.initialMs * 2 ** (attempt - 1));
  return full / 2 + (state.random() * full) / 2;
}

/** Opens a link to the next node; once it is open, every feed subscribes on it. */
export function connect(state: FeedsState): void {
  state.retryTimer = NO_TIMER;
  const node = pickNode(state);
  const spec = state.nodes[node]!;
  const link = openWsLink({
    url: spec.wsUrl,
    label: spec.label,
    ...(spec.headers ? { headers: spec.headers } : {}),
    ...state.opts.link,
  });
  const httpTimeoutMs = state.httpTimeoutMs;
  const s: Session = {
    id: ++state.sessionCount,
    node,
    link,
    open: false,
    healthy: false,
    watch: NO_TIMER,
    via: {
      node,
      call: (method, params) => withTimeout(state, spec.call(method, params), httpTimeoutMs, `${spec.label} ${method}`),
      sleep: state.sleep,
    },
  };
  state.session = s;
  link.onClose((reason) => linkLost(state, s, reason));
  link.opened.then(
    () => {
      if (state.session !== s) return;
      s.open = true;
      for (const feed of state.feeds.values()) state.attach(feed, s);
    },
    () => {}, // onClose reports it.
  );
}

function linkLost(state: FeedsState, s: Session, reason: string): void {
  if (state.session !== s) return;
  state.session = null;
  unwatch(state, s);
  state.waits.nodeFailed(s.node);
  const feeds = state.feeds;
  for (const feed of feeds.values()) {
    if (feed.sub?.session !== s.id) continue;
    feed.sub = null;
    tellLive(state, feed, false);
  }
  state.preferred = (s.node + 1) % state.nodes.length;
  if (feeds.size === 0 || state.closed) return;
  state.failures++;
  startOutageClock(state);
  const delay = backoffDelay(state, state.failures);
  state.opts.log('warn', 'upstream subscription link lost', {
    upstream: labelOf(state, s.node),
    reason: reason.slice(0, 200),
    retry_ms: Math.round(delay),
    feeds: feeds.size,
  });
  state.retryTimer = state.timers.setTimeout(() => connect(state), delay);
}

/** Closes the link on purpose: a step could not make up for what was missed on it. */
export function dropLink(state: FeedsState, s: Session, reason: string): void {
  linkLost(state, s, reason);
  s.link.close();
}

export function stopLink(state: FeedsState): void {
  if (state.retryTimer !== NO_TIMER) state.timers.clearTimeout(state.retryTimer);
  state.retryTimer = NO_TIMER;
  clearOutage(state);
  state.failures = 0;
  const s = state.session;
  state.session = null;
  if (s) unwatch(state, s);
  s?.link.close();
}

/**
 * While a link serves, its node is checked every rotationCheckMs: a node that lags or fails with its socket
 * still open would go on feeding stale heads or none, so once it is out of rotation while another node is
 * in, the link is dropped on purpose and the feeds move as after a loss (backfill by number included).
 */
function watchRotation(state: FeedsState, s: Session): void {
  const inRotation = state.opts.isHealthy;
  if (inRotation === undefined || s.watch !== NO_TIMER) return;
  s.watch = state.timers.setTimeout(() => {
    s.watch = NO_TIMER;
    if (state.session !== s || state.closed) return;
    if (!inRotation(s.node) && state.nodes.some((_, i) => i !== s.node && inRotation(i))) {
      state.opts.log('info', 'upstream out of rotation: subscriptions move', { upstream: labelOf(state, s.node) });
      dropLink(state, s, 'node out of rotation');
      return;
    }
    watchRotation(state, s);
  }, state.rotationCheckMs);
}

function unwatch(state: FeedsState, s: Session): void {
  if (s.watch !== NO_TIMER) state.timers.clearTimeout(s.watch);
  s.watch = NO_TIMER;
}

export function startOutageClock(state: FeedsState): void {
  if (state.outageTimer !== NO_TIMER) return;
  state.outageSince = state.timers.now();
  state.outageTimer = state.timers.setTimeout(() => loseEverything(state), state.opts.maxOutageMs);
}

function clearOutage(state: FeedsState): void {
  if (state.outageTimer !== NO_TIMER) state.timers.clearTimeout(state.outageTimer);
  state.outageTimer = NO_TIMER;
}

function loseEverything(state: FeedsState): void {
  state.outageTimer = NO_TIMER;
  const lost = [...state.feeds.values()];
  let listeners = 0;
  for (const feed of lost) {
    retire(state, feed);
    listeners += feed.entries.size;
  }
  state.feeds.clear();
  const upstream = labelOf(state, state.session?.node ?? state.preferred);
  stopLink(state);
  state.opts.log('warn', 'upstream outage: subscriptions dropped', {
    upstream,
    feeds: lost.length,
    listeners,
    outage_ms: Math.round(state.timers.now() - state.outageSince),
  });
  const reason = `upstream unavailable for more than ${state.opts.maxOutageMs / 1000} s`;
  state.waits.fail(undefined, reason);
  for (const feed of lost) loseListeners(state, feed, reason);
}

/** Every feed is subscribed and caught up on the link: it serves, and an outage is over. */
export function markHealthyIfReady(state: FeedsState, s: Session): void {
  if (state.session !== s || !s.open || s.healthy) return;
  for (const feed of state.feeds.values()) if (feed.readyIn !== s.id) return;
  s.healthy = true;
  watchRotation(state, s);
  if (state.failures > 0) {
    state.opts.log('info', 'upstream subscriptions restored', {
      upstream: labelOf(state, s.node),
      feeds: state.feeds.size,
      outage_ms: Math.round(state.timers.now() - state.outageSince),
    });
  }
  state.failures = 0;
  clearOutage(state);
}
