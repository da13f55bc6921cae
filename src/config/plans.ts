/**
 * The tenancy sections: `plans` (limits per endpoint key, and how many endpoints an owner may have) and
 * `public` (the keyless path).
 */
import { type Static, Type } from './typebox.js';
import type { Errors } from './checks.js';
import { int, mapOf, Missing, optionalInt, Problem, section } from './keys.js';
import { checkPatterns, methodDeny } from './method-policy.js';
import { patternProblem } from '../jsonrpc/method-patterns.js';
import { withoutNulls } from './fill-defaults.js';
import { checkSchema } from './schema-check.js';
import { HEAVY_METHODS } from '../jsonrpc/methods.js';

/** Patterns one `method_limits` mapping may hold at most: each is a window per key (or IP) that calls it. */
export const METHOD_LIMITS_MAX = 64;

/**
 * `method_limits` (a plan's, the public path's): method pattern → requests per second, a sliding window of
 * its own per key (or client IP) beside the rps one. Absent or `{}`: none, and nothing is asked per call.
 */
function methodLimits(description: string) {
  const problem = `must be a mapping of at most ${METHOD_LIMITS_MAX} method patterns to requests per second (e.g. { eth_getLogs: 10, "debug_*": 1 })`;
  return Type.Optional(
    mapOf(
      Type.Integer({ minimum: 1, maximum: 1_000_000_000, description: 'Requests per second of the methods the pattern governs.' }),
      description,
      {
        maxProperties: METHOD_LIMITS_MAX,
        [Problem]: problem,
      },
    ),
  );
}

const METHOD_LIMITS_MEANING =
  'Method pattern → requests per second, per key, beside rps; a method matching several patterns is limited by the most specific (an exact name, else the longest prefix); absent: none.';

export const PlanSchema = section(
  {
    rps: Type.Integer({ minimum: 1, maximum: 1_000_000_000, description: 'Requests per second per endpoint key.', [Missing]: 'required' }),
    ru_per_second: optionalInt(1, 1_000_000_000, 'RU per second per key; absent: no RU rate limit.'),
    max_endpoints: int(0, 1_000_000, 10, 'Endpoints an owner on this plan may have.'),
    methods: methodDeny([], 'Methods keys of this plan may not call; default none.'),
    method_limits: methodLimits(METHOD_LIMITS_MEANING),
  },
  'A plan: limits applied per endpoint key.',
);

/** The plans an absent `plans` section stands for; a `plans` section replaces them as a whole. */
const DEFAULT_PLANS = {
  free: { rps: 100, max_endpoints: 10 },
  growth: { rps: 1500, max_endpoints: 50 },
  premium: { rps: 5000, ru_per_second: 500_000, max_endpoints: 200 },
};

const PLANS_PROBLEM = 'must be a mapping of at least one plan name to its limits';

export const PlansSchema = mapOf(PlanSchema, 'Plans by name; this section replaces the default plans as a whole.', {
  default: DEFAULT_PLANS,
  minProperties: 1,
  [Problem]: PLANS_PROBLEM,
});

/** A plan as the runtime reads it. */
export type PlanConfig = Static<typeof PlanSchema> & {
  /** The plan's name: its key in `plans`. */
  name: string;
};

export const PublicSchema = section(
  {
    rps_per_ip: int(1, 1_000_000_000, 10, 'Requests per second per client IP on the keyless path.'),
    max_batch: int(1, 100_000, 10, 'Items in one batch on the keyless path.'),
    methods: methodDeny(
      HEAVY_METHODS,
      "Methods the keyless path may not call; default the catalogue's heavy ones (traces, the whole mempool), which one IP within its rate could make a node re-execute whole blocks for; deny: [] serves them.",
    ),
    method_limits: methodLimits(METHOD_LIMITS_MEANING.replace('per key', 'per client IP').replace('beside rps', 'beside rps_per_ip')),
  },
  'The keyless path: its rates, its batch size, and the methods it may not call.',
);

const PLAN_NAME = /^[a-z0-9][a-z0-9_-]{0,31}$/;

/** The plans, checked already against their schema: names, and each plan's method patterns. */
export function namePlans(plans: Static<typeof PlansSchema>, errors: Errors): Record<string, PlanConfig> {
  const out: Record<string, PlanConfig> = {};
  for (const [name, p] of Object.entries(plans)) {
    const path = `plans.${name}`;
    if (!PLAN_NAME.test(name)) errors.push(`${path}: a plan name is lowercase letters, digits, '_' and '-'`);
    checkPatterns(p.methods.deny, `${path}.methods.deny`, errors);
    out[name] = { name, ...p, method_limits: readMethodLimits(p.method_limits, `${path}.method_limits`, errors) };
  }
  return out;
}

/** The `plans` section alone (the operator commands read it, with `storage`: config/load.ts). */
export function readPlans(raw: unknown, errors: Errors): Record<string, PlanConfig> {
  return namePlans(checkSchema(PlansSchema, withoutNulls(PlansSchema, raw), 'plans', errors), errors);
}

/** The public section, checked already against its schema: its method_limits' patterns. */
export function readPublic(p: Static<typeof PublicSchema>, errors: Errors): Static<typeof PublicSchema> {
  return { ...p, method_limits: readMethodLimits(p.method_limits, 'public.method_limits', errors) };
}

/**
 * A `method_limits` mapping whose every pattern is one of the catalogue (as any method list's), each error
 * naming its key path; `{}` reads as absent, so the request path asks one question when none is set.
 */
function readMethodLimits(limits: Record<string, number> | undefined, path: string, errors: Errors): Record<string, number> | undefined {
  if (limits === undefined) return undefined;
  const patterns = Object.keys(limits);
  for (const p of patterns) {
    const problem = patternProblem(p);
    if (problem !== undefined) errors.push(`${path}.${p}: ${problem}`);
  }
  return patterns.length === 0 ? undefined : limits;
}
