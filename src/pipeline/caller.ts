import type { ErrorCode } from '../errors.js';
import type { GatewayContext } from '../server/context.js';
import type { HttpRequest, HttpResponse } from '../server/uws.js';
import type { ChainRuntime } from '../upstreams/chain.js';
import type { Caller } from './admission.js';

/** The client's IP: the socket's peer, or with `server.trust_proxy` the last hop of X-Forwarded-For. */
export function clientIp(res: HttpResponse, req: HttpRequest, trustProxy: boolean): string {
  if (trustProxy) {
    const xff = req.getHeader('x-forwarded-for');
    if (xff !== '') {
      const last = xff.slice(xff.lastIndexOf(',') + 1).trim();
      if (last !== '') return last;
    }
  }
  return peerAddress(res);
}

/** IPv4 peers seen lately, as uWS writes them, by their address as a number (+ 2^32 when written as IPv6). */
const ipv4Text = new Map<number, string>();
const IPV4_TEXT_MAX = 4096;
const V4_MAPPED = 2 ** 32;

/**
 * The peer's address as uWS writes it. The text of an IPv4 peer (every request of the public path asks)
 * is kept, so a request reads four bytes instead of formatting and decoding the address again, and the
 * limiter is handed the same string, whose hash V8 has already worked out.
 */
function peerAddress(res: HttpResponse): string {
  const bytes = new Uint8Array(res.getRemoteAddress());
  let key: number;
  if (bytes.length === 4) {
    key = ((bytes[0]! << 24) | (bytes[1]! << 16) | (bytes[2]! << 8) | bytes[3]!) >>> 0;
  } else if (bytes.length === 16 && isV4Mapped(bytes)) {
    key = V4_MAPPED + (((bytes[12]! << 24) | (bytes[13]! << 16) | (bytes[14]! << 8) | bytes[15]!) >>> 0);
  } else {
    return Buffer.from(res.getRemoteAddressAsText()).toString();
  }
  let text = ipv4Text.get(key);
  if (text === undefined) {
    if (ipv4Text.size >= IPV4_TEXT_MAX) ipv4Text.clear();
    text = Buffer.from(res.getRemoteAddressAsText()).toString();
    ipv4Text.set(key, text);
  }
  return text;
}

function isV4Mapped(b: Uint8Array): boolean {
  for (let i = 0; i < 10; i++) if (b[i] !== 0) return false;
  return b[10] === 0xff && b[11] === 0xff;
}

/** The public path's limiter key of an IP; kept per IP string so the same key string is reused. */
const ipLimitKeys = new Map<string, string>();

function ipLimitKey(ip: string): string {
  let key = ipLimitKeys.get(ip);
  if (key === undefined) {
    if (ipLimitKeys.size >= IPV4_TEXT_MAX) ipLimitKeys.clear();
    key = `ip:${ip}`;
    ipLimitKeys.set(ip, key);
  }
  return key;
}

/** Why a caller was refused; `message` replaces the table's only where it tells the key's holder more. */
export interface CallerRefusal {
  error: ErrorCode;
  message?: string;
}

const UNAUTHORIZED: CallerRefusal = Object.freeze({ error: 'unauthorized' });
const UNKNOWN_KEY_THROTTLED: CallerRefusal = Object.freeze({ error: 'rate_limited' });

/**
 * Who is calling: the public path's client IP, or the endpoint an API key grants. An unknown key
 * (random, malformed, deleted, or none at all) is 401 with the table's message, or 429 once its IP has
 * presented too many unknown keys this minute. A valid key used on another chain's host or path is 401
 * too, so a key never reaches a network it was not made for; that refusal names the key's network,
 * which tells nothing to anyone but the key's holder.
 */
export function resolveCaller(
  ctx: GatewayContext, routeChain: ChainRuntime, key: string | null, named: boolean, ipOf: () => string,
): { caller: Caller; chain: ChainRuntime } | CallerRefusal {
  const { config, tenancy } = ctx;
  if (key === null) {
    const ip = ipOf();
    return {
      chain: routeChain,
      caller: { auth: null, plan: null, limitKey: ipLimitKey(ip), rps: config.public.rps_per_ip, maxBatch: Math.min(config.public.max_batch, config.server.max_batch) },
    };
  }
  const auth = tenancy.directory.endpointByKey(key);
  if (auth === null) return tenancy.unknownKeys.refuse(ipOf()) ? UNKNOWN_KEY_THROTTLED : UNAUTHORIZED;
  const chain = ctx.chains.get(auth.network);
  if (chain === undefined) return UNAUTHORIZED;
  if (named && auth.network !== routeChain.config.slug) {
    return {
      error: 'unauthorized',
      message: `This API key belongs to network '${auth.network}', not '${routeChain.config.slug}': call it on its endpoint's URL`,
    };
  }
  const plan = config.plans[auth.plan] ?? null;
  if (plan === null) return UNAUTHORIZED;
  return { chain, caller: { auth, plan, limitKey: `ep:${auth.endpointId}`, rps: plan.rps, maxBatch: config.server.max_batch } };
}


/**
 * The chain a key on an unnamed path serves: its endpoint's network, or undefined for an unknown key
 * (the handler then answers 401). The lookup goes through the key cache, so the handler's own is free.
 */
export function chainOfKey(ctx: GatewayContext, key: string): ChainRuntime | undefined {
  const auth = ctx.tenancy.directory.endpointByKey(key);
  return auth === null ? undefined : ctx.chains.get(auth.network);
}
