/**
 * A block's `logsBloom` (the yellow paper's M3:2048): 2048 bits in 256 bytes, where each log's address and
 * each of its topics set three bits taken from the keccak-256 of their bytes. A bloom that lacks one of an item's
 * bits proves the block has no log with it; one that has all three only says it may (false positives happen).
 */
import { keccak_256 } from '@noble/hashes/sha3.js';

/** A bloom's size in bytes. */
export const BLOOM_BYTES = 256;

/** The three bits an item sets, as byte index and mask pairs: [i0, m0, i1, m1, i2, m2]. */
export type BloomBits = readonly [number, number, number, number, number, number];

/** A hex quantity of `bytes` bytes (with its 0x), as its bytes; null when it is not one. */
export function hexBytes(hex: unknown, bytes: number): Uint8Array | null {
  if (typeof hex !== 'string' || hex.length !== 2 + 2 * bytes || hex.charCodeAt(0) !== 0x30 || (hex.charCodeAt(1) | 0x20) !== 0x78)
    return null;
  const out = Buffer.from(hex.slice(2), 'hex');
  return out.length === bytes ? out : null;
}

/** A `logsBloom` field as its 256 bytes; null when it is not one. */
export function bloomOf(hex: unknown): Uint8Array | null {
  return hexBytes(hex, BLOOM_BYTES);
}

/** The bits `item` (an address's 20 bytes or a topic's 32) sets in a bloom, as geth's bloomValues reads them. */
export function bloomBits(item: Uint8Array): BloomBits {
  const h = keccak_256(item);
  const bit = (k: number): number => ((h[k]! << 8) | h[k + 1]!) & 0x7ff;
  const b0 = bit(0);
  const b1 = bit(2);
  const b2 = bit(4);
  return [
    BLOOM_BYTES - 1 - (b0 >> 3),
    1 << (b0 & 7),
    BLOOM_BYTES - 1 - (b1 >> 3),
    1 << (b1 & 7),
    BLOOM_BYTES - 1 - (b2 >> 3),
    1 << (b2 & 7),
  ];
}

/** Whether `bloom` has every bit of `bits`: false proves no log of the block holds the item. */
export function bloomHas(bloom: Uint8Array, bits: BloomBits): boolean {
  return (bloom[bits[0]]! & bits[1]) !== 0 && (bloom[bits[2]]! & bits[3]) !== 0 && (bloom[bits[4]]! & bits[5]) !== 0;
}

/** The bits of a hex address or topic (its `bytes` bytes), memoized per call in `memo`; null for a malformed one. */
export function itemBits(hex: unknown, bytes: 20 | 32, memo: Map<string, BloomBits | null>): BloomBits | null {
  if (typeof hex !== 'string') return null;
  const key = hex.toLowerCase();
  let bits = memo.get(key);
  if (bits === undefined) {
    const raw = hexBytes(key, bytes);
    bits = raw === null ? null : bloomBits(raw);
    memo.set(key, bits);
  }
  return bits;
}

/** Whether one of `items` (hex, `bytes` long) may be in `bloom`; an empty or absent list matches anything. */
function mayHoldOne(bloom: Uint8Array, items: unknown, bytes: 20 | 32, memo: Map<string, BloomBits | null>): boolean {
  if (items === null || items === undefined) return true;
  const list = Array.isArray(items) ? items : [items];
  if (list.length === 0) return true;
  for (const item of list) {
    const bits = itemBits(item, bytes, memo);
    if (bits === null || bloomHas(bloom, bits)) return true;
  }
  return false;
}

/** Whether a block with `bloom` may hold a log `filter` (its address and topics) matches: an empty bloom holds
 *  none, whatever the filter. */
export function filterMayMatch(bloom: Uint8Array, filter: Record<string, unknown>, memo: Map<string, BloomBits | null>): boolean {
  if (bloom.every((byte) => byte === 0)) return false;
  if (!mayHoldOne(bloom, filter.address, 20, memo)) return false;
  const topics = filter.topics;
  if (!Array.isArray(topics)) return true;
  for (const position of topics) if (!mayHoldOne(bloom, position, 32, memo)) return false;
  return true;
}
