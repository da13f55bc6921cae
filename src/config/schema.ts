import { ANSWER_TIMEOUT_FACTOR, DEFAULTS, RESERVED_SLUGS } from './defaults.js';
import {
  type Errors,
  isObject,
  readBool,
  readEnum,
  readInt,
  readNumber,
  readObject,
  readString,
  readStringList,
  readStringMap,
  readUrl,
} from './checks.js';
import { unknownBeaconCostPaths } from '../beacon/costs.js';
import { IPV6_PREFIX_MAX, IPV6_PREFIX_MIN } from '../limits/address-key.js';
import {
  type ChainRu,
  type MethodDeny,
  type MethodRules,
  readChainRu,
  readMethodCosts,
  readMethodDeny,
  readMethodRules,
} from './method-policy.js';
import { type ClusterConfig, readStorage, type StorageConfig } from './storage.js';
import { LOG_LEVELS, type LogLevel } from '../log.js';

/** One upstream node of a chain. */
export interface UpstreamConfig {
  /**
   * How logs and metrics name the node: never its URL, whose path often holds a provider's key. Default
   * host:port of `url`; unique within its chain.
   */
  name: string;
  /** http(s) URL of the node's JSON-RPC or Beacon API; may carry credentials, which are never logged. */
  url: string;
  /** ws(s) URL for subscriptions (evm chains only). */
  ws: string | undefined;
  /** Headers sent with every upstream request (e.g. Authorization). */
  headers: Record<string, string>;
  /** Keep-alive sockets to this node at most; default 64. */
  max_connections: number;
  /** Requests in flight per socket (HTTP/1.1 pipelining); 1 turns it off; default 8. */
  pipelining: number;
  /** Methods this node does not serve: no call of them is sent to it (evm only); default none. */
  methods: MethodDeny;
  /** The node keeps the state of every block: state reads about old blocks go to it first (evm only); default false. */
  archive: boolean;
}

export interface ChainConfig {
  /** The chain's slug: the config key, the Host label and the path prefix. */
  slug: string;
  /** Display name; defaults to the slug. */
  name: string;
  kind: 'evm' | 'beacon';
  /** EIP-155 chain id (evm only); eth_chainId is answered from it. */
  chain_id: number | undefined;
  /** Seconds for one upstream call, and for a new subscription or event stream to get its upstream one; default 30. */
  timeout_s: number;
  /** Blocks behind the best healthy head before an upstream leaves the rotation. */
  max_lag_blocks: number;
  /** Blocks below the head treated as final (answers about them may be cached). */
  finality_depth: number;
  /** eth_getLogs / eth_newFilter: most blocks in one range. */
  max_logs_block_range: number;
  /** The methods the chain serves, over the catalogue (evm only); default all of them. */
  methods: MethodRules;
  /** The chain's own RU prices over ru (evm only); default none. */
  ru: ChainRu;
  /** Blocks below the head whose state every node keeps; a state read about an older block goes to an archive node; default 128. */
  state_history_blocks: number;
  /** A wider eth_getLogs is split into windows of max_logs_block_range, fetched and merged (pipeline/split-logs.ts); default false. */
  split_logs: boolean;
  /** Bytes a split eth_getLogs answer may hold; past it the call is abandoned with an error naming this; default 64 MiB. */
  max_logs_answer_bytes: number;
  /** Seconds for one upstream answer from start to end (a node dripping bytes holds a call no longer); default 4 × timeout_s. */
  answer_timeout_s: number;
  upstreams: UpstreamConfig[];
}

export interface ServerConfig {
  host: string;
  port: number;
  default_chain: string;
  /** Base of URLs shown to users; `{chain}` is replaced by the slug. */
  public_base_url: string;
  max_body_bytes: number;
  max_batch: number;
  cors_origins: string[];
  stop_timeout_s: number;
  trust_proxy: boolean;
  /** Bits of an IPv6 client's address its per-IP limits count by (default 64); IPv4 counts per address. */
  ipv6_prefix: number;
  tls: { cert_file: string; key_file: string; passphrase: string | undefined } | undefined;
  /** Worker threads serving connections on the one port: 'auto' is one per core (os.availableParallelism()). */
  workers: number | 'auto';
  /** Client connections at once (WebSockets and event streams held, plain HTTP refused past it): 'auto' is the
   *  process's open-files limit less a reserve, read at start (server/fd-watch.ts). */
  max_connections: number | 'auto';
  /** MiB of JS heap a worker thread may use: past it, the worker is replaced (docs/workers.md). */
  worker_max_heap_mb: number;
  /** Seconds a worker thread may go without a heartbeat (or an answer) before it is ended and replaced. */
  worker_stall_s: number;
  /** Bytes the main thread queues for one worker (notifications, event frames) before it drops that worker's subscribers (default 64 MiB). */
  worker_relay_max_bytes: number;
}

/** More worker threads than this is a typo, not a machine. */
export const MAX_WORKERS = 1024;

/** A plan: limits applied per endpoint key, and how many endpoints an owner may have. */
export interface PlanConfig {
  name: string;
  rps: number;
  /** RU per second per key; undefined: no RU rate limit. */
  ru_per_second: number | undefined;
  max_endpoints: number;
  /** Methods keys of this plan may not call; default none. */
  methods: MethodDeny;
}

export interface Config {
  server: ServerConfig;
  storage: StorageConfig;
  /** Set in a fleet (with storage.url): what the instances share besides the store. */
  cluster: ClusterConfig | undefined;
  chains: Record<string, ChainConfig>;
  plans: Record<string, PlanConfig>;
  /** The keyless path: its rates, its batch size, and the methods it may not call (default none). */
  public: { rps_per_ip: number; max_batch: number; methods: MethodDeny };
  /** RU costs: `default` for allowed methods not in `methods`; built-in method costs apply unless overridden. */
  ru: {
    default: number;
    methods: Record<string, number>;
    notification_per_250_bytes: number;
    /** Beacon paths: `default` for listed paths without a cost, `per_event` per delivered event, `paths` by route template. */
    beacon: { default: number; per_event: number; paths: Record<string, number> };
  };
  websocket: {
    max_connections_per_key: number;
    max_connections_per_ip: number;
    max_subscriptions_per_connection: number;
    max_message_bytes: number;
    max_answer_bytes: number;
    max_buffered_bytes: number;
    idle_timeout_s: number;
    max_upstream_outage_s: number;
  };
  sse: { heartbeat_s: number; max_buffered_bytes: number; max_connections_per_key: number; max_connections_per_ip: number };
  cache: { max_bytes: number; hit_ru_factor: number };
  filters: { max_per_key: number; idle_timeout_s: number };
  ledger: { flush_interval_ms: number };
  usage: { keep_minutes_h: number; keep_hours_d: number };
  /** A separate listener for the management REST; undefined: served on the main listener. */
  management: { host: string; port: number } | undefined;
  /** Request rates of the management REST, wherever it is served (the `management` section's other keys). */
  management_limits: { rps_per_key: number; rps_per_ip: number };
  /** The log: its least level, and one line per request when `access` (a share `access_sample` of them). */
  log: { level: LogLevel; access: boolean; access_sample: number };
  /** The Prometheus listener; undefined when `metrics.enabled` is false. */
  metrics: { host: string; port: number; token: string | undefined } | undefined;
}

const SLUG = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;
const UPSTREAM_NAME = /^[A-Za-z0-9._:-]{1,64}$/;

/** An upstream's default name: the host and port of its URL (the scheme's port when it has none). */
function hostPort(url: string): string {
  const u = new URL(url);
  return `${u.hostname}:${u.port || (u.protocol === 'https:' ? '443' : '80')}`;
}

function readUpstream(raw: unknown, path: string, kind: 'evm' | 'beacon', errors: Errors): UpstreamConfig | undefined {
  const o = readObject(raw, path, ['name', 'url', 'ws', 'headers', 'max_connections', 'pipelining', 'methods', 'archive'], errors);
  if (!isObject(raw)) return undefined;
  const url = readUrl(o.url, `${path}.url`, ['http:', 'https:'], errors);
  const name = readString(o.name, `${path}.name`, undefined, errors);
  if (name !== undefined && !UPSTREAM_NAME.test(name))
    errors.push(`${path}.name: letters, digits and . _ : - only, 1 to 64 of them (it is a metric label)`);
  let ws: string | undefined;
  if (o.ws !== undefined) {
    if (kind === 'beacon') errors.push(`${path}.ws: beacon chains have no WebSocket upstream`);
    else ws = readUrl(o.ws, `${path}.ws`, ['ws:', 'wss:'], errors);
  }
  const headers = readStringMap(o.headers, `${path}.headers`, errors);
  const max_connections = readInt(o.max_connections, `${path}.max_connections`, DEFAULTS.upstream.max_connections, 1, 4096, errors);
  const pipelining = readInt(o.pipelining, `${path}.pipelining`, DEFAULTS.upstream.pipelining, 1, 64, errors);
  if (kind === 'beacon')
    for (const k of ['methods', 'archive'] as const) if (o[k] !== undefined) errors.push(`${path}.${k}: belongs to evm chains`);
  const methods = readMethodDeny(o.methods, `${path}.methods`, errors);
  const archive = readBool(o.archive, `${path}.archive`, DEFAULTS.upstream.archive, errors);
  return url === undefined ? undefined : { name: name ?? hostPort(url), url, ws, headers, max_connections, pipelining, methods, archive };
}

function readChain(slug: string, raw: unknown, errors: Errors): ChainConfig {
  const path = `chains.${slug}`;
  if (!SLUG.test(slug)) errors.push(`${path}: a slug is lowercase letters, digits and '-' (at most 63)`);
  if (RESERVED_SLUGS.has(slug)) errors.push(`${path}: '${slug}' is a path the gateway uses itself; pick another slug`);
  const o = readObject(
    raw,
    path,
    [
      'name',
      'kind',
      'chain_id',
      'timeout_s',
      'max_lag_blocks',
      'finality_depth',
      'max_logs_block_range',
      'methods',
      'ru',
      'state_history_blocks',
      'split_logs',
      'max_logs_answer_bytes',
      'answer_timeout_s',
      'upstreams',
    ],
    errors,
  );
  const kind = readEnum(o.kind, `${path}.kind`, DEFAULTS.chain.kind, ['evm', 'beacon'] as const, errors);
  let chain_id: number | undefined;
  if (kind === 'evm') {
    if (o.chain_id === undefined) errors.push(`${path}.chain_id: required for an evm chain`);
    else chain_id = readInt(o.chain_id, `${path}.chain_id`, 0, 1, Number.MAX_SAFE_INTEGER, errors);
  } else {
    for (const k of ['chain_id', 'methods', 'ru', 'state_history_blocks'] as const)
      if (o[k] !== undefined) errors.push(`${path}.${k}: belongs to evm chains; a beacon chain has none`);
  }
  const upstreams: UpstreamConfig[] = [];
  if (!Array.isArray(o.upstreams) || o.upstreams.length === 0) {
    errors.push(`${path}.upstreams: must list at least one upstream`);
  } else {
    o.upstreams.forEach((u, i) => {
      const up = readUpstream(u, `${path}.upstreams[${i}]`, kind, errors);
      if (up === undefined) return;
      const same = upstreams.findIndex((other) => other.name === up.name);
      if (same >= 0)
        errors.push(
          `${path}.upstreams[${i}].name: '${up.name}' already names upstreams[${same}]; give each a name of its own (logs and metrics tell them apart by it)`,
        );
      upstreams.push(up);
    });
  }
  const timeout_s = readInt(o.timeout_s, `${path}.timeout_s`, DEFAULTS.chain.timeout_s, 1, 3600, errors);
  const answer_timeout_s = readInt(o.answer_timeout_s, `${path}.answer_timeout_s`, ANSWER_TIMEOUT_FACTOR * timeout_s, 1, 86_400, errors);
  if (answer_timeout_s < timeout_s)
    errors.push(`${path}.answer_timeout_s: must be at least timeout_s (${timeout_s}), which an answer may take to start`);
  return {
    slug,
    name: readString(o.name, `${path}.name`, slug, errors) ?? slug,
    kind,
    chain_id,
    timeout_s,
    max_lag_blocks: readInt(o.max_lag_blocks, `${path}.max_lag_blocks`, DEFAULTS.chain.max_lag_blocks, 0, 1_000_000, errors),
    finality_depth: readInt(o.finality_depth, `${path}.finality_depth`, DEFAULTS.chain.finality_depth, 1, 1_000_000, errors),
    max_logs_block_range: readInt(
      o.max_logs_block_range,
      `${path}.max_logs_block_range`,
      DEFAULTS.chain.max_logs_block_range,
      1,
      100_000_000,
      errors,
    ),
    methods: readMethodRules(o.methods, `${path}.methods`, errors),
    ru: readChainRu(o.ru, `${path}.ru`, errors),
    state_history_blocks: readInt(
      o.state_history_blocks,
      `${path}.state_history_blocks`,
      DEFAULTS.chain.state_history_blocks,
      1,
      100_000_000,
      errors,
    ),
    split_logs: readBool(o.split_logs, `${path}.split_logs`, DEFAULTS.chain.split_logs, errors),
    max_logs_answer_bytes: readInt(
      o.max_logs_answer_bytes,
      `${path}.max_logs_answer_bytes`,
      DEFAULTS.chain.max_logs_answer_bytes,
      1,
      1 << 30,
      errors,
    ),
    answer_timeout_s,
    upstreams,
  };
}

function readServer(raw: unknown, chains: Record<string, ChainConfig>, errors: Errors): ServerConfig {
  const d = DEFAULTS.server;
  const o = readObject(
    raw,
    'server',
    [
      'host',
      'port',
      'default_chain',
      'public_base_url',
      'max_body_bytes',
      'max_batch',
      'cors_origins',
      'stop_timeout_s',
      'trust_proxy',
      'ipv6_prefix',
      'tls',
      'workers',
      'max_connections',
      'worker_max_heap_mb',
      'worker_stall_s',
      'worker_relay_max_bytes',
    ],
    errors,
  );
  const host = readString(o.host, 'server.host', d.host, errors) ?? d.host;
  const port = readInt(o.port, 'server.port', d.port, 0, 65535, errors);
  const slugs = Object.keys(chains);
  let default_chain = readString(o.default_chain, 'server.default_chain', undefined, errors);
  if (default_chain === undefined) {
    if (slugs.length === 1) default_chain = slugs[0];
    else if (slugs.length > 1) errors.push(`server.default_chain: required when more than one chain is configured (${slugs.join(', ')})`);
  } else if (slugs.length > 0 && !chains[default_chain]) {
    errors.push(`server.default_chain: '${default_chain}' is not a configured chain (${slugs.join(', ')})`);
  }
  let tls: ServerConfig['tls'];
  if (o.tls !== undefined && o.tls !== null) {
    const t = readObject(o.tls, 'server.tls', ['cert_file', 'key_file', 'passphrase'], errors);
    const cert_file = readString(t.cert_file, 'server.tls.cert_file', undefined, errors);
    const key_file = readString(t.key_file, 'server.tls.key_file', undefined, errors);
    if (cert_file === undefined) errors.push('server.tls.cert_file: required with server.tls');
    if (key_file === undefined) errors.push('server.tls.key_file: required with server.tls');
    const passphrase = readString(t.passphrase, 'server.tls.passphrase', undefined, errors);
    if (cert_file && key_file) tls = { cert_file, key_file, passphrase };
  }
  const scheme = tls ? 'https' : 'http';
  const shownHost = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host.includes(':') ? `[${host}]` : host;
  let public_base_url = `${scheme}://${shownHost}:${port}/{chain}`;
  if (o.public_base_url !== undefined) {
    const u = readUrl(o.public_base_url, 'server.public_base_url', ['http:', 'https:'], errors);
    // `{chain}` is not a valid host character, so check the raw text rather than the parsed URL.
    if (u !== undefined) public_base_url = u.replace(/\/+$/, '');
    if (u !== undefined && slugs.length > 1 && !u.includes('{chain}')) {
      errors.push('server.public_base_url: must contain {chain} when more than one chain is configured');
    }
  }
  return {
    host,
    port,
    default_chain: default_chain ?? '',
    public_base_url,
    max_body_bytes: readInt(o.max_body_bytes, 'server.max_body_bytes', d.max_body_bytes, 64, 1 << 30, errors),
    max_batch: readInt(o.max_batch, 'server.max_batch', d.max_batch, 1, 100_000, errors),
    cors_origins: readStringList(o.cors_origins, 'server.cors_origins', d.cors_origins, errors),
    stop_timeout_s: readInt(o.stop_timeout_s, 'server.stop_timeout_s', d.stop_timeout_s, 0, 3600, errors),
    trust_proxy: readBool(o.trust_proxy, 'server.trust_proxy', d.trust_proxy, errors),
    ipv6_prefix: readInt(o.ipv6_prefix, 'server.ipv6_prefix', d.ipv6_prefix, IPV6_PREFIX_MIN, IPV6_PREFIX_MAX, errors),
    tls,
    workers: readWorkers(o.workers, errors),
    max_connections: readMaxConnections(o.max_connections, d.max_connections, errors),
    worker_max_heap_mb: readInt(o.worker_max_heap_mb, 'server.worker_max_heap_mb', d.worker_max_heap_mb, 64, 1 << 20, errors),
    worker_stall_s: readInt(o.worker_stall_s, 'server.worker_stall_s', d.worker_stall_s, 1, 3600, errors),
    worker_relay_max_bytes: readInt(
      o.worker_relay_max_bytes,
      'server.worker_relay_max_bytes',
      d.worker_relay_max_bytes,
      65_536,
      1 << 30,
      errors,
    ),
  };
}

/** server.max_connections: an integer of at least 1, or 'auto' (the default: the open-files limit less a reserve). */
function readMaxConnections(v: unknown, fallback: number | 'auto', errors: Errors): number | 'auto' {
  if (v === undefined || v === null) return fallback;
  if (v === 'auto') return 'auto';
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 1 || v > 10_000_000) {
    errors.push(`server.max_connections: must be an integer from 1 to 10000000 or 'auto' (got ${JSON.stringify(v)})`);
    return fallback;
  }
  return v;
}

/** server.workers: an integer of at least 1, or 'auto' (the default: one per core the process may use). */
function readWorkers(v: unknown, errors: Errors): number | 'auto' {
  if (v === undefined || v === null || v === 'auto') return 'auto';
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 1 || v > MAX_WORKERS) {
    errors.push(`server.workers: must be an integer from 1 to ${MAX_WORKERS} or 'auto' (got ${JSON.stringify(v)})`);
    return 'auto';
  }
  return v;
}

/** The `plans` section (the operator commands read it alone, with `storage`: config/load.ts). */
export function readPlans(raw: unknown, errors: Errors): Record<string, PlanConfig> {
  if (raw === undefined || raw === null) {
    return Object.fromEntries(Object.entries(DEFAULTS.plans).map(([name, p]) => [name, { name, ...p, methods: { deny: [] } }]));
  }
  if (!isObject(raw) || Object.keys(raw).length === 0) {
    errors.push('plans: must be a mapping of at least one plan name to its limits');
    return {};
  }
  const plans: Record<string, PlanConfig> = {};
  for (const [name, p] of Object.entries(raw)) {
    const path = `plans.${name}`;
    if (!/^[a-z0-9][a-z0-9_-]{0,31}$/.test(name)) errors.push(`${path}: a plan name is lowercase letters, digits, '_' and '-'`);
    const o = readObject(p, path, ['rps', 'ru_per_second', 'max_endpoints', 'methods'], errors);
    if (o.rps === undefined) errors.push(`${path}.rps: required`);
    plans[name] = {
      name,
      rps: readInt(o.rps, `${path}.rps`, 1, 1, 1_000_000_000, errors),
      ru_per_second:
        o.ru_per_second === undefined ? undefined : readInt(o.ru_per_second, `${path}.ru_per_second`, 1, 1, 1_000_000_000, errors),
      max_endpoints: readInt(o.max_endpoints, `${path}.max_endpoints`, 10, 0, 1_000_000, errors),
      methods: readMethodDeny(o.methods, `${path}.methods`, errors),
    };
  }
  return plans;
}

function readCostMap(v: unknown, path: string, what: string, errors: Errors): Record<string, number> {
  const costs: Record<string, number> = {};
  if (v === undefined || v === null) return costs;
  if (!isObject(v)) errors.push(`${path}: must be a mapping of ${what} to RU`);
  else for (const [k, c] of Object.entries(v)) costs[k] = readInt(c, `${path}.${k}`, 0, 0, 1_000_000, errors);
  return costs;
}

function readRu(raw: unknown, errors: Errors): Config['ru'] {
  const d = DEFAULTS.ru;
  const o = readObject(raw, 'ru', ['default', 'methods', 'notification_per_250_bytes', 'beacon'], errors);
  const b = readObject(o.beacon, 'ru.beacon', ['default', 'per_event', 'paths'], errors);
  const paths = readCostMap(b.paths, 'ru.beacon.paths', 'Beacon route templates', errors);
  for (const p of unknownBeaconCostPaths(paths))
    errors.push(
      `ru.beacon.paths.${p}: not a Beacon route the gateway serves (write it as its template, e.g. /eth/v2/beacon/blocks/{block_id})`,
    );
  const methods = readMethodCosts(o.methods, 'ru.methods', errors);
  return {
    default: readInt(o.default, 'ru.default', d.default, 0, 1_000_000, errors),
    methods,
    notification_per_250_bytes: readInt(
      o.notification_per_250_bytes,
      'ru.notification_per_250_bytes',
      d.notification_per_250_bytes,
      0,
      1_000_000,
      errors,
    ),
    beacon: {
      default: readInt(b.default, 'ru.beacon.default', d.beacon_default, 0, 1_000_000, errors),
      per_event: readInt(b.per_event, 'ru.beacon.per_event', d.beacon_per_event, 0, 1_000_000, errors),
      paths,
    },
  };
}

/** The streaming sections: WebSocket and event-stream limits, the response cache, the filters. */
function readStreaming(top: Record<string, unknown>, errors: Errors): Pick<Config, 'websocket' | 'sse' | 'cache' | 'filters'> {
  const w = DEFAULTS.websocket;
  const ws = readObject(top.websocket, 'websocket', Object.keys(w), errors);
  const s = DEFAULTS.sse;
  const sse = readObject(top.sse, 'sse', Object.keys(s), errors);
  const c = readObject(top.cache, 'cache', ['max_bytes', 'hit_ru_factor'], errors);
  const f = readObject(top.filters, 'filters', ['max_per_key', 'idle_timeout_s'], errors);
  const big = 1 << 30;
  return {
    websocket: {
      max_connections_per_key: readInt(
        ws.max_connections_per_key,
        'websocket.max_connections_per_key',
        w.max_connections_per_key,
        1,
        1_000_000,
        errors,
      ),
      max_connections_per_ip: readInt(
        ws.max_connections_per_ip,
        'websocket.max_connections_per_ip',
        w.max_connections_per_ip,
        1,
        1_000_000,
        errors,
      ),
      max_subscriptions_per_connection: readInt(
        ws.max_subscriptions_per_connection,
        'websocket.max_subscriptions_per_connection',
        w.max_subscriptions_per_connection,
        1,
        100_000,
        errors,
      ),
      max_message_bytes: readInt(ws.max_message_bytes, 'websocket.max_message_bytes', w.max_message_bytes, 64, big, errors),
      max_answer_bytes: readInt(ws.max_answer_bytes, 'websocket.max_answer_bytes', w.max_answer_bytes, 1024, big, errors),
      max_buffered_bytes: readInt(ws.max_buffered_bytes, 'websocket.max_buffered_bytes', w.max_buffered_bytes, 1024, big, errors),
      idle_timeout_s: readInt(ws.idle_timeout_s, 'websocket.idle_timeout_s', w.idle_timeout_s, 8, 960, errors),
      max_upstream_outage_s: readInt(
        ws.max_upstream_outage_s,
        'websocket.max_upstream_outage_s',
        w.max_upstream_outage_s,
        1,
        86_400,
        errors,
      ),
    },
    sse: {
      heartbeat_s: readInt(sse.heartbeat_s, 'sse.heartbeat_s', s.heartbeat_s, 1, 3600, errors),
      max_buffered_bytes: readInt(sse.max_buffered_bytes, 'sse.max_buffered_bytes', s.max_buffered_bytes, 1024, big, errors),
      max_connections_per_key: readInt(
        sse.max_connections_per_key,
        'sse.max_connections_per_key',
        s.max_connections_per_key,
        1,
        1_000_000,
        errors,
      ),
      max_connections_per_ip: readInt(
        sse.max_connections_per_ip,
        'sse.max_connections_per_ip',
        s.max_connections_per_ip,
        1,
        1_000_000,
        errors,
      ),
    },
    cache: {
      max_bytes: readInt(c.max_bytes, 'cache.max_bytes', DEFAULTS.cache.max_bytes, 0, 64 * big, errors),
      hit_ru_factor: readNumber(c.hit_ru_factor, 'cache.hit_ru_factor', DEFAULTS.cache.hit_ru_factor, 0, 1, errors),
    },
    filters: {
      max_per_key: readInt(f.max_per_key, 'filters.max_per_key', DEFAULTS.filters.max_per_key, 1, 100_000, errors),
      idle_timeout_s: readInt(f.idle_timeout_s, 'filters.idle_timeout_s', DEFAULTS.filters.idle_timeout_s, 1, 86_400, errors),
    },
  };
}

function readTenancy(
  top: Record<string, unknown>,
  errors: Errors,
): Pick<Config, 'plans' | 'public' | 'ru' | 'ledger' | 'usage' | 'management' | 'management_limits'> {
  const pub = readObject(top.public, 'public', ['rps_per_ip', 'max_batch', 'methods'], errors);
  const ledger = readObject(top.ledger, 'ledger', ['flush_interval_ms'], errors);
  const usage = readObject(top.usage, 'usage', ['keep_minutes_h', 'keep_hours_d'], errors);
  const m = readObject(top.management, 'management', ['host', 'port', 'rps_per_key', 'rps_per_ip'], errors);
  // Its own listener only when a port is given: the limits alone leave the API on the main listener.
  let management: Config['management'];
  if (m.port !== undefined) {
    management = {
      host: readString(m.host, 'management.host', DEFAULTS.server.host, errors) ?? DEFAULTS.server.host,
      port: readInt(m.port, 'management.port', 0, 0, 65535, errors),
    };
  } else if (m.host !== undefined) {
    errors.push('management.host: needs management.port (a listener of its own)');
  }
  const management_limits = {
    rps_per_key: readInt(m.rps_per_key, 'management.rps_per_key', DEFAULTS.management.rps_per_key, 1, 1_000_000, errors),
    rps_per_ip: readInt(m.rps_per_ip, 'management.rps_per_ip', DEFAULTS.management.rps_per_ip, 1, 1_000_000, errors),
  };
  return {
    plans: readPlans(top.plans, errors),
    public: {
      rps_per_ip: readInt(pub.rps_per_ip, 'public.rps_per_ip', DEFAULTS.public.rps_per_ip, 1, 1_000_000_000, errors),
      max_batch: readInt(pub.max_batch, 'public.max_batch', DEFAULTS.public.max_batch, 1, 100_000, errors),
      methods: readMethodDeny(pub.methods, 'public.methods', errors, DEFAULTS.public.methods.deny),
    },
    ru: readRu(top.ru, errors),
    ledger: {
      flush_interval_ms: readInt(
        ledger.flush_interval_ms,
        'ledger.flush_interval_ms',
        DEFAULTS.ledger.flush_interval_ms,
        10,
        60_000,
        errors,
      ),
    },
    usage: {
      keep_minutes_h: readInt(usage.keep_minutes_h, 'usage.keep_minutes_h', DEFAULTS.usage.keep_minutes_h, 1, 24 * 365, errors),
      keep_hours_d: readInt(usage.keep_hours_d, 'usage.keep_hours_d', DEFAULTS.usage.keep_hours_d, 1, 3650, errors),
    },
    management,
    management_limits,
  };
}

/** Each evm chain has its own chain_id: two slugs answering eth_chainId alike would be one network twice. */
function checkChainIds(chains: Record<string, ChainConfig>, errors: Errors): void {
  const firstWith = new Map<number, string>();
  for (const c of Object.values(chains)) {
    // Below 1: refused already as out of range, not a second use.
    if (c.chain_id === undefined || c.chain_id < 1) continue;
    const first = firstWith.get(c.chain_id);
    if (first === undefined) firstWith.set(c.chain_id, c.slug);
    else errors.push(`chains.${c.slug}.chain_id: ${c.chain_id} is already the chain_id of chains.${first}; each chain needs its own`);
  }
}

/** Addresses that take every interface, so they collide with any other host on the same port. */
const WILDCARD_HOSTS = new Set(['0.0.0.0', '::']);

/**
 * The management listener needs a port of its own. Port 0 (any free port) never collides; two distinct
 * specific addresses may share a port, a wildcard address shares it with nothing.
 */
function checkManagementPort(server: ServerConfig, management: Config['management'], errors: Errors): void {
  if (management === undefined || management.port === 0 || management.port !== server.port) return;
  const overlap = management.host === server.host || WILDCARD_HOSTS.has(management.host) || WILDCARD_HOSTS.has(server.host);
  if (overlap)
    errors.push(
      `management.port: ${management.port} is also server.port on ${server.host}; the management listener needs a port of its own`,
    );
}

/** The log and the metrics listener. */
function readOperations(top: Record<string, unknown>, errors: Errors): Pick<Config, 'log' | 'metrics'> {
  const l = readObject(top.log, 'log', ['level', 'access', 'access_sample'], errors);
  const m = readObject(top.metrics, 'metrics', ['enabled', 'host', 'port', 'token'], errors);
  const d = DEFAULTS.metrics;
  const enabled = readBool(m.enabled, 'metrics.enabled', true, errors);
  const token = readString(m.token, 'metrics.token', undefined, errors);
  if (token !== undefined && token.length < 16) errors.push('metrics.token: at least 16 characters (it guards the exposition)');
  const metrics = {
    host: readString(m.host, 'metrics.host', d.host, errors) ?? d.host,
    port: readInt(m.port, 'metrics.port', d.port, 0, 65535, errors),
    token,
  };
  return {
    log: {
      level: readEnum(l.level, 'log.level', DEFAULTS.log.level, LOG_LEVELS, errors),
      access: readBool(l.access, 'log.access', DEFAULTS.log.access, errors),
      access_sample: readNumber(l.access_sample, 'log.access_sample', DEFAULTS.log.access_sample, 0, 1, errors),
    },
    metrics: enabled ? metrics : undefined,
  };
}

/** The metrics listener needs a port of its own too (0, any free port, never collides). */
function checkMetricsPort(server: ServerConfig, management: Config['management'], metrics: Config['metrics'], errors: Errors): void {
  if (metrics === undefined || metrics.port === 0) return;
  const taken = [
    { name: 'server.port', host: server.host, port: server.port },
    ...(management ? [{ name: 'management.port', host: management.host, port: management.port }] : []),
  ];
  for (const other of taken) {
    if (other.port !== metrics.port) continue;
    if (metrics.host === other.host || WILDCARD_HOSTS.has(metrics.host) || WILDCARD_HOSTS.has(other.host))
      errors.push(`metrics.port: ${metrics.port} is also ${other.name} on ${other.host}; the metrics listener needs a port of its own`);
  }
}

/** Validates a parsed YAML document; returns the config or every error found, each with its key path. */
export function validateConfig(raw: unknown): { ok: true; config: Config } | { ok: false; errors: string[] } {
  const errors: Errors = [];
  const top = readObject(
    raw,
    '',
    [
      'server',
      'storage',
      'cluster',
      'chains',
      'plans',
      'public',
      'ru',
      'ledger',
      'usage',
      'management',
      'websocket',
      'sse',
      'cache',
      'filters',
      'log',
      'metrics',
    ],
    errors,
  );
  if (raw !== undefined && raw !== null && !isObject(raw)) return { ok: false, errors: ['(top level): must be a mapping'] };
  const chains: Record<string, ChainConfig> = {};
  if (!isObject(top.chains) || Object.keys(top.chains).length === 0) {
    errors.push('chains: must configure at least one chain');
  } else {
    for (const [slug, c] of Object.entries(top.chains)) chains[slug] = readChain(slug, c, errors);
  }
  const server = readServer(top.server, chains, errors);
  const { storage, cluster } = readStorage(top, server.port, errors);
  if (cluster !== undefined && typeof server.workers === 'number' && server.workers > 1)
    errors.push(
      'server.workers: an instance of a fleet (storage.url) runs one thread: run one instance per core behind the load balancer instead',
    );
  const tenancy = readTenancy(top, errors);
  const streaming = readStreaming(top, errors);
  const operations = readOperations(top, errors);
  checkChainIds(chains, errors);
  // Spending stops a flush interval before the last renewal may have expired: a TTL within two intervals leaves no time to spend.
  if (cluster !== undefined && cluster.reservation_ttl_s * 1000 < 2 * tenancy.ledger.flush_interval_ms)
    errors.push(
      `cluster.reservation_ttl_s: at least twice ledger.flush_interval_ms (${tenancy.ledger.flush_interval_ms} ms), which renews the reservations`,
    );
  checkManagementPort(server, tenancy.management, errors);
  checkMetricsPort(server, tenancy.management, operations.metrics, errors);
  return errors.length > 0
    ? { ok: false, errors }
    : { ok: true, config: { server, storage, cluster, chains, ...tenancy, ...streaming, ...operations } };
}
