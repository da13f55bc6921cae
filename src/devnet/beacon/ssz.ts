/**
 * SSZ serialization (not merkleization) of values already in the Beacon API's JSON form: unsigned
 * integers as decimal strings, byte vectors and lists as 0x hex, bitfields as 0x hex in their SSZ
 * form (bitlists carry their delimiter bit). So the devnet node serves its JSON and its SSZ from one
 * object and the two can never disagree.
 */
export type SszType =
  | { readonly kind: 'uint'; readonly bytes: 1 | 8 | 32 }
  | { readonly kind: 'bool' }
  /** ByteVector[length], and fixed-size Bitvector given as its bytes. */
  | { readonly kind: 'bytes'; readonly length: number }
  /** ByteList, and Bitlist given as its bytes (delimiter included). */
  | { readonly kind: 'byteList' }
  | { readonly kind: 'vector'; readonly of: SszType; readonly length: number }
  | { readonly kind: 'list'; readonly of: SszType }
  | { readonly kind: 'container'; readonly fields: ReadonlyArray<readonly [string, SszType]> };

export const uint8: SszType = { kind: 'uint', bytes: 1 };
export const uint64: SszType = { kind: 'uint', bytes: 8 };
export const uint256: SszType = { kind: 'uint', bytes: 32 };
export const bool: SszType = { kind: 'bool' };
export const byteList: SszType = { kind: 'byteList' };
export const bytes = (length: number): SszType => ({ kind: 'bytes', length });
export const vector = (of: SszType, length: number): SszType => ({ kind: 'vector', of, length });
export const list = (of: SszType): SszType => ({ kind: 'list', of });
export const container = (fields: ReadonlyArray<readonly [string, SszType]>): SszType => ({ kind: 'container', fields });

const OFFSET_BYTES = 4;

function fixedSize(t: SszType): number | undefined {
  switch (t.kind) {
    case 'uint':
      return t.bytes;
    case 'bool':
      return 1;
    case 'bytes':
      return t.length;
    case 'byteList':
    case 'list':
      return undefined;
    case 'vector': {
      const one = fixedSize(t.of);
      return one === undefined ? undefined : one * t.length;
    }
    case 'container': {
      let sum = 0;
      for (const [, f] of t.fields) {
        const one = fixedSize(f);
        if (one === undefined) return undefined;
        sum += one;
      }
      return sum;
    }
  }
}

function hexBytes(value: unknown, where: string): Buffer {
  if (typeof value !== 'string' || !/^0x([0-9a-fA-F]{2})*$/.test(value)) throw new TypeError(`${where}: expected 0x hex, got ${String(value)}`);
  return Buffer.from(value.slice(2), 'hex');
}

function uintBytes(value: unknown, size: 1 | 8 | 32, where: string): Buffer {
  if (typeof value !== 'string' || !/^\d+$/.test(value)) throw new TypeError(`${where}: expected a decimal string, got ${String(value)}`);
  let n = BigInt(value);
  if (n >> BigInt(size * 8) !== 0n) throw new TypeError(`${where}: ${value} does not fit in ${size} bytes`);
  const out = Buffer.alloc(size);
  for (let i = 0; i < size; i++, n >>= 8n) out[i] = Number(n & 0xffn);
  return out;
}

/** Elements of a vector, list or container: fixed parts first (offsets for variable ones), then the variable parts. */
function joinParts(types: SszType[], values: unknown[], labels: string[]): Buffer {
  const fixed: Array<Buffer | undefined> = [];
  const variable: Buffer[] = [];
  let fixedLength = 0;
  types.forEach((t, i) => {
    const encoded = encode(t, values[i], labels[i] ?? '?');
    if (fixedSize(t) === undefined) {
      fixed.push(undefined);
      variable.push(encoded);
      fixedLength += OFFSET_BYTES;
    } else {
      fixed.push(encoded);
      fixedLength += encoded.length;
    }
  });
  const parts: Buffer[] = [];
  let offset = fixedLength;
  let v = 0;
  for (const part of fixed) {
    if (part) {
      parts.push(part);
      continue;
    }
    const o = Buffer.alloc(OFFSET_BYTES);
    o.writeUInt32LE(offset);
    parts.push(o);
    offset += variable[v++]?.length ?? 0;
  }
  return Buffer.concat([...parts, ...variable]);
}

function encode(t: SszType, value: unknown, where: string): Buffer {
  switch (t.kind) {
    case 'uint':
      return uintBytes(value, t.bytes, where);
    case 'bool':
      if (typeof value !== 'boolean') throw new TypeError(`${where}: expected a boolean`);
      return Buffer.from([value ? 1 : 0]);
    case 'bytes': {
      const b = hexBytes(value, where);
      if (b.length !== t.length) throw new TypeError(`${where}: expected ${t.length} bytes, got ${b.length}`);
      return b;
    }
    case 'byteList':
      return hexBytes(value, where);
    case 'vector':
    case 'list': {
      if (!Array.isArray(value)) throw new TypeError(`${where}: expected an array`);
      if (t.kind === 'vector' && value.length !== t.length) throw new TypeError(`${where}: expected ${t.length} items, got ${value.length}`);
      return joinParts(value.map(() => t.of), value, value.map((_, i) => `${where}[${i}]`));
    }
    case 'container': {
      if (typeof value !== 'object' || value === null) throw new TypeError(`${where}: expected an object`);
      const record = value as Record<string, unknown>;
      return joinParts(t.fields.map(([, f]) => f), t.fields.map(([name]) => record[name]), t.fields.map(([name]) => `${where}.${name}`));
    }
  }
}

/** The SSZ bytes of `value` (JSON form) as type `t`; throws TypeError naming the path of a value that does not fit. */
export function serialize(t: SszType, value: unknown): Buffer {
  return encode(t, value, '$');
}
