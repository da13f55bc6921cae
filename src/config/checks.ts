/**
 * What every section's reader shares: the error list it appends to, so validation goes on after a bad
 * key and the operator sees every mistake at once, and the test for a YAML mapping.
 */
export type Errors = string[];
export type Raw = Record<string, unknown>;

export function isObject(v: unknown): v is Raw {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
