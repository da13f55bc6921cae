/**
 * Where a request's key and signed token come from. The key may be in the URL's path (`/v1/rpc/<key>`), in
 * `X-API-Key: <key>`, or in `Authorization: Bearer <key>`; a signed token (jwt.ts) comes in
 * `Authorization: Bearer <JWT>`, so an endpoint that takes tokens gets its key in the path or X-API-Key.
 * `Bearer` holds a key when it has a key's shape (32 base62 characters), a token otherwise.
 *
 * A browser cannot set headers on a WebSocket; it can offer subprotocols, which travel in
 * `Sec-WebSocket-Protocol` (the pattern Kubernetes uses for bearer tokens): `new WebSocket(url,
 * ['chaingate', 'chaingate.key.<key>', 'chaingate.jwt.<JWT>'])`. The gateway answers with the protocol
 * `chaingate` (never one carrying a secret), which the client must therefore offer too: a browser fails a
 * handshake whose answer names no protocol it offered, or names none when it offered some.
 */
import { looksLikeKey } from '../tenancy/keys.js';
import type { KeyPlace } from './fences.js';

/** The subprotocol the gateway answers with when the client sends its key or token as subprotocols. */
export const WS_PROTOCOL = 'chaingate';
export const WS_KEY_PREFIX = 'chaingate.key.';
export const WS_TOKEN_PREFIX = 'chaingate.jwt.';

/** The parts of a request that may carry credentials, as uWS reads them ('' for a header not sent). */
export interface CredentialSources {
  /** The key segment of the path, or undefined on a path without one. */
  pathKey: string | undefined;
  xApiKey: string;
  authorization: string;
  /** `Sec-WebSocket-Protocol` of an upgrade ('' otherwise). */
  wsProtocols: string;
}

/** A request's credentials, or why they cannot be read (answered as `unauthorized`). */
export type Credentials =
  | {
      ok: true;
      /** Undefined when no key was given (the public path, or a 401 for the caller to answer). */
      key: string | undefined;
      /** `path` when the key is in the URL at all, even if a header repeats it: the URL's copy is what leaks. */
      keyPlace: KeyPlace;
      token: string | undefined;
      /** The subprotocol to answer an upgrade with, or undefined to answer none. */
      protocol: string | undefined;
    }
  | { ok: false; message: string };

export function readCredentials(s: CredentialSources): Credentials {
  const keys: string[] = [];
  let token: string | undefined;
  if (s.pathKey !== undefined && s.pathKey !== '') keys.push(s.pathKey);
  if (s.xApiKey !== '') keys.push(s.xApiKey.trim());
  if (s.authorization !== '') {
    const bearer = /^bearer[ \t]+(\S+)\s*$/i.exec(s.authorization);
    if (bearer === null) return { ok: false, message: 'Authorization must be "Bearer <key>" or "Bearer <JWT>"' };
    if (looksLikeKey(bearer[1]!, 'api')) keys.push(bearer[1]!);
    else token = bearer[1]!;
  }
  let protocol: string | undefined;
  if (s.wsProtocols !== '') {
    const offered = s.wsProtocols.split(',').map((p) => p.trim());
    let carries = false;
    for (const p of offered) {
      if (p.startsWith(WS_KEY_PREFIX)) {
        keys.push(p.slice(WS_KEY_PREFIX.length));
        carries = true;
      } else if (p.startsWith(WS_TOKEN_PREFIX)) {
        if (token !== undefined) return { ok: false, message: 'Two signed tokens given: send one' };
        token = p.slice(WS_TOKEN_PREFIX.length);
        carries = true;
      }
    }
    if (carries && !offered.includes(WS_PROTOCOL)) {
      return { ok: false, message: `Offer the subprotocol '${WS_PROTOCOL}' beside the key or token, which the gateway answers with` };
    }
    if (offered.includes(WS_PROTOCOL)) protocol = WS_PROTOCOL;
  }
  const key = keys[0];
  if (keys.some((k) => k !== key)) return { ok: false, message: 'Two different API keys given: send one' };
  return { ok: true, key, keyPlace: s.pathKey !== undefined && s.pathKey !== '' ? 'path' : 'header', token, protocol };
}
