import { beaconCost } from '../beacon/costs.js';
import { matchBeaconPath } from '../beacon/paths.js';
import type { ChainRuntime } from '../chain/runtime.js';
import type { ParsedItem } from '../jsonrpc/parse.js';
import { ADMITTED } from '../limits/entry-log.js';
import { type FleetTake, UNAVAILABLE } from '../limits/fleet-limiter.js';
import type { Caller, Grant } from './admission.js';
import type { GatewayContext } from './context.js';
import { wideLogRange } from './split-logs.js';
import type { FleetParts, Tenancy } from './tenancy.js';
import { type MethodLimits, methodLimitsOf, takeMethodsInFleet } from './method-limits.js';

/** A grant's `ru` when the plan has no ru_per_second: never the limit. */
const NO_RU_LIMIT = Number.POSITIVE_INFINITY;

/** A take refused because no decision could be made (fleet-limiter.ts answers only its UNAVAILABLE so). */
function isUnavailable(take: FleetTake): take is Extract<FleetTake, { unavailable: true }> {
  return take === UNAVAILABLE;
}

/**
 * In a fleet, what a request may spend is decided outside the instance: the rate limits in Redis, the RU
 * in blocks reserved from PostgreSQL. Planning is synchronous (one machine's limits and balances are in
 * memory), so a fleet asks first, once per request, and the items then spend the grant in order
 * (admission.ts). `costs` holds each item's RU (0 for an item that is not a valid call):
 * - one take per item of the requests-per-second window, sent in one script call with the other takes of
 *   this event-loop turn (redis-window.ts): items are admitted in order while the window allows, as on one
 *   machine;
 * - then, when the caller has limits per method, one take per admitted item its method's pattern governs
 *   (method-limits.ts: a second call to Redis, only then), the items it refuses going no further;
 * - then, for the plan's RU per second, one take per admitted item of its RU (a second call to Redis, only
 *   for plans with that limit), so a batch passes in part as on one machine;
 * - then the owner's RU for the items admitted: `prepare` reserves a block when this instance holds too
 *   little (no round trip when it holds enough, the usual case). When PostgreSQL fails, the request goes on
 *   against what is held here, and a call it cannot pay is refused 503 rather than 402.
 */
export function askFleet(t: Tenancy, c: Caller, costs: readonly number[], methods: MethodAsk | null = null): Promise<Grant> {
  const fleet = t.fleet!;
  // One item, the usual request: one promise, no array of them.
  if (costs.length === 1) return fleet.limiter.take(c.limitKey, c.rps).then((take) => afterTakes(t, c, costs, [take], methods));
  return Promise.all(costs.map(() => fleet.limiter.take(c.limitKey, c.rps))).then((taken) => afterTakes(t, c, costs, taken, methods));
}

/** The methods of a request's items (null for one that is not a well-formed call) and the caller's limits per method. */
export interface MethodAsk {
  limits: MethodLimits;
  methods: ReadonlyArray<string | null>;
}

/**
 * askFleet for a JSON-RPC request's items: their RU at the chain's prices, and their methods when the
 * caller has limits per method (method-limits.ts), which are taken between the rps and the RU per second.
 */
export function askFleetForItems(ctx: GatewayContext, chain: ChainRuntime, caller: Caller, items: readonly ParsedItem[]): Promise<Grant> {
  const t = ctx.tenancy;
  const limits = methodLimitsOf(ctx.config, caller);
  const methods = limits === null ? null : { limits, methods: items.map((item) => (item.ok ? item.method : null)) };
  return askFleet(t, caller, itemsRu(t, chain, caller, items), methods);
}

/** The grant once the rps takes are in: synchronous unless the plan limits methods or RU per second, or RU must be reserved. */
function afterTakes(
  t: Tenancy,
  c: Caller,
  costs: readonly number[],
  taken: readonly FleetTake[],
  ask: MethodAsk | null,
): Grant | Promise<Grant> {
  const grant: Grant = {
    requests: 0,
    retryAfterMs: 0,
    ru: NO_RU_LIMIT,
    ruRetryAfterMs: 0,
    limitsUnavailable: false,
    storeDown: false,
    methods: null,
  };
  const admitted: number[] = [];
  taken.forEach((take, i) => {
    if (take.ok) {
      grant.requests++;
      admitted.push(i);
    } else if (isUnavailable(take)) grant.limitsUnavailable = true;
    else grant.retryAfterMs = Math.max(grant.retryAfterMs, take.retryAfterMs);
  });
  if (ask === null)
    return afterMethods(
      t,
      c,
      admitted.map((i) => costs[i]!),
      grant,
    );
  return takeMethodsInFleet(t.fleet!.limiter, c.limitKey, ask.limits, ask.methods, admitted, grant).then((passed) =>
    afterMethods(
      t,
      c,
      passed.map((i) => costs[i]!),
      grant,
    ),
  );
}

/** The grant once the items that passed the rate limits so far are known (`admitted`: their RU): the RU per second and the balance. */
function afterMethods(t: Tenancy, c: Caller, admitted: readonly number[], grant: Grant): Grant | Promise<Grant> {
  const fleet = t.fleet!;
  const auth = c.auth;
  if (auth === null) return grant;
  const ruPerSecond = c.plan?.ru_per_second;
  if (ruPerSecond === undefined) return prepared(fleet, auth.ownerId, admitted, grant);
  return Promise.all(admitted.map((ru) => (ru > 0 ? fleet.limiter.take(`ru:${auth.endpointId}`, ruPerSecond, ru) : ADMITTED))).then(
    (ruTaken) => {
      grant.ru = 0;
      const paid: number[] = [];
      ruTaken.forEach((take, i) => {
        if (take.ok) {
          grant.ru += admitted[i]!;
          paid.push(admitted[i]!);
        } else if (isUnavailable(take)) grant.limitsUnavailable = true;
        else grant.ruRetryAfterMs = Math.max(grant.ruRetryAfterMs, take.retryAfterMs);
      });
      return prepared(fleet, auth.ownerId, paid, grant);
    },
  );
}

/** The grant once the owner's RU for `admitted` are held here: at once when they are (the usual case). */
function prepared(fleet: FleetParts, ownerId: number, admitted: readonly number[], grant: Grant): Grant | Promise<Grant> {
  let ru = 0;
  for (const r of admitted) ru += r;
  const waiting = ru > 0 ? fleet.ledger.prepare(ownerId, ru) : null;
  if (waiting === null) return grant;
  return waiting.then(
    () => grant,
    () => {
      grant.storeDown = true;
      return grant;
    },
  );
}

/**
 * Each item's RU before any size surcharge, at the chain's prices: a split eth_getLogs costs its windows
 * (split-logs.ts); an item that is not a valid call costs nothing.
 */
export function itemsRu(t: Tenancy, chain: ChainRuntime, caller: Caller, items: readonly ParsedItem[]): number[] {
  return items.map((item) => {
    if (!item.ok) return 0;
    const ru = t.ruCost(item.method, chain.policy.prices);
    if (item.method !== 'eth_getLogs' || typeof item.params[0] !== 'object' || item.params[0] === null) return ru;
    try {
      return ru * (wideLogRange(chain, caller, item.params)?.windows ?? 1);
    } catch {
      // A filter its checks refuse: planning answers it, at no cost.
      return ru;
    }
  });
}

/** The RU of a Beacon request before any surcharge (0 for a path the gateway refuses). */
export function beaconRu(ctx: GatewayContext, method: string, path: string): number {
  const match = matchBeaconPath(method, path);
  return match.ok ? beaconCost(match.template, ctx.config.ru.beacon.paths, ctx.config.ru.beacon.default) : 0;
}
