/**
 * Every metric family the daemon exports, one row each: its name, help text, type, labels, how worker
 * threads' values combine, and a histogram's buckets. The rows are registered in this order (the
 * exposition's order). What a family is for and who counts it is said where it is counted.
 *
 * A family labelled `chain` is per chain: its series go when a reload removes the chain. That list is
 * read from the labels here (perChain), never kept by hand, so a new per-chain family cannot leak series.
 */
import { type Aggregator, CounterFamily, GaugeFamily, HistogramFamily, type Registrar } from './families.js';

/** Seconds: from a cached answer (~50 µs) to a slow trace (tens of seconds). */
const DURATION_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

interface RowBase {
  readonly name: string;
  readonly help: string;
  readonly labelNames: readonly string[];
  /** How worker threads' values combine; default `sum` (families.ts). */
  readonly aggregator?: Aggregator;
}
/** One family's row; a histogram's also has its bucket bounds. */
type FamilyRow =
  | (RowBase & { readonly type: 'counter' | 'gauge' })
  | (RowBase & { readonly type: 'histogram'; readonly buckets: readonly number[] });

export const METRIC_FAMILIES = {
  requests: {
    type: 'counter',
    name: 'chaingate_requests_total',
    help: 'Requests answered, by chain, transport, method (allowlisted or a Beacon route template, else other) and HTTP status',
    labelNames: ['chain', 'transport', 'method', 'status'],
  },
  requestDuration: {
    type: 'histogram',
    name: 'chaingate_request_duration_seconds',
    help: 'Time from a request read to its answer sent',
    labelNames: ['chain', 'transport'],
    buckets: DURATION_BUCKETS,
  },
  upstreamRequests: {
    type: 'counter',
    name: 'chaingate_upstream_requests_total',
    help: 'Calls sent to upstream nodes, by outcome',
    labelNames: ['chain', 'upstream', 'outcome'],
  },
  upstreamDuration: {
    type: 'histogram',
    name: 'chaingate_upstream_duration_seconds',
    help: 'Time from a call sent to a node to its answer complete',
    labelNames: ['chain', 'upstream'],
    buckets: DURATION_BUCKETS,
  },
  inRotation: {
    type: 'gauge',
    name: 'chaingate_upstream_in_rotation',
    help: '1 while the upstream takes calls, 0 while it is out of rotation',
    labelNames: ['chain', 'upstream'],
    aggregator: 'max',
  },
  wrongChain: {
    type: 'gauge',
    name: 'chaingate_upstream_wrong_chain',
    help: '1 while the upstream serves another chain (chain id, or beacon genesis) than its chain, 0 otherwise',
    labelNames: ['chain', 'upstream'],
    aggregator: 'max',
  },
  upstreamCooldowns: {
    type: 'counter',
    name: 'chaingate_upstream_cooldowns_total',
    help: 'Times the upstream answered 429 and got no call until its Retry-After (or the default cooldown) passed',
    labelNames: ['chain', 'upstream'],
  },
  upstreamCheckFailures: {
    type: 'counter',
    name: 'chaingate_upstream_check_failures_total',
    help: "Node answers that failed one of the gateway's checks (docs/consistency.md), by check: block, logs_bloom, receipt_block",
    labelNames: ['chain', 'upstream', 'check'],
  },
  upstreamHead: {
    type: 'gauge',
    name: 'chaingate_upstream_head',
    help: 'The block (or slot) the upstream last reported',
    labelNames: ['chain', 'upstream'],
    aggregator: 'max',
  },
  chainHead: {
    type: 'gauge',
    name: 'chaingate_chain_head',
    help: 'The best head of the chain',
    labelNames: ['chain'],
    aggregator: 'max',
  },
  chainServedHead: {
    type: 'gauge',
    name: 'chaingate_chain_served_head',
    help: 'The head the chain serves: the highest block enough nodes in rotation have reached (consistency.min_nodes)',
    labelNames: ['chain'],
    aggregator: 'max',
  },
  chainFinalized: {
    type: 'gauge',
    name: 'chaingate_chain_finalized_block',
    help: "The chain's finalized block: its beacon chain's finalized checkpoint, else its nodes' own",
    labelNames: ['chain'],
    aggregator: 'max',
  },
  chainSafe: {
    type: 'gauge',
    name: 'chaingate_chain_safe_block',
    help: "The chain's safe block: its beacon chain's justified checkpoint, else its nodes' own",
    labelNames: ['chain'],
    aggregator: 'max',
  },
  refusals: {
    type: 'counter',
    name: 'chaingate_refusals_total',
    help: 'Requests refused by the gateway before reaching a node, by reason',
    labelNames: ['reason'],
  },
  ruCharged: {
    type: 'counter',
    name: 'chaingate_ru_charged_total',
    help: 'RU charged to owners',
    labelNames: ['chain'],
  },
  wsConnections: {
    type: 'gauge',
    name: 'chaingate_ws_connections',
    help: 'Open client WebSockets',
    labelNames: ['chain'],
  },
  subscriptions: {
    type: 'gauge',
    name: 'chaingate_subscriptions',
    help: 'Open client subscriptions (eth_subscribe), by kind',
    labelNames: ['chain', 'kind'],
  },
  notifications: {
    type: 'counter',
    name: 'chaingate_notifications_total',
    help: 'Subscription notifications sent to clients, by kind',
    labelNames: ['chain', 'kind'],
  },
  logBackfills: {
    type: 'counter',
    name: 'chaingate_log_backfills_total',
    help: "Blocks whose logs a logs subscription's node did not send though the block's bloom said so: fetched with eth_getLogs",
    labelNames: ['chain'],
  },
  slowConsumers: {
    type: 'counter',
    name: 'chaingate_slow_consumers_total',
    help: 'Clients cut for not reading what was sent to them',
    labelNames: ['transport'],
  },
  sseClients: {
    type: 'gauge',
    name: 'chaingate_sse_clients',
    help: 'Open Beacon event streams',
    labelNames: ['chain'],
  },
  sseEvents: {
    type: 'counter',
    name: 'chaingate_sse_events_total',
    help: 'Beacon events sent to clients, by topic',
    labelNames: ['chain', 'topic'],
  },
  cacheHits: {
    type: 'counter',
    name: 'chaingate_cache_hits_total',
    help: 'Answers served from the cache',
    labelNames: ['chain'],
  },
  cacheMisses: {
    type: 'counter',
    name: 'chaingate_cache_misses_total',
    help: 'Cacheable calls the cache did not hold',
    labelNames: ['chain'],
  },
  cacheBytes: {
    type: 'gauge',
    name: 'chaingate_cache_bytes',
    help: 'Bytes held by the response cache',
    labelNames: ['chain'],
  },
  sharedCalls: {
    type: 'counter',
    name: 'chaingate_shared_calls_total',
    help: "Calls answered by another caller's identical call in flight",
    labelNames: ['chain'],
  },
  consensusCalls: {
    type: 'counter',
    name: 'chaingate_consensus_calls_total',
    help: 'Calls asked of several nodes (consistency.quorum), by outcome: agreed, majority, disagreed, too_few, too_large, failed',
    labelNames: ['chain', 'method', 'outcome'],
  },
  consensusMismatches: {
    type: 'counter',
    name: 'chaingate_consensus_mismatches_total',
    help: 'Answers of a node that differed from the answer its chain served to a call asked of several nodes',
    labelNames: ['chain', 'method', 'upstream'],
  },
  ledgerFlush: {
    type: 'histogram',
    name: 'chaingate_ledger_flush_duration_seconds',
    help: 'Time one flush of the RU ledger to the store took',
    labelNames: [],
    buckets: [0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1],
  },
  ledgerFlushFailures: {
    type: 'counter',
    name: 'chaingate_ledger_flush_failures_total',
    help: 'Flushes of the RU ledger the store refused (retried at the next tick)',
    labelNames: [],
  },
  // Only a fleet sets it: one machine exports the family without a value.
  redisUp: {
    type: 'gauge',
    name: 'chaingate_cluster_redis_up',
    help: 'In a fleet: 1 while rate limits are shared through Redis, 0 while Redis is unreachable',
    labelNames: [],
  },
  noticesIgnored: {
    type: 'counter',
    name: 'chaingate_change_notices_ignored_total',
    help: 'In a fleet: notices on the change channel dropped because they do not parse, by reason',
    labelNames: ['reason'],
  },
  resyncs: {
    type: 'counter',
    name: 'chaingate_change_resyncs_total',
    help: 'In a fleet: times every known API key was read again (the change feed came back, or a flood of notices)',
    labelNames: [],
  },
  reloads: {
    type: 'counter',
    name: 'chaingate_config_reloads_total',
    help: 'Config reloads (SIGHUP), by result',
    labelNames: ['result'],
  },
  lastReload: {
    type: 'gauge',
    name: 'chaingate_config_last_reload_success_timestamp_seconds',
    help: 'When the config was last loaded with success (start or reload), in seconds since the epoch',
    labelNames: [],
    aggregator: 'max',
  },
  workerRestarts: {
    type: 'counter',
    name: 'chaingate_worker_restarts_total',
    help: 'Worker threads that died and were started again, by worker number',
    labelNames: ['worker'],
  },
  evictions: {
    type: 'counter',
    name: 'chaingate_limit_table_evictions_total',
    help: 'Entries a full limit table gave to another key while they still counted (the one counting least; its count starts again), by table',
    labelNames: ['table'],
  },
  workerStalls: {
    type: 'counter',
    name: 'chaingate_worker_stalls_total',
    help: 'Worker threads that went without a heartbeat for server.worker_stall_s and were ended, by worker number',
    labelNames: ['worker'],
  },
  workerUp: {
    type: 'gauge',
    name: 'chaingate_worker_up',
    help: 'Whether worker N answered this scrape within server.worker_stall_s (1) or not (0: its values are missing)',
    labelNames: ['worker'],
  },
  connectionsRefused: {
    type: 'counter',
    name: 'chaingate_connections_refused_total',
    help: 'Client connections refused before any work: max_connections (the cap is full) or file_descriptors (open files near their limit)',
    labelNames: ['reason'],
  },
  connectionsMax: {
    type: 'gauge',
    name: 'chaingate_connections_max',
    help: 'The cap on client connections in force (server.max_connections, resolved at start)',
    labelNames: [],
    aggregator: 'max',
  },
} as const satisfies Record<string, FamilyRow>;

type Rows = typeof METRIC_FAMILIES;
type FamilyOf<R> = R extends { type: 'counter' } ? CounterFamily : R extends { type: 'gauge' } ? GaugeFamily : HistogramFamily;
/** The registered family of each row, by the row's key. */
export type Families = { readonly [K in keyof Rows]: FamilyOf<Rows[K]> };
type AnyFamily = CounterFamily | GaugeFamily | HistogramFamily;

/** Whether a row's family is per chain: it has a `chain` label. */
export function isPerChain(row: FamilyRow): boolean {
  return row.labelNames.includes('chain');
}

function register(row: FamilyRow, registers: readonly Registrar[]): AnyFamily {
  const opts = { name: row.name, help: row.help, aggregator: row.aggregator, labelNames: row.labelNames, registers };
  switch (row.type) {
    case 'counter':
      return new CounterFamily(opts);
    case 'gauge':
      return new GaugeFamily(opts);
    case 'histogram':
      return new HistogramFamily({ ...opts, buckets: row.buckets });
    default: {
      const unknown: never = row;
      throw new Error(`unknown metric type in ${JSON.stringify(unknown)}`);
    }
  }
}

/** Every family of the table registered with `registers`, and the per-chain ones: what a removed chain's series are dropped from. */
export function registerFamilies(registers: readonly Registrar[]): { families: Families; perChain: readonly AnyFamily[] } {
  const families: Record<string, AnyFamily> = {};
  const perChain: AnyFamily[] = [];
  for (const [key, row] of Object.entries(METRIC_FAMILIES) as Array<[string, FamilyRow]>) {
    const family = register(row, registers);
    families[key] = family;
    if (isPerChain(row)) perChain.push(family);
  }
  return { families: families as Families, perChain };
}
