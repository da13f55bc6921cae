/**
 * An endpoint's restrictions as its owner sets them through the management API, the CLI and the
 * dashboard (field names as the API spells them), read from a request body with PATCH semantics: a field
 * left out keeps its value, `null` clears it (a list: no restriction; a flag or number: its default).
 * Each field's shape is declared once in a TypeBox schema; what a shape cannot say (an origin, a CIDR, a
 * method pattern, an address, a key) is checked after it; every problem is reported at once, each naming
 * its field, for one 400.
 */
import { Errors, type Static, type TSchema, Type, type ValueError, ValueErrorType } from '../config/typebox.js';
import { patternProblem } from '../jsonrpc/method-patterns.js';
import { contractEntryProblem } from './contracts.js';
import { ipEntryProblem, normaliseIpEntry } from './ip-ranges.js';
import { importJwtKey, JWT_ALGORITHMS, type JwtKeySetting } from './jwt.js';
import { normaliseOriginEntry, originEntryProblem } from './origins.js';

/** The limits of the lists (FENCE_LIMITS has each one's meaning and default). */
export interface FenceLimits {
  readonly origins: number;
  readonly origin_chars: number;
  readonly ips: number;
  readonly methods: number;
  readonly method_chars: number;
  readonly contracts: number;
  readonly jwt_keys: number;
  readonly jwt_key_id_chars: number;
  readonly jwt_key_chars: number;
  readonly jwt_max_lifetime_s: number;
}

/** The most each list may hold and the longest an entry may be, by default (a caller may pass lower or higher ones). */
export const FENCE_LIMITS: FenceLimits = Object.freeze({
  /** allowed_origins: entries; characters each (a host name is at most 253). */
  origins: 100,
  origin_chars: 300,
  /** allowed_ips: entries (an IPv6 CIDR is at most 43 characters). */
  ips: 200,
  /** allowed_methods: patterns; characters each. */
  methods: 100,
  method_chars: 64,
  /** allowed_contracts: addresses. */
  contracts: 1000,
  /** jwt_keys: keys; characters of an id; characters of a PEM or of the JSON of a JWK (an RSA-4096 key is about 800). */
  jwt_keys: 10,
  jwt_key_id_chars: 64,
  jwt_key_chars: 8192,
  /** jwt_max_lifetime_s: the highest an owner may set (7 days, in seconds). */
  jwt_max_lifetime_s: 604_800,
});

/** jwt_max_lifetime_s when not set: one hour, in seconds. */
export const DEFAULT_JWT_MAX_LIFETIME_S = 3600;

/** An endpoint's restrictions as stored: every field present; a list null when it restricts nothing. */
export interface FenceSettings {
  /** Origins and `*.` wildcards a browser's `Origin` must match (origins.ts); null: any. */
  allowed_origins: readonly string[] | null;
  /** Whether a request without `Origin` passes while allowed_origins is set (servers using the same key). */
  allow_no_origin: boolean;
  /** Client addresses and CIDR ranges (ip-ranges.ts), as `network/prefix`; null: any. */
  allowed_ips: readonly string[] | null;
  /** Method patterns (jsonrpc/method-patterns.ts), narrowing the plan's; null: the plan's. */
  allowed_methods: readonly string[] | null;
  /** Contract addresses, lower-case (contracts.ts); null: any. */
  allowed_contracts: readonly string[] | null;
  /** Whether the key may come in the URL's path; false: only in `X-API-Key` or `Authorization: Bearer`. */
  key_in_path: boolean;
  /** Public keys a request's JWT must be signed by (jwt.ts); null: no token required. */
  jwt_keys: readonly JwtKeySetting[] | null;
  /** The longest lifetime of a token, in seconds (default DEFAULT_JWT_MAX_LIFETIME_S). */
  jwt_max_lifetime_s: number;
}

/** The restrictions of an endpoint that has none. */
export const NO_FENCES: FenceSettings = Object.freeze({
  allowed_origins: null,
  allow_no_origin: false,
  allowed_ips: null,
  allowed_methods: null,
  allowed_contracts: null,
  key_in_path: true,
  jwt_keys: null,
  jwt_max_lifetime_s: DEFAULT_JWT_MAX_LIFETIME_S,
});

/** The fields of FenceSettings, as a body may carry them beside an endpoint's other fields. */
export const FENCE_FIELDS = Object.freeze(Object.keys(NO_FENCES) as Array<keyof FenceSettings>);

/** One problem of a body, naming its field (`allowed_ips[3]`). */
export interface FenceProblem {
  field: string;
  message: string;
}

const list = <T extends TSchema>(items: T, max: number) => Type.Array(items, { minItems: 1, maxItems: max });

/**
 * Each field's shape when it is not null (null, which clears a field, is taken before the schema is asked:
 * a union with null would make TypeBox report the union's failure alone, not the entry that broke it).
 */
function fieldSchemas(limits: FenceLimits) {
  const jwtKey = Type.Object(
    {
      id: Type.String({ minLength: 1, maxLength: limits.jwt_key_id_chars, pattern: '^[A-Za-z0-9._:-]+$' }),
      alg: Type.Union(JWT_ALGORITHMS.map((a) => Type.Literal(a))),
      jwk: Type.Optional(Type.Object({ kty: Type.String() })),
      pem: Type.Optional(Type.String({ minLength: 1, maxLength: limits.jwt_key_chars })),
    },
    { additionalProperties: false },
  );
  return Type.Object({
    allowed_origins: Type.Optional(list(Type.String({ minLength: 1, maxLength: limits.origin_chars }), limits.origins)),
    allow_no_origin: Type.Optional(Type.Boolean()),
    allowed_ips: Type.Optional(list(Type.String({ minLength: 1, maxLength: 64 }), limits.ips)),
    allowed_methods: Type.Optional(list(Type.String({ minLength: 1, maxLength: limits.method_chars }), limits.methods)),
    allowed_contracts: Type.Optional(list(Type.String({ minLength: 1, maxLength: 42 }), limits.contracts)),
    key_in_path: Type.Optional(Type.Boolean()),
    jwt_keys: Type.Optional(list(jwtKey, limits.jwt_keys)),
    jwt_max_lifetime_s: Type.Optional(Type.Integer({ minimum: 1, maximum: limits.jwt_max_lifetime_s })),
  });
}
type FenceValues = Static<ReturnType<typeof fieldSchemas>>;
/** A body's fence fields: each a value, null (clear it) or absent (keep it). */
type FencePatch = { [K in keyof FenceValues]?: FenceValues[K] | null };

const schemas = new WeakMap<FenceLimits, ReturnType<typeof fieldSchemas>>();

/**
 * `current` changed by the fence fields of `body` (other fields are ignored: the caller reads them), or
 * every problem found. Entries come back normalised (origins lower-case without default ports, CIDRs
 * as network/prefix, addresses lower-case) and without duplicates.
 */
export function applyFencePatch(
  current: FenceSettings,
  body: Record<string, unknown>,
  limits: FenceLimits = FENCE_LIMITS,
): { ok: true; settings: FenceSettings } | { ok: false; problems: FenceProblem[] } {
  const patch: Record<string, unknown> = {};
  const values: Record<string, unknown> = {};
  for (const field of FENCE_FIELDS) {
    if (!Object.hasOwn(body, field)) continue;
    patch[field] = body[field];
    if (body[field] !== null) values[field] = body[field];
  }
  let schema = schemas.get(limits);
  if (schema === undefined) schemas.set(limits, (schema = fieldSchemas(limits)));
  const problems = [...Errors(schema, values)].map((e) => shapeProblem(e, limits));
  if (problems.length > 0) return { ok: false, problems: dedupe(problems) };
  const typed = patch as FencePatch;
  const entryProblems = [
    ...listProblems('allowed_origins', typed.allowed_origins, originEntryProblem),
    ...listProblems('allowed_ips', typed.allowed_ips, ipEntryProblem),
    ...listProblems('allowed_methods', typed.allowed_methods, patternProblem),
    ...listProblems('allowed_contracts', typed.allowed_contracts, contractEntryProblem),
    ...keyProblems(typed.jwt_keys as JwtKeySetting[] | null | undefined, limits),
  ];
  if (entryProblems.length > 0) return { ok: false, problems: entryProblems };
  const next: FenceSettings = {
    allowed_origins: pick(typed.allowed_origins, current.allowed_origins, (l) => unique(l.map(normaliseOriginEntry))),
    allow_no_origin: typed.allow_no_origin === undefined ? current.allow_no_origin : (typed.allow_no_origin ?? NO_FENCES.allow_no_origin),
    allowed_ips: pick(typed.allowed_ips, current.allowed_ips, (l) => unique(l.map(normaliseIpEntry))),
    allowed_methods: pick(typed.allowed_methods, current.allowed_methods, unique),
    allowed_contracts: pick(typed.allowed_contracts, current.allowed_contracts, (l) => unique(l.map((a) => a.toLowerCase()))),
    key_in_path: typed.key_in_path === undefined ? current.key_in_path : (typed.key_in_path ?? NO_FENCES.key_in_path),
    jwt_keys: pick(typed.jwt_keys as JwtKeySetting[] | null | undefined, current.jwt_keys, (keys) => keys),
    jwt_max_lifetime_s:
      typed.jwt_max_lifetime_s === undefined ? current.jwt_max_lifetime_s : (typed.jwt_max_lifetime_s ?? NO_FENCES.jwt_max_lifetime_s),
  };
  return { ok: true, settings: Object.freeze(next) };
}

/** Stored settings are read without the limits: an operator who lowers one later must not make stored endpoints unreadable. */
const STORED_LIMITS: FenceLimits = Object.freeze(
  Object.fromEntries(Object.keys(FENCE_LIMITS).map((k) => [k, Number.MAX_SAFE_INTEGER])) as unknown as FenceLimits,
);

/** The settings a store kept (as JSON text, or null for none), checked again: stored text that is not valid throws. */
export function storedFences(text: string | null): FenceSettings {
  if (text === null) return NO_FENCES;
  const read = applyFencePatch(NO_FENCES, JSON.parse(text) as Record<string, unknown>, STORED_LIMITS);
  if (!read.ok) throw new Error(`stored endpoint restrictions are not valid: ${fenceProblemsText(read.problems)}`);
  return read.settings;
}

/** The problems as one line, for a 400's message. */
export function fenceProblemsText(problems: readonly FenceProblem[]): string {
  return problems.map((p) => `${p.field}: ${p.message}`).join('; ');
}

/** Whether the settings restrict anything. */
export function hasFences(s: FenceSettings): boolean {
  return (
    s.allowed_origins !== null ||
    s.allowed_ips !== null ||
    s.allowed_methods !== null ||
    s.allowed_contracts !== null ||
    !s.key_in_path ||
    s.jwt_keys !== null
  );
}

function pick<T>(
  given: readonly T[] | null | undefined,
  current: readonly T[] | null,
  normalise: (l: readonly T[]) => readonly T[],
): readonly T[] | null {
  if (given === undefined) return current;
  return given === null ? null : Object.freeze(normalise(given));
}

function unique<T>(l: readonly T[]): T[] {
  return [...new Set(l)];
}

function listProblems(
  field: string,
  given: readonly string[] | null | undefined,
  problem: (entry: string) => string | undefined,
): FenceProblem[] {
  if (given == null) return [];
  return given.flatMap((entry, i) => {
    const p = problem(entry);
    return p === undefined ? [] : [{ field: `${field}[${i}]`, message: p }];
  });
}

function keyProblems(keys: readonly JwtKeySetting[] | null | undefined, limits: FenceLimits): FenceProblem[] {
  if (keys == null) return [];
  const seen = new Set<string>();
  return keys.flatMap((key, i) => {
    const field = `jwt_keys[${i}]`;
    if ((key.jwk === undefined) === (key.pem === undefined))
      return [{ field, message: `key '${key.id}': give the public key as jwk or as pem, one of them` }];
    if (seen.has(key.id)) return [{ field, message: `key id '${key.id}' is given twice` }];
    seen.add(key.id);
    if (key.jwk !== undefined && JSON.stringify(key.jwk).length > limits.jwt_key_chars) {
      return [{ field, message: `key '${key.id}': a JWK of at most ${limits.jwt_key_chars} characters` }];
    }
    const imported = importJwtKey(key);
    return typeof imported === 'string' ? [{ field, message: imported }] : [];
  });
}

/** `allowed_ips[3]` from `/allowed_ips/3`. */
function fieldOf(path: string): string {
  return path
    .split('/')
    .slice(1)
    .reduce((field, seg) => (/^\d+$/.test(seg) ? `${field}[${seg}]` : field === '' ? seg : `${field}.${seg}`), '');
}

function shapeProblem(e: ValueError, limits: FenceLimits): FenceProblem {
  const field = fieldOf(e.path);
  const top = field.replace(/[[.].*$/, '') as keyof FenceSettings;
  const s = e.schema as { maxItems?: number; maxLength?: number; minimum?: number; maximum?: number };
  switch (e.type) {
    case ValueErrorType.ArrayMaxItems:
      return { field, message: `at most ${s.maxItems} entries` };
    case ValueErrorType.ArrayMinItems:
      return { field, message: 'an empty list would refuse everything; send null to remove the restriction' };
    case ValueErrorType.StringMaxLength:
      return { field, message: `at most ${s.maxLength} characters` };
    case ValueErrorType.StringMinLength:
      return { field, message: 'must not be empty' };
    case ValueErrorType.IntegerMinimum:
    case ValueErrorType.IntegerMaximum:
    case ValueErrorType.Integer:
      return { field, message: `must be a whole number of seconds from 1 to ${limits.jwt_max_lifetime_s}` };
    case ValueErrorType.Union:
      if (field.endsWith('.alg'))
        return {
          field,
          message: `must be one of ${JWT_ALGORITHMS.join(', ')} (HS* and none are refused: only public keys are registered)`,
        };
      break;
    case ValueErrorType.StringPattern:
      return { field, message: 'letters, digits and . _ : - only' };
    case ValueErrorType.ObjectAdditionalProperties:
      return { field, message: 'a key is {id, alg, jwk} or {id, alg, pem}' };
    case ValueErrorType.String:
      if (top !== 'jwt_keys') return { field, message: ENTRY[top] ?? e.message };
  }
  return { field, message: EXPECTED[top] ?? e.message };
}

/** What an entry of each list must be. */
const ENTRY: Partial<Record<string, string>> = {
  allowed_origins: 'must be an origin as a string',
  allowed_ips: 'must be an address or CIDR range as a string',
  allowed_methods: 'must be a method pattern as a string',
  allowed_contracts: 'must be an address as a string',
};

/** What each field must be, for the problems whose words are the field's shape. */
const EXPECTED: Partial<Record<string, string>> = {
  allowed_origins: 'must be a list of origins (https://app.example.com, *.example.com) or null',
  allow_no_origin: 'must be true, false or null',
  allowed_ips: 'must be a list of addresses and CIDR ranges (192.0.2.0/24, 2001:db8::/32) or null',
  allowed_methods: 'must be a list of method patterns (eth_call, eth_get*) or null',
  allowed_contracts: 'must be a list of addresses (0x and 40 hex digits) or null',
  key_in_path: 'must be true, false or null',
  jwt_keys: `must be a list of {id, alg, jwk} or {id, alg, pem} (alg: ${JWT_ALGORITHMS.join(', ')}; id: letters, digits, . _ : -) or null`,
  jwt_max_lifetime_s: 'must be a whole number of seconds or null',
};

function dedupe(problems: FenceProblem[]): FenceProblem[] {
  const seen = new Set<string>();
  return problems.filter((p) => {
    const key = `${p.field}\n${p.message}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}
