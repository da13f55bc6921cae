import type { ErrorCode } from '../errors.js';
import type { GatewayContext } from './context.js';
import type { ChainRuntime } from '../chain/runtime.js';
import type { Caller } from './admission.js';
import type { EndpointAuth } from '../tenancy/directory.js';
import { tallyFor } from './answers.js';
import type { Transport } from '../metrics/registry.js';
import { errorText } from '../log.js';

/** IPs whose limiter key is kept at most; past it the table starts again. */
const IP_KEYS_MAX = 4096;

/** The public path's limiter key of an IP; kept per IP string so the same key string is reused. */
const ipLimitKeys = new Map<string, string>();

function ipLimitKey(ip: string): string {
  let key = ipLimitKeys.get(ip);
  if (key === undefined) {
    if (ipLimitKeys.size >= IP_KEYS_MAX) ipLimitKeys.clear();
    key = `ip:${ip}`;
    ipLimitKeys.set(ip, key);
  }
  return key;
}

/**
 * Each endpoint's limiter key, kept beside what its key grants (the key cache's entry, which lives as long
 * as the cache keeps the key): no string made and hashed anew per request, however many keys are in use.
 * A map capped at a few thousand endpoints made one per request once calls spread over more keys than that.
 */
const endpointLimitKeys = new WeakMap<EndpointAuth, string>();

function endpointLimitKey(auth: EndpointAuth): string {
  let key = endpointLimitKeys.get(auth);
  if (key === undefined) {
    key = `ep:${auth.endpointId}`;
    endpointLimitKeys.set(auth, key);
  }
  return key;
}

/** Where a caller's client address is asked for, only when needed: an object whose method reads it, or a function. */
export interface PeerAddress {
  clientIp(): string;
}

function ipFrom(peer: PeerAddress | (() => string)): string {
  return typeof peer === 'function' ? peer() : peer.clientIp();
}

/** Who is calling, once known, and the chain the call goes to (a key's own network). */
export interface ResolvedCaller {
  kind: 'caller';
  caller: Caller;
  chain: ChainRuntime;
}

/** Why a caller was refused; `message` replaces the table's only where it tells the key's holder more. */
export interface CallerRefusal {
  kind: 'refused';
  error: ErrorCode;
  message?: string;
}

const UNAUTHORIZED: CallerRefusal = Object.freeze({ kind: 'refused', error: 'unauthorized' });
const UNKNOWN_KEY_THROTTLED: CallerRefusal = Object.freeze({ kind: 'refused', error: 'rate_limited' });
const OWNER_SUSPENDED: CallerRefusal = Object.freeze({ kind: 'refused', error: 'owner_suspended' });

/**
 * Who is calling: the public path's client IP, or the endpoint an API key grants. An unknown key
 * (random, malformed, deleted, rotated out past its grace, or none at all) is 401 with the table's message,
 * or 429 once its IP has presented too many unknown keys this minute; a suspended owner's key is 403
 * `owner_suspended`, so the owner knows a typo is not the problem. The endpoint's restrictions are checked
 * after this (request-fences.ts). A valid key used on another chain's host or path is 401
 * too, so a key never reaches a network it was not made for; that refusal names the key's network,
 * which tells nothing to anyone but the key's holder. `peer` gives the client's address, asked for only
 * when it is needed (the public path, an unknown key).
 */
export function resolveCaller(
  ctx: GatewayContext,
  routeChain: ChainRuntime,
  key: string | null,
  named: boolean,
  peer: PeerAddress | (() => string),
  transport: Transport = 'http',
): ResolvedCaller | CallerRefusal {
  const { config, tenancy } = ctx;
  if (key === null) {
    const ip = ipFrom(peer);
    return {
      kind: 'caller',
      chain: routeChain,
      caller: {
        auth: null,
        key: null,
        plan: null,
        limitKey: ipLimitKey(ip),
        rps: config.public.rps_per_ip,
        maxBatch: Math.min(config.public.max_batch, config.server.max_batch),
        tally: tallyFor(ctx, routeChain, transport, null),
        // Set here, not added later, so callers keep one shape on the hot path (a fleet's grant comes later).
        grant: undefined,
      },
    };
  }
  // Undefined only for a fleet's key never looked up: the road holds such a request until it has been.
  const auth = tenancy.keys.cached(key) ?? null;
  // A rotated-out key past its grace is no key at all: the same 401 (and the same guessing count) as a typo.
  if (auth === null || (auth.keyExpiresAtMs !== null && auth.keyExpiresAtMs <= ctx.now())) {
    return tenancy.unknownKeys.refuse(ipFrom(peer)) ? UNKNOWN_KEY_THROTTLED : UNAUTHORIZED;
  }
  if (auth.suspended) return OWNER_SUSPENDED;
  const chain = ctx.chains.get(auth.network);
  if (chain === undefined) return UNAUTHORIZED;
  if (named && auth.network !== routeChain.config.slug) {
    return {
      kind: 'refused',
      error: 'unauthorized',
      message: `This API key belongs to network '${auth.network}', not '${routeChain.config.slug}': call it on its endpoint's URL`,
    };
  }
  const plan = config.plans[auth.plan] ?? null;
  if (plan === null) return UNAUTHORIZED;
  return {
    kind: 'caller',
    chain,
    caller: {
      auth,
      key,
      plan,
      limitKey: endpointLimitKey(auth),
      rps: plan.rps,
      maxBatch: config.server.max_batch,
      tally: tallyFor(ctx, chain, transport, key),
      grant: undefined,
    },
  };
}

/**
 * The chain a key on an unnamed path serves: its endpoint's network, or undefined for an unknown key
 * (the handler then answers 401). The lookup goes through the key cache, so the handler's own is free.
 */
export function chainOfKey(ctx: GatewayContext, key: string): ChainRuntime | undefined {
  const auth = ctx.tenancy.keys.cached(key);
  return auth == null ? undefined : ctx.chains.get(auth.network);
}

/**
 * In a fleet, a key this instance has not met is read from the store before its request goes on:
 * `resume` is called with a runner that runs the request's road with the key's answer at hand (even one the
 * cache did not keep, a change having come meanwhile), or `failed` when the store could not answer (503).
 */
export function whenKeyKnown(
  ctx: GatewayContext,
  key: string,
  resume: (run: (road: () => void) => void) => void,
  failed: () => void,
): void {
  const keys = ctx.tenancy.keys;
  keys
    .lookUp(key)
    .then(
      (auth) => resume((road) => keys.answering(key, auth, road)),
      () => failed(),
    )
    // A fault of the road itself, which on the synchronous path would have been thrown to uWS: logged, not fatal.
    .catch((err: unknown) => ctx.log.error('a request held for its key failed', { error: errorText(err) }));
}
