/**
 * A chain's failover policy (config chains.<slug>.failover, docs/failover.md): how long an upstream attempt may
 * take, how many more attempts a failure gets and after which outcomes, when a silent attempt is hedged, and
 * when a failing node leaves rotation (its breaker). `methods` overlays any of these (the breaker aside: it is
 * a node's, per chain) for the methods matching a pattern, the most specific pattern winning. Every default is
 * the behaviour the gateway had before the policy existed, so a chain without `failover` is served as before.
 */
import { type Static, Type } from './typebox.js';
import type { Errors } from './checks.js';
import { int, mapOf, num, optionalInt, optionalText, Problem, section, stringList, text, unlessNoString } from './keys.js';
import { patternProblem } from '../jsonrpc/method-patterns.js';

/** The outcomes a retry may follow: a node not reached (or timed out, or an answer not JSON-RPC), a 5xx, a 429,
 *  an empty answer (null for a thing the node should have, or "not there yet"). */
export const RETRY_OUTCOMES = ['transport', '5xx', '429', 'empty'] as const;
export type RetryOutcome = (typeof RETRY_OUTCOMES)[number];

const AFTER_PATTERN = '^(half|off|p[0-9]+|[0-9]{1,7}ms)$';
const AFTER_PROBLEM = 'must be half, off, a latency quantile p50 to p99 (e.g. p90) or a delay in ms (e.g. 250ms)';
const RETRY_ON_PROBLEM = `must be a list of outcomes among ${RETRY_OUTCOMES.join(', ')}`;

const TIMEOUT_TEXT = "Seconds for one upstream attempt until its answer starts; default the chain's timeout_s.";
const ANSWER_TIMEOUT_TEXT = "Seconds for one upstream answer from start to end; default the chain's answer_timeout_s.";
const RETRIES_TEXT = 'Further attempts after a failure, each on a node not tried yet, for methods safe to repeat, within the deadline.';
const BACKOFF_TEXT = 'Milliseconds waited before a retry (none before a hedge).';
const JITTER_TEXT = 'Up to this many milliseconds added at random to each backoff.';
const RETRY_ON_TEXT = `Outcomes that are retried: ${RETRY_OUTCOMES.join(', ')}; default all four.`;
const AFTER_TEXT =
  "When a silent attempt gets another beside it: half (half the timeout), off, pNN (that method's latency quantile on this chain over the last minute) or Nms.";
const MAX_TEXT = 'Hedges (extra attempts beside a silent one) at most per call; the k-th after k times `after`.';

/** The keys a chain's policy and a method's override share: a method's have no defaults (absent: the chain's). */
function policyKeys(chainLevel: boolean) {
  const n = (min: number, max: number, def: number, description: string) =>
    chainLevel ? int(min, max, def, description) : optionalInt(min, max, description);
  const afterMore = { pattern: AFTER_PATTERN, [Problem]: unlessNoString(AFTER_PROBLEM) };
  return {
    timeout_s: optionalInt(1, 3600, TIMEOUT_TEXT),
    answer_timeout_s: optionalInt(1, 86_400, ANSWER_TIMEOUT_TEXT),
    retries: n(0, 5, 1, RETRIES_TEXT),
    backoff_ms: n(0, 600_000, 0, BACKOFF_TEXT),
    jitter_ms: n(0, 600_000, 0, JITTER_TEXT),
    retry_on: chainLevel
      ? stringList([...RETRY_OUTCOMES], RETRY_ON_TEXT, RETRY_ON_PROBLEM)
      : Type.Optional(stringList(undefined, RETRY_ON_TEXT, RETRY_ON_PROBLEM)),
    hedge: section(
      {
        after: chainLevel ? text('half', AFTER_TEXT, afterMore) : optionalText(AFTER_TEXT, afterMore),
        max: n(0, 3, 1, MAX_TEXT),
      },
      'Extra attempts beside one that has not begun answering; the first answer wins, the others are cancelled.',
    ),
  };
}

export const BreakerSchema = section(
  {
    failure_streak: int(1, 1000, 3, 'Failed outcomes in a row that take a node out of rotation.'),
    failure_rate: num(0.01, 1, 0.5, 'Failed share of the outcomes in the window that takes a node out, once min_calls are counted.'),
    min_calls: int(1, 1_000_000, 10, 'Outcomes in the window before the failure rate is judged.'),
    window_s: int(1, 300, 10, 'Seconds of the sliding window the failure rate is judged over.'),
    open_s: optionalInt(
      1,
      86_400,
      'Seconds a node taken out stays out before a good probe may bring it back half-open; absent: it is back at its next good probe.',
    ),
    half_open_probes: int(
      1,
      100,
      1,
      'Calls a half-open node (open_s set) must answer before it is closed again; a failure among them opens it anew.',
    ),
  },
  "When a failing node leaves rotation (per chain: a node's breaker, whatever the method).",
);

export const MethodFailoverSchema = section(policyKeys(false), 'A policy over the chain one for the methods of its pattern.');

export const FailoverSchema = section(
  {
    ...policyKeys(true),
    breaker: BreakerSchema,
    methods: mapOf(MethodFailoverSchema, 'Method pattern (a name, or a prefix ending in *) → keys over the chain policy.', {
      default: {},
      [Problem]: 'must be a mapping of method patterns to policies',
    }),
  },
  "How calls fail over between the chain's nodes: timeouts, retries, hedges, the breaker; default the built-in behaviour.",
);

export type FailoverConfig = Static<typeof FailoverSchema>;
export type MethodFailoverConfig = Static<typeof MethodFailoverSchema>;
export type BreakerConfig = Static<typeof BreakerSchema>;

/** When a silent attempt is hedged. */
export type HedgeAfter = { kind: 'half' } | { kind: 'off' } | { kind: 'fixed'; ms: number } | { kind: 'quantile'; q: number };

/** One method's policy on one chain, resolved: what the failover of its calls reads (pipeline/route-call.ts). */
export interface FailoverPolicy {
  readonly timeoutMs: number;
  readonly answerTimeoutMs: number;
  readonly retries: number;
  readonly backoffMs: number;
  readonly jitterMs: number;
  readonly retryTransport: boolean;
  readonly retry5xx: boolean;
  readonly retry429: boolean;
  readonly retryEmpty: boolean;
  readonly hedge: HedgeAfter;
  readonly hedgeMax: number;
}

/** `after` as written, or undefined when it is not one (the schema reported it). */
export function parseHedgeAfter(after: string): HedgeAfter | undefined {
  if (after === 'half' || after === 'off') return { kind: after };
  let m = /^p([0-9]+)$/.exec(after);
  if (m !== null) {
    const q = Number(m[1]);
    return q >= 50 && q <= 99 ? { kind: 'quantile', q: q / 100 } : undefined;
  }
  m = /^([0-9]+)ms$/.exec(after);
  return m === null ? undefined : { kind: 'fixed', ms: Number(m[1]) };
}

type PolicyKeys = Partial<Omit<MethodFailoverConfig, 'hedge'>> & { hedge?: { after?: string | undefined; max?: number | undefined } };

/** The chain policy with `over`'s keys on top (each absent key left as the chain's). */
export function overlay(base: FailoverPolicy, over: PolicyKeys): FailoverPolicy {
  const retryOn = over.retry_on;
  const after = over.hedge?.after === undefined ? undefined : parseHedgeAfter(over.hedge.after);
  return {
    timeoutMs: over.timeout_s === undefined ? base.timeoutMs : over.timeout_s * 1000,
    answerTimeoutMs: over.answer_timeout_s === undefined ? base.answerTimeoutMs : over.answer_timeout_s * 1000,
    retries: over.retries ?? base.retries,
    backoffMs: over.backoff_ms ?? base.backoffMs,
    jitterMs: over.jitter_ms ?? base.jitterMs,
    retryTransport: retryOn === undefined ? base.retryTransport : retryOn.includes('transport'),
    retry5xx: retryOn === undefined ? base.retry5xx : retryOn.includes('5xx'),
    retry429: retryOn === undefined ? base.retry429 : retryOn.includes('429'),
    retryEmpty: retryOn === undefined ? base.retryEmpty : retryOn.includes('empty'),
    hedge: after ?? base.hedge,
    hedgeMax: over.hedge?.max ?? base.hedgeMax,
  };
}

/** The policy of a chain with no `failover`: the built-in behaviour with the chain's own timeouts. */
export function builtInPolicy(timeoutMs: number, answerTimeoutMs: number): FailoverPolicy {
  return {
    timeoutMs,
    answerTimeoutMs,
    retries: 1,
    backoffMs: 0,
    jitterMs: 0,
    retryTransport: true,
    retry5xx: true,
    retry429: true,
    retryEmpty: true,
    hedge: { kind: 'half' },
    hedgeMax: 1,
  };
}

/** The chain policy of `f` on a chain whose own timeouts are `timeoutS` and `answerTimeoutS`. */
export function chainPolicy(f: FailoverConfig, timeoutS: number, answerTimeoutS: number): FailoverPolicy {
  return overlay(builtInPolicy(timeoutS * 1000, answerTimeoutS * 1000), f);
}

/**
 * The pattern of `methods` that decides `method`'s policy: its exact name over any prefix, a longer prefix over a
 * shorter one; undefined when none matches.
 */
export function patternFor(patterns: readonly string[], method: string): string | undefined {
  let best: string | undefined;
  for (const p of patterns) {
    if (p === method) return p;
    if (p.endsWith('*') && method.startsWith(p.slice(0, -1)) && (best === undefined || p.length > best.length)) best = p;
  }
  return best;
}

/** The rules across a policy's keys at `path` (the chain's or a method's, over `base`), each error naming its key path. */
function checkPolicy(keys: PolicyKeys, base: FailoverPolicy, path: string, errors: Errors): void {
  keys.retry_on?.forEach((o, i) => {
    if (!(RETRY_OUTCOMES as readonly string[]).includes(o))
      errors.push(`${path}.retry_on[${i}]: '${o}' is not an outcome; one of ${RETRY_OUTCOMES.join(', ')}`);
  });
  const after = keys.hedge?.after;
  if (after !== undefined && new RegExp(AFTER_PATTERN).test(after) && parseHedgeAfter(after) === undefined)
    errors.push(`${path}.hedge.after: '${after}' is not a quantile the gateway keeps; p50 to p99`);
  const p = overlay(base, keys);
  // Each rule speaks where a key it reads is set (a method's rule is not the chain's told again; the chain's own
  // timeouts are checked at their keys); a chain policy sets every key but its timeouts.
  const timeout = keys.timeout_s !== undefined;
  const hedge = (after !== undefined && parseHedgeAfter(after) !== undefined) || keys.hedge?.max !== undefined;
  if ((timeout || keys.answer_timeout_s !== undefined) && p.answerTimeoutMs < p.timeoutMs)
    errors.push(
      `${path}.answer_timeout_s: ${p.answerTimeoutMs / 1000} is less than timeout_s (${p.timeoutMs / 1000}), which an answer may take to start`,
    );
  if ((timeout || hedge) && p.hedge.kind === 'fixed' && p.hedge.ms >= p.timeoutMs && p.hedgeMax > 0)
    errors.push(`${path}.hedge.after: ${p.hedge.ms} ms is not below the timeout (${p.timeoutMs} ms); no hedge could start in time`);
  const retries = keys.retries !== undefined;
  if ((retries || keys.retry_on !== undefined) && p.retries > 0 && !p.retryTransport && !p.retry5xx && !p.retry429 && !p.retryEmpty)
    errors.push(`${path}.retry_on: empty while retries is ${p.retries}; nothing would be retried (set retries: 0)`);
  const waits = timeout || retries || keys.backoff_ms !== undefined || keys.jitter_ms !== undefined;
  if (waits && p.retries > 0 && p.backoffMs + p.jitterMs >= p.timeoutMs)
    errors.push(
      `${path}.backoff_ms: ${p.backoffMs} ms (with jitter_ms ${p.jitterMs}) is not below the timeout (${p.timeoutMs} ms); no retry could start in time`,
    );
}

/** The rules across a chain's failover keys (its timeouts given), each error naming its key path. */
export function checkFailover(f: FailoverConfig, timeoutS: number, answerTimeoutS: number, path: string, errors: Errors): void {
  const builtIn = builtInPolicy(timeoutS * 1000, answerTimeoutS * 1000);
  checkPolicy(f, builtIn, path, errors);
  const base = overlay(builtIn, f);
  for (const [pattern, keys] of Object.entries(f.methods)) {
    const problem = patternProblem(pattern);
    if (problem !== undefined) errors.push(`${path}.methods.${pattern}: ${problem}`);
    checkPolicy(keys, base, `${path}.methods.${pattern}`, errors);
  }
  if (f.breaker.open_s === undefined && f.breaker.half_open_probes !== 1)
    errors.push(`${path}.breaker.half_open_probes: needs open_s; without it a node is back whole at its next good probe`);
}
