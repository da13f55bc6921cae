/**
 * An endpoint's restrictions compiled once (when its key is looked up, or its settings change) into the
 * matchers every request and call of it is checked with. The checks are results, not exceptions: each
 * returns undefined (allowed) or a FenceRefusal, whose message names what was refused (the origin, the
 * address, the method) and never the entries of the list, so a client learns nothing of the owner's
 * settings. A refused call never reaches a node and is charged nothing: the checks run before both.
 */
import type { ErrorCode } from '../errors.js';
import { type MethodMatcher, methodMatcher } from '../jsonrpc/method-patterns.js';
import { type ContractOptions, fencesMethod, refuseContracts } from './contracts.js';
import { compileIpRanges, type IpMatcher } from './ip-ranges.js';
import { TokenVerifier } from './jwt.js';
import { compileOrigins, type OriginMatcher } from './origins.js';
import { loadRawTransactionDecoder } from './raw-transaction.js';
import type { FenceSettings } from './settings.js';

/** What a refusal is about; each has its row in the error table (FENCE_ERRORS). */
export type FenceKind = 'origin' | 'ip' | 'method' | 'contract' | 'token' | 'key_in_path';

/** A refusal: its kind and the client's message. */
export interface FenceRefusal {
  kind: FenceKind;
  message: string;
}

/**
 * The error table's row of each kind. A key sent in the URL to an endpoint that takes it only in a header
 * is answered as a missing key (401): the URL's copy is worth nothing, as if it were not there.
 */
export const FENCE_ERRORS: Readonly<Record<FenceKind, ErrorCode>> = Object.freeze({
  origin: 'origin_not_allowed',
  ip: 'ip_not_allowed',
  method: 'method_not_allowed_for_key',
  contract: 'contract_not_allowed',
  token: 'token_refused',
  key_in_path: 'unauthorized',
});

/** Options the operator sets for every endpoint. */
export interface FenceOptions extends ContractOptions {
  /** Milliseconds since the epoch, for token times (tests drive a fake clock). */
  now?: () => number;
}

/** The compiled restrictions of one endpoint. */
export interface EndpointFences {
  readonly settings: FenceSettings;
  /** Null when the list is not set (anything passes). */
  readonly origins: OriginMatcher | null;
  readonly ips: IpMatcher | null;
  readonly methods: MethodMatcher | null;
  readonly contracts: ReadonlySet<string> | null;
  readonly tokens: TokenVerifier | null;
  readonly options: ContractOptions;
  /** Whether any call's method or params are checked (refuseCall has something to do). */
  readonly checksCalls: boolean;
}

/** The matchers of an endpoint's settings (validated: see settings.ts), made once per settings value. */
export function compileFences(settings: FenceSettings, options: FenceOptions = { balance: false }): EndpointFences {
  const contracts = settings.allowed_contracts === null ? null : new Set(settings.allowed_contracts);
  // The raw-transaction decoder loads in the background, so the first eth_sendRawTransaction rarely waits for it.
  // A failed load is answered where it matters: rawTransactionTarget refuses the transaction.
  if (contracts !== null) loadRawTransactionDecoder().catch(() => undefined);
  const tokenOptions =
    options.now === undefined
      ? { maxLifetimeS: settings.jwt_max_lifetime_s }
      : { maxLifetimeS: settings.jwt_max_lifetime_s, now: options.now };
  const methods = settings.allowed_methods === null ? null : methodMatcher(settings.allowed_methods);
  return Object.freeze({
    settings,
    origins: settings.allowed_origins === null ? null : compileOrigins(settings.allowed_origins),
    ips: settings.allowed_ips === null ? null : compileIpRanges(settings.allowed_ips),
    methods,
    contracts,
    tokens: settings.jwt_keys === null ? null : new TokenVerifier(settings.jwt_keys, tokenOptions),
    options: { balance: options.balance },
    checksCalls: methods !== null || contracts !== null,
  });
}

/** Where a request's key came from, as the server read it. */
export type KeyPlace = 'path' | 'header';

/** What the checks of a whole request (HTTP, WebSocket upgrade, Beacon, event stream) read from it. */
export interface RequestFacts {
  /** The `Origin` header; undefined or '' when absent. */
  origin: string | undefined;
  /** The client's address (as `trust_proxy` reads it), as text or as the socket's 4 or 16 bytes. */
  ip: string | Uint8Array;
  keyPlace: KeyPlace;
}

/**
 * Why a request is refused before its body is read, or undefined: the key's place, then the client's
 * address, then its origin (the token has its own check: refuseToken).
 */
export function refuseRequest(f: EndpointFences, facts: RequestFacts): FenceRefusal | undefined {
  if (facts.keyPlace === 'path' && !f.settings.key_in_path) {
    return { kind: 'key_in_path', message: 'This key is accepted only in a header (X-API-Key or Authorization: Bearer), not in the URL' };
  }
  if (f.ips !== null) {
    const allowed = typeof facts.ip === 'string' ? f.ips.matchesText(facts.ip) : f.ips.matchesBytes(facts.ip);
    if (!allowed) return { kind: 'ip', message: `Client address ${addressText(facts.ip)} is not allowed for this key` };
  }
  if (f.origins !== null) {
    const origin = facts.origin;
    if (origin === undefined || origin === '') {
      if (!f.settings.allow_no_origin) return { kind: 'origin', message: 'A request without Origin is not allowed for this key' };
    } else if (!f.origins(origin)) {
      return { kind: 'origin', message: `Origin ${JSON.stringify(truncate(origin))} is not allowed for this key` };
    }
  }
  return undefined;
}

/**
 * Why a request's signed token is refused, or undefined; `token` as readCredentials found it (in
 * `Authorization: Bearer`, or a WebSocket subprotocol), undefined when the request has none. A promise the
 * first time a token is seen (its signature is verified then).
 */
export function refuseToken(f: EndpointFences, token: string | undefined): FenceRefusal | undefined | Promise<FenceRefusal | undefined> {
  if (f.tokens === null) return undefined;
  const checked = f.tokens.check(token);
  if (checked instanceof Promise) return checked.then(tokenRefusal);
  return tokenRefusal(checked);
}

function tokenRefusal(c: { ok: true } | { ok: false; message: string }): FenceRefusal | undefined {
  return c.ok ? undefined : { kind: 'token', message: `Signed token refused: ${c.message}` };
}

/**
 * Why one JSON-RPC call is refused by the method and contract lists, or undefined (after the call's params
 * are validated: the contract checks read them). A promise only for `eth_sendRawTransaction` while the
 * transaction decoder loads.
 */
export function refuseCall(
  f: EndpointFences,
  method: string,
  params: readonly unknown[],
): FenceRefusal | undefined | Promise<FenceRefusal | undefined> {
  if (!f.checksCalls) return undefined;
  const byMethod = refuseMethod(f, method);
  if (byMethod !== undefined) return byMethod;
  if (f.contracts === null || !fencesMethod(method, f.options)) return undefined;
  const refused = refuseContracts(f.contracts, method, params, f.options);
  if (refused instanceof Promise) return refused.then(contractRefusal);
  return contractRefusal(refused);
}

/** Why the method list refuses `method`, or undefined: readable before the call's params are (refuseCall checks it too). */
export function refuseMethod(f: EndpointFences, method: string): FenceRefusal | undefined {
  if (f.methods === null || f.methods(method)) return undefined;
  return { kind: 'method', message: `Method ${truncate(method)} is not allowed for this key` };
}

function contractRefusal(message: string | undefined): FenceRefusal | undefined {
  return message === undefined ? undefined : { kind: 'contract', message };
}

function addressText(ip: string | Uint8Array): string {
  if (typeof ip === 'string') return truncate(ip);
  if (ip.length === 4) return ip.join('.');
  const words: string[] = [];
  for (let i = 0; i + 1 < ip.length; i += 2) words.push(((ip[i]! << 8) | ip[i + 1]!).toString(16));
  return words.join(':');
}

/** A client's value echoed in a message, cut so a long header cannot make a long answer. */
function truncate(s: string): string {
  return s.length > 200 ? `${s.slice(0, 200)}…` : s;
}
