/**
 * A section's defaults filled in from its schema: what a key left out (or written empty) reads as. Kept
 * apart from the error wording (config/schema-check.ts) so that reading DEFAULTS loads no validator.
 */
import type { TSchema } from './typebox.js';
import { isObject, type Raw } from './checks.js';

type Node = TSchema;

/**
 * A copy of `v` without null-valued keys: YAML's `key:` with nothing after it leaves the key at its
 * default. An entry of a mapping of names (`chains: { devnet: }`) is kept, as an empty entry, so it is
 * reported rather than dropped; a null list item or value of a name is kept, to be refused.
 */
export function withoutNulls(schema: Node, v: unknown): unknown {
  if (v === null) return undefined;
  if (Array.isArray(v)) return v.map((x) => (schema.items === undefined || x === null ? x : withoutNulls(schema.items as Node, x)));
  if (!isObject(v)) return v;
  const properties = schema.properties as Record<string, Node> | undefined;
  const entry = schema.patternProperties === undefined ? undefined : (Object.values(schema.patternProperties)[0] as Node);
  const out: Raw = {};
  for (const [k, x] of Object.entries(v)) {
    const s = properties?.[k] ?? entry;
    if (s === undefined) out[k] = x;
    else if (x !== null && x !== undefined) out[k] = withoutNulls(s, x);
    else if (entry !== undefined) out[k] = entry.type === 'object' ? {} : x;
  }
  return out;
}

/**
 * Fills every absent key that has a default, down through sections, mappings and lists. `complete`: a new
 * object per section, in its declared key order, with every declared key (undefined when it has no default).
 */
export function fillDefaults(schema: Node, v: unknown, complete: boolean): unknown {
  let value = v;
  if (value === undefined) {
    if (schema.default === undefined) return undefined;
    value = structuredClone(schema.default);
  }
  if (Array.isArray(value) && schema.items !== undefined) {
    const items = schema.items as Node;
    return value.map((x) => (x === undefined ? x : fillDefaults(items, x, complete)));
  }
  if (!isObject(value)) return value;
  const properties = schema.properties as Record<string, Node> | undefined;
  const pattern = schema.patternProperties as Record<string, Node> | undefined;
  // A union (`methods: { deny } | 'auto'`): kept as given; its reader fills what it leaves out.
  if (properties === undefined && pattern === undefined) return value;
  const out: Raw = complete ? {} : value;
  if (properties !== undefined) {
    for (const [k, s] of Object.entries(properties)) {
      const filled = fillDefaults(s, value[k], complete);
      if (filled !== undefined || complete) out[k] = filled;
    }
  } else if (pattern !== undefined) {
    const s = Object.values(pattern)[0] as Node;
    for (const k of Object.keys(value)) out[k] = fillDefaults(s, value[k], complete);
  }
  return out;
}
