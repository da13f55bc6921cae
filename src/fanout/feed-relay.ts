/**
 * The main thread's end of the feeds relay: worker threads own client sockets, the main thread owns each chain's
 * feeds (one upstream subscription per kind and params for the process). A worker holds at most one relay hold
 * per chain, kind and params (remote-feeds.ts dedups its own subscribers); for each, this end holds one listener
 * on the real feed and posts to the worker every notification (the same JSON text FeedListener.notify gets, so
 * a backfill after an upstream loss reaches the worker as it reaches a direct listener), the loss, and the
 * changes of the upstream subscription's live state. The feed itself drops its upstream subscription once no
 * listener is left (after its linger), so the last worker to let go ends it; a worker whose port closes (it
 * died or was stopped) lets go of everything it held.
 */
import type { MessagePort } from 'node:worker_threads';
import type { DeliveredBlock } from './delivered-logs.js';
import type { FeedHold, FeedKind, Feeds, FeedsLog } from './feeds.js';
import type { HeadMark } from './head-feed.js';
import { backlogReason, createRelayBacklog, DEFAULT_RELAY_BACKLOG_BYTES, type RelayBacklog } from './relay-backlog.js';
import { errorText } from '../log.js';

/** Worker → main. `hold` and `wait` are numbers the worker gives, unique on its port. */
export type FeedRelayRequest =
  /** Mirror `chain`'s head() and upstreamSubscriptions() to this worker (FeedRelayEvent 'state'). */
  | { op: 'watch'; chain: string }
  /** Stop mirroring `chain` (its remote Feeds closed; its holds are released one by one before). */
  | { op: 'unwatch'; chain: string }
  /** Hold the feed of `kind` and `params` of `chain` for this worker. */
  | { op: 'hold'; hold: number; chain: string; kind: FeedKind; params: unknown }
  /** Answer FeedHold.whenLive(ms) of hold `hold` with FeedRelayEvent 'waited'. */
  | { op: 'wait'; hold: number; wait: number; ms: number }
  /** The worker's last subscriber of the hold left. */
  | { op: 'release'; hold: number }
  /** The worker handled notifications of `bytes` (their JSON's length) since its last ack (relay-backlog.ts). */
  | { op: 'ack'; bytes: number }
  /** Answer Feeds.deliveredLogs(params, from) of `chain` with FeedRelayEvent 'delivered'. */
  | { op: 'delivered'; ask: number; chain: string; params: unknown; from: number };

/** Main → worker. */
export type FeedRelayEvent =
  /** One notification's result as JSON text, in the feed's delivery order. */
  | { op: 'notify'; hold: number; json: string }
  /** The hold's upstream subscription opened (true) or was lost with its link (false); sent at once when a new hold's feed is live. */
  | { op: 'live'; hold: number; live: boolean }
  /** The feed lost or refused the hold's listener (or the chain has no feeds): the hold is gone on the main side. */
  | { op: 'lost'; hold: number; reason: string }
  /** What the real FeedHold.whenLive answered: null once live, else why not. */
  | { op: 'waited'; wait: number; outcome: string | null }
  /** The chain's head() and upstreamSubscriptions() on the main thread, sent when either changed. */
  | { op: 'state'; chain: string; head: HeadMark | null; upstreams: number }
  /** What the real Feeds.deliveredLogs answered (none when the chain has no feeds). */
  | { op: 'delivered'; ask: number; blocks: DeliveredBlock[] };

export interface FeedRelayOptions {
  /** How often the mirrored head and upstream count are checked for a change besides the moments a hold
   *  of this worker shows one (a newHeads notification, a live change), in ms. Default 1_000. */
  stateIntervalMs?: number;
  /** Where a feeds call that threw is reported (a subscribe after the chain's feeds closed), and a worker dropped as too slow. */
  log?: FeedsLog;
  /**
   * Notification bytes posted to the worker and not yet handled there, at most (config
   * server.worker_relay_max_bytes, default 64 MiB): past it every hold of the worker is lost (its subscribers are
   * closed, 1011, saying the worker is too slow) and new ones are refused until half of it has drained.
   */
  maxBacklogBytes?: number;
}

/** The main side of one worker's feeds relay. */
export interface FeedRelayServer {
  /** The real holds kept for the worker now (one per chain, kind and params it needs). */
  holds(): number;
  /** Notification bytes posted to the worker that it has not acknowledged. */
  backlogBytes(): number;
  /** Releases every hold and closes the port. */
  close(): void;
}

interface Held {
  readonly chain: string;
  /** null while feeds.subscribe runs: a loss reported from inside it finds the hold already gone. */
  real: FeedHold | null;
}

/** One worker's relay, main side, in fields; its steps are the functions below, which take it. */
class RelayServer {
  readonly port: MessagePort;
  readonly feedsOf: (chain: string) => Feeds | null;
  readonly log: FeedsLog | undefined;
  readonly held: Map<number, Held>;
  /** Per chain mirrored: what the worker was last told. */
  readonly watched: Map<string, { head: HeadMark | null; upstreams: number } | null>;
  readonly maxBacklog: number;
  readonly backlog: RelayBacklog;
  closed: boolean;
  /** The periodic state check, from serve on. */
  timer: NodeJS.Timeout | undefined;

  constructor(port: MessagePort, feedsOf: (chain: string) => Feeds | null, opts: FeedRelayOptions) {
    this.port = port;
    this.feedsOf = feedsOf;
    this.log = opts.log;
    this.held = new Map();
    this.watched = new Map();
    this.maxBacklog = opts.maxBacklogBytes ?? DEFAULT_RELAY_BACKLOG_BYTES;
    this.backlog = createRelayBacklog(this.maxBacklog);
    this.closed = false;
    this.timer = undefined;
  }
}

function post(relay: RelayServer, event: FeedRelayEvent): void {
  if (!relay.closed) relay.port.postMessage(event);
}

/** One notification to the worker, counted; the one that takes its backlog over the bound drops the worker's holds. */
function postNotify(relay: RelayServer, id: number, json: string): void {
  if (relay.closed) return;
  relay.port.postMessage({ op: 'notify', hold: id, json } satisfies FeedRelayEvent);
  if (!relay.backlog.posted(json.length)) dropSlowWorker(relay);
}

function dropSlowWorker(relay: RelayServer): void {
  const reason = backlogReason(relay.maxBacklog);
  relay.log?.('warn', 'feeds relay: a worker thread too slow for its notifications; its subscriptions dropped', {
    holds: relay.held.size,
    backlog_bytes: relay.backlog.bytes(),
  });
  const all = [...relay.held];
  relay.held.clear();
  for (const [id, entry] of all) {
    entry.real?.remove();
    post(relay, { op: 'lost', hold: id, reason });
  }
}

function pushState(relay: RelayServer, chain: string): void {
  const watched = relay.watched;
  if (!watched.has(chain)) return;
  const feeds = relay.feedsOf(chain);
  const head = feeds?.head() ?? null;
  const upstreams = feeds?.upstreamSubscriptions() ?? 0;
  const told = watched.get(chain);
  if (told != null && told.upstreams === upstreams && told.head?.number === head?.number && told.head?.hash === head?.hash) return;
  watched.set(chain, { head, upstreams });
  post(relay, { op: 'state', chain, head, upstreams });
}

function hold(relay: RelayServer, id: number, chain: string, kind: FeedKind, params: unknown): void {
  const feeds = relay.feedsOf(chain);
  if (feeds === null) return post(relay, { op: 'lost', hold: id, reason: `no upstream subscriptions on chain ${chain}` });
  if (relay.backlog.overloaded()) return post(relay, { op: 'lost', hold: id, reason: backlogReason(relay.maxBacklog) });
  const held = relay.held;
  const entry: Held = { chain, real: null };
  held.set(id, entry);
  try {
    entry.real = feeds.subscribe(kind, params, {
      notify(json) {
        postNotify(relay, id, json);
        if (kind === 'newHeads') pushState(relay, chain);
      },
      lost(reason) {
        held.delete(id);
        post(relay, { op: 'lost', hold: id, reason });
      },
      liveChanged(live) {
        post(relay, { op: 'live', hold: id, live });
        pushState(relay, chain);
      },
    });
  } catch (err) {
    held.delete(id);
    const reason = errorText(err);
    relay.log?.('warn', 'feeds relay: subscribe failed', { chain, kind, error: reason.slice(0, 200) });
    return post(relay, { op: 'lost', hold: id, reason: 'upstream subscription lost' });
  }
  // A feed already live tells no change: the worker learns it here.
  if (held.has(id) && entry.real.live()) post(relay, { op: 'live', hold: id, live: true });
}

function wait(relay: RelayServer, id: number, waitId: number, ms: number): void {
  const real = relay.held.get(id)?.real;
  // A hold lost already: its 'lost' went first, and this answers as a dropped feed's whenLive does.
  if (real == null) return post(relay, { op: 'waited', wait: waitId, outcome: 'upstream subscription lost' });
  void real.whenLive(ms).then((outcome) => post(relay, { op: 'waited', wait: waitId, outcome }));
}

function release(relay: RelayServer, id: number): void {
  const entry = relay.held.get(id);
  relay.held.delete(id);
  entry?.real?.remove();
}

function dropAll(relay: RelayServer): void {
  const all = [...relay.held.values()];
  relay.held.clear();
  relay.watched.clear();
  clearInterval(relay.timer);
  for (const entry of all) entry.real?.remove();
}

function received(relay: RelayServer, msg: FeedRelayRequest): void {
  switch (msg.op) {
    case 'hold':
      return hold(relay, msg.hold, msg.chain, msg.kind, msg.params);
    case 'wait':
      return wait(relay, msg.hold, msg.wait, msg.ms);
    case 'release':
      return release(relay, msg.hold);
    case 'watch':
      relay.watched.set(msg.chain, null);
      return pushState(relay, msg.chain);
    case 'unwatch':
      relay.watched.delete(msg.chain);
      return;
    case 'ack':
      relay.backlog.acked(msg.bytes);
      return;
    case 'delivered': {
      const feeds = relay.feedsOf(msg.chain);
      const ask = msg.ask;
      if (feeds === null) return post(relay, { op: 'delivered', ask, blocks: [] });
      void feeds.deliveredLogs(msg.params, msg.from).then((blocks) => post(relay, { op: 'delivered', ask, blocks }));
      return;
    }
    default:
      msg satisfies never;
  }
}

/**
 * Serves one worker's feeds relay on `port` over the main thread's feeds: `feedsOf(chain)` gives the chain's
 * feeds now, or null when it has none (the worker's hold is then lost at once). A hold keeps the Feeds it was
 * made on; one replaced by a reload drops its listeners silently (Feeds.close), as it does the direct ones.
 */
export function serveFeedRelay(port: MessagePort, feedsOf: (chain: string) => Feeds | null, opts: FeedRelayOptions = {}): FeedRelayServer {
  const relay = new RelayServer(port, feedsOf, opts);
  port.on('message', (msg: FeedRelayRequest) => received(relay, msg));
  // The worker died or was stopped: nothing it held is needed any more.
  port.on('close', () => {
    dropAll(relay);
    relay.closed = true;
  });
  const timer = setInterval(() => {
    for (const chain of relay.watched.keys()) pushState(relay, chain);
  }, opts.stateIntervalMs ?? 1_000);
  timer.unref();
  relay.timer = timer;

  return {
    holds: () => relay.held.size,
    backlogBytes: () => relay.backlog.bytes(),
    close() {
      if (relay.closed) return;
      dropAll(relay);
      relay.closed = true;
      port.close();
    },
  };
}
