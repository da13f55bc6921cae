/**
 * Checks a raw section against its declared schema: every error at once, each as `key.path: problem` in
 * the operator's words, derived from the failing key's own declaration (config/keys.ts). What comes back
 * is the section with every absent key at its default and every wrong one back at its default, so the
 * rules across keys (the readers beside each section's schema) still run and report their errors too.
 */
import type { Static, TSchema } from '@sinclair/typebox';
import { Errors as SchemaErrors, type ValueError, ValueErrorType } from '@sinclair/typebox/errors';
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

/** Takes a wrong value out, so its default (or nothing, for a list item) stands in its place. */
function removeAt(value: unknown, segments: readonly string[]): void {
  let node = value;
  for (const seg of segments.slice(0, -1)) node = isObject(node) || Array.isArray(node) ? (node as Raw)[seg] : undefined;
  const last = segments[segments.length - 1];
  if (last === undefined) return;
  if (Array.isArray(node)) node[Number(last)] = undefined;
  else if (isObject(node)) delete node[last];
}

/**
 * `given` (without nulls) checked against `schema`, whose key paths start at `root`: each problem is
 * appended to `errors`, one per key path, and the section comes back with its defaults filled in, its keys
 * in declared order. A required key left out stays undefined, so a section's reader looks before it uses one.
 */
export function checkSchema<T extends TSchema>(schema: T, given: unknown, root: string, errors: Errors): Static<T> {
  const value = fillDefaults(schema, structuredClone(given), false);
  const seen = new Set<string>();
  const wrong: string[][] = [];
  for (const e of SchemaErrors(schema, value)) {
    let segments = e.path
      .split('/')
      .slice(1)
      .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
    if ((e.schema as Node)[AtList]) segments = segments.slice(0, -1);
    const path = keyPath(root, segments, value);
    if (seen.has(path)) continue;
    seen.add(path);
    errors.push(`${path}: ${problemOf(e)}`);
    wrong.push(segments);
  }
  for (const segments of wrong) removeAt(value, segments);
  return fillDefaults(schema, value, true) as Static<T>;
}
