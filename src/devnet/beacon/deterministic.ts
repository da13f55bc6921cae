/**
 * Deterministic stand-ins for values the devnet cannot compute for real (BLS keys and signatures,
 * RANDAO mixes, a deposit root): SHA-256 of a label and its inputs, so the same request always gets
 * the same bytes.
 */
import { createHash } from 'node:crypto';

/** `length` bytes derived from `parts`; longer outputs chain further hashes. */
export function derivedBytes(length: number, ...parts: Array<string | number>): Buffer {
  const out = Buffer.alloc(length);
  const seed = parts.join('|');
  for (let filled = 0, round = 0; filled < length; round++) {
    filled += createHash('sha256').update(`${seed}|${round}`).digest().copy(out, filled);
  }
  return out;
}

export function derivedRoot(...parts: Array<string | number>): string {
  return '0x' + derivedBytes(32, ...parts).toString('hex');
}

/** 96 bytes with the compressed-point flag set, shaped like a BLS signature. */
export function derivedSignature(...parts: Array<string | number>): string {
  const b = derivedBytes(96, 'signature', ...parts);
  b[0] = ((b[0] ?? 0) & 0x1f) | 0x80;
  return '0x' + b.toString('hex');
}

/** 48 bytes with the compressed-point flag set, shaped like a BLS public key. */
export function derivedPubkey(...parts: Array<string | number>): string {
  const b = derivedBytes(48, 'pubkey', ...parts);
  b[0] = ((b[0] ?? 0) & 0x1f) | 0x80;
  return '0x' + b.toString('hex');
}

/** A permutation of 0..n-1 seeded by `seed` (Fisher-Yates over derived bytes). */
export function derivedShuffle(n: number, ...seed: Array<string | number>): number[] {
  const order = Array.from({ length: n }, (_, i) => i);
  const randomness = derivedBytes(n * 4, 'shuffle', ...seed);
  for (let i = n - 1; i > 0; i--) {
    const j = randomness.readUInt32LE(i * 4) % (i + 1);
    const a = order[i] ?? i;
    order[i] = order[j] ?? j;
    order[j] = a;
  }
  return order;
}

export const ZERO_ROOT = '0x' + '00'.repeat(32);
