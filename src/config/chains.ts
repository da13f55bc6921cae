/**
 * The `chains` section: one entry per network, keyed by its slug, each with its upstream nodes. The
 * schemas declare every key once; the readers below add what depends on other keys (the kind, the slug,
 * the URL) and the rules across entries.
 */
import { type Static, Type } from './typebox.js';
import { type Errors, isObject, type Raw } from './checks.js';
import { bool, int, mapOf, Missing, oneOf, optionalInt, optionalText, Problem, section, unlessNoString, url } from './keys.js';
import { checkConsistency, ConsistencySchema } from './consistency.js';
import { checkFailover, FailoverSchema } from './failover.js';
import { ChainRuSchema, checkMethodCosts, checkMethodRules, checkPatterns, MethodRulesSchema, methodDeny } from './method-policy.js';

/**
 * chains.<slug>.answer_timeout_s when absent, in multiples of timeout_s (4 × 30 s = 120 s): a 64 MiB eth_getLogs
 * answer that starts within timeout_s still has three times as long to arrive, at 0.7 MiB/s or more.
 */
export const ANSWER_TIMEOUT_FACTOR = 4;

/** Path segments the gateway's own routes use: a chain slug may not be one of them. */
export const RESERVED_SLUGS: ReadonlySet<string> = new Set(['v1', 'api', 'dashboard', 'healthz', 'readyz', 'metrics']);

const UPSTREAMS_PROBLEM = 'must list at least one upstream';

export const UpstreamSchema = section(
  {
    name: optionalText(
      "How logs and metrics name the node (never its URL, whose path often holds a provider's key); default host:port of url; unique within its chain.",
      {
        pattern: '^[A-Za-z0-9._:-]{1,64}$',
        [Problem]: unlessNoString('letters, digits and . _ : - only, 1 to 64 of them (it is a metric label)'),
      },
    ),
    url: url('http-url', "http(s) URL of the node's JSON-RPC or Beacon API; may carry credentials, which are never logged."),
    ws: Type.Optional(url('ws-url', 'ws(s) URL for subscriptions (evm chains only).')),
    headers: mapOf(
      Type.Union([Type.String(), Type.Number()], { [Problem]: 'must be a string' }),
      'Headers sent with every upstream request (e.g. Authorization).',
      {
        default: {},
        [Problem]: 'must be a mapping of header names to strings',
      },
    ),
    max_connections: int(1, 4096, 64, 'Keep-alive sockets to this node at most.'),
    pipelining: int(
      1,
      64,
      8,
      'Requests in flight per socket (HTTP/1.1 pipelining); 1 turns it off, for a node or balancer that mishandles it.',
    ),
    methods: Type.Union([methodDeny([], 'Methods this node does not serve: no call of them is sent to it.'), Type.Literal('auto')], {
      default: { deny: [] },
      description:
        "Methods this node does not serve, { deny: [...] } (no call of them is sent to it), or 'auto': the gateway finds out which of the debug_, trace_ and txpool_ groups it answers (evm only); default none denied.",
      [Problem]: (v: unknown) => {
        const unknown = isObject(v) ? Object.keys(v).filter((k) => k !== 'deny') : [];
        return unknown.length > 0
          ? `unknown key ${unknown.map((k) => `'${k}'`).join(', ')} (known: deny; or the word 'auto')`
          : "must be { deny: [patterns] } or 'auto'";
      },
    }),
    archive: Type.Union([Type.Boolean(), Type.Literal('auto')], {
      default: false,
      description:
        "The node keeps the state of every block: state reads about old blocks go to it first; 'auto': the gateway finds out (evm only); default false, a full node.",
      [Problem]: "must be true, false or 'auto'",
    }),
    tier: int(
      0,
      9,
      0,
      'Node tier: a call goes to a higher tier only while no node of a lower tier can take it (out of rotation, behind, at its budget) or after an attempt there failed; 0, the default, is the first.',
    ),
    rps: optionalInt(
      1,
      100_000,
      'Calls per second the gateway sends this node at most (a sliding second; split between worker threads); default none: no limit.',
    ),
    max_in_flight: optionalInt(
      1,
      100_000,
      'Calls the gateway has in flight to this node at most (split between worker threads); default none: no limit.',
    ),
  },
  'One upstream node of a chain.',
);

/** One upstream node of a chain, as the runtime reads it: `archive` and `methods` as booleans and lists whatever was
 *  configured, 'auto' turned into the flags below (its starting values: not archive, nothing denied). */
export type UpstreamConfig = Omit<Static<typeof UpstreamSchema>, 'name' | 'headers' | 'archive' | 'methods'> & {
  /** As configured, or host:port of `url`. */
  name: string;
  /** Header values as strings (a YAML number is taken as its text). */
  headers: Record<string, string>;
  /** As configured; false with `archive: auto` until the gateway finds out (chain/capabilities.ts). */
  archive: boolean;
  /** `archive: auto`: whether the node keeps old state is found out, not declared. */
  archive_auto: boolean;
  /** As configured; none with `methods: auto` until the gateway finds out. */
  methods: { deny: string[] };
  /** `methods: auto`: which method groups the node answers is found out, not declared. */
  methods_auto: boolean;
};

export const ChainSchema = section(
  {
    name: optionalText('Display name; default the slug.'),
    kind: oneOf(['evm', 'beacon'] as const, 'evm', 'evm (JSON-RPC) or beacon (Beacon REST).'),
    chain_id: optionalInt(
      1,
      Number.MAX_SAFE_INTEGER,
      'EIP-155 chain id (required for evm, refused for beacon); eth_chainId is answered from it.',
    ),
    timeout_s: int(
      1,
      3600,
      30,
      'Seconds for one upstream call (until its answer starts, and between chunks), and for a new subscription or event stream to get its upstream one.',
    ),
    max_lag_blocks: int(0, 1_000_000, 5, 'Blocks behind the best healthy head before an upstream leaves the rotation.'),
    finality_depth: int(1, 1_000_000, 64, 'Blocks below the head treated as final (answers about them may be cached).'),
    max_logs_block_range: int(1, 100_000_000, 10_000, 'eth_getLogs / eth_newFilter: most blocks in one range.'),
    methods: MethodRulesSchema,
    ru: ChainRuSchema,
    state_history_blocks: int(
      1,
      100_000_000,
      128,
      'Blocks below the head whose state every node keeps (geth: 128); a state read about an older block goes to an archive node (evm only).',
    ),
    split_logs: bool(false, 'A wider eth_getLogs is split into windows of max_logs_block_range, fetched and merged.'),
    max_logs_answer_bytes: int(
      1,
      1 << 30,
      67_108_864,
      'Bytes a split eth_getLogs answer may hold (64 MiB); past it the call is abandoned with an error naming this.',
    ),
    answer_timeout_s: optionalInt(
      1,
      86_400,
      `Seconds for one upstream answer from start to end (a node dripping bytes holds a call no longer); at least timeout_s; default ${ANSWER_TIMEOUT_FACTOR} × timeout_s.`,
    ),
    consistency: ConsistencySchema,
    failover: FailoverSchema,
    beacon: optionalText(
      "The slug of the beacon chain whose finality checkpoints decide this chain's safe and finalized blocks (evm only); default none: the nodes' own.",
    ),
    upstreams: Type.Array(UpstreamSchema, {
      minItems: 1,
      description: 'The nodes serving the chain.',
      [Problem]: UPSTREAMS_PROBLEM,
      [Missing]: UPSTREAMS_PROBLEM,
    }),
  },
  'One network.',
);

/** One configured network as the runtime reads it. */
export type ChainConfig = Omit<Static<typeof ChainSchema>, 'name' | 'upstreams' | 'answer_timeout_s'> & {
  /** The chain's slug: the config key, the Host label and the path prefix. */
  slug: string;
  /** Display name; the slug when not configured. */
  name: string;
  /** As configured, or ANSWER_TIMEOUT_FACTOR × timeout_s. */
  answer_timeout_s: number;
  upstreams: UpstreamConfig[];
};

export const ChainsSchema = mapOf(ChainSchema, 'One entry per network; the key is its slug.', {
  minProperties: 1,
  [Problem]: 'must configure at least one chain',
  [Missing]: 'must configure at least one chain',
});

const SLUG = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** An upstream's default name: the host and port of its URL (the scheme's port when it has none). */
function hostPort(url: string): string {
  const u = new URL(url);
  return `${u.hostname}:${u.port || (u.protocol === 'https:' ? '443' : '80')}`;
}

/** Header names a request may carry, and values without line breaks (which would split the request). */
function readHeaders(headers: Record<string, string | number>, path: string, errors: Errors): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, val] of Object.entries(headers)) {
    if (!HEADER_NAME.test(k)) errors.push(`${path}.${k}: not a valid header name`);
    else if (/[\r\n]/.test(String(val))) errors.push(`${path}.${k}: may not contain a line break`);
    else out[k] = String(val);
  }
  return out;
}

type UpstreamValue = Static<typeof UpstreamSchema>;

/** An upstream as read; undefined when its URL is wrong (already reported). */
function readUpstream(u: UpstreamValue | undefined, given: Raw, path: string, kind: string, errors: Errors): UpstreamConfig | undefined {
  if (!isObject(u)) return undefined;
  if (kind === 'beacon') {
    if (given.ws !== undefined) errors.push(`${path}.ws: beacon chains have no WebSocket upstream`);
    for (const k of ['methods', 'archive'] as const) if (given[k] !== undefined) errors.push(`${path}.${k}: belongs to evm chains`);
  }
  const headers = readHeaders(u.headers, `${path}.headers`, errors);
  // 'auto' never goes further than here: the runtime reads booleans and lists, and the flags (capabilities.ts).
  const methodsAuto = u.methods === 'auto';
  const deny = u.methods === 'auto' ? [] : [...(u.methods.deny ?? [])];
  // Read from what was given: a section refused for another key (a union is refused whole) still has its patterns checked.
  const givenDeny = isObject(given.methods) && Array.isArray(given.methods.deny) ? given.methods.deny : deny;
  checkPatterns(
    givenDeny.filter((p): p is string => typeof p === 'string'),
    `${path}.methods.deny`,
    errors,
  );
  if (u.url === undefined) return undefined;
  return {
    ...u,
    name: u.name ?? hostPort(u.url),
    ws: kind === 'beacon' ? undefined : u.ws,
    headers,
    archive: u.archive === true,
    archive_auto: u.archive === 'auto',
    methods: { deny },
    methods_auto: methodsAuto,
  };
}

/** Each upstream by its name, which logs and metrics tell them apart by. */
function readUpstreams(c: Static<typeof ChainSchema>, given: Raw, path: string, errors: Errors): UpstreamConfig[] {
  const upstreams: UpstreamConfig[] = [];
  const givenList = Array.isArray(given.upstreams) ? given.upstreams : [];
  (c.upstreams ?? []).forEach((u, i) => {
    const g = givenList[i];
    const up = readUpstream(u, isObject(g) ? g : {}, `${path}.upstreams[${i}]`, c.kind, errors);
    if (up === undefined) return;
    const same = upstreams.findIndex((other) => other.name === up.name);
    if (same >= 0)
      errors.push(
        `${path}.upstreams[${i}].name: '${up.name}' already names upstreams[${same}]; give each a name of its own (logs and metrics tell them apart by it)`,
      );
    upstreams.push(up);
  });
  return upstreams;
}

/** One chain: its slug, its kind's keys, its upstreams and its timeouts. */
function readChain(slug: string, c: Static<typeof ChainSchema>, given: Raw, errors: Errors): ChainConfig {
  const path = `chains.${slug}`;
  if (!SLUG.test(slug)) errors.push(`${path}: a slug is lowercase letters, digits and '-' (at most 63)`);
  if (RESERVED_SLUGS.has(slug)) errors.push(`${path}: '${slug}' is a path the gateway uses itself; pick another slug`);
  if (c.kind === 'evm') {
    if (given.chain_id === undefined) errors.push(`${path}.chain_id: required for an evm chain`);
  } else {
    for (const k of ['chain_id', 'methods', 'ru', 'state_history_blocks', 'consistency', 'beacon'] as const)
      if (given[k] !== undefined) errors.push(`${path}.${k}: belongs to evm chains; a beacon chain has none`);
  }
  checkMethodRules(c.methods, `${path}.methods`, errors);
  checkMethodCosts(c.ru.methods, `${path}.ru.methods`, errors);
  const upstreams = readUpstreams(c, given, path, errors);
  checkConsistency(c.consistency, upstreams.length, `${path}.consistency`, errors);
  const answer_timeout_s = c.answer_timeout_s ?? ANSWER_TIMEOUT_FACTOR * c.timeout_s;
  if (answer_timeout_s < c.timeout_s)
    errors.push(`${path}.answer_timeout_s: must be at least timeout_s (${c.timeout_s}), which an answer may take to start`);
  checkFailover(c.failover, c.timeout_s, answer_timeout_s, `${path}.failover`, errors);
  return { slug, ...c, name: c.name ?? slug, chain_id: c.kind === 'evm' ? c.chain_id : undefined, answer_timeout_s, upstreams };
}

/** Each evm chain has its own chain_id: two slugs answering eth_chainId alike would be one network twice. */
export function checkChainIds(chains: Record<string, ChainConfig>, errors: Errors): void {
  const firstWith = new Map<number, string>();
  for (const c of Object.values(chains)) {
    if (c.chain_id === undefined) continue;
    const first = firstWith.get(c.chain_id);
    if (first === undefined) firstWith.set(c.chain_id, c.slug);
    else errors.push(`chains.${c.slug}.chain_id: ${c.chain_id} is already the chain_id of chains.${first}; each chain needs its own`);
  }
}

/** A chain's `beacon` names a beacon chain configured beside it. */
export function checkBeaconLinks(chains: Record<string, ChainConfig>, errors: Errors): void {
  for (const c of Object.values(chains)) {
    if (c.beacon === undefined) continue;
    const linked = chains[c.beacon];
    if (linked === undefined) errors.push(`chains.${c.slug}.beacon: no chain '${c.beacon}' is configured`);
    else if (linked.kind !== 'beacon') errors.push(`chains.${c.slug}.beacon: chains.${c.beacon} is not a beacon chain (kind: beacon)`);
  }
}

/** Every chain as read, in the order written. */
export function readChains(chains: Static<typeof ChainsSchema> | undefined, given: unknown, errors: Errors): Record<string, ChainConfig> {
  const out: Record<string, ChainConfig> = {};
  const raw = isObject(given) ? given : {};
  for (const [slug, c] of Object.entries(chains ?? {})) {
    const g = raw[slug];
    if (isObject(c)) out[slug] = readChain(slug, c, isObject(g) ? g : {}, errors);
  }
  return out;
}
