import type { HttpRequest, HttpResponse } from './uws.js';

/** The client's IP: the socket's peer, or with `server.trust_proxy` the last hop of X-Forwarded-For. */
export function clientIp(res: HttpResponse, req: HttpRequest, trustProxy: boolean): string {
  if (trustProxy) {
    const xff = req.getHeader('x-forwarded-for');
    if (xff !== '') {
      const last = xff.slice(xff.lastIndexOf(',') + 1).trim();
      if (last !== '') return last;
    }
  }
  return peerAddress(res);
}

/** IPv4 peers seen lately, as uWS writes them, by their address as a number (+ 2^32 when written as IPv6). */
const ipv4Text = new Map<number, string>();
const IPV4_TEXT_MAX = 4096;
const V4_MAPPED = 2 ** 32;

/**
 * The peer's address as uWS writes it. The text of an IPv4 peer (every request of the public path asks)
 * is kept, so a request reads four bytes instead of formatting and decoding the address again, and the
 * limiter is handed the same string, whose hash V8 has already worked out.
 */
function peerAddress(res: HttpResponse): string {
  const bytes = new Uint8Array(res.getRemoteAddress());
  let key: number;
  if (bytes.length === 4) {
    key = ((bytes[0]! << 24) | (bytes[1]! << 16) | (bytes[2]! << 8) | bytes[3]!) >>> 0;
  } else if (bytes.length === 16 && isV4Mapped(bytes)) {
    key = V4_MAPPED + (((bytes[12]! << 24) | (bytes[13]! << 16) | (bytes[14]! << 8) | bytes[15]!) >>> 0);
  } else {
    return Buffer.from(res.getRemoteAddressAsText()).toString();
  }
  let text = ipv4Text.get(key);
  if (text === undefined) {
    if (ipv4Text.size >= IPV4_TEXT_MAX) ipv4Text.clear();
    text = Buffer.from(res.getRemoteAddressAsText()).toString();
    ipv4Text.set(key, text);
  }
  return text;
}

function isV4Mapped(b: Uint8Array): boolean {
  for (let i = 0; i < 10; i++) if (b[i] !== 0) return false;
  return b[10] === 0xff && b[11] === 0xff;
}
