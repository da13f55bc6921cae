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
  return Buffer.from(res.getRemoteAddressAsText()).toString();
}

/**
 * Who is calling: the public path's client IP, or the endpoint an API key grants. An unknown key is
 * 401, or 429 once its IP has presented too many unknown keys this minute; a key used on another
 * chain's host or path is 401 too, so a key never reaches a network it was not made for.
 */
export function resolveCaller(
  ctx: GatewayContext, routeChain: ChainRuntime, key: string | null, named: boolean, ipOf: () => string,
): { caller: Caller; chain: ChainRuntime } | ErrorCode {
  const { config, tenancy } = ctx;
  if (key === null) {
    const ip = ipOf();
    return {
      chain: routeChain,
      caller: { auth: null, plan: null, limitKey: `ip:${ip}`, rps: config.public.rps_per_ip, maxBatch: Math.min(config.public.max_batch, config.server.max_batch) },
    };
  }
  const auth = tenancy.directory.endpointByKey(key);
  if (auth === null) return tenancy.unknownKeys.refuse(ipOf()) ? 'rate_limited' : 'unauthorized';
  const chain = ctx.chains.get(auth.network);
  if (chain === undefined || (named && auth.network !== routeChain.config.slug)) return 'unauthorized';
  const plan = config.plans[auth.plan] ?? null;
  if (plan === null) return 'unauthorized';
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
