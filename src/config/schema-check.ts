/**
 * Checks a raw section against its declared schema: every error at once, each as `key.path: problem` in
 * the operator's words, derived from the failing key's own declaration (config/keys.ts). What comes back
 * is the section with every absent key at its default and every wrong one back at its default, so the
 * rules across keys (the readers beside each section's schema) still run and report their errors too.
 */
import type { Static, TSchema } from './typebox.js';
import { Errors as SchemaErrors, type ValueError, ValueErrorType } from './typebox.js';
import { type Errors, isObject, type Raw } from './checks.js';
import { fillDefaults } from './fill-defaults.js';
import { AtList, type Messages, Missing, Problem, urlWords } from './keys.js';

type Node = TSchema & Messages;

/** The operator's words for a value its declaration refuses. */
function derivedProblem(s: Node): string {
  switch (s.type) {
    case 'integer':
      return `must be an integer from ${s.minimum} to ${s.maximum}`;
    case 'number':
      return `must be a number from ${s.minimum} to ${s.maximum}`;
    case 'boolean':
      return 'must be true or false';
    case 'string':
      return typeof s.format === 'string' ? `must be ${urlWords(s.format)}` : 'must be a non-empty string';
    case 'object':
      return 'must be a mapping';
    case 'array':
      return 'must be a list of non-empty strings';
  }
  const words = Array.isArray(s.anyOf) ? (s.anyOf as Node[]).map((v) => v.const) : [];
  return `must be one of ${words.join(', ')}`;
}

function problemOf(e: ValueError): string {
  const s = e.schema as Node;
  if (e.type === ValueErrorType.ObjectAdditionalProperties) return `unknown key (known: ${Object.keys(s.properties ?? {}).join(', ')})`;
  if (e.type === ValueErrorType.ObjectRequiredProperty && s[Missing] !== undefined) return s[Missing];
  const p = s[Problem];
  if (p !== undefined) return typeof p === 'string' ? p : p(e.value);
  return derivedProblem(s);
}

/** `chains.devnet.upstreams[0].url` from the JSON pointer's segments, as operators read key paths. */
function keyPath(root: string, segments: readonly string[], value: unknown): string {
  let path = root;
  let node = value;
  for (const seg of segments) {
    path = Array.isArray(node) ? `${path}[${seg}]` : path ? `${path}.${seg}` : seg;
    node = isObject(node) || Array.isArray(node) ? (node as Raw)[seg] : undefined;
  }
  return path === '' ? '(top level)' : path;
}

/** The mapping or list that holds the value at `segments`, and the value's key in it. */
function parentOf(value: unknown, segments: readonly string[]): { parent: unknown; key: string | undefined } {
  let parent = value;
  for (const seg of segments.slice(0, -1)) parent = isObject(parent) || Array.isArray(parent) ? (parent as Raw)[seg] : undefined;
  return { parent, key: segments[segments.length - 1] };
}

/** Takes a wrong value out, so its default (or nothing, for a list item) stands in its place. */
function removeAt(value: unknown, segments: readonly string[]): void {
  const { parent, key } = parentOf(value, segments);
  if (key === undefined) return;
  if (Array.isArray(parent)) parent[Number(key)] = undefined;
  else if (isObject(parent)) delete parent[key];
}

/** The JSON pointer's segments, less the item's own when its list takes the blame. */
function segmentsOf(e: ValueError): string[] {
  const segments = e.path
    .split('/')
    .slice(1)
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
  return (e.schema as Node)[AtList] ? segments.slice(0, -1) : segments;
}

/**
 * `given` (without nulls) checked against `schema`, whose key paths start at `root`: each problem is
 * appended to `errors`, one per key path, and the section comes back with its defaults filled in, its keys
 * in declared order. A required key left out stays undefined, so a section's reader looks before it uses one.
 * A section or entry that is not a mapping reads as an empty one, whose own required keys are then reported
 * too (a chain written `devnet: x` lacks its upstreams); a list item that is not one is left out.
 */
export function checkSchema<T extends TSchema>(schema: T, given: unknown, root: string, errors: Errors): Static<T> {
  // The section hangs under a holder, so that the section itself can be emptied or taken out too.
  const holder: Raw = { section: fillDefaults(schema, structuredClone(given), false) };
  const seen = new Set<string>();
  const wrong: string[][] = [];
  // Each pass empties the wrong mappings it finds; a mapping is nested at most a few levels deep.
  for (let pass = 0; pass < 8; pass++) {
    let emptied = false;
    for (const e of SchemaErrors(schema, holder.section)) {
      const segments = segmentsOf(e);
      const path = keyPath(root, segments, holder.section);
      if (seen.has(path)) continue;
      seen.add(path);
      errors.push(`${path}: ${problemOf(e)}`);
      const { parent, key } = parentOf(holder, ['section', ...segments]);
      if (e.type === ValueErrorType.Object && isObject(parent) && key !== undefined) {
        parent[key] = {};
        emptied = true;
      } else wrong.push(['section', ...segments]);
    }
    if (!emptied) break;
    holder.section = fillDefaults(schema, holder.section, false);
  }
  for (const segments of wrong) removeAt(holder, segments);
  return fillDefaults(schema, holder.section, true) as Static<T>;
}
