import { beaconCost } from '../beacon/costs.js';
import { matchBeaconPath } from '../beacon/paths.js';
import type { ChainRuntime } from '../chain/runtime.js';
import type { ParsedItem } from '../jsonrpc/parse.js';
import type { FleetTake } from '../limits/fleet-limiter.js';
import type { Caller, Grant } from './admission.js';
import type { GatewayContext } from './context.js';
import type { Tenancy } from './tenancy.js';

/** A grant's `ru` when the plan has no ru_per_second: never the limit. */
const NO_RU_LIMIT = Number.POSITIVE_INFINITY;

/**
 * In a fleet, what a request may spend is decided outside the instance: the rate limits in Redis, the RU
 * in blocks reserved from PostgreSQL. Planning is synchronous (one machine's limits and balances are in
 * memory), so a fleet asks first, once per request, and the items then spend the grant in order
 * (admission.ts):
 * - one take per item of the requests-per-second window, all sent in one script call with the other takes
 *   of this event-loop turn (redis-window.ts): items are admitted in order while the window allows, as on
 *   one machine;
 * - the plan's RU per second, for the items' RU together;
 * - the owner's RU: `prepare` reserves a block when this instance holds too little (no round trip when it
 *   holds enough, the usual case). When PostgreSQL fails, the request goes on against what is held here,
 *   and a call it cannot pay is refused 503 rather than 402.
 * Null on one machine: plan at once.
 */
export function askFleet(t: Tenancy, c: Caller, requests: number, ru: number): Promise<Grant> | null {
  const fleet = t.fleet;
  if (fleet === null) return null;
  const takes: Array<Promise<FleetTake>> = [];
  for (let i = 0; i < requests; i++) takes.push(fleet.limiter.take(c.limitKey, c.rps));
  const ruPerSecond = c.auth === null ? undefined : c.plan?.ru_per_second;
  const ruTake = ruPerSecond !== undefined && ru > 0 ? fleet.limiter.take(`ru:${c.auth!.endpointId}`, ruPerSecond, ru) : null;
  const prepared = c.auth !== null && ru > 0 ? fleet.ledger.prepare(c.auth.ownerId, ru) : null;
  const storeDown: Promise<boolean> | false =
    prepared === null
      ? false
      : prepared.then(
          () => false,
          () => true,
        );
  return Promise.all([Promise.all(takes), ruTake, storeDown]).then(([taken, ruTaken, down]) => {
    const grant: Grant = {
      requests: 0,
      retryAfterMs: 0,
      ru: ruTaken === null ? NO_RU_LIMIT : ruTaken.ok ? ru : 0,
      ruRetryAfterMs: ruTaken !== null && !ruTaken.ok && 'retryAfterMs' in ruTaken ? ruTaken.retryAfterMs : 0,
      limitsUnavailable: ruTaken !== null && 'unavailable' in ruTaken,
      storeDown: down,
    };
    for (const take of taken) {
      if (take.ok) grant.requests++;
      else if ('unavailable' in take) grant.limitsUnavailable = true;
      else grant.retryAfterMs = Math.max(grant.retryAfterMs, take.retryAfterMs);
    }
    return grant;
  });
}

/** The RU a request's items cost before any surcharge, at the chain's prices: what `askFleet` reserves for. */
export function itemsRu(t: Tenancy, chain: ChainRuntime, items: readonly ParsedItem[]): number {
  let ru = 0;
  for (const item of items) if (item.ok) ru += t.ruCost(item.method, chain.policy.prices);
  return ru;
}

/** The RU of a Beacon request before any surcharge (0 for a path the gateway refuses). */
export function beaconRu(ctx: GatewayContext, method: string, path: string): number {
  const match = matchBeaconPath(method, path);
  return match.ok ? beaconCost(match.template, ctx.config.ru.beacon.paths, ctx.config.ru.beacon.default) : 0;
}
