import type { PlanConfig } from '../config/schema.js';
import type { ErrorCode } from '../errors.js';
import type { Reservation } from '../metering/ledger.js';
import type { EndpointAuth } from '../tenancy/directory.js';
import type { Tenancy } from './tenancy.js';

/**
 * Who is calling and under which limits: an endpoint key, or a client IP on the keyless path.
 * Limits are taken per item, in request order, so a batch is admitted while the limit allows and
 * the rest is refused in place.
 */
export interface Caller {
  /** null on the public path. */
  auth: EndpointAuth | null;
  plan: PlanConfig | null;
  /** The limiter key for requests per second. */
  limitKey: string;
  rps: number;
  maxBatch: number;
}

export type Admission = { ok: true; reservation: Reservation | null; ru: number } | { ok: false; error: ErrorCode; retryAfterMs?: number };

/** One request counted against the requests-per-second limit (every parsed item counts, valid or not). */
export function takeRequest(t: Tenancy, c: Caller): { ok: true } | { ok: false; retryAfterMs: number } {
  return t.limiter.take(c.limitKey, c.rps);
}

/**
 * After the method check: the RU-per-second limit and the balance. Public calls are not metered.
 * Fail-closed: while the ledger cannot write, calls that need metering get 503 rather than free service.
 */
export function admitCost(t: Tenancy, c: Caller, method: string): Admission {
  return admitRu(t, c, t.ruCost(method));
}

/** The same admission for a known price (a Beacon path's, an event stream's). */
export function admitRu(t: Tenancy, c: Caller, ru: number): Admission {
  if (c.auth === null) return { ok: true, reservation: null, ru };
  if (c.plan?.ru_per_second !== undefined) {
    const taken = t.limiter.take(`ru:${c.auth.endpointId}`, c.plan.ru_per_second, ru);
    if (!taken.ok) return { ok: false, error: 'rate_limited', retryAfterMs: taken.retryAfterMs };
  }
  if (!t.ledger.healthy()) return { ok: false, error: 'store_unavailable' };
  let reservation: Reservation | null;
  try {
    // The first reservation of an owner reads its stored balance: SQLite may be busy or failing.
    reservation = t.ledger.reserve(c.auth.ownerId, ru);
  } catch {
    return { ok: false, error: 'store_unavailable' };
  }
  if (reservation === null) return { ok: false, error: 'insufficient_balance' };
  return { ok: true, reservation, ru };
}

const MIB = 1_048_576;

/** A response over 1 MiB costs 100% more per started extra MiB; RU are whole numbers. */
export function costWithSize(ru: number, answerBytes: number): number {
  if (answerBytes <= MIB) return ru;
  return ru * (1 + Math.ceil((answerBytes - MIB) / MIB));
}

/** Closes a call's metering: charged with the size surcharge on success, refunded on an upstream failure. */
export function settleCall(
  t: Tenancy,
  c: Caller,
  method: string,
  admission: { reservation: Reservation | null; ru: number },
  outcome: { ok: true; bytes: number } | { ok: false; status: number },
): void {
  if (c.auth === null || admission.reservation === null) return;
  if (outcome.ok) {
    t.ledger.settle(admission.reservation, costWithSize(admission.ru, outcome.bytes), { endpointId: c.auth.endpointId, method, status: 0 });
  } else {
    t.ledger.refund(admission.reservation);
    t.ledger.recordUsage(c.auth.ownerId, { endpointId: c.auth.endpointId, method, status: outcome.status });
  }
}

/** Counts a refused call in the caller's usage (0 RU). */
export function countRefusal(t: Tenancy, c: Caller, method: string, status: number): void {
  if (c.auth !== null) t.ledger.recordUsage(c.auth.ownerId, { endpointId: c.auth.endpointId, method, status });
}

/**
 * A call answered from the response cache costs `factor` (config cache.hit_ru_factor) of its RU,
 * rounded up to a whole RU; settleCall then charges that. The product is rounded to 6 decimals
 * first, so that 50 × 0.28 (14.000000000000002 in binary floating point) costs 14, not 15.
 */
export function chargeAsCacheHit(admission: { ru: number }, factor: number): void {
  admission.ru = Math.ceil(Math.round(admission.ru * factor * 1e6) / 1e6);
}
