/**
 * Limits per method (`plans.<name>.method_limits`, `public.method_limits`): method pattern → requests per
 * second, each pattern a sliding window of its own per key (or client IP on the keyless path), beside the
 * plan's rps and with the same limiter, so the same exactness: one thread's windows, the shared-memory ones
 * of worker threads, or Redis for a fleet (whose takes fleet-gate.ts makes before planning, this file's
 * `takeMethodsInFleet`, and the items then spend in order, as they spend the rps grant).
 *
 * A method matching several patterns is limited by the most specific one alone: its exact name, else the
 * longest prefix. So `{ "debug_*": 1, debug_traceTransaction: 5 }` gives debug_traceTransaction 5 a second
 * of its own and every other debug_ method 1 a second together (one window per pattern, shared by the
 * methods it governs).
 *
 * Each well-formed item whose method a pattern governs takes one request, right after the rps take and
 * before the method policy and the parameters (so a fleet can ask for it before planning): a refused item
 * is 429 / -32005, costs no RU and reaches no node.
 */
import type { Config } from '../config/schema.js';
import type { FleetLimiter, FleetTake } from '../limits/fleet-limiter.js';
import { UNAVAILABLE } from '../limits/fleet-limiter.js';
import type { SlidingWindowLimiter } from '../limits/sliding-window.js';
import type { Caller, Grant } from './admission.js';

/** One pattern's limit: the window the methods it governs share, per key. */
export interface MethodLimitRule {
  readonly pattern: string;
  /** Requests per second. */
  readonly limit: number;
  /** Its place in MethodLimits.rules: a fleet's grant counts by it. */
  readonly index: number;
}

/** A `method_limits` mapping, compiled once (per mapping: a reload's config brings new ones). */
export interface MethodLimits {
  readonly rules: readonly MethodLimitRule[];
  /** Where the operator wrote them: `plans.<name>.method_limits` or `public.method_limits`. */
  readonly configKey: string;
  /** 'key' or 'client IP': who each window belongs to, for the refusal's message. */
  readonly per: string;
  readonly exact: ReadonlyMap<string, MethodLimitRule>;
  /** Prefix patterns without their '*', longest first: the first that matches is the most specific. */
  readonly prefixes: ReadonlyArray<readonly [string, MethodLimitRule]>;
}

/**
 * What a fleet's Redis granted one request's method-limited items (fleet-gate.ts): per rule, the items that
 * may still pass, and the wait told to one refused.
 */
export interface MethodGrant {
  readonly limits: MethodLimits;
  readonly left: number[];
  readonly retryAfterMs: number[];
}

/** A method-limited item refused (429 / -32005, rate_limited): the answer's message and its Retry-After. */
export interface MethodLimitRefusal {
  message: string;
  retryAfterMs: number;
}

/** Redis away with limits failing closed (fleet-limiter.ts answers only its UNAVAILABLE so). */
function isUnavailable(take: FleetTake): take is Extract<FleetTake, { unavailable: true }> {
  return take === UNAVAILABLE;
}

const compiled = new WeakMap<Readonly<Record<string, number>>, MethodLimits>();

/** Compiles a mapping (a config's, frozen and kept until a reload replaces it): see the file's top for the precedence. */
export function compileMethodLimits(limits: Readonly<Record<string, number>>, configKey: string, per: string): MethodLimits {
  const rules: MethodLimitRule[] = [];
  const exact = new Map<string, MethodLimitRule>();
  const prefixes: Array<readonly [string, MethodLimitRule]> = [];
  for (const [pattern, limit] of Object.entries(limits)) {
    const rule: MethodLimitRule = { pattern, limit, index: rules.length };
    rules.push(rule);
    if (pattern.endsWith('*')) prefixes.push([pattern.slice(0, -1), rule]);
    else exact.set(pattern, rule);
  }
  prefixes.sort((a, b) => b[0].length - a[0].length);
  return { rules, configKey, per, exact, prefixes };
}

/** The rule that limits `method`, or null when no pattern governs it. */
export function ruleFor(limits: MethodLimits, method: string): MethodLimitRule | null {
  const rule = limits.exact.get(method);
  if (rule !== undefined) return rule;
  for (const [prefix, r] of limits.prefixes) if (method.startsWith(prefix)) return r;
  return null;
}

/**
 * The caller's limits per method: its plan's, or the keyless path's in `config`; null when none are set
 * (what the request path asks first, so it looks no further).
 */
export function methodLimitsOf(config: Config, c: Caller): MethodLimits | null {
  const plan = c.plan;
  const raw = plan === null ? config.public.method_limits : plan.method_limits;
  if (raw === undefined) return null;
  let limits = compiled.get(raw);
  if (limits === undefined) {
    limits =
      plan === null
        ? compileMethodLimits(raw, 'public.method_limits', 'client IP')
        : compileMethodLimits(raw, `plans.${plan.name}.method_limits`, 'key');
    compiled.set(raw, limits);
  }
  return limits;
}

/** The limiter key of a caller's window for one pattern: never an API key (limitKey is `ep:<id>` or `ip:<addr>`). */
export function methodWindowKey(limitKey: string, rule: MethodLimitRule): string {
  return `m:${limitKey}:${rule.pattern}`;
}

/** The refusal's message: the method, the pattern, the limit and where the operator set it. */
export function methodLimitMessage(limits: MethodLimits, rule: MethodLimitRule, method: string): string {
  const per = rule.limit === 1 ? 'request' : 'requests';
  return `Rate limit exceeded: ${method} is limited to ${rule.limit} ${per} per second per ${limits.per} ('${rule.pattern}' in ${limits.configKey})`;
}

/**
 * One item of `method` taken against the caller's limit per method, when a pattern governs it: from the
 * request's grant in a fleet (`c.grant`), else `limiter` (this thread's or the threads' shared windows).
 * null: admitted. The caller checked already that the caller has limits per method (methodLimitsOf).
 */
export function takeMethodLimit(limiter: SlidingWindowLimiter, config: Config, c: Caller, method: string): MethodLimitRefusal | null {
  const g = c.grant;
  if (g !== undefined) return spendMethodGrant(g, method);
  const limits = methodLimitsOf(config, c);
  if (limits === null) return null;
  const rule = ruleFor(limits, method);
  if (rule === null) return null;
  const taken = limiter.take(methodWindowKey(c.limitKey, rule), rule.limit);
  if (taken.ok) return null;
  return { message: methodLimitMessage(limits, rule, method), retryAfterMs: taken.retryAfterMs };
}

/** An item spending the grant Redis gave its request; limits set by a reload since it was asked wait for the next request. */
function spendMethodGrant(g: Grant, method: string): MethodLimitRefusal | null {
  const m = g.methods;
  if (m === null) return null;
  const rule = ruleFor(m.limits, method);
  if (rule === null) return null;
  if (m.left[rule.index]! > 0) {
    m.left[rule.index]!--;
    return null;
  }
  return { message: methodLimitMessage(m.limits, rule, method), retryAfterMs: m.retryAfterMs[rule.index]! };
}

/**
 * In a fleet, before planning: one take per item of `methods` (null for an item that is not a well-formed
 * call) among `admitted` (the indexes the rps takes admitted, in order) that a pattern governs, all sent in
 * this turn's script call (redis-window.ts). Sets `grant.methods` (and `limitsUnavailable` when Redis is away
 * with limits failing closed) and resolves with the indexes that may go on to the RU step.
 */
export function takeMethodsInFleet(
  limiter: FleetLimiter,
  limitKey: string,
  limits: MethodLimits,
  methods: ReadonlyArray<string | null>,
  admitted: readonly number[],
  grant: Grant,
): Promise<number[]> {
  const n = limits.rules.length;
  const methodGrant: MethodGrant = { limits, left: new Array<number>(n).fill(0), retryAfterMs: new Array<number>(n).fill(0) };
  grant.methods = methodGrant;
  const rules = admitted.map((i) => {
    const method = methods[i];
    return method == null ? null : ruleFor(limits, method);
  });
  const takes = rules.map((rule) => (rule === null ? null : limiter.take(methodWindowKey(limitKey, rule), rule.limit)));
  return Promise.all(takes).then((taken: ReadonlyArray<FleetTake | null>) => {
    const passed: number[] = [];
    taken.forEach((take, k) => {
      const rule = rules[k]!;
      if (take === null || rule === null) passed.push(admitted[k]!);
      else if (take.ok) {
        methodGrant.left[rule.index]!++;
        passed.push(admitted[k]!);
      } else if (isUnavailable(take)) grant.limitsUnavailable = true;
      else methodGrant.retryAfterMs[rule.index] = Math.max(methodGrant.retryAfterMs[rule.index]!, take.retryAfterMs);
    });
    return passed;
  });
}
