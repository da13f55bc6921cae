/**
 * How a config key is declared: one call per key gives its type, range, default and one-line meaning, as
 * a TypeBox schema (JSON Schema underneath, so chaingate.schema.json is these objects written out). The
 * operator's message for a wrong value is derived from the same declaration (config/schema-check.ts), so
 * no key spells its range twice. A message the schema cannot derive rides on a symbol, which JSON Schema
 * output never shows.
 */
import { FormatRegistry, type TLiteral, type TObject, type TProperties, type TSchema, type TUnion, Type } from './typebox.js';

/** The message for a wrong value, in place of the one derived from the type: text, or text from the value. */
export const Problem: unique symbol = Symbol('config.problem');
/** The message for a required key left out, when not the Problem one (e.g. `required with server.tls`). */
export const Missing: unique symbol = Symbol('config.missing');
/** A list item's error is reported at its list (`server.cors_origins: must be a list of ...`), as one problem. */
export const AtList: unique symbol = Symbol('config.at-list');

export interface Messages {
  [Problem]?: string | ((value: unknown) => string);
  [Missing]?: string;
  [AtList]?: true;
}

/** URL formats by the schemes they take; checked by parsing, as the gateway uses the URL later. */
const URL_SCHEMES = {
  'http-url': ['http:', 'https:'],
  'ws-url': ['ws:', 'wss:'],
  'postgres-url': ['postgres:', 'postgresql:'],
  'redis-url': ['redis:', 'rediss:'],
} as const;
export type UrlFormat = keyof typeof URL_SCHEMES;

for (const [format, schemes] of Object.entries(URL_SCHEMES)) {
  FormatRegistry.Set(format, (v) => {
    try {
      const u = new URL(v);
      return (schemes as readonly string[]).includes(u.protocol) && u.hostname !== '';
    } catch {
      return false;
    }
  });
}

/** "an http(s) URL", "a ws(s) URL", "a postgres/postgresql URL": as operators write them. */
export function urlWords(format: string): string {
  const schemes: readonly string[] = URL_SCHEMES[format as UrlFormat] ?? [];
  const names = schemes.map((s) => s.replace(':', ''));
  const what = names.length === 2 && names[1] === `${names[0]}s` ? `${names[0]}(s)` : names.join('/');
  return `${what.startsWith('http') ? 'an' : 'a'} ${what} URL`;
}

/** An integer key from `minimum` to `maximum`, `def` when absent. */
export function int(minimum: number, maximum: number, def: number, description: string, more: Messages = {}) {
  return Type.Integer({ minimum, maximum, default: def, description, ...more });
}

/** An integer key with no default of its own: absent means what its description says. */
export function optionalInt(minimum: number, maximum: number, description: string, more: Messages = {}) {
  return Type.Optional(Type.Integer({ minimum, maximum, description, ...more }));
}

export function num(minimum: number, maximum: number, def: number, description: string) {
  return Type.Number({ minimum, maximum, default: def, description });
}

export function bool(def: boolean, description: string) {
  return Type.Boolean({ default: def, description });
}

/** A non-empty string with a default. */
export function text(def: string, description: string, more: Messages & { pattern?: string } = {}) {
  return Type.String({ minLength: 1, default: def, description, ...more });
}

/** A non-empty string with no default: absent means what its description says. */
export function optionalText(description: string, more: Messages & { pattern?: string; minLength?: number } = {}) {
  return Type.Optional(Type.String({ minLength: 1, description, ...more }));
}

/** A URL of the given kind (required where its section needs it, optional otherwise). */
export function url(format: UrlFormat, description: string, more: Messages = {}) {
  // The pattern is for editors, which do not know the format; the format parses the URL, as the gateway will.
  const pattern = `^(${URL_SCHEMES[format].map((s) => s.replace(':', '')).join('|')})://`;
  return Type.String({ format, pattern, description, ...more });
}

/** One of a few words. */
export function oneOf<const T extends readonly string[]>(values: T, def: T[number], description: string) {
  const literals = values.map((v) => Type.Literal(v)) as TLiteral<T[number]>[];
  return Type.Union(literals, { default: def, description }) as TUnion<TLiteral<T[number]>[]>;
}

/** A list of non-empty strings; any wrong item is reported once, at the list. */
export function stringList(def: string[] | undefined, description: string, problem = 'must be a list of non-empty strings') {
  const item = Type.String({ minLength: 1, [AtList]: true, [Problem]: problem });
  return Type.Array(item, { ...(def ? { default: def } : {}), description, [Problem]: problem });
}

/** `message` for a string that breaks its pattern; what any other wrong value gets, for one that is no string. */
export function unlessNoString(message: string): (value: unknown) => string {
  return (v) => (typeof v === 'string' && v !== '' ? message : 'must be a non-empty string');
}

/** A section (or sub-mapping) with fixed keys: unknown keys are refused, naming the known ones. Absent: all defaults. */
export function section<T extends TProperties>(
  properties: T,
  description: string,
  more: Messages & { default?: unknown } = {},
): TObject<T> {
  return Type.Object(properties, { additionalProperties: false, default: {}, description, ...more });
}

/** A mapping of names the operator chooses (chains, plans, costs) to values of one schema. */
export function mapOf<T extends TSchema>(
  value: T,
  description: string,
  more: Messages & { default?: unknown; minProperties?: number; maxProperties?: number } = {},
) {
  return Type.Record(Type.String(), value, { description, ...more });
}
