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
}

const OPEN = Buffer.from('{"jsonrpc":"2.0","id":', 'latin1');
const METHOD = Buffer.from(',"method":"', 'latin1');
const PARAMS = Buffer.from('","params":', 'latin1');
const CLOSE = 0x7d;
/** Up to this many characters a string is measured and copied by a loop: Buffer's calls into C++ cost more. */
const LOOP_CHARS = 256;

/** Whether `s` is short and plain ASCII, so that its bytes are its characters. */
function shortAscii(s: string): boolean {
  if (s.length > LOOP_CHARS) return false;
  for (let i = 0; i < s.length; i++) if (s.charCodeAt(i) > 0x7f) return false;
  return true;
}

/** Whether a method name goes between quotes as it is: printable ASCII without a quote or a backslash. */
function plainName(s: string): boolean {
  if (s.length > LOOP_CHARS) return false;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20 || c > 0x7e || c === 0x22 || c === 0x5c) return false;
  }
  return true;
}

function put(out: Buffer, at: number, bytes: Buffer): number {
  for (let k = 0; k < bytes.length; k++) out[at + k] = bytes[k]!;
  return at + bytes.length;
}

function putAscii(out: Buffer, at: number, s: string): number {
  for (let k = 0; k < s.length; k++) out[at + k] = s.charCodeAt(k);
  return at + s.length;
}

/**
 * The body's parts as strings, for a method name that needs JSON escaping (none the catalogue has) or a
 * long or non-ASCII part: the plain, slower way.
 */
export function rpcBodyText(body: RpcBody): string {
  return `{"jsonrpc":"2.0","id":${body.rpcId},"method":${JSON.stringify(body.rpcMethod)},"params":${body.rpcParams}}`;
}

/** A POST head `prefix` (up to Content-Length's value) and `body` in one new buffer. */
export function encodeRpcPost(prefix: Buffer, body: RpcBody): Buffer {
  const id = body.rpcId;
  const method = body.rpcMethod;
  const params = body.rpcParams;
  if (!plainName(method) || !shortAscii(id) || !shortAscii(params)) return encodeTextPost(prefix, rpcBodyText(body));
  const bodyLength = OPEN.length + id.length + METHOD.length + method.length + PARAMS.length + params.length + 1;
  const out = allocPost(prefix, bodyLength);
  let at = out.length - bodyLength;
  at = put(out, at, OPEN);
  at = putAscii(out, at, id);
  at = put(out, at, METHOD);
  at = putAscii(out, at, method);
  at = put(out, at, PARAMS);
  at = putAscii(out, at, params);
  out[at] = CLOSE;
  return out;
}

/** A POST head `prefix` (up to Content-Length's value) and a text body in one new buffer. */
export function encodeTextPost(prefix: Buffer, body: string): Buffer {
  const bodyLength = Buffer.byteLength(body);
  const out = allocPost(prefix, bodyLength);
  // As many bytes as characters: the body is ASCII, which latin1 writes as it is, faster than UTF-8.
  out.write(body, out.length - bodyLength, bodyLength, bodyLength === body.length ? 'latin1' : 'utf8');
  return out;
}

const CRLF2 = Buffer.from('\r\n\r\n', 'latin1');

/** A buffer for a POST with a body of `bodyLength` bytes, its head written: `prefix`, the length and CRLFCRLF. */
function allocPost(prefix: Buffer, bodyLength: number): Buffer {
  let digits = 1;
  for (let v = bodyLength; v >= 10; v = Math.floor(v / 10)) digits++;
  const headLength = prefix.length + digits + 4;
  const out = Buffer.allocUnsafe(headLength + bodyLength);
  prefix.copy(out, 0);
  for (let i = prefix.length + digits - 1, v = bodyLength; i >= prefix.length; i--, v = Math.floor(v / 10)) out[i] = 48 + (v % 10);
  put(out, headLength - 4, CRLF2);
  return out;
}
