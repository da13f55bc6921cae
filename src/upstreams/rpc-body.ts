/**
 * A JSON-RPC call's request body written by its parts straight into the request's buffer, after a head
 * rendered once (request-head.ts): no string of the body is built, flattened and encoded per call.
 */

/**
 * The body `{"jsonrpc":"2.0","id":<rpcId>,"method":<rpcMethod as a JSON string>,"params":<rpcParams>}`.
 * A forwarded call is its own RpcBody (pipeline/forward.ts), so giving it costs no object.
 */
export interface RpcBody {
  /** The id's JSON text (the gateway's own, call-ids.ts). */
  readonly rpcId: string;
  /** The method's name, as the catalogue spells it. */
  readonly rpcMethod: string;
  /** The params' JSON text, as it will be sent. */
  readonly rpcParams: string;
  /** The body's text (rpcBodyText), for whatever reads a request as a string. */
  toString(): string;
}

const OPEN = Buffer.from('{"jsonrpc":"2.0","id":', 'latin1');
const METHOD = Buffer.from(',"method":"', 'latin1');
const PARAMS = Buffer.from('","params":', 'latin1');
const CLOSE = 0x7d;
const CRLF2 = Buffer.from('\r\n\r\n', 'latin1');

/** Whether a short string (an id, a method name) goes between quotes as it is: printable ASCII, no quote or backslash. */
function plain(s: string): boolean {
  if (s.length > 256) return false;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20 || c > 0x7e || c === 0x22 || c === 0x5c) return false;
  }
  return true;
}

function putAscii(out: Buffer, at: number, s: string): number {
  for (let k = 0; k < s.length; k++) out[at + k] = s.charCodeAt(k);
  return at + s.length;
}

/** The body as one string: for an id or a method name that is not plain ASCII (none the gateway makes). */
export function rpcBodyText(body: RpcBody): string {
  return `{"jsonrpc":"2.0","id":${body.rpcId},"method":${JSON.stringify(body.rpcMethod)},"params":${body.rpcParams}}`;
}

/** A POST head `prefix` (up to Content-Length's value) and `body` in one new buffer. */
export function encodeRpcPost(prefix: Buffer, body: RpcBody): Buffer {
  const id = body.rpcId;
  const method = body.rpcMethod;
  const params = body.rpcParams;
  if (!plain(method) || !plain(id)) return encodeTextPost(prefix, rpcBodyText(body));
  // The constant parts are copied and the params written by Buffer's own code, which beats a loop over their
  // bytes (bench/PROFILE-upstream.md); the id and the name, a few characters each, by a loop.
  const paramsLength = Buffer.byteLength(params);
  const bodyLength = OPEN.length + id.length + METHOD.length + method.length + PARAMS.length + paramsLength + 1;
  const out = allocPost(prefix, bodyLength);
  let at = out.length - bodyLength;
  at += OPEN.copy(out, at);
  at = putAscii(out, at, id);
  at += METHOD.copy(out, at);
  at = putAscii(out, at, method);
  at += PARAMS.copy(out, at);
  // As many bytes as characters: ASCII, which latin1 writes as it is, faster than UTF-8.
  at += out.write(params, at, paramsLength, paramsLength === params.length ? 'latin1' : 'utf8');
  out[at] = CLOSE;
  return out;
}

/** A POST head `prefix` (up to Content-Length's value) and a text body in one new buffer. */
export function encodeTextPost(prefix: Buffer, body: string): Buffer {
  const bodyLength = Buffer.byteLength(body);
  const out = allocPost(prefix, bodyLength);
  out.write(body, out.length - bodyLength, bodyLength, bodyLength === body.length ? 'latin1' : 'utf8');
  return out;
}

/** A buffer for a POST with a body of `bodyLength` bytes, its head written: `prefix`, the length and CRLFCRLF. */
function allocPost(prefix: Buffer, bodyLength: number): Buffer {
  let digits = 1;
  for (let v = bodyLength; v >= 10; v = Math.floor(v / 10)) digits++;
  const headLength = prefix.length + digits + 4;
  const out = Buffer.allocUnsafe(headLength + bodyLength);
  prefix.copy(out, 0);
  for (let i = prefix.length + digits - 1, v = bodyLength; i >= prefix.length; i--, v = Math.floor(v / 10)) out[i] = 48 + (v % 10);
  CRLF2.copy(out, headLength - 4);
  return out;
}
