import type { PlanConfig } from '../config/schema.js';
import type { ChainPrices } from '../chain/method-policy.js';
import type { ErrorCode } from '../errors.js';
import type { FailureDetail, Reservation } from '../metering/ledger.js';
import { callFailure } from './call-failure.js';
import { isOpen } from '../metering/meter.js';
import { ADMITTED } from '../limits/entry-log.js';
import type { EndpointAuth } from '../tenancy/directory.js';
import { methodLabel, type RefusalCode, type RequestTally, refusalError, refusalErrorCode } from './answers.js';
import type { MethodGrant } from './method-limits.js';
import type { Tenancy } from './tenancy.js';
import { KEY_PREFIX_LENGTH } from '../tenancy/keys.js';
import { type CallSpan, type TracedCall, tracing } from './tracing.js';

/**
 * Who is calling and under which limits: an endpoint key, or a client IP on the keyless path.
 * Limits are taken per item, in request order, so a batch is admitted while the limit allows and
 * the rest is refused in place.
 */
export interface Caller {
  /** null on the public path. */
  auth: EndpointAuth | null;
  /** The API key the caller brought (null on the public path): an open connection's is looked up again when its endpoint changes (regrant.ts). */
  key: string | null;
  plan: PlanConfig | null;
  /** The limiter key for requests per second. */
  limitKey: string;
  rps: number;
  maxBatch: number;
  /** Where the request's answers are counted and logged (answers.ts). */
  tally: RequestTally;
  /** In a fleet: what the shared limits granted the request being planned (fleet-gate.ts); undefined on one machine. */
  grant?: Grant;
}

/**
 * What a fleet's shared limits granted one request before its items are planned (fleet-gate.ts): planning
 * is synchronous, so Redis and PostgreSQL are asked first, and the items then spend the grant in order.
 */
export interface Grant {
  /** Items that may still pass the requests-per-second limit. */
  requests: number;
  /** The wait a refused item is told, in ms. */
  retryAfterMs: number;
  /** RU that may still pass the plan's ru_per_second (unused without one). */
  ru: number;
  ruRetryAfterMs: number;
  /** Redis was down with cluster.redis_failure 'closed': every item is refused 503. */
  limitsUnavailable: boolean;
  /** PostgreSQL failed when RU were asked for: a call the RU already held here cannot pay is refused 503, not 402. */
  storeDown: boolean;
  /** What the limits per method granted (method-limits.ts); null when the caller has none. */
  methods: MethodGrant | null;
}

/** `span`: the call's span as tracing.ts keeps it, undefined until it decides (every admission is made with it). */
export type Admission =
  | { ok: true; reservation: Reservation | null; ru: number; span: CallSpan }
  | { ok: false; error: ErrorCode; retryAfterMs?: number };

/**
 * One request counted against the requests-per-second limit (every parsed item counts, valid or not): from
 * the request's grant in a fleet, else the local limiter. `error` is set when the refusal is not a 429.
 */
export function takeRequest(t: Tenancy, c: Caller): { ok: true } | { ok: false; retryAfterMs: number; error?: 'limits_unavailable' } {
  const g = c.grant;
  if (g === undefined) return t.limiter.take(c.limitKey, c.rps);
  if (g.limitsUnavailable) return { ok: false, retryAfterMs: 1000, error: 'limits_unavailable' };
  if (g.requests === 0) return { ok: false, retryAfterMs: g.retryAfterMs };
  g.requests--;
  return ADMITTED;
}

/**
 * After the method check: the RU-per-second limit and the balance, at the chain's price when it has its own
 * (`prices`). Public calls are not metered. Fail-closed: while the ledger cannot write, calls that need
 * metering get 503 rather than free service. `calls` is how many calls of the method one item makes (the
 * windows of a split eth_getLogs), all set aside at once.
 */
export function admitCost(t: Tenancy, c: Caller, method: string, prices: ChainPrices | null = null, calls = 1): Admission {
  return admitRu(t, c, t.ruCost(method, prices) * calls);
}

/** The same admission for a known price (a Beacon path's, an event stream's). */
export function admitRu(t: Tenancy, c: Caller, ru: number): Admission {
  if (c.auth === null) return { ok: true, reservation: null, ru, span: undefined };
  const g = c.grant;
  if (c.plan?.ru_per_second !== undefined) {
    if (g === undefined) {
      const taken = t.limiter.take(`ru:${c.auth.endpointId}`, c.plan.ru_per_second, ru);
      if (!taken.ok) return { ok: false, error: 'rate_limited', retryAfterMs: taken.retryAfterMs };
    } else if (g.ru < ru) return { ok: false, error: 'rate_limited', retryAfterMs: g.ruRetryAfterMs };
    else g.ru -= ru;
  }
  // One machine fails closed while its ledger cannot write; a fleet spends the RU it holds, then refuses (storeDown).
  if (g === undefined && !t.ledger.healthy()) return { ok: false, error: 'store_unavailable' };
  let reservation: Reservation | null;
  try {
    // The first reservation of an owner reads its stored balance: SQLite may be busy or failing.
    reservation = t.ledger.reserve(c.auth.ownerId, ru);
  } catch {
    return { ok: false, error: 'store_unavailable' };
  }
  if (reservation === null) return { ok: false, error: g?.storeDown === true ? 'store_unavailable' : 'insufficient_balance' };
  return { ok: true, reservation, ru, span: undefined };
}

/**
 * A call whose client left before it was answered (its connection closed or aborted): the RU set aside for
 * it go back, unless its answer had already settled them. Nothing is counted: nothing was answered.
 */
export function abandonCall(t: Tenancy, c: Caller, admission: { reservation: Reservation | null; ru: number } & TracedCall): void {
  // Its span, when begun, ends as `abandoned` with nginx's 499 (client closed request): no answer was sent.
  if (tracing?.begun(admission) === true) traceCall(c, 'other', admission, 'abandoned', 499);
  if (c.auth !== null && admission.reservation !== null && isOpen(admission.reservation)) t.ledger.refund(admission.reservation);
}

const MIB = 1_048_576;

/** A response over 1 MiB costs 100% more per started extra MiB; RU are whole numbers. */
export function costWithSize(ru: number, answerBytes: number): number {
  if (answerBytes <= MIB) return ru;
  return ru * (1 + Math.ceil((answerBytes - MIB) / MIB));
}

/**
 * Closes a call's metering: charged with the size surcharge on success, refunded on an upstream failure.
 * Every answered call passes here or through countRefusal, so both also count it (answers.ts): `status` is
 * the HTTP status of a success (200 unless the node said another, as a Beacon answer may); a failure's `status`
 * is what the usage rows keep, `http` its HTTP status when that differs, and `reason` what a 5xx's log line says.
 */
export function settleCall(
  t: Tenancy,
  c: Caller,
  method: string,
  admission: { reservation: Reservation | null; ru: number } & TracedCall,
  outcome:
    | { ok: true; bytes: number; status?: number; ru?: number }
    | { ok: false; status: number; http?: number; reason?: string; code: ErrorCode | null; upstream?: string },
  label?: string,
): void {
  const status = outcome.ok ? (outcome.status ?? 200) : (outcome.http ?? (outcome.status >= 100 ? outcome.status : 200));
  // A usage status that is a JSON-RPC code (a node-like -32000) is an error that travels with HTTP 200.
  // The latency histogram's (latency-histogram.ts): the tally's one clock read, on the clock it started.
  const latencyMs = c.tally.answered(method, status, outcome.ok ? undefined : outcome.reason, label);
  if (tracing !== null) traceCall(c, method, admission, outcome.ok ? 'ok' : (outcome.code ?? 'error'), status, label);
  if (c.auth === null || admission.reservation === null) return;
  if (outcome.ok) {
    // `ru` when the caller worked the charge out itself (a split eth_getLogs: per window, each with its surcharge).
    const ru = outcome.ru ?? costWithSize(admission.ru, outcome.bytes);
    t.ledger.settle(admission.reservation, ru, { endpointId: c.auth.endpointId, method, status: 0, latencyMs });
    c.tally.metrics.ruCharged.inc(ru);
  } else {
    t.ledger.refund(admission.reservation);
    const failure = beaconShape(c, callFailure(status, outcome.status, outcome.code, outcome.upstream));
    t.ledger.recordUsage(c.auth.ownerId, { endpointId: c.auth.endpointId, method, status: outcome.status, latencyMs, failure });
  }
}

/**
 * Counts a call refused before any node for `code`: in the caller's usage (0 RU, `usageStatus` as the usage
 * rows keep it) and in the metrics, with the HTTP status the code has in the error table.
 */
export function countRefusal(t: Tenancy, c: Caller, method: string, usageStatus: number, code: RefusalCode, label?: string): void {
  const row = refusalError(code);
  c.tally.refused(code);
  const latencyMs = c.tally.answered(method, row.http, row.message, label);
  if (tracing !== null) traceCall(c, method, null, code, row.http, label);
  if (c.auth === null) return;
  const failure = beaconShape(c, callFailure(row.http, usageStatus, refusalErrorCode(code)));
  t.ledger.recordUsage(c.auth.ownerId, { endpointId: c.auth.endpointId, method, status: usageStatus, latencyMs, failure });
}

/** A Beacon answer carries no JSON-RPC code (its error is `{code: <HTTP status>, message}`): none is kept. */
function beaconShape(c: Caller, failure: FailureDetail): FailureDetail {
  const transport = c.tally.transport;
  return transport === 'beacon' || transport === 'sse' ? { ...failure, code: null } : failure;
}

/**
 * A call answered from the response cache costs `factor` (config cache.hit_ru_factor) of its RU,
 * rounded up to a whole RU; settleCall then charges that. The product is rounded to 6 decimals
 * first, so that 50 × 0.28 (14.000000000000002 in binary floating point) costs 14, not 15.
 */
export function chargeAsCacheHit(admission: { ru: number }, factor: number): void {
  admission.ru = Math.ceil(Math.round(admission.ru * factor * 1e6) / 1e6);
}

/** Ends the call's span (tracing.ts): only called while tracing is on. `admission` is null for a refusal. */
function traceCall(
  c: Caller,
  method: string,
  admission: ({ ru: number } & TracedCall) | null,
  outcome: string,
  status: number,
  label?: string,
): void {
  // The end is built only for a span that records (1 call of 100 at sample_ratio 0.01).
  if (!tracing!.records(admission)) return;
  const tally = c.tally;
  tracing!.settled(admission, tally.startedAt, {
    name: label ?? methodLabel(method),
    chain: tally.slug,
    transport: tally.transport,
    keyPrefix: c.key === null ? undefined : c.key.slice(0, KEY_PREFIX_LENGTH),
    ru: admission === null ? 0 : admission.ru,
    outcome,
    status,
  });
}
