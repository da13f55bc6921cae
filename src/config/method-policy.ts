/**
 * The operator's method policy as the config writes it: `methods` lists of patterns (a chain's allow and
 * deny, a plan's and the public path's deny, an upstream's deny) and RU prices by method name. The
 * schemas declare their shape; the rules below check every pattern and every priced name against the
 * catalogue the same way wherever it is written, each error naming its key path.
 */
import { type Static, Type } from './typebox.js';
import type { Errors } from './checks.js';
import { int, mapOf, optionalInt, Problem, section, stringList } from './keys.js';
import { didYouMean, patternProblem } from '../jsonrpc/method-patterns.js';
import { isAllowedMethod } from '../jsonrpc/methods.js';

const PATTERNS_PROBLEM = "must be a list of method names or prefixes ending in '*' (e.g. [eth_getLogs, debug_*])";

/** A list of method patterns: an exact name, or a prefix ending in '*'. */
function patterns(def: readonly string[] | undefined, description: string) {
  return stringList(def === undefined ? undefined : [...def], description, PATTERNS_PROBLEM);
}

/**
 * `methods: { deny: [...] }` (a plan's, the public path's, an upstream's): `deny` left out denies `absent`
 * (default none), while an empty list denies nothing.
 */
export function methodDeny(absent: readonly string[], description: string) {
  return section({ deny: patterns(absent, 'Patterns of methods refused.') }, description);
}

/** Method patterns that remove methods. */
export type MethodDeny = Static<ReturnType<typeof methodDeny>>;

/** A chain's methods: `allow`, when given, limits the chain to its patterns; `deny` removes; deny wins. */
export const MethodRulesSchema = section(
  {
    allow: Type.Optional(patterns(undefined, 'Patterns of the only methods served; absent: every method of the catalogue.')),
    deny: patterns([], 'Patterns of methods the chain does not serve, whatever allow says.'),
  },
  'The methods the chain serves, over the catalogue (evm only); default all of them.',
);
export type MethodRules = Static<typeof MethodRulesSchema>;

/** Method name → RU (ru.methods, a chain's ru.methods); the names are checked against the catalogue. */
export function methodCosts(description: string) {
  return mapOf(int(0, 1_000_000, 0, 'RU of one call of the method.'), description, {
    default: {},
    [Problem]: 'must be a mapping of method names to RU',
  });
}

/** A chain's own RU prices, over ru.methods and the built-in costs. */
export const ChainRuSchema = section(
  {
    methods: methodCosts('Method → RU on this chain; a method without an entry costs what it costs everywhere.'),
    default: optionalInt(0, 1_000_000, 'RU of a method without a cost of its own on this chain; absent: ru.default.'),
  },
  "The chain's own RU prices over ru (evm only); default none.",
);
export type ChainRu = Static<typeof ChainRuSchema>;

/** Each pattern of the list at `path` must match a method the catalogue serves (or a whole namespace). */
export function checkPatterns(list: readonly string[] | undefined, path: string, errors: Errors): void {
  list?.forEach((p, i) => {
    const problem = patternProblem(p);
    if (problem !== undefined) errors.push(`${path}[${i}]: ${problem}`);
  });
}

/** A chain's allow and deny; an empty allow list would serve nothing, so it is refused. */
export function checkMethodRules(rules: MethodRules, path: string, errors: Errors): void {
  checkPatterns(rules.allow, `${path}.allow`, errors);
  if (rules.allow !== undefined && rules.allow.length === 0)
    errors.push(`${path}.allow: an empty list would serve no method; leave allow out to serve every method`);
  checkPatterns(rules.deny, `${path}.deny`, errors);
}

/** A cost for a method outside the catalogue would never be charged: most likely a misspelt name, refused with the likely one. */
export function checkMethodCosts(costs: Readonly<Record<string, number>>, path: string, errors: Errors): void {
  for (const m of Object.keys(costs))
    if (!isAllowedMethod(m)) errors.push(`${path}.${m}: not a method the gateway serves (${didYouMean(m)})`);
}
