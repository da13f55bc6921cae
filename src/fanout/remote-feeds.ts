/**
 * A worker thread's end of the feeds relay (feed-relay.ts has the main thread's end and the messages): Feeds
 * for each chain that the worker's SubscriptionHub and filters use as they use the real ones, while the
 * upstream subscriptions live once, on the main thread. The worker's subscribers of one chain, kind and params
 * share one relay hold, so the main thread sees one listener per worker whatever the number of sockets, and
 * each notification crosses the thread boundary once per worker.
 */
import type { MessagePort } from 'node:worker_threads';
import type { FeedRelayEvent, FeedRelayRequest } from './feed-relay.js';
import { type FeedHold, type FeedKind, type FeedListener, type Feeds, type FeedsLog, feedKey } from './feeds.js';
import type { HeadMark } from './head-feed.js';
import { createBacklogAcks } from './relay-backlog.js';

/** A worker's client of its feeds relay port. */
export interface FeedRelayClient {
  /**
   * The feeds of `chain` through the relay (the same object for every call until it is closed). Like the real
   * ones but for two mirrors: head() is the main thread's feeds head(), and upstreamSubscriptions() the main
   * thread's count for the whole process (so sum it over workers and it over-counts: read it once); both are
   * refreshed on each newHeads notification or live change this worker gets, else within the main side's
   * stateIntervalMs.
   */
  feeds(chain: string): Feeds;
  /** Closes every chain's feeds (releasing their holds) and the port. */
  close(): void;
}

export interface FeedRelayClientOptions {
  /** Where a local listener that threw is reported. */
  log?: FeedsLog;
}

interface Entry {
  readonly listener: FeedListener;
  /** The first notification (by the hold's count) this listener gets. */
  readonly since: number;
}

interface RelayHold {
  readonly id: number;
  readonly key: string;
  readonly chain: ChainFeeds;
  readonly entries: Set<Entry>;
  /** Notifications received. */
  seq: number;
  live: boolean;
  /** Lost, or released by its last subscriber or by close(). */
  dropped: boolean;
}

interface ChainFeeds {
  readonly name: string;
  readonly holds: Map<string, RelayHold>;
  head: HeadMark | null;
  upstreams: number;
  closed: boolean;
  readonly feeds: Feeds;
}

const CLOSED = 'subscriptions closed';

export function connectFeedRelay(port: MessagePort, opts: FeedRelayClientOptions = {}): FeedRelayClient {
  const chains = new Map<string, ChainFeeds>();
  const byId = new Map<number, RelayHold>();
  const waits = new Map<number, { hold: RelayHold; settle(outcome: string | null): void }>();
  let nextId = 0;
  let portClosed = false;
  const send = (msg: FeedRelayRequest): void => {
    if (!portClosed) port.postMessage(msg);
  };
  /** What this thread has handled, told to the main side so it can bound what it queues here (relay-backlog.ts). */
  const acks = createBacklogAcks((bytes) => send({ op: 'ack', bytes }));

  /** Calls every listener of the hold; with `upTo`, only those registered before notification `upTo`. */
  function each(hold: RelayHold, call: (listener: FeedListener) => void, upTo = Number.POSITIVE_INFINITY): void {
    for (const e of hold.entries) {
      if (e.since > upTo) continue;
      try {
        call(e.listener);
      } catch (err) {
        opts.log?.('warn', 'feed listener threw', { chain: hold.chain.name, error: String(err).slice(0, 200) });
      }
    }
  }

  function settleWaits(hold: RelayHold | null, outcome: string): void {
    for (const [id, w] of waits) {
      if (hold !== null && w.hold !== hold) continue;
      waits.delete(id);
      w.settle(outcome);
    }
  }

  /** Forgets the hold here; `tell` releases it on the main side too. */
  function drop(hold: RelayHold, tell: boolean): void {
    if (hold.dropped) return;
    hold.dropped = true;
    hold.live = false;
    byId.delete(hold.id);
    if (hold.chain.holds.get(hold.key) === hold) hold.chain.holds.delete(hold.key);
    if (tell) send({ op: 'release', hold: hold.id });
  }

  function received(msg: FeedRelayEvent): void {
    switch (msg.op) {
      case 'notify': {
        acks.took(msg.json.length);
        const hold = byId.get(msg.hold);
        if (hold === undefined) return;
        each(hold, (l) => l.notify(msg.json), ++hold.seq);
        return;
      }
      case 'live': {
        const hold = byId.get(msg.hold);
        if (hold === undefined || hold.live === msg.live) return;
        hold.live = msg.live;
        each(hold, (l) => l.liveChanged?.(msg.live));
        return;
      }
      case 'lost': {
        const hold = byId.get(msg.hold);
        if (hold === undefined) return;
        drop(hold, false);
        settleWaits(hold, msg.reason);
        each(hold, (l) => l.lost(msg.reason));
        hold.entries.clear();
        return;
      }
      case 'waited': {
        const w = waits.get(msg.wait);
        if (w === undefined) return;
        waits.delete(msg.wait);
        w.settle(msg.outcome);
        return;
      }
      case 'state': {
        const chain = chains.get(msg.chain);
        if (chain === undefined) return;
        chain.head = msg.head;
        chain.upstreams = msg.upstreams;
        return;
      }
    }
  }

  function subscribe(chain: ChainFeeds, kind: FeedKind, params: unknown, listener: FeedListener): FeedHold {
    if (chain.closed) throw new Error('feeds: subscribe after close');
    const key = feedKey(kind, params);
    let hold = chain.holds.get(key);
    if (hold === undefined) {
      hold = { id: ++nextId, key, chain, entries: new Set(), seq: 0, live: false, dropped: false };
      chain.holds.set(key, hold);
      byId.set(hold.id, hold);
      send({ op: 'hold', hold: hold.id, chain: chain.name, kind, params });
    }
    const h = hold;
    const entry: Entry = { listener, since: h.seq + 1 };
    h.entries.add(entry);
    let removed = false;
    const live = (): boolean => !h.dropped && h.live;
    return {
      remove() {
        if (removed) return;
        removed = true;
        h.entries.delete(entry);
        if (h.entries.size === 0) drop(h, true);
      },
      live,
      whenLive(ms) {
        if (live()) return Promise.resolve(null);
        if (h.dropped) return Promise.resolve(chain.closed || portClosed ? CLOSED : 'upstream subscription lost');
        return new Promise((settle) => {
          const wait = ++nextId;
          waits.set(wait, { hold: h, settle });
          send({ op: 'wait', hold: h.id, wait, ms });
        });
      },
    };
  }

  function closeChain(chain: ChainFeeds): void {
    if (chain.closed) return;
    chain.closed = true;
    chains.delete(chain.name);
    const holds = [...chain.holds.values()];
    for (const hold of holds) {
      drop(hold, true);
      hold.entries.clear();
      settleWaits(hold, CLOSED);
    }
    send({ op: 'unwatch', chain: chain.name });
  }

  function chainFeeds(name: string): ChainFeeds {
    const chain: ChainFeeds = {
      name,
      holds: new Map(),
      head: null,
      upstreams: 0,
      closed: false,
      feeds: {
        subscribe: (kind, params, listener) => subscribe(chain, kind, params, listener),
        upstreamSubscriptions: () => chain.upstreams,
        head: () => (chain.head === null ? null : { ...chain.head }),
        close: () => closeChain(chain),
      },
    };
    return chain;
  }

  port.on('message', received);
  // The main thread went away (the process is stopping): nothing will answer a wait.
  port.on('close', () => {
    portClosed = true;
    settleWaits(null, CLOSED);
  });

  return {
    feeds(name) {
      let chain = chains.get(name);
      if (chain === undefined) {
        chain = chainFeeds(name);
        chains.set(name, chain);
        send({ op: 'watch', chain: name });
      }
      return chain.feeds;
    },
    close() {
      for (const chain of [...chains.values()]) closeChain(chain);
      portClosed = true;
      settleWaits(null, CLOSED);
      port.close();
    },
  };
}
