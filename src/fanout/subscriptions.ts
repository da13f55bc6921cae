import { randomBytes } from 'node:crypto';
import { type ChainMetrics, noMetrics } from '../metrics/registry.js';
import type { DeliveredBlock } from './delivered-logs.js';
import type { FeedKind } from './feeds.js';

export { subscriptionCount } from './conn-subs.js';
import { RecentHeads } from './recent-heads.js';
import { holdSub, releaseSub, subOf, subsOf } from './conn-subs.js';
import { BALANCE_CLOSE, notificationFrame } from './notification.js';
import {
  holdLive,
  REPLAY_HELD_MAX,
  type Replay,
  type ReplaySource,
  type Resuming,
  replayEnd,
  replayThen,
  resumePoint,
  sendReplayed,
  stopResuming,
} from './replay.js';

/** One upstream notification source per kind and params: implemented by the chain's feeds (see Feeds). */
export interface FeedSource {
  /** Registers a listener; the hold removes it, and tells whether its upstream subscription is open. */
  subscribe(
    kind: FeedKind,
    params: unknown,
    listener: { notify(resultJson: string): void; lost(reason: string): void },
  ): {
    remove(): void;
    live(): boolean;
    /** null once the upstream subscription is open, else why not (fit for a client), within `ms`. */
    whenLive(ms: number): Promise<string | null>;
  };
  /** What the logs feed of `params` delivered from block `from` on (Feeds.deliveredLogs): a resume retracts what
   *  of it is no longer on the chain. Without it nothing is retracted. */
  deliveredLogs?(params: unknown, from: number): Promise<DeliveredBlock[]>;
}

/** A client connection as the hub sees it: who pays, how bytes reach it, how it is closed. */
export interface SubscriberConn {
  /** null on the public path, which is not metered. */
  readonly ownerId: number | null;
  readonly endpointId: string | null;
  /** Set once the connection closed: a subscription that waited for its upstream is not given to it. */
  readonly closed: boolean;
  /**
   * This connection's subscriptions by the id it was given (lower case), kept by the hub: the first in
   * `firstSubId`/`firstSub`, any more in `moreSubs`, so a connection with one subscription (nearly every
   * subscriber) holds no Map of its own. Start them at null.
   */
  firstSubId: string | null;
  firstSub: Subscription | null;
  moreSubs: Map<string, Subscription> | null;
  /** Sends one prepared message, or closes the connection as a slow consumer. */
  deliver(bytes: Buffer): void;
  /**
   * null while the connection can take more now, else a promise settled once what waits for it drained (or it
   * closed): a replay sends its fetched windows no faster than the client reads (replay.ts). Absent: always null.
   */
  writable?(): Promise<void> | null;
  close(code: number, reason: string): void;
}

export interface Subscription {
  readonly topic: Topic;
  readonly variant: number;
}

export interface Topic {
  readonly key: string;
  /** Per variant index: the connections holding that variant. Variant k has the same id on every connection. */
  readonly variants: Array<Set<SubscriberConn>>;
  readonly idPrefix: string;
  /** Per variant: its id and the Subscription every connection holding it shares, made once, so
   *  an idle subscriber costs its socket one map entry and no strings or objects of its own. */
  readonly ids: string[];
  readonly shared: Subscription[];
  /** Keyed subscriptions per owner and endpoint, so a notification is charged per owner, not per socket. */
  readonly metered: Map<number, Map<string, number>>;
  count: number;
  /** Subscribe calls waiting for the upstream subscription: they keep the topic (and its feed) too. */
  waiting: number;
  /** The feed lost or refused the topic: it takes no more subscribers; a new topic of its key is made. */
  lost: boolean;
  hold: ReturnType<FeedSource['subscribe']> | null;
  readonly kind: FeedKind;
  /** chaingate_notifications_total{kind} of the chain, held so a notification looks no label up. */
  readonly notified: { inc(n?: number): void };
  /** Subscriptions still replaying what they missed (replay.ts), each holding the live results meanwhile; null
   *  while there is none, so the live path checks one field. */
  resuming: Set<Resuming> | null;
}

export interface HubOptions {
  feeds: FeedSource;
  /** RU of one delivered message of `bytes` bytes. */
  ruPerMessage(bytes: number): number;
  /** Debits `ru` for `deliveries` messages; false when the owner's balance cannot cover it. */
  charge(ownerId: number, endpointId: string, ru: number, deliveries: number): boolean;
  /** How long a subscribe waits for an upstream subscription that is not open yet, in ms (the chain's
   *  timeout_s); past it, or once every upstream node failed meanwhile, the subscribe fails. */
  liveWaitMs: number;
  /** The chain's metrics: open subscriptions and notifications sent, by kind. */
  metrics?: Pick<ChainMetrics, 'subscription' | 'notifications'>;
  /**
   * The first 24 hex digits of a topic's ids, from its key: every worker thread's hub gives a topic the same
   * ids, so clients on different workers share them as they would on one. Default: random per topic.
   */
  idPrefix?: (topicKey: string) => string;
  /** Where resuming subscriptions (eth_subscribe fromBlock) get what the hub's memory lacks; without it a resume
   *  point is refused. */
  replay?: ReplaySource;
}

/**
 * A subscribe: the id given (and, for one that resumes, `start`, to call once the id was sent: the replay's
 * notifications come after it), or why no subscription could be opened (no id is handed out that would never
 * deliver): `invalid` when the params were refused (a resume point out of reach), else the upstream failed.
 */
export type SubscribeOutcome = { ok: true; id: string; start?: () => void } | { ok: false; reason: string; invalid?: boolean };

export interface SubscriptionHub {
  /**
   * Opens a subscription for `conn`. Settled at once when the upstream subscription of its kind and params
   * is open; otherwise it waits for it (see liveWaitMs) and `conn` gets nothing until the id is given.
   */
  subscribe(conn: SubscriberConn, kind: FeedKind, params: unknown): SubscribeOutcome | Promise<SubscribeOutcome>;
  /** false for an id this connection does not hold (another connection's id included). */
  unsubscribe(conn: SubscriberConn, id: string): boolean;
  /** Removes every subscription of a connection that closed. */
  dropConnection(conn: SubscriberConn): void;
  stats(): { topics: number; subscriptions: number; notifications: number };
}

const LOST_CLOSE = 1011;

/** One hub's state, in fields; its steps are the functions below, which take it. */
class SubscriptionHubState {
  readonly opts: HubOptions;
  readonly topics: Map<string, Topic>;
  readonly metrics: Pick<ChainMetrics, 'subscription' | 'notifications'>;
  notifications: number;
  subscriptions: number;
  /** The recent heads resumes replay from; null without HubOptions.replay. */
  readonly heads: RecentHeads | null;

  constructor(opts: HubOptions) {
    this.opts = opts;
    this.heads = opts.replay === undefined ? null : new RecentHeads(opts.replay.maxBlocks);

    this.topics = new Map();
    this.metrics = opts.metrics ?? noMetrics().chain('');
    this.notifications = 0;
    this.subscriptions = 0;
  }
}

function idOf(topic: Topic, variant: number): string {
  return (topic.ids[variant] ??= `${topic.idPrefix}${variant.toString(16).padStart(8, '0')}`);
}

function meter(topic: Topic, conn: SubscriberConn, delta: number): void {
  if (conn.ownerId === null || conn.endpointId === null) return;
  let byEndpoint = topic.metered.get(conn.ownerId);
  if (byEndpoint === undefined) topic.metered.set(conn.ownerId, (byEndpoint = new Map()));
  const n = (byEndpoint.get(conn.endpointId) ?? 0) + delta;
  if (n > 0) byEndpoint.set(conn.endpointId, n);
  else {
    byEndpoint.delete(conn.endpointId);
    if (byEndpoint.size === 0) topic.metered.delete(conn.ownerId);
  }
}

/**
 * One notification of the topic: its bytes made once per variant, RU charged once per owner and endpoint,
 * and the same Buffer sent to every connection of the variant (an owner out of balance is closed instead).
 */
function notify(hub: SubscriptionHubState, topic: Topic, resultJson: string): void {
  const opts = hub.opts;
  if (topic.resuming !== null) holdLive(topic.resuming, resultJson, hub.opts.replay?.maxHeld ?? REPLAY_HELD_MAX);
  hub.notifications++;
  const prepared: Buffer[] = [];
  const broke = new Set<number>();
  for (let k = 0; k < topic.variants.length; k++) {
    if (topic.variants[k]!.size === 0) continue;
    prepared[k] = Buffer.from(notificationFrame(idOf(topic, k), resultJson));
  }
  const first = prepared.find((b) => b !== undefined);
  if (first === undefined) return;
  // Every variant's id has the same length, so one message size prices them all.
  const ru = opts.ruPerMessage(first.length);
  for (const [ownerId, byEndpoint] of topic.metered) {
    for (const [endpointId, n] of byEndpoint) {
      if (!opts.charge(ownerId, endpointId, ru * n, n)) broke.add(ownerId);
    }
  }
  for (let k = 0; k < topic.variants.length; k++) {
    const bytes = prepared[k];
    if (bytes === undefined) continue;
    let sent = 0;
    for (const conn of topic.variants[k]!) {
      if (conn.ownerId !== null && broke.has(conn.ownerId)) conn.close(BALANCE_CLOSE.code, BALANCE_CLOSE.reason);
      else {
        conn.deliver(bytes);
        sent++;
      }
    }
    if (sent > 0) topic.notified.inc(sent);
  }
}

function lost(hub: SubscriptionHubState, topic: Topic, reason: string): void {
  topic.lost = true;
  if (hub.topics.get(topic.key) === topic) hub.topics.delete(topic.key);
  const conns = new Set<SubscriberConn>();
  for (const v of topic.variants) for (const c of v) conns.add(c);
  // Those still replaying too: their replay would end by joining a topic that no longer delivers.
  for (const r of topic.resuming ?? []) conns.add(r.conn);
  for (const c of conns) c.close(LOST_CLOSE, reason.slice(0, 120));
}

function topicFor(hub: SubscriptionHubState, kind: FeedKind, params: unknown): Topic {
  const key = `${kind}:${params === undefined ? '' : JSON.stringify(params)}`;
  const topic = hub.topics.get(key);
  if (topic !== undefined) return topic;
  const t: Topic = {
    key,
    variants: [],
    ids: [],
    shared: [],
    metered: new Map(),
    count: 0,
    waiting: 0,
    lost: false,
    hold: null,
    kind,
    notified: hub.metrics.notifications(kind),
    resuming: null,
    // 24 hex digits per topic (random, or the workers' common one), then 8 for the variant: 0x + 32 hex, the form nodes give.
    idPrefix: `0x${hub.opts.idPrefix?.(key) ?? randomBytes(12).toString('hex')}`,
  };
  hub.topics.set(key, t);
  t.hold = hub.opts.feeds.subscribe(kind, params, { notify: (r) => notify(hub, t, r), lost: (reason) => lost(hub, t, reason) });
  return t;
}

/** Drops the topic and its feed listener once nobody holds or waits for it. */
function release(hub: SubscriptionHubState, topic: Topic): void {
  if (topic.count > 0 || topic.waiting > 0) return;
  if (hub.topics.get(topic.key) === topic) hub.topics.delete(topic.key);
  topic.hold?.remove();
  // The memory of heads listens while some newHeads or logs topic is held.
  for (const t of hub.topics.values()) if (t.kind === 'newHeads' || t.kind === 'logs') return;
  hub.heads?.stop();
}

/** Adds `conn` to the topic's fan-out, in a variant it does not hold yet; `resuming` reserves the variant and
 *  holds the live results for the replay instead (the subscription goes live with goLive). */
function add(hub: SubscriptionHubState, conn: SubscriberConn, topic: Topic, resuming?: string[]): string {
  let variant = 0;
  // A connection in a variant's set (or replaying in it) holds its id: one look-up covers both.
  while (subOf(conn, idOf(topic, variant)) !== undefined) variant++;
  const id = idOf(topic, variant);
  holdSub(conn, id, (topic.shared[variant] ??= { topic, variant }));
  if (resuming === undefined) {
    (topic.variants[variant] ??= new Set()).add(conn);
    meter(topic, conn, 1);
  } else (topic.resuming ??= new Set()).add({ conn, variant, buffer: resuming });
  topic.count++;
  hub.subscriptions++;
  hub.metrics.subscription(topic.kind, 1);
  return id;
}

function remove(hub: SubscriptionHubState, conn: SubscriberConn, id: string, sub: Subscription): void {
  const { topic, variant } = sub;
  releaseSub(conn, id);
  if (!stopResuming(topic, conn, variant)) {
    topic.variants[variant]!.delete(conn);
    meter(topic, conn, -1);
  }
  topic.count--;
  hub.subscriptions--;
  hub.metrics.subscription(topic.kind, -1);
  release(hub, topic);
}

function subscribe(
  hub: SubscriptionHubState,
  conn: SubscriberConn,
  kind: FeedKind,
  params: unknown,
): SubscribeOutcome | Promise<SubscribeOutcome> {
  const point = resumePoint(kind, params);
  if ('refused' in point) return { ok: false, reason: point.refused, invalid: true };
  if (hub.heads !== null && (kind === 'newHeads' || kind === 'logs')) hub.heads.listen(hub.opts.feeds);
  if (point.from !== null) return subscribeResuming(hub, conn, kind as 'newHeads' | 'logs', point.live, point.from);
  const topic = topicFor(hub, kind, point.live);
  if (topic.hold!.live()) return { ok: true, id: add(hub, conn, topic) };
  topic.waiting++;
  return topic.hold!.whenLive(hub.opts.liveWaitMs).then((failure): SubscribeOutcome => {
    topic.waiting--;
    const outcome: SubscribeOutcome =
      failure !== null
        ? { ok: false, reason: failure }
        : topic.lost
          ? { ok: false, reason: 'upstream subscription lost' }
          : conn.closed
            ? { ok: false, reason: 'connection closed' }
            : { ok: true, id: add(hub, conn, topic) };
    release(hub, topic);
    return outcome;
  });
}

/**
 * A subscribe with a resume point (replay.ts): once the topic is live, the subscription is registered with a
 * buffer, the replay's end read and checked against the bound, and the id given; `start` runs the replay, and the
 * subscription joins the live fan-out once its buffer is empty (in the same turn: no notification falls between).
 */
async function subscribeResuming(
  hub: SubscriptionHubState,
  conn: SubscriberConn,
  kind: 'newHeads' | 'logs',
  live: unknown,
  from: number,
): Promise<SubscribeOutcome> {
  const { replay: source, liveWaitMs } = hub.opts;
  if (source === undefined || hub.heads === null) return { ok: false, reason: 'this gateway does not resume subscriptions', invalid: true };
  const topic = topicFor(hub, kind, live);
  topic.waiting++;
  try {
    const failure = topic.hold!.live() ? null : await topic.hold!.whenLive(liveWaitMs);
    if (failure !== null || topic.lost || conn.closed)
      return { ok: false, reason: failure ?? (topic.lost ? 'upstream subscription lost' : 'connection closed') };
    const buffer: string[] = [];
    const id = add(hub, conn, topic, buffer);
    const sub = subOf(conn, id)!;
    const end = await replayEnd(kind, from, hub.heads, source);
    if (!('upTo' in end)) {
      remove(hub, conn, id, sub);
      return end;
    }
    const held = (): boolean => subOf(conn, id) === sub && !conn.closed;
    const replay: Replay = {
      kind,
      from,
      upTo: end.upTo,
      filter: (live ?? {}) as Record<string, unknown>,
      source,
      heads: hub.heads,
      buffer,
      delivered: () => hub.opts.feeds.deliveredLogs?.(live, from) ?? Promise.resolve([]),
      writable: () => (held() ? (conn.writable?.() ?? null) : null),
      send(json) {
        if (!held() || !sendReplayed(conn, id, json, hub.opts)) return false;
        hub.notifications++;
        topic.notified.inc(1);
        return true;
      },
    };
    const goLive = (): void => {
      if (!held() || !stopResuming(topic, conn, sub.variant)) return;
      (topic.variants[sub.variant] ??= new Set()).add(conn);
      meter(topic, conn, 1);
    };
    return { ok: true, id, start: () => void replayThen(replay, goLive, (reason) => held() && conn.close(LOST_CLOSE, reason)) };
  } finally {
    topic.waiting--;
    release(hub, topic);
  }
}

/**
 * Local fan-out of one chain's feeds. Every notification is turned into bytes once per variant
 * (usually one: every connection's first subscription of a kind shares its id), and the same Buffer
 * goes to each socket; RU are charged once per owner with the count of its subscriptions, so the
 * per-socket work is one send.
 */
export function createSubscriptionHub(opts: HubOptions): SubscriptionHub {
  const hub = new SubscriptionHubState(opts);
  return {
    subscribe: (conn, kind, params) => subscribe(hub, conn, kind, params),
    unsubscribe(conn, id) {
      const key = id.toLowerCase();
      const sub = subOf(conn, key);
      if (sub === undefined) return false;
      remove(hub, conn, key, sub);
      return true;
    },
    dropConnection(conn) {
      for (const [id, sub] of subsOf(conn)) remove(hub, conn, id, sub);
    },
    stats: () => ({ topics: hub.topics.size, subscriptions: hub.subscriptions, notifications: hub.notifications }),
  };
}
