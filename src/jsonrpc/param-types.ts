/**
 * The scalar parameter types of the execution API and their checks. A check returns why a value is
 * refused, naming the parameter (`'address' must be ...`), or undefined when the value is acceptable.
 * The checks refuse what is malformed only; whether a well-formed value exists is the node's call.
 */
export type Check = (value: unknown, name: string) => string | undefined;

const ADDRESS = /^0x[0-9a-fA-F]{40}$/;
const HASH = /^0x[0-9a-fA-F]{64}$/;
// A bare character-class loop: long calldata must not cost the regex engine a backtrack entry per pair.
const HEX_BYTES = /^0x[0-9a-fA-F]*$/;
// A QUANTITY fits 256 bits.
const QUANTITY = /^0x(?:0|[1-9a-fA-F][0-9a-fA-F]{0,63})$/;
// Filter ids, subscription ids and storage slots: up to 32 bytes, zero-padded by some writers.
const HEX_ID = /^0x[0-9a-fA-F]{1,64}$/;
const BLOCK_TAGS: ReadonlySet<unknown> = new Set(['latest', 'earliest', 'pending', 'safe', 'finalized']);

export function isAddress(v: unknown): v is string {
  return typeof v === 'string' && v.length === 42 && ADDRESS.test(v);
}

export function isHash(v: unknown): v is string {
  return typeof v === 'string' && v.length === 66 && HASH.test(v);
}

export function isData(v: unknown): v is string {
  return typeof v === 'string' && (v.length & 1) === 0 && HEX_BYTES.test(v);
}

export function isQuantity(v: unknown): v is string {
  return typeof v === 'string' && QUANTITY.test(v);
}

export function isBlockTag(v: unknown): v is string {
  return BLOCK_TAGS.has(v) || isQuantity(v);
}

export function isPlainObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

export const checkAddress: Check = (v, name) => (isAddress(v) ? undefined : `'${name}' must be a 20-byte 0x-prefixed hex address`);

export const checkHash: Check = (v, name) => (isHash(v) ? undefined : `'${name}' must be a 32-byte 0x-prefixed hex hash`);

export const checkData: Check = (v, name) =>
  isData(v) ? undefined : `'${name}' must be 0x-prefixed hex bytes (an even number of hex digits)`;

export const checkQuantity: Check = (v, name) =>
  isQuantity(v) ? undefined : `'${name}' must be a 0x-prefixed hex quantity without leading zeros`;

export const checkBoolean: Check = (v, name) => (typeof v === 'boolean' ? undefined : `'${name}' must be a boolean`);

export const checkObject: Check = (v, name) => (isPlainObject(v) ? undefined : `'${name}' must be an object`);

export const checkHexId: Check = (v, name) =>
  typeof v === 'string' && HEX_ID.test(v) ? undefined : `'${name}' must be 0x-prefixed hex of 1 to 64 digits`;

/** A count or index: a QUANTITY, or a plain non-negative integer as geth and Erigon also take. */
export const checkCount: Check = (v, name) =>
  isQuantity(v) || (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0)
    ? undefined
    : `'${name}' must be a hex quantity or a non-negative integer`;

export const checkString: Check = (v, name) => (typeof v === 'string' ? undefined : `'${name}' must be a string`);

export const checkBlockTag: Check = (v, name) =>
  isBlockTag(v) ? undefined : `'${name}' must be a hex block number or one of latest, earliest, pending, safe, finalized`;

/**
 * The block a state read runs against: a number, a tag, a block hash, or an EIP-1898 object
 * `{blockHash, requireCanonical?}` / `{blockNumber}`.
 */
export const checkBlockReference: Check = (v, name) => {
  if (isBlockTag(v) || isHash(v)) return undefined;
  if (!isPlainObject(v)) {
    return `'${name}' must be a hex block number, a block tag, a block hash or an EIP-1898 {blockHash} / {blockNumber} object`;
  }
  const hasHash = v.blockHash !== undefined;
  const hasNumber = v.blockNumber !== undefined;
  if (hasHash === hasNumber) return `'${name}' must hold exactly one of 'blockHash' and 'blockNumber'`;
  if (hasHash) {
    if (!isHash(v.blockHash)) return checkHash(v.blockHash, `${name}.blockHash`);
    if (v.requireCanonical !== undefined) return checkBoolean(v.requireCanonical, `${name}.requireCanonical`);
    return undefined;
  }
  return checkBlockTag(v.blockNumber, `${name}.blockNumber`);
};

/** A list of `element`s; the message names the first bad entry by index. */
export function arrayOf(element: Check, what: string): Check {
  return (v, name) => {
    if (!Array.isArray(v)) return `'${name}' must be an array of ${what}`;
    for (let i = 0; i < v.length; i++) {
      // The indexed name is built only on refusal, keeping long valid lists allocation-free.
      if (element(v[i], name) !== undefined) return element(v[i], `${name}[${i}]`);
    }
    return undefined;
  };
}
