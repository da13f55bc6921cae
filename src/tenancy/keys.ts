import { createHash, randomBytes } from 'node:crypto';

/**
 * Keys are random base62 strings: safe in a URL path segment and in an Authorization header without
 * escaping. An API key has 32 characters (190 bits), a management key 48 (285 bits). Only their
 * SHA-256 is stored: a fast hash is enough because the keys are random, not chosen passwords.
 */
export type KeyKind = 'api' | 'management';

export interface NewKey {
  /** The key itself: shown once to its holder, never stored. */
  key: string;
  /** SHA-256 of the key's bytes: what the database keeps. */
  hash: Buffer;
  /** The first KEY_PREFIX_LENGTH characters, stored so a key can be named later without revealing it. */
  prefix: string;
}

export const KEY_LENGTH: Readonly<Record<KeyKind, number>> = { api: 32, management: 48 };
export const KEY_PREFIX_LENGTH = 8;

const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const KEY_SHAPE = /^[0-9A-Za-z]+$/;

/** `length` characters drawn uniformly from `alphabet` (at most 256 characters) with the CSPRNG. */
export function randomString(length: number, alphabet: string = ALPHABET): string {
  // Bytes at or above the largest multiple of the alphabet's size are dropped, so no character is
  // likelier than another (248 = 4 * 62 for base62).
  const limit = 256 - (256 % alphabet.length);
  let out = '';
  while (out.length < length) {
    for (const b of randomBytes(length * 2)) {
      if (b >= limit) continue;
      out += alphabet[b % alphabet.length]!;
      if (out.length === length) break;
    }
  }
  return out;
}

export function newKey(kind: KeyKind): NewKey {
  const key = randomString(KEY_LENGTH[kind]);
  return { key, hash: hashKey(key), prefix: key.slice(0, KEY_PREFIX_LENGTH) };
}

export function hashKey(key: string): Buffer {
  return createHash('sha256').update(key, 'utf8').digest();
}

/**
 * A cheap shape check before hashing or looking up: the length of a key of `kind` (either kind when
 * omitted) and base62 characters only. Anything else cannot be a key, so it never reaches a cache or SQLite.
 */
export function looksLikeKey(s: string, kind?: KeyKind): boolean {
  const fits = kind === undefined ? s.length === KEY_LENGTH.api || s.length === KEY_LENGTH.management : s.length === KEY_LENGTH[kind];
  return fits && KEY_SHAPE.test(s);
}
