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
import type { FeedHold, FeedKind, Feeds, FeedsLog } from './feeds.js';
import type { HeadMark } from './head-feed.js';
import { backlogReason, createRelayBacklog, DEFAULT_RELAY_BACKLOG_BYTES } from './relay-backlog.js';
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
  | { op: 'ack'; bytes: number };

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
  | { op: 'state'; chain: string; head: HeadMark | null; upstreams: number };

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

/**
 * Serves one worker's feeds relay on `port` over the main thread's feeds: `feedsOf(chain)` gives the chain's
 * feeds now, or null when it has none (the worker's hold is then lost at once). A hold keeps the Feeds it was
 * made on; one replaced by a reload drops its listeners silently (Feeds.close), as it does the direct ones.
 */
export function serveFeedRelay(port: MessagePort, feedsOf: (chain: string) => Feeds | null, opts: FeedRelayOptions = {}): FeedRelayServer {
  const held = new Map<number, Held>();
  /** Per chain mirrored: what the worker was last told. */
  const watched = new Map<string, { head: HeadMark | null; upstreams: number } | null>();
  let closed = false;
  const post = (event: FeedRelayEvent): void => {
    if (!closed) port.postMessage(event);
  };
  const maxBacklog = opts.maxBacklogBytes ?? DEFAULT_RELAY_BACKLOG_BYTES;
  const backlog = createRelayBacklog(maxBacklog);

  /** One notification to the worker, counted; the one that takes its backlog over the bound drops the worker's holds. */
  function postNotify(id: number, json: string): void {
    if (closed) return;
    port.postMessage({ op: 'notify', hold: id, json } satisfies FeedRelayEvent);
    if (!backlog.posted(json.length)) dropSlowWorker();
  }

  function dropSlowWorker(): void {
    const reason = backlogReason(maxBacklog);
    opts.log?.('warn', 'feeds relay: a worker thread too slow for its notifications; its subscriptions dropped', {
      holds: held.size,
      backlog_bytes: backlog.bytes(),
    });
    const all = [...held];
    held.clear();
    for (const [id, entry] of all) {
      entry.real?.remove();
      post({ op: 'lost', hold: id, reason });
    }
  }

  function pushState(chain: string): void {
    if (!watched.has(chain)) return;
    const feeds = feedsOf(chain);
    const head = feeds?.head() ?? null;
    const upstreams = feeds?.upstreamSubscriptions() ?? 0;
    const told = watched.get(chain);
    if (told != null && told.upstreams === upstreams && told.head?.number === head?.number && told.head?.hash === head?.hash) return;
    watched.set(chain, { head, upstreams });
    post({ op: 'state', chain, head, upstreams });
  }

  function hold(id: number, chain: string, kind: FeedKind, params: unknown): void {
    const feeds = feedsOf(chain);
    if (feeds === null) return post({ op: 'lost', hold: id, reason: `no upstream subscriptions on chain ${chain}` });
    if (backlog.overloaded()) return post({ op: 'lost', hold: id, reason: backlogReason(maxBacklog) });
    const entry: Held = { chain, real: null };
    held.set(id, entry);
    try {
      entry.real = feeds.subscribe(kind, params, {
        notify(json) {
          postNotify(id, json);
          if (kind === 'newHeads') pushState(chain);
        },
        lost(reason) {
          held.delete(id);
          post({ op: 'lost', hold: id, reason });
        },
        liveChanged(live) {
          post({ op: 'live', hold: id, live });
          pushState(chain);
        },
      });
    } catch (err) {
      held.delete(id);
      const reason = errorText(err);
      opts.log?.('warn', 'feeds relay: subscribe failed', { chain, kind, error: reason.slice(0, 200) });
      return post({ op: 'lost', hold: id, reason: 'upstream subscription lost' });
    }
    // A feed already live tells no change: the worker learns it here.
    if (held.has(id) && entry.real.live()) post({ op: 'live', hold: id, live: true });
  }

  function wait(id: number, waitId: number, ms: number): void {
    const real = held.get(id)?.real;
    // A hold lost already: its 'lost' went first, and this answers as a dropped feed's whenLive does.
    if (real == null) return post({ op: 'waited', wait: waitId, outcome: 'upstream subscription lost' });
    void real.whenLive(ms).then((outcome) => post({ op: 'waited', wait: waitId, outcome }));
  }

  function release(id: number): void {
    const entry = held.get(id);
    held.delete(id);
    entry?.real?.remove();
  }

  function dropAll(): void {
    const all = [...held.values()];
    held.clear();
    watched.clear();
    clearInterval(timer);
    for (const entry of all) entry.real?.remove();
  }

  port.on('message', (msg: FeedRelayRequest) => {
    switch (msg.op) {
      case 'hold':
        return hold(msg.hold, msg.chain, msg.kind, msg.params);
      case 'wait':
        return wait(msg.hold, msg.wait, msg.ms);
      case 'release':
        return release(msg.hold);
      case 'watch':
        watched.set(msg.chain, null);
        return pushState(msg.chain);
      case 'unwatch':
        watched.delete(msg.chain);
        return;
      case 'ack':
        backlog.acked(msg.bytes);
        return;
      default:
        msg satisfies never;
    }
  });
  // The worker died or was stopped: nothing it held is needed any more.
  port.on('close', () => {
    dropAll();
    closed = true;
  });
  const timer = setInterval(() => {
    for (const chain of watched.keys()) pushState(chain);
  }, opts.stateIntervalMs ?? 1_000);
  timer.unref();

  return {
    holds: () => held.size,
    backlogBytes: () => backlog.bytes(),
    close() {
      if (closed) return;
      dropAll();
      closed = true;
      port.close();
    },
  };
}
