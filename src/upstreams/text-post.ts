/**
 * A POST whose head is rendered once as bytes up to Content-Length's value (request-head.ts): a request
 * copies that prefix and adds its length and body, with no head string built and encoded per call.
 */

const CRLF2 = Buffer.from('\r\n\r\n', 'latin1');

/** The head `prefix` (up to Content-Length's value) and a text body in one new buffer. */
export function encodeTextPost(prefix: Buffer, body: string): Buffer {
  const bodyLength = Buffer.byteLength(body);
  let digits = 1;
  for (let v = bodyLength; v >= 10; v = Math.floor(v / 10)) digits++;
  const headLength = prefix.length + digits + 4;
  const out = Buffer.allocUnsafe(headLength + bodyLength);
  prefix.copy(out, 0);
  for (let i = prefix.length + digits - 1, v = bodyLength; i >= prefix.length; i--, v = Math.floor(v / 10)) out[i] = 48 + (v % 10);
  CRLF2.copy(out, headLength - 4);
  // As many bytes as characters: ASCII, which latin1 writes as it is, faster than UTF-8.
  out.write(body, headLength, bodyLength, bodyLength === body.length ? 'latin1' : 'utf8');
  return out;
}
