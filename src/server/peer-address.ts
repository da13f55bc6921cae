import type { RequestSide } from '../pipeline/request-fences.js';
import type { ServerConfig } from '../config/schema.js';
import { addressKeyOfBytes, addressKeyOfText, ipv4Text } from '../limits/address-key.js';
import type { HttpRequest, HttpResponse } from './uws.js';

/**
 * The address the client's per-IP limits count under (limits/address-key.ts): the socket's peer, or with
 * `server.trust_proxy` the last hop of X-Forwarded-For; an IPv6 client by its `server.ipv6_prefix`, an
 * IPv4-mapped one as its IPv4 address.
 */
export function clientLimitAddress(res: HttpResponse, req: HttpRequest, server: Pick<ServerConfig, 'trust_proxy' | 'ipv6_prefix'>): string {
  if (server.trust_proxy) {
    const xff = req.getHeader('x-forwarded-for');
    if (xff !== '') {
      const last = xff.slice(xff.lastIndexOf(',') + 1).trim();
      if (last !== '') return addressKeyOfText(last, server.ipv6_prefix);
    }
  }
  return peerKey(res, server.ipv6_prefix);
}

/**
 * The client's whole address, as an endpoint's allowed_ips reads it (fences/ip-ranges.ts): with
 * `server.trust_proxy` the last hop of X-Forwarded-For as text, else the socket peer's 4 or 16 bytes.
 * Not cut to `ipv6_prefix`: a list names single addresses too.
 */
export function clientAddress(res: HttpResponse, req: HttpRequest, server: Pick<ServerConfig, 'trust_proxy'>): string | Uint8Array {
  if (server.trust_proxy) {
    const xff = req.getHeader('x-forwarded-for');
    if (xff !== '') {
      const last = xff.slice(xff.lastIndexOf(',') + 1).trim();
      if (last !== '') return last;
    }
  }
  return new Uint8Array(res.getRemoteAddress());
}

/** What an endpoint's request checks read of a request (pipeline/request-fences.ts): its Origin, and its address only if asked. */
export function requestSide(res: HttpResponse, req: HttpRequest, server: Pick<ServerConfig, 'trust_proxy'>): RequestSide {
  return { origin: req.getHeader('origin'), address: () => clientAddress(res, req, server) };
}

/** IPv4 peers' keys seen lately, by their address as a number (mapped into IPv6 or not: the same key). */
const ipv4Keys = new Map<number, string>();
const IPV4_KEYS_MAX = 4096;

/**
 * The peer's key, from the bytes uWS gives. An IPv4 peer's (every request of the public path asks) is kept,
 * so a request reads four bytes instead of formatting the address again, and the limiter is handed the
 * same string, whose hash V8 has already worked out.
 */
function peerKey(res: HttpResponse, prefix: number): string {
  const bytes = new Uint8Array(res.getRemoteAddress());
  let at: number;
  if (bytes.length === 4) at = 0;
  else if (bytes.length === 16 && isV4Mapped(bytes)) at = 12;
  else return addressKeyOfBytes(bytes, prefix) ?? Buffer.from(res.getRemoteAddressAsText()).toString();
  const number = ((bytes[at]! << 24) | (bytes[at + 1]! << 16) | (bytes[at + 2]! << 8) | bytes[at + 3]!) >>> 0;
  let key = ipv4Keys.get(number);
  if (key === undefined) {
    if (ipv4Keys.size >= IPV4_KEYS_MAX) ipv4Keys.clear();
    key = ipv4Text(bytes[at]!, bytes[at + 1]!, bytes[at + 2]!, bytes[at + 3]!);
    ipv4Keys.set(number, key);
  }
  return key;
}

function isV4Mapped(b: Uint8Array): boolean {
  for (let i = 0; i < 10; i++) if (b[i] !== 0) return false;
  return b[10] === 0xff && b[11] === 0xff;
}
