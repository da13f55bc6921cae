/**
 * The key a keyed request brings, read from its path and headers (fences/credentials.ts) before it is routed
 * on: a key in `X-API-Key` or `Authorization: Bearer` serves `/v1/rpc` and `/<slug>/v1/rpc` as the path's
 * would, and on an upgrade the `chaingate.key.` and `chaingate.jwt.` subprotocols too. The public path reads
 * no header; a path key with neither header set costs two header reads and makes nothing (undefined: the
 * route's key, from the path).
 */
import { readCredentials } from '../fences/credentials.js';
import { KEY_IN_PATH, type KeyFacts } from '../pipeline/request-fences.js';
import type { RpcTarget } from './routes.js';
import type { HttpRequest } from './uws.js';

/** A request's key as found: its target (the route's, or one carrying a header's key), and the rest. */
export interface RequestKey {
  ok: true;
  target: RpcTarget;
  facts: KeyFacts;
  /** The subprotocol an upgrade is answered with (`chaingate`), or undefined to answer as before. */
  protocol: string | undefined;
}

/** Why the credentials cannot be read (two different keys, a malformed Authorization): answered 401. */
export interface KeyRefusal {
  ok: false;
  message: string;
}

/**
 * The key of a request on `target` (a route of kind rpc). `upgrade`: the request is a WebSocket handshake,
 * whose subprotocols may carry the key and token. On the public path (`target.key === null`) nothing is read.
 * Undefined when no header says anything: the route's own key (KEY_IN_PATH), the common case, which costs no object.
 */
export function requestKey(req: HttpRequest, target: RpcTarget, upgrade: boolean): RequestKey | KeyRefusal | undefined {
  if (target.key === null) return undefined;
  const xApiKey = req.getHeader('x-api-key');
  const authorization = req.getHeader('authorization');
  const wsProtocols = upgrade ? req.getHeader('sec-websocket-protocol') : '';
  if (xApiKey === '' && authorization === '' && wsProtocols === '') return undefined;
  const c = readCredentials({ pathKey: target.key === '' ? undefined : target.key, xApiKey, authorization, wsProtocols });
  if (!c.ok) return { ok: false, message: c.message };
  // No key anywhere stays the path's empty key: an unknown key (401), as before headers were read.
  const key = c.key ?? '';
  return {
    ok: true,
    target: key === target.key ? target : { ...target, key },
    facts: c.keyPlace === 'path' && c.token === undefined ? KEY_IN_PATH : { keyPlace: c.keyPlace, token: c.token },
    protocol: c.protocol,
  };
}
