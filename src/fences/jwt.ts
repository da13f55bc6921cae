/**
 * Signed tokens: an endpoint may require, beside its key, a JWT in `Authorization: Bearer`, signed by
 * one of the public keys its owner registered (JWK or PEM; ES256, RS256 or EdDSA, each with an id). The
 * owner's backend hands short-lived tokens to its own users; the gateway checks, with jose:
 * - the signature, by the key the header's `kid` names (or, without `kid`, each key of the header's
 *   algorithm in turn);
 * - the algorithm: the header's must be one of the three and the key's own (so `none`, HS256 with a public
 *   key as the secret, or an RS256 token against an EC key are refused before any cryptography);
 * - `exp`, required; `nbf` when present; both with CLOCK_SKEW_S of tolerance for clocks that differ;
 * - the lifetime: `exp` less `iat` (or less now, when `iat` is absent or in the future) at most the
 *   endpoint's `jwt_max_lifetime_s`, so a token minted for a year is refused, whatever its signature.
 * A token's signature is checked once: what it proved (its times, or why it was refused) is kept in a
 * bounded LRU until the token expires, and the times are checked again on every use.
 *
 * jose is loaded with the first token to verify, not with the gateway: 1.3 MB of resident memory that a
 * gateway whose endpoints take no tokens does not pay.
 */
import { createPublicKey, type KeyObject } from 'node:crypto';
import { LRUCache } from 'lru-cache';

/** The algorithms a registered key may have. */
export const JWT_ALGORITHMS = ['ES256', 'RS256', 'EdDSA'] as const;
export type JwtAlgorithm = (typeof JWT_ALGORITHMS)[number];

/** A key as the owner registers it: an id, its algorithm and the public key as a JWK or a PEM (SPKI), one of them. */
export interface JwtKeySetting {
  id: string;
  alg: JwtAlgorithm;
  jwk?: Record<string, unknown>;
  pem?: string;
}

/**
 * Clock skew tolerated on `exp` and `nbf`, in seconds: the owner's backend and the gateway keep their own
 * clocks; 30 s covers NTP-synced machines with room, and is small beside any sensible token lifetime.
 */
export const CLOCK_SKEW_S = 30;

/** The smallest RSA modulus accepted: 2048 bits (NIST SP 800-131A). */
const MIN_RSA_BITS = 2048;

/** The key of a setting, or why it is not one (the words name the key's id, never its material). */
export function importJwtKey(key: JwtKeySetting): KeyObject | string {
  let object: KeyObject;
  try {
    if (key.jwk !== undefined) {
      if (key.jwk.d !== undefined || key.jwk.p !== undefined || key.jwk.k !== undefined)
        return `key '${key.id}': register the public key only (this JWK holds secret members)`;
      object = createPublicKey({ key: key.jwk as import('node:crypto').JsonWebKey, format: 'jwk' });
    } else {
      if (key.pem === undefined) return `key '${key.id}': give the public key as jwk or as pem`;
      if (/PRIVATE KEY/.test(key.pem)) return `key '${key.id}': register the public key only (this PEM is a private key)`;
      if (!/^-----BEGIN PUBLIC KEY-----/.test(key.pem.trim()))
        return `key '${key.id}': the PEM must be a public key (-----BEGIN PUBLIC KEY-----)`;
      object = createPublicKey({ key: key.pem, format: 'pem' });
    }
  } catch {
    return `key '${key.id}': not a readable public key`;
  }
  const mismatch = algorithmMismatch(object, key.alg);
  return mismatch === undefined ? object : `key '${key.id}': ${mismatch}`;
}

function algorithmMismatch(key: KeyObject, alg: JwtAlgorithm): string | undefined {
  const type = key.asymmetricKeyType;
  const details = key.asymmetricKeyDetails ?? {};
  switch (alg) {
    case 'ES256':
      return type === 'ec' && details.namedCurve === 'prime256v1' ? undefined : 'ES256 needs an EC key on the P-256 curve';
    case 'RS256':
      if (type !== 'rsa') return 'RS256 needs an RSA key';
      return (details.modulusLength ?? 0) >= MIN_RSA_BITS ? undefined : `RS256 needs an RSA key of ${MIN_RSA_BITS} bits or more`;
    case 'EdDSA':
      return type === 'ed25519' || type === 'ed448' ? undefined : 'EdDSA needs an Ed25519 or Ed448 key';
  }
}

/** What a token proved: its times, in seconds since the epoch. */
interface Proven {
  refused?: undefined;
  exp: number;
  nbf: number | undefined;
  iat: number | undefined;
}

/** A token's check: accepted (with its `exp`), or refused with the client's message. */
export type TokenCheck = { ok: true; exp: number } | { ok: false; message: string };

export interface TokenVerifierOptions {
  /** The endpoint's `jwt_max_lifetime_s`. */
  maxLifetimeS: number;
  /** Milliseconds since the epoch (tests drive a fake clock). */
  now?: () => number;
  /** Tokens whose verification is kept (default 1024 per endpoint). */
  cacheMax?: number;
}

/** The characters of tokens one endpoint's cache holds at most (about 1 MB of strings). */
const CACHE_CHARS = 1_000_000;

/** Tokens are refused above this length before any parsing (a JWT of one ES256 or RS256 signature is far below it). */
export const MAX_TOKEN_CHARS = 8192;

interface RegisteredKey {
  id: string;
  alg: JwtAlgorithm;
  key: KeyObject;
}

type Cached = Proven | { refused: string };

let jose: Promise<typeof import('jose')> | undefined;

/** The token checks of one endpoint, made when its settings are (compileFences). */
export class TokenVerifier {
  readonly #keys: readonly RegisteredKey[];
  readonly #maxLifetimeS: number;
  readonly #now: () => number;
  readonly #cache: LRUCache<string, Cached>;
  /** Tokens whose signature is being verified: requests that bring the same new token at once share one verification. */
  readonly #pending = new Map<string, Promise<Cached>>();

  /** `keys`: the endpoint's settings, each importable (settings are validated before they are stored). */
  constructor(keys: readonly JwtKeySetting[], options: TokenVerifierOptions) {
    this.#keys = keys.flatMap((k) => {
      const key = importJwtKey(k);
      return typeof key === 'string' ? [] : [{ id: k.id, alg: k.alg, key }];
    });
    this.#maxLifetimeS = options.maxLifetimeS;
    this.#now = options.now ?? Date.now;
    // Bounded by count and by characters: a token may be up to MAX_TOKEN_CHARS long.
    this.#cache = new LRUCache({ max: options.cacheMax ?? 1024, maxSize: CACHE_CHARS, sizeCalculation: (_, token) => token.length + 64 });
  }

  /**
   * The check of a token (the text after `Bearer `; undefined when the request has none). Synchronous when
   * the token was seen before; a promise when its signature has to be verified.
   */
  check(token: string | undefined): TokenCheck | Promise<TokenCheck> {
    if (token === undefined || token === '') return refuse('a signed token is required (Authorization: Bearer <JWT>)');
    const cached = this.#cache.get(token);
    if (cached !== undefined) return this.#judge(token, cached);
    if (token.length > MAX_TOKEN_CHARS) return refuse(`token longer than ${MAX_TOKEN_CHARS} characters`);
    let pending = this.#pending.get(token);
    if (pending === undefined) {
      pending = this.#verify(token).then((proven) => {
        this.#cache.set(token, proven);
        this.#pending.delete(token);
        return proven;
      });
      this.#pending.set(token, pending);
    }
    return pending.then((proven) => this.#judge(token, proven));
  }

  #judge(token: string, entry: Cached): TokenCheck {
    if (entry.refused !== undefined) return refuse(entry.refused);
    const nowS = this.#now() / 1000;
    if (nowS > entry.exp + CLOCK_SKEW_S) {
      // Expired for good: nothing more to keep.
      this.#cache.delete(token);
      return refuse('token expired');
    }
    if (entry.nbf !== undefined && nowS + CLOCK_SKEW_S < entry.nbf) return refuse('token not yet valid (nbf)');
    const from = entry.iat !== undefined && entry.iat <= nowS ? entry.iat : nowS;
    if (entry.exp - from > this.#maxLifetimeS) return refuse(`token lifetime over this endpoint's ${this.#maxLifetimeS} s (exp - iat)`);
    return { ok: true, exp: entry.exp };
  }

  async #verify(token: string): Promise<Cached> {
    const { compactVerify, decodeProtectedHeader } = await (jose ??= import('jose'));
    let header: { alg?: unknown; kid?: unknown };
    try {
      header = decodeProtectedHeader(token);
    } catch {
      return { refused: 'token is not a JWT' };
    }
    const alg = header.alg;
    if (typeof alg !== 'string' || !(JWT_ALGORITHMS as readonly string[]).includes(alg)) {
      return { refused: `token algorithm ${JSON.stringify(alg ?? null)} is not accepted (${JWT_ALGORITHMS.join(', ')})` };
    }
    const candidates =
      typeof header.kid === 'string' ? this.#keys.filter((k) => k.id === header.kid) : this.#keys.filter((k) => k.alg === alg);
    if (candidates.length === 0) {
      return {
        refused: typeof header.kid === 'string' ? `token key id '${header.kid}' is not registered` : `no registered key for ${alg}`,
      };
    }
    for (const key of candidates) {
      // The key's algorithm, never the header's alone: a token cannot choose how it is verified.
      if (key.alg !== alg) return { refused: `token algorithm ${alg} does not match its key's (${key.alg})` };
      try {
        const { payload } = await compactVerify(token, key.key, { algorithms: [key.alg] });
        return claimsOf(payload);
      } catch {
        // A signature that does not verify under this key: the next candidate may hold it.
      }
    }
    return { refused: 'token signature does not verify with the registered keys' };
  }
}

function refuse(message: string): TokenCheck {
  return { ok: false, message };
}

/** The times of a verified payload, or why they do not make a usable token. */
function claimsOf(payload: Uint8Array): Cached {
  let claims: unknown;
  try {
    claims = JSON.parse(new TextDecoder().decode(payload));
  } catch {
    return { refused: 'token payload is not JSON' };
  }
  if (typeof claims !== 'object' || claims === null || Array.isArray(claims)) return { refused: 'token payload is not a claims object' };
  const { exp, nbf, iat } = claims as Record<string, unknown>;
  if (exp === undefined) return { refused: 'token has no exp (expiry is required)' };
  if (!isTime(exp)) return { refused: 'token exp is not a number of seconds' };
  if (nbf !== undefined && !isTime(nbf)) return { refused: 'token nbf is not a number of seconds' };
  if (iat !== undefined && !isTime(iat)) return { refused: 'token iat is not a number of seconds' };
  return { exp, nbf, iat };
}

function isTime(v: unknown): v is number {
  return typeof v === 'number' && Number.isFinite(v) && v >= 0;
}
