/**
 * The address a client's per-IP limits count under (public rps, the unknown-key guard, the management
 * per-IP limit, the WebSocket and event-stream per-IP caps): an IPv4 address as itself, an IPv6 address
 * by its prefix (`server.ipv6_prefix` bits, default 64), an IPv4-mapped IPv6 address (::ffff:a.b.c.d) as
 * its IPv4 address.
 *
 * Why a prefix: one IPv6 subscriber is given a whole /64 (often a /56 or /48), so counting per address
 * would give one client 2^64 limits. Why not a library (ipaddr.js): this is two small parsers run on every
 * keyless request, whose hot path must allocate nothing but the key; a general library builds objects.
 *
 * Keys: `a.b.c.d` for IPv4; for IPv6 the prefix's first ceil(prefix / 16) groups in lowercase hex without
 * leading zeros, the bits past the prefix cleared, then `::/<prefix>` (or `/<prefix>` when all eight
 * groups are written): `2001:db8:1:2::/64`. A given prefix length gives each network exactly one key, and
 * IPv4 and IPv6 keys never meet (dots against colons).
 */

/** Prefix lengths server.ipv6_prefix accepts. */
export const IPV6_PREFIX_MIN = 1;
export const IPV6_PREFIX_MAX = 128;

/** Groups of the address being parsed or keyed (one buffer: the callers are synchronous). */
const groups = new Uint16Array(8);

/** `a.b.c.d` of four bytes. */
export function ipv4Text(a: number, b: number, c: number, d: number): string {
  return `${a}.${b}.${c}.${d}`;
}

/** The key of `groups` (an IPv6 address) under `prefix` bits, or its IPv4 text when it is IPv4-mapped. */
function keyOfGroups(prefix: number): string {
  if (groups[0] === 0 && groups[1] === 0 && groups[2] === 0 && groups[3] === 0 && groups[4] === 0 && groups[5] === 0xffff) {
    return ipv4Text(groups[6]! >>> 8, groups[6]! & 0xff, groups[7]! >>> 8, groups[7]! & 0xff);
  }
  const written = Math.ceil(prefix / 16);
  let key = '';
  for (let i = 0; i < written; i++) {
    const kept = prefix - 16 * i;
    const mask = kept >= 16 ? 0xffff : (0xffff << (16 - kept)) & 0xffff;
    key += (i === 0 ? '' : ':') + (groups[i]! & mask).toString(16);
  }
  return written === 8 ? `${key}/${prefix}` : `${key}::/${prefix}`;
}

/**
 * The key of an address as uWS gives it (getRemoteAddress: 4 bytes for IPv4, 16 for IPv6); null for any
 * other length.
 */
export function addressKeyOfBytes(bytes: Uint8Array, prefix: number): string | null {
  if (bytes.length === 4) return ipv4Text(bytes[0]!, bytes[1]!, bytes[2]!, bytes[3]!);
  if (bytes.length !== 16) return null;
  for (let i = 0; i < 8; i++) groups[i] = (bytes[2 * i]! << 8) | bytes[2 * i + 1]!;
  return keyOfGroups(prefix);
}

/**
 * The key of an address written as text (the last hop of X-Forwarded-For): dotted IPv4, or IPv6 in any of
 * its text forms (`::`, an IPv4 tail, upper case), with a zone (`%eth0`, ignored), in brackets or not; a
 * port after the brackets or after an IPv4 address is ignored. Text that is neither is its own key, as it was before keys were parsed: a proxy
 * trusted with the header decides what it holds.
 */
export function addressKeyOfText(text: string, prefix: number): string {
  let s = text;
  if (s.charCodeAt(0) === 0x5b /* [ */) {
    const close = s.indexOf(']');
    if (close < 0) return text;
    s = s.slice(1, close);
  }
  const colon = s.indexOf(':');
  if (colon < 0) return isCanonicalIpv4(s) ? s : (ipv4OfText(s) ?? text);
  // IPv4 with a port (1.2.3.4:5678): one colon, dots before it.
  if (s.indexOf(':', colon + 1) < 0 && s.lastIndexOf('.', colon) >= 0) return ipv4OfText(s.slice(0, colon)) ?? text;
  const zone = s.indexOf('%');
  if (zone >= 0) s = s.slice(0, zone);
  return parseIpv6(s) ? keyOfGroups(prefix) : text;
}

/** Whether `s` is dotted IPv4 exactly as its key writes it (no leading zeros): the common case, copied nowhere. */
function isCanonicalIpv4(s: string): boolean {
  let parts = 0;
  let value = 0;
  let digits = 0;
  for (let i = 0; i <= s.length; i++) {
    const c = i === s.length ? 0x2e : s.charCodeAt(i);
    if (c === 0x2e /* . */) {
      if (digits === 0 || value > 255 || (digits > 1 && s.charCodeAt(i - digits) === 0x30)) return false;
      parts++;
      value = 0;
      digits = 0;
    } else if (c >= 0x30 && c <= 0x39 && digits < 3) {
      value = value * 10 + c - 0x30;
      digits++;
    } else {
      return false;
    }
  }
  return parts === 4;
}

/** Dotted IPv4 with leading zeros (read as decimal), as its key; null when `s` is not dotted IPv4. */
function ipv4OfText(s: string): string | null {
  const parts = s.split('.');
  if (parts.length !== 4) return null;
  const bytes: number[] = [];
  for (const p of parts) {
    if (!/^[0-9]{1,3}$/.test(p) || Number(p) > 255) return null;
    bytes.push(Number(p));
  }
  return ipv4Text(bytes[0]!, bytes[1]!, bytes[2]!, bytes[3]!);
}

/** Reads the IPv6 text `s` (RFC 4291 section 2.2 forms) into `groups`; false when it is not one. */
function parseIpv6(s: string): boolean {
  const gap = s.indexOf('::');
  if (gap >= 0 && s.indexOf('::', gap + 1) >= 0) return false;
  const head = gap < 0 ? s : s.slice(0, gap);
  const tail = gap < 0 ? '' : s.slice(gap + 2);
  const front = head === '' ? [] : head.split(':');
  const back = tail === '' ? [] : tail.split(':');
  // An IPv4 tail (::ffff:1.2.3.4) stands for the last two groups.
  const last = gap < 0 ? front : back;
  let v4: number[] | null = null;
  if (last.length > 0 && last[last.length - 1]!.includes('.')) {
    const text = ipv4OfText(last.pop()!);
    if (text === null) return false;
    v4 = text.split('.').map(Number);
  }
  const count = front.length + back.length + (v4 === null ? 0 : 2);
  if (gap < 0 ? count !== 8 : count > 7) return false;
  groups.fill(0);
  let at = 0;
  for (const g of front) if (!readGroup(g, at++)) return false;
  at = 8 - back.length - (v4 === null ? 0 : 2);
  for (const g of back) if (!readGroup(g, at++)) return false;
  if (v4 !== null) {
    groups[6] = (v4[0]! << 8) | v4[1]!;
    groups[7] = (v4[2]! << 8) | v4[3]!;
  }
  return true;
}

function readGroup(g: string, at: number): boolean {
  if (!/^[0-9a-fA-F]{1,4}$/.test(g)) return false;
  groups[at] = Number.parseInt(g, 16);
  return true;
}
