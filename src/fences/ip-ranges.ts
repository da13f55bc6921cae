/**
 * Allowed IPs: addresses and CIDR ranges, IPv4 and IPv6, parsed with ipaddr.js. An IPv4-mapped IPv6
 * address (`::ffff:192.0.2.1`, as a dual-stack socket reports an IPv4 peer) is its IPv4 address, on
 * either side: a client and an entry. Matching a request compares integers, not strings: IPv4 ranges
 * as (network, mask) words, IPv6 ones as 16 bytes and a prefix length.
 */
import ipaddr from 'ipaddr.js';

/** An entry as it is stored: the network address in its shortest form and the prefix length (`10.0.0.0/8`). */
export type IpEntry = string;

/** Why an entry is not an address or range, or undefined when it is. */
export function ipEntryProblem(entry: string): string | undefined {
  const parsed = parseEntry(entry);
  return parsed.problem;
}

/** The entry in its stored form: a bare address gets its full prefix (/32, /128). */
export function normaliseIpEntry(entry: string): IpEntry {
  const parsed = parseEntry(entry);
  if (parsed.problem !== undefined) throw new Error(parsed.problem);
  return `${parsed.address.toString()}/${parsed.bits}`;
}

type ParsedEntry = { address: ipaddr.IPv4 | ipaddr.IPv6; bits: number; problem?: undefined } | { problem: string };

function parseEntry(entry: string): ParsedEntry {
  const bad = (why: string): ParsedEntry => ({ problem: `'${entry}' is not an IP address or CIDR range (${why})` });
  const slash = entry.indexOf('/');
  const text = slash >= 0 ? entry.slice(0, slash) : entry;
  // ipaddr.js also reads `127.1` and hexadecimal parts as IPv4; an allowlist takes the unambiguous form only.
  const v4 = !text.includes(':');
  if (v4 && !ipaddr.IPv4.isValidFourPartDecimal(text)) return bad('IPv4 is four decimal numbers, as in 192.0.2.0/24');
  if (!v4 && (!ipaddr.IPv6.isValid(text) || text.includes('%'))) return bad('not an IPv6 address');
  let address = ipaddr.parse(text);
  const max = address.kind() === 'ipv4' ? 32 : 128;
  let bits = max;
  if (slash >= 0) {
    const prefix = entry.slice(slash + 1);
    if (!/^\d{1,3}$/.test(prefix) || Number(prefix) > max) return bad(`the prefix length is a number from 0 to ${max}`);
    bits = Number(prefix);
  }
  if (address.kind() === 'ipv6' && (address as ipaddr.IPv6).isIPv4MappedAddress() && bits >= 96) {
    address = (address as ipaddr.IPv6).toIPv4Address();
    bits -= 96;
  }
  const network = networkOf(address.toByteArray(), bits);
  if (network.some((b, i) => b !== address.toByteArray()[i])) {
    const suggestion = `${ipaddr.fromByteArray(network).toString()}/${bits}`;
    return bad(`host bits are set after the /${bits} prefix: did you mean ${suggestion}?`);
  }
  return { address, bits };
}

function networkOf(bytes: number[], bits: number): number[] {
  return bytes.map((b, i) => {
    const keep = Math.max(0, Math.min(8, bits - i * 8));
    return b & ((0xff << (8 - keep)) & 0xff);
  });
}

/** Whether a client address (as text, or as the 4 or 16 bytes a socket reports) is allowed. */
export interface IpMatcher {
  matchesText(address: string): boolean;
  matchesBytes(bytes: Uint8Array): boolean;
}

/** The matcher of a list of entries (each valid: see ipEntryProblem), made once per endpoint. */
export function compileIpRanges(entries: readonly string[]): IpMatcher {
  const v4: number[] = [];
  const v6: Array<{ bytes: Uint8Array; bits: number }> = [];
  for (const entry of entries) {
    const parsed = parseEntry(entry);
    if (parsed.problem !== undefined) continue;
    const bytes = parsed.address.toByteArray();
    if (bytes.length === 4) {
      const mask = parsed.bits === 0 ? 0 : (0xffffffff << (32 - parsed.bits)) >>> 0;
      v4.push(word(bytes, 0) & mask, mask);
    } else {
      v6.push({ bytes: Uint8Array.from(bytes), bits: parsed.bits });
    }
  }
  const ranges4 = Uint32Array.from(v4);
  const matches4 = (address: number): boolean => {
    for (let i = 0; i < ranges4.length; i += 2) if ((address & ranges4[i + 1]!) >>> 0 === ranges4[i]) return true;
    return false;
  };
  const matchesBytes = (bytes: ArrayLike<number>): boolean => {
    if (bytes.length === 4) return matches4(word(bytes, 0));
    if (bytes.length !== 16) return false;
    if (isV4Mapped(bytes)) return matches4(word(bytes, 12));
    for (const range of v6) if (prefixEqual(bytes, range.bytes, range.bits)) return true;
    return false;
  };
  return {
    matchesBytes,
    matchesText(address) {
      const bytes = quadBytes(address);
      if (bytes !== undefined) return matches4(bytes);
      // A zone (`fe80::1%eth0`) names the interface, not the address.
      const bare = address.startsWith('[') && address.endsWith(']') ? address.slice(1, -1) : address;
      const zone = bare.indexOf('%');
      const text = zone >= 0 ? bare.slice(0, zone) : bare;
      return readIpv6(text, scratch) && matchesBytes(scratch);
    },
  };
}

function word(b: ArrayLike<number>, at: number): number {
  return ((b[at]! << 24) | (b[at + 1]! << 16) | (b[at + 2]! << 8) | b[at + 3]!) >>> 0;
}

function isV4Mapped(b: ArrayLike<number>): boolean {
  for (let i = 0; i < 10; i++) if (b[i] !== 0) return false;
  return b[10] === 0xff && b[11] === 0xff;
}

function prefixEqual(a: ArrayLike<number>, b: Uint8Array, bits: number): boolean {
  const whole = bits >>> 3;
  for (let i = 0; i < whole; i++) if (a[i] !== b[i]) return false;
  const rest = bits & 7;
  if (rest === 0) return true;
  const mask = (0xff << (8 - rest)) & 0xff;
  return (a[whole]! & mask) === b[whole];
}

/** A dotted quad read straight into its 32-bit word (the common case: no parser, no allocation), or undefined. */
function quadBytes(text: string): number | undefined {
  let value = 0;
  let part = 0;
  let digits = 0;
  let parts = 0;
  for (let i = 0; i <= text.length; i++) {
    const c = i < text.length ? text.charCodeAt(i) : 0x2e;
    if (c === 0x2e) {
      if (digits === 0 || part > 255) return undefined;
      value = value * 256 + part;
      parts++;
      part = 0;
      digits = 0;
    } else if (c >= 0x30 && c <= 0x39 && digits < 3) {
      // A leading zero (`010`) reads as octal to some parsers: not an address here.
      if (digits === 1 && part === 0) return undefined;
      part = part * 10 + (c - 0x30);
      digits++;
    } else return undefined;
  }
  return parts === 4 ? value : undefined;
}

/**
 * An IPv6 address's 16 bytes (with `::` and a dotted IPv4 tail), or undefined. Scanned by hand rather than
 * asked of ipaddr.js, whose parser (regular expressions tried in turn) took some 10 µs an address: a
 * sixth of a whole call's CPU. The tests hold it to ipaddr.js's reading.
 */
export function ipv6Bytes(text: string): Uint8Array | undefined {
  const bytes = new Uint8Array(16);
  return readIpv6(text, bytes) ? bytes : undefined;
}

// The words and bytes of the address being read: a check runs to its end without yielding, so one pair
// serves every check of the thread without an allocation per request.
const words = new Uint16Array(8);
const scratch = new Uint8Array(16);

/** Reads an IPv6 address's bytes into `bytes`; false when the text is not one. */
function readIpv6(text: string, bytes: Uint8Array): boolean {
  const len = text.length;
  let n = 0;
  let gapAt = -1;
  let i = 0;
  if (text.charCodeAt(0) === COLON) {
    if (text.charCodeAt(1) !== COLON) return false;
    gapAt = 0;
    i = 2;
  }
  while (i < len) {
    const start = i;
    let value = 0;
    let digits = 0;
    for (let h = hexValue(text.charCodeAt(i)); h >= 0 && digits <= 4; h = hexValue(text.charCodeAt(++i))) {
      value = value * 16 + h;
      digits++;
    }
    if (text.charCodeAt(i) === DOT) {
      // A dotted IPv4 tail: the rest of the text, and two words.
      const v4 = quadBytes(text.slice(start));
      if (v4 === undefined || n > 6) return false;
      words[n++] = v4 >>> 16;
      words[n++] = v4 & 0xffff;
      i = len;
      break;
    }
    if (digits === 0 || digits > 4 || n === 8) return false;
    words[n++] = value;
    if (i === len) break;
    if (text.charCodeAt(i) !== COLON) return false;
    i++;
    if (text.charCodeAt(i) === COLON) {
      if (gapAt >= 0) return false;
      gapAt = n;
      i++;
    } else if (i === len) return false;
  }
  if (gapAt < 0 ? n !== 8 : n > 7) return false;
  bytes.fill(0);
  const tail = gapAt < 0 ? 0 : n - gapAt;
  const head = n - tail;
  for (let w = 0; w < head; w++) setWord(bytes, w, words[w]!);
  for (let w = 0; w < tail; w++) setWord(bytes, 8 - tail + w, words[head + w]!);
  return true;
}

const COLON = 0x3a;
const DOT = 0x2e;

/** A hexadecimal digit's value, or -1 (NaN past the end of the text is -1 too). */
function hexValue(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  const lower = c | 0x20;
  if (lower >= 0x61 && lower <= 0x66) return lower - 0x61 + 10;
  return -1;
}

function setWord(bytes: Uint8Array, at: number, word: number): void {
  bytes[at * 2] = word >>> 8;
  bytes[at * 2 + 1] = word & 0xff;
}
