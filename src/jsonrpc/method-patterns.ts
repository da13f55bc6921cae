/**
 * Method patterns, as the operator writes them in the config's `methods` lists (a chain's allow and deny,
 * a plan's, the public path's, an upstream's): an exact method name (`eth_getLogs`), or a prefix ending in
 * `*` (`debug_*`, `eth_get*`; `*` alone is every method). Nothing else is a pattern: no `*` inside, no
 * character classes.
 */
import { ALLOWED_METHODS, isAllowedMethod } from './methods.js';

/**
 * Namespaces a whole-namespace pattern (`debug_*`) may name even while the catalogue serves none of its
 * methods: a policy that denies a family before (or after) the gateway serves it is harmless, and a
 * chain's deny list written for nodes without a trace module should not break on an upgrade.
 */
export const KNOWN_NAMESPACES: readonly string[] = Object.freeze(['eth_', 'net_', 'web3_', 'debug_', 'trace_', 'txpool_']);

/** Whether `method` matches one of `patterns`. */
export type MethodMatcher = (method: string) => boolean;

const NOTHING: MethodMatcher = () => false;

/** Compiled lists by identity: a config's lists are frozen and live until a reload replaces them. */
const compiled = new WeakMap<readonly string[], MethodMatcher>();

/**
 * The matcher of a list of patterns, made once per list (the list itself is the key, so a caller passes the
 * config's array and pays a lookup, not a compilation, per call). An empty list matches nothing.
 */
export function methodMatcher(patterns: readonly string[]): MethodMatcher {
  if (patterns.length === 0) return NOTHING;
  let m = compiled.get(patterns);
  if (m === undefined) {
    m = compileMatcher(patterns);
    compiled.set(patterns, m);
  }
  return m;
}

function compileMatcher(patterns: readonly string[]): MethodMatcher {
  const exact = new Set<string>();
  const prefixes: string[] = [];
  for (const p of patterns) {
    if (p.endsWith('*')) prefixes.push(p.slice(0, -1));
    else exact.add(p);
  }
  if (prefixes.includes('')) return () => true;
  if (prefixes.length === 0) return (method) => exact.has(method);
  return (method) => {
    if (exact.has(method)) return true;
    for (const prefix of prefixes) if (method.startsWith(prefix)) return true;
    return false;
  };
}

/** Whether `method` matches one of `patterns` (compiled once per list; see methodMatcher). */
export function matchesAny(patterns: readonly string[], method: string): boolean {
  return patterns.length > 0 && methodMatcher(patterns)(method);
}

/**
 * Why `pattern` is not a pattern of the catalogue, or undefined when it is: an exact name must be a method
 * the gateway serves (names are case-sensitive), a prefix must match one of them or be a whole known
 * namespace (KNOWN_NAMESPACES). The catalogue is read when called, so methods added to it are covered.
 */
export function patternProblem(pattern: string): string | undefined {
  const star = pattern.indexOf('*');
  if (star >= 0 && star !== pattern.length - 1) return `'${pattern}': a pattern is a method name, or a prefix ending in '*' (e.g. debug_*)`;
  if (star < 0) {
    if (isAllowedMethod(pattern)) return undefined;
    return `'${pattern}' is not a method the gateway serves (${didYouMean(pattern)})`;
  }
  const prefix = pattern.slice(0, -1);
  if (KNOWN_NAMESPACES.includes(prefix) || ALLOWED_METHODS.some((m) => m.startsWith(prefix))) return undefined;
  const lower = prefix.toLowerCase();
  const meant =
    KNOWN_NAMESPACES.find((ns) => ns === lower) ?? ALLOWED_METHODS.find((m) => m.toLowerCase().startsWith(lower))?.slice(0, prefix.length);
  const hint =
    meant !== undefined
      ? `did you mean ${meant}*?`
      : `names are case-sensitive; namespaces: ${KNOWN_NAMESPACES.map((ns) => `${ns}*`).join(', ')}`;
  return `'${pattern}' matches no method the gateway serves (${hint})`;
}

/**
 * The hint of a name outside the catalogue: the method it most likely means (the same name in another
 * case, else one at most two edits away), or a reminder that names are case-sensitive.
 */
export function didYouMean(name: string): string {
  const lower = name.toLowerCase();
  const meant = ALLOWED_METHODS.find((m) => m.toLowerCase() === lower) ?? closest(name);
  return meant !== undefined ? `did you mean ${meant}?` : 'names are case-sensitive, e.g. eth_getLogs';
}

/** The catalogue's method nearest to `name` within two edits, or undefined. */
function closest(name: string): string | undefined {
  let best: string | undefined;
  let bestDistance = 3;
  for (const m of ALLOWED_METHODS) {
    if (Math.abs(m.length - name.length) >= bestDistance) continue;
    const d = editDistance(name, m, bestDistance);
    if (d < bestDistance) {
      best = m;
      bestDistance = d;
    }
  }
  return best;
}

/** Levenshtein distance of a and b, or `limit` once it cannot be below it. */
function editDistance(a: string, b: string, limit: number): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    let rowBest = i;
    for (let j = 1; j <= b.length; j++) {
      const d = Math.min(previous[j]! + 1, row[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
      row.push(d);
      if (d < rowBest) rowBest = d;
    }
    if (rowBest >= limit) return limit;
    previous = row;
  }
  return Math.min(previous[b.length]!, limit);
}
