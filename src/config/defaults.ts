import { HEAVY_METHODS } from '../jsonrpc/methods.js';

/**
 * Every default of the configuration, in one place, with its unit. config.example.yaml repeats these
 * with the reason for each; the schema fills them in where a key is absent.
 */
/**
 * chains.<slug>.answer_timeout_s when absent, in multiples of timeout_s (4 × 30 s = 120 s): a 64 MiB eth_getLogs
 * answer that starts within timeout_s still has three times as long to arrive, at 0.7 MiB/s or more.
 */
export const ANSWER_TIMEOUT_FACTOR = 4;

export const DEFAULTS = {
  server: {
    host: '127.0.0.1', // listen address: loopback until the operator says otherwise
    port: 8080,
    default_chain: undefined as string | undefined, // the only chain when exactly one is configured
    public_base_url: undefined as string | undefined, // derived from host and port when absent
    max_body_bytes: 1_048_576, // bytes of one HTTP request body
    max_batch: 1000, // items in one JSON-RPC batch
    cors_origins: ['*'] as string[],
    stop_timeout_s: 10, // seconds in-flight requests get to finish on SIGTERM
    trust_proxy: false, // true: the client IP is the last hop of X-Forwarded-For
    max_connections: 'auto' as number | 'auto', // client connections at once; auto: open-files limit less a reserve
    ipv6_prefix: 64, // bits: per-IP limits count an IPv6 client by this prefix (one subscriber's /64)
    worker_max_heap_mb: 1024, // MiB of JS heap one worker thread may use before it is replaced
    worker_stall_s: 5, // seconds a worker thread may go without a heartbeat before it is ended and replaced
    worker_relay_max_bytes: 67_108_864, // bytes of notifications/event frames queued for one worker thread; past it its subscribers are dropped
  },
  storage: {
    path: './data/chaingate.db',
  },
  cluster: {
    reservation_ttl_s: 10, // s: a killed instance's unspent RU return to their owners after this
    reservation_block_ru: 1000, // RU an instance reserves at once from an owner's balance
    redis_failure: 'open' as 'open' | 'closed', // Redis unreachable: limit locally (open) or refuse with 503 (closed)
  },
  chain: {
    kind: 'evm' as 'evm' | 'beacon',
    timeout_s: 30, // seconds for one upstream call (until the answer starts, and between its chunks), and
    // for a new subscription or event stream to get its upstream one
    max_lag_blocks: 5, // an upstream this many blocks behind the best healthy head leaves the rotation
    finality_depth: 64, // blocks below the head whose answers are final (cacheable)
    max_logs_block_range: 10_000, // eth_getLogs / eth_newFilter: blocks in one query at most
    state_history_blocks: 128, // blocks below the head whose state a full node keeps (geth's in-memory tries)
    split_logs: false, // true: a wider eth_getLogs is split into windows of max_logs_block_range and merged
    max_logs_answer_bytes: 67_108_864, // bytes of one split eth_getLogs answer at most (64 MiB)
    answer_timeout_s: undefined as number | undefined, // seconds for a whole upstream answer; absent: ANSWER_TIMEOUT_FACTOR × timeout_s
  },
  upstream: {
    max_connections: 64, // keep-alive sockets to one upstream node
    pipelining: 8, // requests in flight per socket; 1 for a node or balancer that mishandles pipelining
    archive: false, // a full node: only the last state_history_blocks blocks' state
  },
  // Plans apply per endpoint key; a `plans` section in the config replaces these as a whole.
  plans: {
    free: { rps: 100, ru_per_second: undefined as number | undefined, max_endpoints: 10 },
    growth: { rps: 1500, ru_per_second: undefined as number | undefined, max_endpoints: 50 },
    premium: { rps: 5000, ru_per_second: 500_000 as number | undefined, max_endpoints: 200 },
  },
  management: {
    rps_per_key: 20, // management requests per second of one owner's keys (a dashboard page makes a few)
    rps_per_ip: 50, // management requests per second from one client IP, whatever the key
  },
  public: {
    rps_per_ip: 10, // requests per second per client IP on the keyless path
    max_batch: 10, // items in one batch on the keyless path
    // methods the keyless path may not call: the catalogue's heavy ones (traces, the whole mempool), which one
    // IP within its rate could make a node re-execute whole blocks for; `deny: []` serves them
    methods: { deny: HEAVY_METHODS },
  },
  ru: {
    default: 15, // RU of an allowed method without an entry in ru.methods
    notification_per_250_bytes: 5, // RU of a delivered subscription notification, per started 250 bytes
    beacon_default: 20, // RU of a Beacon path without a cost of its own
    beacon_per_event: 1, // RU of one Beacon event delivered to a client
  },
  websocket: {
    max_connections_per_key: 100, // open WebSockets of one endpoint key
    max_connections_per_ip: 50, // open WebSockets of one client IP on the public path
    max_subscriptions_per_connection: 100,
    max_message_bytes: 1_048_576, // one client frame; larger → close 1009
    max_answer_bytes: 33_554_432, // one answer sent over a WebSocket (held whole); larger → an error naming this
    max_buffered_bytes: 1_048_576, // bytes waiting for a subscriber that does not read; past it → closed
    idle_timeout_s: 120, // a socket silent this long is closed; pings keep live clients
    max_upstream_outage_s: 60, // subscribers are closed with 1011 once the upstream is away this long
  },
  sse: {
    heartbeat_s: 15, // a comment line this often keeps idle proxies from cutting event streams
    max_buffered_bytes: 1_048_576, // bytes waiting for a client that does not read; past it → ended (": closed: slow consumer")
    max_connections_per_key: 100, // open event streams of one endpoint key
    max_connections_per_ip: 50, // open event streams of one client IP on the public path
  },
  cache: {
    max_bytes: 67_108_864, // response cache of final answers; 0 turns it off
    hit_ru_factor: 0.5, // a cache hit costs this share of the method's RU, rounded up
  },
  filters: {
    max_per_key: 100, // filters one endpoint key (or public client IP) may hold
    idle_timeout_s: 300, // a filter not polled this long is removed, as nodes do
  },
  ledger: {
    flush_interval_ms: 200, // debits reach SQLite at most this late; a kill -9 loses at most this much
  },
  log: {
    level: 'info' as 'debug' | 'info' | 'warn' | 'error',
    access: false, // one line per request when true (journald grows by ~200 bytes a request)
    access_sample: 1, // with access: the share of requests logged, 0 to 1 (0.1: one in ten)
  },
  metrics: {
    host: '127.0.0.1', // the Prometheus listener: loopback unless the operator opens it
    port: 9464, // the port OpenTelemetry and many exporters use for Prometheus
  },
  usage: {
    keep_minutes_h: 48, // hours of per-minute rows before they are rolled up into hours
    keep_hours_d: 90, // days of hourly rows before they are rolled up into days (kept)
  },
} as const;

/** Path segments the gateway's own routes use: a chain slug may not be one of them. */
export const RESERVED_SLUGS: ReadonlySet<string> = new Set(['v1', 'api', 'dashboard', 'healthz', 'readyz', 'metrics']);
