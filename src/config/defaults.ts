/**
 * Every default of the configuration, in one place, with its unit. config.example.yaml repeats these
 * with the reason for each; the schema fills them in where a key is absent.
 */
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
  },
  storage: {
    path: './data/chaingate.db',
  },
  chain: {
    kind: 'evm' as 'evm' | 'beacon',
    timeout_s: 30, // seconds for one upstream call: until the answer starts, and between its chunks
  },
  upstream: {
    max_connections: 64, // keep-alive sockets to one upstream node
    pipelining: 8, // requests in flight per socket; 1 for a node or balancer that mishandles pipelining
  },
  // Plans apply per endpoint key; a `plans` section in the config replaces these as a whole.
  plans: {
    free: { rps: 100, ru_per_second: undefined as number | undefined, max_endpoints: 10 },
    growth: { rps: 1500, ru_per_second: undefined as number | undefined, max_endpoints: 50 },
    premium: { rps: 5000, ru_per_second: 500_000 as number | undefined, max_endpoints: 200 },
  },
  public: {
    rps_per_ip: 10, // requests per second per client IP on the keyless path
    max_batch: 10, // items in one batch on the keyless path
  },
  ru: {
    default: 15, // RU of an allowed method without an entry in ru.methods
  },
  ledger: {
    flush_interval_ms: 200, // debits reach SQLite at most this late; a kill -9 loses at most this much
  },
  usage: {
    keep_minutes_h: 48, // hours of per-minute rows before they are rolled up into hours
    keep_hours_d: 90, // days of hourly rows before they are rolled up into days (kept)
  },
} as const;

/** Path segments the gateway's own routes use: a chain slug may not be one of them. */
export const RESERVED_SLUGS: ReadonlySet<string> = new Set(['v1', 'api', 'dashboard', 'healthz', 'readyz', 'metrics']);
