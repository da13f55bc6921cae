import type { HttpResponseParser } from './http-parser.js';

// The response head: gathered when it is split across reads, then checked and cut into its status,
// headers and body framing. These steps run on the parser's fields (http-parser.ts owns the body).

/** Longest response head, and longest chunk-extension or trailer section, accepted. */
export const MAX_HEAD_BYTES = 64 * 1024;

// The parser's states. They are declared here, where a head picks the body's first one.
export const HEAD = 0;
export const BODY_LENGTH = 1;
export const BODY_UNTIL_CLOSE = 2;
export const CHUNK_SIZE = 3;
export const CHUNK_EXTENSION = 4;
export const CHUNK_SIZE_LF = 5;
export const CHUNK_DATA = 6;
export const CHUNK_DATA_CR = 7;
export const CHUNK_DATA_LF = 8;
export const TRAILER_LINE_START = 9;
export const TRAILER_LINE = 10;
export const TRAILER_LINE_LF = 11;
export const TRAILER_END_LF = 12;
export const DONE = 13;
export const FAILED = 14;

export const CR = 13;
export const LF = 10;
const HEAD_END = Buffer.from('\r\n\r\n', 'latin1');
/** The header list handed to a consumer that reads none. */
const NO_HEADERS: Array<[string, string]> = Object.freeze([]) as unknown as Array<[string, string]>;
const STATUS_PREFIX = Buffer.from('HTTP/1.', 'latin1');
const TOKEN_CHAR = new Uint8Array(128);
for (const c of "!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz") TOKEN_CHAR[c.charCodeAt(0)] = 1;

// Header names most responses carry, by length. A name is matched against them on its bytes, ignoring
// case, so these cost neither a slice nor a toLowerCase per response.
const COMMON_NAMES: Array<string[] | undefined> = [];
for (const name of [
  'content-length',
  'content-type',
  'content-encoding',
  'transfer-encoding',
  'connection',
  'keep-alive',
  'date',
  'server',
  'vary',
  'etag',
  'cache-control',
  'access-control-allow-origin',
]) {
  (COMMON_NAMES[name.length] ??= []).push(name);
}

/** The common name buf[start, end) spells in any case, if it is one. The bytes are known to be token characters. */
function commonName(buf: Buffer, start: number, end: number): string | undefined {
  const candidates = COMMON_NAMES[end - start];
  if (candidates === undefined) return undefined;
  next: for (const name of candidates) {
    // Setting bit 0x20 lower-cases letters, and turns no other token character into a letter or '-'.
    for (let i = 0; i < name.length; i++) if ((buf[start + i]! | 0x20) !== name.charCodeAt(i)) continue next;
    return name;
  }
  return undefined;
}

/** Skips buf[pos..] to the end of its line and the CRLF; returns the next line's start, or -1 on a stray CR, LF or NUL. */
function skipLine(buf: Buffer, pos: number, end: number): number {
  let c = 0;
  while (pos < end && (c = buf[pos]!) !== CR) {
    if (c === LF || c === 0) return -1;
    pos++;
  }
  if (pos === end) return end;
  return pos + 1 < end && buf[pos + 1] === LF ? pos + 2 : -1;
}

function trimOws(s: string): string {
  let start = 0;
  let end = s.length;
  while (start < end && (s.charCodeAt(start) === 32 || s.charCodeAt(start) === 9)) start++;
  while (end > start && (s.charCodeAt(end - 1) === 32 || s.charCodeAt(end - 1) === 9)) end--;
  return start === 0 && end === s.length ? s : s.slice(start, end);
}

function gather(p: HttpResponseParser, chunk: Buffer, start: number, end: number): void {
  const needed = p.headLength + (end - start);
  if (p.headBuffer === null || p.headBuffer.length < needed) {
    const grown = Buffer.allocUnsafe(Math.max(needed, p.headBuffer === null ? 1024 : p.headBuffer.length * 2));
    if (p.headBuffer !== null) p.headBuffer.copy(grown, 0, 0, p.headLength);
    p.headBuffer = grown;
  }
  chunk.copy(p.headBuffer, p.headLength, start, end);
  p.headLength = needed;
}

function checkStatusPrefix(p: HttpResponseParser, chunk: Buffer, pos: number, limit: number): boolean {
  for (let seen = p.headLength; seen < STATUS_PREFIX.length && pos < limit; seen++, pos++) {
    if (chunk[pos] !== STATUS_PREFIX[seen]) {
      p.fail('not an HTTP/1.x response');
      return false;
    }
  }
  return true;
}

/** Reads head bytes from pos; returns the offset after the head, or limit while it is incomplete. */
export function readHead(p: HttpResponseParser, chunk: Buffer, pos: number, limit: number): number {
  if (p.headLength < STATUS_PREFIX.length && !checkStatusPrefix(p, chunk, pos, limit)) return pos;
  if (p.headLength === 0) {
    const end = chunk.indexOf(HEAD_END, pos);
    if (end !== -1 && end + 4 <= limit && end - pos <= MAX_HEAD_BYTES) {
      parseHead(p, chunk, pos, end);
      return end + 4;
    }
    if (limit - pos > MAX_HEAD_BYTES) {
      p.fail('response head too large');
      return pos;
    }
    gather(p, chunk, pos, limit);
    return limit;
  }
  // The terminator may straddle the previous read, so the search backs up three bytes.
  const searchFrom = Math.max(0, p.headLength - 3);
  const take = Math.min(limit - pos, MAX_HEAD_BYTES + 4 - p.headLength);
  gather(p, chunk, pos, pos + take);
  const gathered = p.headBuffer!;
  const end = gathered.subarray(0, p.headLength).indexOf(HEAD_END, searchFrom);
  if (end === -1) {
    if (p.headLength >= MAX_HEAD_BYTES + 4) p.fail('response head too large');
    return pos + take;
  }
  const usedFromChunk = end + 4 - (p.headLength - take);
  p.headLength = 0;
  parseHead(p, gathered, 0, end);
  return pos + usedFromChunk;
}

/**
 * Parses head bytes buf[start, end), the final CRLFCRLF excluded. The structure is scanned on the bytes
 * (faster than charCodeAt); names and values are then cut from one latin1 string of the whole head.
 */
function parseHead(p: HttpResponseParser, buf: Buffer, start: number, end: number): void {
  // "HTTP/1.x SSS[ reason]": the "HTTP/1." prefix was checked as it arrived.
  const minor = buf[start + 7];
  const d0 = buf[start + 9]! - 48;
  const d1 = buf[start + 10]! - 48;
  const d2 = buf[start + 11]! - 48;
  if (
    end - start < 12 ||
    (minor !== 48 && minor !== 49) ||
    buf[start + 8] !== 32 ||
    !(d0 >= 1 && d0 <= 5 && d1 >= 0 && d1 <= 9 && d2 >= 0 && d2 <= 9) ||
    (end - start > 12 && buf[start + 12] !== 32 && buf[start + 12] !== CR)
  ) {
    return p.fail('malformed status line');
  }
  const status = d0 * 100 + d1 * 10 + d2;
  let pos = skipLine(buf, start + 12, end);
  if (pos < 0) return p.fail('stray CR, LF or NUL in response head');

  // A JSON-RPC answer's headers matter only for its framing: a consumer that reads none is spared the
  // strings and the list (most forwarded calls). An answer outside 2xx keeps them: a 429's Retry-After.
  const keep = status < 200 || status > 299 || (p.events.wantsHeaders?.() ?? true);
  const text = keep ? buf.toString('latin1', start, end) : '';
  const headers: Array<[string, string]> = keep ? [] : NO_HEADERS;
  let contentLength: number | undefined;
  let transferEncoding: string | undefined;
  let connectionClose = false;
  while (pos < end) {
    const nameStart = pos;
    let upper = false;
    let c = buf[pos]!;
    while (c !== 58 /* : */) {
      if (c > 127 || TOKEN_CHAR[c] === 0) return p.fail('malformed header name');
      if (c <= 90 && c >= 65) upper = true;
      if (++pos === end) return p.fail('malformed header line');
      c = buf[pos]!;
    }
    if (pos === nameStart) return p.fail('malformed header line');
    // A consumer that reads no header needs only the framing ones' names, which are 10, 14 or 17 bytes long.
    const length = pos - nameStart;
    let name = keep || length === 14 || length === 10 || length === 17 ? commonName(buf, nameStart, pos) : undefined;
    if (name === undefined && keep) {
      name = text.slice(nameStart - start, pos - start);
      if (upper) name = name.toLowerCase();
    }
    pos++;
    while (pos < end && ((c = buf[pos]!) === 32 || c === 9)) pos++;
    const valueStart = pos;
    let valueEnd = pos;
    while (pos < end && (c = buf[pos]!) !== CR) {
      if (c === LF || c === 0) return p.fail('stray CR, LF or NUL in response head');
      pos++;
      if (c !== 32 && c !== 9) valueEnd = pos;
    }
    if (pos < end) {
      if (pos + 1 === end || buf[pos + 1] !== LF) return p.fail('stray CR, LF or NUL in response head');
      pos += 2;
    }
    if (keep) headers.push([name!, text.slice(valueStart - start, valueEnd - start)]);
    if (name === 'content-length') {
      if (valueEnd === valueStart || valueEnd - valueStart > 15) return p.fail('invalid content-length');
      let length = 0;
      for (let i = valueStart; i < valueEnd; i++) {
        const digit = buf[i]! - 48;
        if (digit < 0 || digit > 9) return p.fail('invalid content-length');
        length = length * 10 + digit;
      }
      if (contentLength !== undefined && contentLength !== length) return p.fail('conflicting content-length');
      contentLength = length;
    } else if (name === 'transfer-encoding') {
      const value = buf.toString('latin1', valueStart, valueEnd);
      transferEncoding = transferEncoding === undefined ? value : transferEncoding + ',' + value;
    } else if (name === 'connection') {
      if (/(?:^|,)[ \t]*close[ \t]*(?:,|$)/i.test(buf.toString('latin1', valueStart, valueEnd))) connectionClose = true;
    }
  }

  if (status < 200) {
    // 101 would switch protocols, which this client never asks for.
    if (status === 101) return p.fail('unexpected 101 Switching Protocols');
    return;
  }
  p.keepAlive = minor === 49 && !connectionClose;
  if (status === 204 || status === 304) {
    p.state = DONE;
    p.events.onHead(status, headers, 0);
    return;
  }
  if (transferEncoding !== undefined) {
    const codings = transferEncoding.toLowerCase().split(',');
    const chunked = codings.map(trimOws).indexOf('chunked');
    if (chunked !== -1 && chunked !== codings.length - 1) return p.fail('chunked is not the final transfer coding');
    // A length beside a transfer coding is ignored, and the connection is not trusted for reuse.
    if (contentLength !== undefined) p.keepAlive = false;
    contentLength = undefined;
    if (chunked !== -1) {
      p.state = CHUNK_SIZE;
      p.chunkDigits = 0;
      p.remaining = 0;
    } else {
      p.state = BODY_UNTIL_CLOSE;
      p.keepAlive = false;
    }
  } else if (contentLength !== undefined) {
    p.remaining = contentLength;
    p.state = contentLength === 0 ? DONE : BODY_LENGTH;
  } else {
    p.state = BODY_UNTIL_CLOSE;
    p.keepAlive = false;
  }
  p.events.onHead(status, headers, contentLength);
}
