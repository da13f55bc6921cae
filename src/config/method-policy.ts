/**
 * The operator's method policy as the config writes it: `methods` lists of patterns (a chain's allow and
 * deny, a plan's and the public path's deny, an upstream's deny) and a chain's own RU prices. Every pattern
 * and every priced name is checked against the catalogue the same way wherever it is written, and each
 * error names its key path.
 */
import { type Errors, isObject, readInt, readObject } from './checks.js';
import { didYouMean, patternProblem } from '../jsonrpc/method-patterns.js';
import { isAllowedMethod } from '../jsonrpc/methods.js';

/** Method patterns that remove methods (an exact name, or a prefix ending in '*'). */
export interface MethodDeny {
  /** Patterns of methods refused; default none. */
  deny: string[];
}

/** A chain's methods: `allow`, when given, limits the chain to its patterns; `deny` removes; deny wins. */
export interface MethodRules extends MethodDeny {
  /** Patterns of the only methods served; undefined (the default): every method of the catalogue. */
  allow: string[] | undefined;
}

/** A chain's own RU prices, over ru.methods and the built-in costs. */
export interface ChainRu {
  /** Method → RU on this chain; a method without an entry costs what it costs everywhere. */
  methods: Record<string, number>;
  /** RU of a method that has no cost of its own (built-in or ru.methods) on this chain; undefined: ru.default. */
  default: number | undefined;
}

/** A list of patterns at `path`, each checked against the catalogue. */
function readPatterns(v: unknown, path: string, errors: Errors): string[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v) || v.some((p) => typeof p !== 'string' || p === '')) {
    errors.push(`${path}: must be a list of method names or prefixes ending in '*' (e.g. [eth_getLogs, debug_*])`);
    return [];
  }
  const patterns = v as string[];
  patterns.forEach((p, i) => {
    const problem = patternProblem(p);
    if (problem !== undefined) errors.push(`${path}[${i}]: ${problem}`);
  });
  return patterns;
}

/**
 * `<path>: { deny: [...] }` (a plan's, the public path's, an upstream's); `deny` left out denies `absent`
 * (default none), while an empty list denies nothing.
 */
export function readMethodDeny(v: unknown, path: string, errors: Errors, absent: readonly string[] = []): MethodDeny {
  const o = readObject(v, path, ['deny'], errors);
  return { deny: o.deny === undefined ? [...absent] : readPatterns(o.deny, `${path}.deny`, errors) };
}

/** A chain's `methods: { allow?: [...], deny?: [...] }`; an empty allow list would serve nothing, so it is refused. */
export function readMethodRules(v: unknown, path: string, errors: Errors): MethodRules {
  const o = readObject(v, path, ['allow', 'deny'], errors);
  let allow: string[] | undefined;
  if (o.allow !== undefined && o.allow !== null) {
    allow = readPatterns(o.allow, `${path}.allow`, errors);
    if (Array.isArray(o.allow) && o.allow.length === 0)
      errors.push(`${path}.allow: an empty list would serve no method; leave allow out to serve every method`);
  }
  return { allow, deny: readPatterns(o.deny, `${path}.deny`, errors) };
}

/**
 * A mapping of method names to RU at `path` (ru.methods, a chain's ru.methods). A cost for a method outside
 * the catalogue would never be charged: most likely a misspelt name, refused with the likely one.
 */
export function readMethodCosts(v: unknown, path: string, errors: Errors): Record<string, number> {
  const costs: Record<string, number> = {};
  if (v === undefined || v === null) return costs;
  if (!isObject(v)) {
    errors.push(`${path}: must be a mapping of method names to RU`);
    return costs;
  }
  for (const [m, c] of Object.entries(v)) {
    costs[m] = readInt(c, `${path}.${m}`, 0, 0, 1_000_000, errors);
    if (!isAllowedMethod(m)) errors.push(`${path}.${m}: not a method the gateway serves (${didYouMean(m)})`);
  }
  return costs;
}

/** A chain's `ru: { methods?: {...}, default?: N }`. */
export function readChainRu(v: unknown, path: string, errors: Errors): ChainRu {
  const o = readObject(v, path, ['methods', 'default'], errors);
  return {
    methods: readMethodCosts(o.methods, `${path}.methods`, errors),
    default: o.default === undefined || o.default === null ? undefined : readInt(o.default, `${path}.default`, 0, 0, 1_000_000, errors),
  };
}
