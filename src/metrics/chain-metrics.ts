/**
 * One chain's metrics: the children of its series, found once per label set and kept, so counting a
 * request is three map lookups and increments, with no label string built per call.
 */
import type { Families } from './catalogue.js';
import { type CounterChild, memo } from './families.js';
import type { ChainMetrics, ConsensusMetrics, UpstreamMetrics } from './registry.js';

/** Seconds over which `chaingate status` reports a chain's request rate. */
const RATE_WINDOW_S = 60;

/**
 * Requests per second over the last RATE_WINDOW_S whole seconds: a ring of per-second counts, so
 * counting one request is an index and an increment.
 */
function createRecentRate(now: () => number): { count(): void; perSecond(): number } {
  const slots = new Float64Array(RATE_WINDOW_S);
  let second = Math.floor(now() / 1000);
  const advance = (): void => {
    const s = Math.floor(now() / 1000);
    for (let k = second + 1; k <= Math.min(s, second + RATE_WINDOW_S); k++) slots[k % RATE_WINDOW_S] = 0;
    if (s > second) second = s;
  };
  return {
    count() {
      advance();
      slots[second % RATE_WINDOW_S]!++;
    },
    perSecond() {
      advance();
      let sum = 0;
      for (const v of slots) sum += v;
      return sum / RATE_WINDOW_S;
    },
  };
}

/**
 * The metrics of chain `slug`, on the families of createMetrics; `remove` drops every series of the chain
 * (ChainMetrics.remove).
 */
export function createChainMetrics(f: Families, slug: string, now: () => number, remove: () => void): ChainMetrics {
  const { requests, requestDuration, upstreamRequests, upstreamDuration, inRotation, wrongChain, upstreamHead, upstreamCheckFailures } = f;
  const { upstreamCooldowns } = f;
  const { chainHead, chainServedHead, ruCharged, logBackfills, wsConnections, subscriptions, notifications, sseClients, sseEvents } = f;
  const { cacheHits, cacheMisses, cacheBytes, sharedCalls, consensusCalls, consensusMismatches, chainFinalized, chainSafe } = f;
  const byTransport = memo((transport) => requestDuration.labels(slug, transport));
  const kinds = memo((kind) => subscriptions.labels(slug, kind));
  const notified = memo((kind) => notifications.labels(slug, kind));
  const topics = memo((topic) => sseEvents.labels(slug, topic));
  // Made at the first block known, so a chain without finality (a beacon chain) has no series.
  const finality = memo((tag) => (tag === 'finalized' ? chainFinalized : chainSafe).labels(slug));
  // transport → method → status → child: three lookups and no string built per request.
  const requestChildren = new Map<string, Map<string, Map<number, CounterChild>>>();
  const requestChild = (transport: string, method: string, status: number): CounterChild => {
    let byMethod = requestChildren.get(transport);
    if (byMethod === undefined) requestChildren.set(transport, (byMethod = new Map()));
    let byStatus = byMethod.get(method);
    if (byStatus === undefined) byMethod.set(method, (byStatus = new Map()));
    let child = byStatus.get(status);
    if (child === undefined) byStatus.set(status, (child = requests.labels(slug, transport, method, String(status))));
    return child;
  };
  const upstream = memo((name): UpstreamMetrics => {
    const outcomes = memo((o) => upstreamRequests.labels(slug, name, o));
    const duration = upstreamDuration.labels(slug, name);
    const checks = memo((check) => upstreamCheckFailures.labels(slug, name, check));
    const cooldowns = upstreamCooldowns.labels(slug, name);
    return {
      call(outcome, seconds) {
        outcomes(outcome).inc();
        duration.observe(seconds);
      },
      checkFailed(check) {
        checks(check).inc();
      },
      cooledDown() {
        cooldowns.inc();
      },
      inRotation: inRotation.labels(slug, name),
      wrongChain: wrongChain.labels(slug, name),
      head: upstreamHead.labels(slug, name),
    };
  });
  const consensus = memo((method): ConsensusMetrics => {
    const outcomes = memo((o) => consensusCalls.labels(slug, method, o));
    const mismatches = memo((name) => consensusMismatches.labels(slug, method, name));
    return {
      call: (outcome) => outcomes(outcome).inc(),
      mismatch: (name) => mismatches(name).inc(),
    };
  });
  const recent = createRecentRate(now);
  const open = { ws: 0, sse: 0, subscriptions: 0 };
  const wsGauge = wsConnections.labels(slug);
  const sseGauge = sseClients.labels(slug);
  return {
    request(transport, method, status, seconds) {
      requestChild(transport, method, status).inc();
      byTransport(transport).observe(seconds);
      recent.count();
    },
    wsConnection(delta) {
      open.ws += delta;
      wsGauge.inc(delta);
    },
    sseClient(delta) {
      open.sse += delta;
      sseGauge.inc(delta);
    },
    subscription(kind, delta) {
      open.subscriptions += delta;
      kinds(kind).inc(delta);
    },
    snapshot: () => ({
      wsConnections: open.ws,
      sseClients: open.sse,
      subscriptions: open.subscriptions,
      requestsPerSecond1m: recent.perSecond(),
    }),
    ruCharged: ruCharged.labels(slug),
    logBackfills: logBackfills.labels(slug),
    cacheHits: cacheHits.labels(slug),
    cacheMisses: cacheMisses.labels(slug),
    cacheBytes: cacheBytes.labels(slug),
    sharedCalls: sharedCalls.labels(slug),
    head: chainHead.labels(slug),
    servedHead: chainServedHead.labels(slug),
    finality,
    notifications: notified,
    sseEvents: topics,
    upstream,
    consensus,
    remove,
  };
}
