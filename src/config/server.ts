/**
 * The `server` section: the main listener, its limits and its worker threads. The schema declares every
 * key once; readServer adds what depends on other keys (the default chain, the public base URL).
 */
import { type Static, Type } from './typebox.js';
import type { Errors } from './checks.js';
import type { ChainConfig } from './chains.js';
import { bool, int, Missing, optionalText, Problem, section, stringList, text, url } from './keys.js';
import { IPV6_PREFIX_MAX, IPV6_PREFIX_MIN } from '../limits/address-key.js';

/** More worker threads than this is a typo, not a machine. */
export const MAX_WORKERS = 1024;

/** An integer from 1 to `max`, or 'auto' (the default). */
function countOrAuto(max: number, description: string) {
  return Type.Union([Type.Integer({ minimum: 1, maximum: max }), Type.Literal('auto')], {
    default: 'auto',
    description,
    [Problem]: (v: unknown) => `must be an integer from 1 to ${max} or 'auto' (got ${JSON.stringify(v)})`,
  });
}

const TlsSchema = section(
  {
    cert_file: Type.String({ minLength: 1, description: 'The certificate chain (PEM).', [Missing]: 'required with server.tls' }),
    key_file: Type.String({ minLength: 1, description: 'The private key (PEM).', [Missing]: 'required with server.tls' }),
    passphrase: optionalText('Opens an encrypted key.'),
  },
  'Serve HTTPS (and WSS) directly; absent: plain HTTP, for use behind a TLS proxy.',
  { default: undefined },
);

export const ServerSchema = section(
  {
    host: text('127.0.0.1', 'Listen address: loopback until the operator says otherwise.'),
    port: int(0, 65535, 8080, 'Listen port.'),
    default_chain: optionalText('Chain when neither the Host label nor the path names one; default the only chain; required with several.'),
    public_base_url: Type.Optional(
      url('http-url', 'Base of URLs shown to users; {chain} is replaced by the slug; default http(s)://host:port/{chain}.'),
    ),
    max_body_bytes: int(64, 1 << 30, 1_048_576, 'Bytes of one HTTP request body at most (413 above it).'),
    max_batch: int(1, 100_000, 1000, 'Items in one JSON-RPC batch at most (413 above it).'),
    cors_origins: stringList(['*'], 'Origins browsers may call from; "*" allows all.'),
    stop_timeout_s: int(0, 3600, 10, 'Seconds in-flight requests get to finish on SIGTERM.'),
    trust_proxy: bool(false, 'true: the client IP is the last hop of X-Forwarded-For.'),
    ipv6_prefix: int(
      IPV6_PREFIX_MIN,
      IPV6_PREFIX_MAX,
      64,
      "Bits of an IPv6 client's address its per-IP limits count by (one subscriber's /64); IPv4 counts per address.",
    ),
    tls: Type.Optional(TlsSchema),
    workers: countOrAuto(MAX_WORKERS, "Worker threads serving connections on the one port: 'auto' is one per core."),
    max_connections: countOrAuto(
      10_000_000,
      "Client connections at once (WebSockets and event streams held, plain HTTP refused past it): 'auto' is the open-files limit less a reserve, read at start.",
    ),
    worker_max_heap_mb: int(64, 1 << 20, 1024, 'MiB of JS heap a worker thread may use: past it, the worker is replaced.'),
    worker_stall_s: int(1, 3600, 5, 'Seconds a worker thread may go without a heartbeat (or an answer) before it is ended and replaced.'),
    worker_relay_max_bytes: int(
      65_536,
      1 << 30,
      67_108_864,
      "Bytes the main thread queues for one worker (notifications, event frames) before it drops that worker's subscribers (64 MiB).",
    ),
  },
  'The main listener.',
);

/** The `server` section as the runtime reads it. */
export type ServerConfig = Omit<Static<typeof ServerSchema>, 'default_chain' | 'public_base_url' | 'tls'> & {
  /** The chain named by neither the Host label nor the path; '' only when no chain is configured. */
  default_chain: string;
  /** As configured (no trailing '/'), or derived from host and port. */
  public_base_url: string;
  tls: Static<typeof TlsSchema> | undefined;
};

/** The default chain: required to be named when there are several. */
function readDefaultChain(named: string | undefined, chains: Record<string, ChainConfig>, errors: Errors): string {
  const slugs = Object.keys(chains);
  if (named === undefined) {
    if (slugs.length === 1) return slugs[0] ?? '';
    if (slugs.length > 1) errors.push(`server.default_chain: required when more than one chain is configured (${slugs.join(', ')})`);
    return '';
  }
  if (slugs.length > 0 && !chains[named]) errors.push(`server.default_chain: '${named}' is not a configured chain (${slugs.join(', ')})`);
  return named;
}

/** The `server` section, checked already against its schema, with what depends on other keys. */
export function readServer(s: Static<typeof ServerSchema>, chains: Record<string, ChainConfig>, errors: Errors): ServerConfig {
  const default_chain = readDefaultChain(s.default_chain, chains, errors);
  const tls = s.tls?.cert_file && s.tls.key_file ? s.tls : undefined;
  const scheme = tls ? 'https' : 'http';
  const shownHost = s.host === '0.0.0.0' || s.host === '::' ? '127.0.0.1' : s.host.includes(':') ? `[${s.host}]` : s.host;
  let public_base_url = `${scheme}://${shownHost}:${s.port}/{chain}`;
  if (s.public_base_url !== undefined) {
    // `{chain}` is not a valid host character, so check the raw text rather than the parsed URL.
    public_base_url = s.public_base_url.replace(/\/+$/, '');
    if (Object.keys(chains).length > 1 && !s.public_base_url.includes('{chain}'))
      errors.push('server.public_base_url: must contain {chain} when more than one chain is configured');
  }
  return { ...s, default_chain, public_base_url, tls };
}
