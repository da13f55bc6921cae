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
import type { DeliveredBlock } from './delivered-logs.js';
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

/** One worker's relay client, in fields; its steps are the functions below, which take it. */
class RelayClient {
  readonly port: MessagePort;
  readonly log: FeedsLog | undefined;
  readonly chains: Map<string, ChainFeeds>;
  readonly byId: Map<number, RelayHold>;
  readonly waits: Map<number, { hold: RelayHold; settle(outcome: string | null): void }>;
  /** deliveredLogs asks waiting for the main side's answer, by ask number; answered with none when their chain
   *  or the port closes. */
  readonly asks: Map<number, { chain: ChainFeeds; settle(blocks: DeliveredBlock[]): void }>;
  nextId: number;
  portClosed: boolean;
  /** What this thread has handled, told to the main side so it can bound what it queues here (relay-backlog.ts). */
  readonly acks: { took(bytes: number): void };

  constructor(port: MessagePort, opts: FeedRelayClientOptions) {
    this.port = port;
    this.log = opts.log;
    this.chains = new Map();
    this.byId = new Map();
    this.waits = new Map();
    this.asks = new Map();
    this.nextId = 0;
    this.portClosed = false;
    this.acks = createBacklogAcks((bytes) => send(this, { op: 'ack', bytes }));
  }
}

function send(client: RelayClient, msg: FeedRelayRequest): void {
  if (!client.portClosed) client.port.postMessage(msg);
}

/** Calls every listener of the hold; with `upTo`, only those registered before notification `upTo`. */
function each(client: RelayClient, hold: RelayHold, call: (listener: FeedListener) => void, upTo = Number.POSITIVE_INFINITY): void {
  for (const e of hold.entries) {
    if (e.since > upTo) continue;
    try {
      call(e.listener);
    } catch (err) {
      client.log?.('warn', 'feed listener threw', { chain: hold.chain.name, error: String(err).slice(0, 200) });
    }
  }
}

/** Answers the deliveredLogs asks of `chain` (every chain's when null) with none: no answer will come. */
function settleAsks(client: RelayClient, chain: ChainFeeds | null): void {
  for (const [id, a] of client.asks) {
    if (chain !== null && a.chain !== chain) continue;
    client.asks.delete(id);
    a.settle([]);
  }
}

function deliveredLogs(client: RelayClient, chain: ChainFeeds, params: unknown, from: number): Promise<DeliveredBlock[]> {
  if (chain.closed || client.portClosed) return Promise.resolve([]);
  return new Promise((settle) => {
    const ask = ++client.nextId;
    client.asks.set(ask, { chain, settle });
    send(client, { op: 'delivered', ask, chain: chain.name, params, from });
  });
}

function settleWaits(client: RelayClient, hold: RelayHold | null, outcome: string): void {
  for (const [id, w] of client.waits) {
    if (hold !== null && w.hold !== hold) continue;
    client.waits.delete(id);
    w.settle(outcome);
  }
}

/** Forgets the hold here; `tell` releases it on the main side too. */
function drop(client: RelayClient, hold: RelayHold, tell: boolean): void {
  if (hold.dropped) return;
  hold.dropped = true;
  hold.live = false;
  client.byId.delete(hold.id);
  if (hold.chain.holds.get(hold.key) === hold) hold.chain.holds.delete(hold.key);
  if (tell) send(client, { op: 'release', hold: hold.id });
}

function received(client: RelayClient, msg: FeedRelayEvent): void {
  switch (msg.op) {
    case 'notify': {
      client.acks.took(msg.json.length);
      const hold = client.byId.get(msg.hold);
      if (hold === undefined) return;
      each(client, hold, (l) => l.notify(msg.json), ++hold.seq);
      return;
    }
    case 'live': {
      const hold = client.byId.get(msg.hold);
      if (hold === undefined || hold.live === msg.live) return;
      hold.live = msg.live;
      each(client, hold, (l) => l.liveChanged?.(msg.live));
      return;
    }
    case 'lost': {
      const hold = client.byId.get(msg.hold);
      if (hold === undefined) return;
      drop(client, hold, false);
      settleWaits(client, hold, msg.reason);
      each(client, hold, (l) => l.lost(msg.reason));
      hold.entries.clear();
      return;
    }
    case 'waited': {
      const w = client.waits.get(msg.wait);
      if (w === undefined) return;
      client.waits.delete(msg.wait);
      w.settle(msg.outcome);
      return;
    }
    case 'state': {
      const chain = client.chains.get(msg.chain);
      if (chain === undefined) return;
      chain.head = msg.head;
      chain.upstreams = msg.upstreams;
      return;
    }
    case 'delivered': {
      const a = client.asks.get(msg.ask);
      if (a === undefined) return;
      client.asks.delete(msg.ask);
      a.settle(msg.blocks);
      return;
    }
    default:
      msg satisfies never;
  }
}

function subscribe(client: RelayClient, chain: ChainFeeds, kind: FeedKind, params: unknown, listener: FeedListener): FeedHold {
  if (chain.closed) throw new Error('feeds: subscribe after close');
  const key = feedKey(kind, params);
  let hold = chain.holds.get(key);
  if (hold === undefined) {
    hold = { id: ++client.nextId, key, chain, entries: new Set(), seq: 0, live: false, dropped: false };
    chain.holds.set(key, hold);
    client.byId.set(hold.id, hold);
    send(client, { op: 'hold', hold: hold.id, chain: chain.name, kind, params });
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
      if (h.entries.size === 0) drop(client, h, true);
    },
    live,
    whenLive(ms) {
      if (live()) return Promise.resolve(null);
      if (h.dropped) return Promise.resolve(chain.closed || client.portClosed ? CLOSED : 'upstream subscription lost');
      return new Promise((settle) => {
        const wait = ++client.nextId;
        client.waits.set(wait, { hold: h, settle });
        send(client, { op: 'wait', hold: h.id, wait, ms });
      });
    },
  };
}

function closeChain(client: RelayClient, chain: ChainFeeds): void {
  if (chain.closed) return;
  chain.closed = true;
  client.chains.delete(chain.name);
  const holds = [...chain.holds.values()];
  for (const hold of holds) {
    drop(client, hold, true);
    hold.entries.clear();
    settleWaits(client, hold, CLOSED);
  }
  settleAsks(client, chain);
  send(client, { op: 'unwatch', chain: chain.name });
}

function chainFeeds(client: RelayClient, name: string): ChainFeeds {
  const chain: ChainFeeds = {
    name,
    holds: new Map(),
    head: null,
    upstreams: 0,
    closed: false,
    feeds: {
      subscribe: (kind, params, listener) => subscribe(client, chain, kind, params, listener),
      upstreamSubscriptions: () => chain.upstreams,
      head: () => (chain.head === null ? null : { ...chain.head }),
      deliveredLogs: (params, from) => deliveredLogs(client, chain, params, from),
      close: () => closeChain(client, chain),
    },
  };
  return chain;
}

export function connectFeedRelay(port: MessagePort, opts: FeedRelayClientOptions = {}): FeedRelayClient {
  const client = new RelayClient(port, opts);
  port.on('message', (msg: FeedRelayEvent) => received(client, msg));
  // The main thread went away (the process is stopping): nothing will answer a wait.
  port.on('close', () => {
    client.portClosed = true;
    settleWaits(client, null, CLOSED);
    settleAsks(client, null);
  });

  return {
    feeds(name) {
      let chain = client.chains.get(name);
      if (chain === undefined) {
        chain = chainFeeds(client, name);
        client.chains.set(name, chain);
        send(client, { op: 'watch', chain: name });
      }
      return chain.feeds;
    },
    close() {
      for (const chain of [...client.chains.values()]) closeChain(client, chain);
      client.portClosed = true;
      settleWaits(client, null, CLOSED);
      settleAsks(client, null);
      port.close();
    },
  };
}
