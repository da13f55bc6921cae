/** What the parser reports while it reads one response. */
export interface ResponseEvents {
  /** A final (non-1xx) head. Names are lower-cased; contentLength is undefined for chunked and close-delimited bodies. */
  onHead(status: number, headers: Array<[string, string]>, contentLength: number | undefined): void;
  /** chunk[start, end) is body data, valid only during the call. Return false to stop the parser after it. */
  onBody(chunk: Buffer, start: number, end: number): boolean;
  /** Asked as a head is parsed; false means its consumer reads no header, so onHead gets an empty list. */
  wantsHeaders?(): boolean;
}

/**
 * An incremental HTTP/1.x response parser for one connection, safe for input split at any byte.
 * It reads one response (skipping 1xx heads) and then stops until `reset()`.
 */
export interface ResponseParser {
  /**
   * Parses chunk[from, limit); returns the offset it stopped at: limit, or earlier when onBody returned
   * false, the response completed (bytes after it are not consumed), or the input is not HTTP. Bytes of
   * chunk past limit are never read as data.
   */
  execute(chunk: Buffer, from: number, limit: number): number;
  /** The connection delivered its last byte; true when that completes a close-delimited body. */
  finish(): boolean;
  /** Readies the parser for the next response on the same connection. */
  reset(): void;
  /** The response is complete. */
  readonly done: boolean;
  /** Set once the input proved not to be a valid response; the connection must then be dropped. */
  readonly error: string | undefined;
  /** The connection may carry another request after this response (HTTP/1.1, no `Connection: close`, self-delimited body). */
  readonly keepAlive: boolean;
}

/** Longest response head, and longest chunk-extension or trailer section, accepted. */
export const MAX_HEAD_BYTES = 64 * 1024;

const HEAD = 0;
const BODY_LENGTH = 1;
const BODY_UNTIL_CLOSE = 2;
const CHUNK_SIZE = 3;
const CHUNK_EXTENSION = 4;
const CHUNK_SIZE_LF = 5;
const CHUNK_DATA = 6;
const CHUNK_DATA_CR = 7;
const CHUNK_DATA_LF = 8;
const TRAILER_LINE_START = 9;
const TRAILER_LINE = 10;
const TRAILER_LINE_LF = 11;
const TRAILER_END_LF = 12;
const DONE = 13;
const FAILED = 14;

const CR = 13;
const LF = 10;
const HEAD_END = Buffer.from('\r\n\r\n', 'latin1');
/** The header list handed to a consumer that reads none. */
const NO_HEADERS: Array<[string, string]> = Object.freeze([]) as unknown as Array<[string, string]>;
const STATUS_PREFIX = Buffer.from('HTTP/1.', 'latin1');
// chunk-size is hex; 13 digits keep it below 2^53.
const MAX_CHUNK_SIZE_DIGITS = 13;
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

function hexValue(c: number): number {
  if (c >= 48 && c <= 57) return c - 48;
  const lower = c | 0x20;
  if (lower >= 97 && lower <= 102) return lower - 87;
  return -1;
}

function trimOws(s: string): string {
  let start = 0;
  let end = s.length;
  while (start < end && (s.charCodeAt(start) === 32 || s.charCodeAt(start) === 9)) start++;
  while (end > start && (s.charCodeAt(end - 1) === 32 || s.charCodeAt(end - 1) === 9)) end--;
  return start === 0 && end === s.length ? s : s.slice(start, end);
}

export function createResponseParser(events: ResponseEvents): ResponseParser {
  let state = HEAD;
  let error: string | undefined;
  let keepAlive = true;
  // A head split across reads is gathered here; the common single-read head is parsed in place.
  let headBuffer: Buffer | null = null;
  let headLength = 0;
  let remaining = 0;
  let chunkDigits = 0;
  let sectionBytes = 0;

  function fail(reason: string): void {
    state = FAILED;
    error = reason;
    keepAlive = false;
  }

  function gather(chunk: Buffer, start: number, end: number): void {
    const needed = headLength + (end - start);
    if (headBuffer === null || headBuffer.length < needed) {
      const grown = Buffer.allocUnsafe(Math.max(needed, headBuffer === null ? 1024 : headBuffer.length * 2));
      if (headBuffer !== null) headBuffer.copy(grown, 0, 0, headLength);
      headBuffer = grown;
    }
    chunk.copy(headBuffer, headLength, start, end);
    headLength = needed;
  }

  function checkStatusPrefix(chunk: Buffer, pos: number, limit: number): boolean {
    for (let seen = headLength; seen < STATUS_PREFIX.length && pos < limit; seen++, pos++) {
      if (chunk[pos] !== STATUS_PREFIX[seen]) {
        fail('not an HTTP/1.x response');
        return false;
      }
    }
    return true;
  }

  /** Reads head bytes from pos; returns the offset after the head, or limit while it is incomplete. */
  function readHead(chunk: Buffer, pos: number, limit: number): number {
    if (headLength < STATUS_PREFIX.length && !checkStatusPrefix(chunk, pos, limit)) return pos;
    if (headLength === 0) {
      const end = chunk.indexOf(HEAD_END, pos);
      if (end !== -1 && end + 4 <= limit && end - pos <= MAX_HEAD_BYTES) {
        parseHead(chunk, pos, end);
        return end + 4;
      }
      if (limit - pos > MAX_HEAD_BYTES) {
        fail('response head too large');
        return pos;
      }
      gather(chunk, pos, limit);
      return limit;
    }
    // The terminator may straddle the previous read, so the search backs up three bytes.
    const searchFrom = Math.max(0, headLength - 3);
    const take = Math.min(limit - pos, MAX_HEAD_BYTES + 4 - headLength);
    gather(chunk, pos, pos + take);
    const gathered = headBuffer!;
    const end = gathered.subarray(0, headLength).indexOf(HEAD_END, searchFrom);
    if (end === -1) {
      if (headLength >= MAX_HEAD_BYTES + 4) fail('response head too large');
      return pos + take;
    }
    const usedFromChunk = end + 4 - (headLength - take);
    headLength = 0;
    parseHead(gathered, 0, end);
    return pos + usedFromChunk;
  }

  /**
   * Parses head bytes buf[start, end), the final CRLFCRLF excluded. The structure is scanned on the bytes
   * (faster than charCodeAt); names and values are then cut from one latin1 string of the whole head.
   */
  function parseHead(buf: Buffer, start: number, end: number): void {
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
      return fail('malformed status line');
    }
    const status = d0 * 100 + d1 * 10 + d2;
    let pos = skipLine(buf, start + 12, end);
    if (pos < 0) return fail('stray CR, LF or NUL in response head');

    // A JSON-RPC answer's headers matter only for its framing: a consumer that reads none is spared the
    // strings and the list (most forwarded calls).
    const keep = events.wantsHeaders?.() ?? true;
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
        if (c > 127 || TOKEN_CHAR[c] === 0) return fail('malformed header name');
        if (c <= 90 && c >= 65) upper = true;
        if (++pos === end) return fail('malformed header line');
        c = buf[pos]!;
      }
      if (pos === nameStart) return fail('malformed header line');
      let name = commonName(buf, nameStart, pos);
      if (name === undefined && keep) {
        name = text.slice(nameStart - start, pos - start);
        if (upper) name = name.toLowerCase();
      }
      pos++;
      while (pos < end && ((c = buf[pos]!) === 32 || c === 9)) pos++;
      const valueStart = pos;
      let valueEnd = pos;
      while (pos < end && (c = buf[pos]!) !== CR) {
        if (c === LF || c === 0) return fail('stray CR, LF or NUL in response head');
        pos++;
        if (c !== 32 && c !== 9) valueEnd = pos;
      }
      if (pos < end) {
        if (pos + 1 === end || buf[pos + 1] !== LF) return fail('stray CR, LF or NUL in response head');
        pos += 2;
      }
      if (keep) headers.push([name!, text.slice(valueStart - start, valueEnd - start)]);
      if (name === 'content-length') {
        if (valueEnd === valueStart || valueEnd - valueStart > 15) return fail('invalid content-length');
        let length = 0;
        for (let i = valueStart; i < valueEnd; i++) {
          const digit = buf[i]! - 48;
          if (digit < 0 || digit > 9) return fail('invalid content-length');
          length = length * 10 + digit;
        }
        if (contentLength !== undefined && contentLength !== length) return fail('conflicting content-length');
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
      if (status === 101) return fail('unexpected 101 Switching Protocols');
      return;
    }
    keepAlive = minor === 49 && !connectionClose;
    if (status === 204 || status === 304) {
      state = DONE;
      events.onHead(status, headers, 0);
      return;
    }
    if (transferEncoding !== undefined) {
      const codings = transferEncoding.toLowerCase().split(',');
      const chunked = codings.map(trimOws).indexOf('chunked');
      if (chunked !== -1 && chunked !== codings.length - 1) return fail('chunked is not the final transfer coding');
      // A length beside a transfer coding is ignored, and the connection is not trusted for reuse.
      if (contentLength !== undefined) keepAlive = false;
      contentLength = undefined;
      if (chunked !== -1) {
        state = CHUNK_SIZE;
        chunkDigits = 0;
        remaining = 0;
      } else {
        state = BODY_UNTIL_CLOSE;
        keepAlive = false;
      }
    } else if (contentLength !== undefined) {
      remaining = contentLength;
      state = contentLength === 0 ? DONE : BODY_LENGTH;
    } else {
      state = BODY_UNTIL_CLOSE;
      keepAlive = false;
    }
    events.onHead(status, headers, contentLength);
  }

  function execute(chunk: Buffer, from: number, limit: number): number {
    let pos = from;
    while (pos < limit) {
      switch (state) {
        case HEAD:
          pos = readHead(chunk, pos, limit);
          break;
        case BODY_LENGTH: {
          const end = pos + Math.min(remaining, limit - pos);
          remaining -= end - pos;
          if (remaining === 0) state = DONE;
          const more = events.onBody(chunk, pos, end);
          pos = end;
          if (!more) return pos;
          break;
        }
        case BODY_UNTIL_CLOSE:
          if (!events.onBody(chunk, pos, limit)) return limit;
          pos = limit;
          break;
        case CHUNK_SIZE: {
          const c = chunk[pos]!;
          const digit = hexValue(c);
          pos++;
          if (digit >= 0) {
            if (++chunkDigits > MAX_CHUNK_SIZE_DIGITS) fail('chunk size too large');
            remaining = remaining * 16 + digit;
          } else if (chunkDigits === 0) {
            fail('invalid chunk size');
          } else if (c === CR) {
            state = CHUNK_SIZE_LF;
          } else if (c === 59 /* ; */ || c === 32 || c === 9) {
            state = CHUNK_EXTENSION;
            sectionBytes = 0;
          } else {
            fail('invalid chunk size');
          }
          break;
        }
        case CHUNK_EXTENSION: {
          // Extensions carry nothing chaingate uses: skipped up to the CR that ends the size line.
          const start = pos;
          let c = 0;
          while (pos < limit && (c = chunk[pos]!) !== CR && c !== LF) pos++;
          sectionBytes += pos - start;
          if (pos === limit) {
            if (sectionBytes > MAX_HEAD_BYTES) fail('chunk extension too large');
          } else if (c === LF) {
            fail('stray LF in chunk extension');
          } else {
            pos++;
            state = CHUNK_SIZE_LF;
          }
          break;
        }
        case CHUNK_SIZE_LF:
          if (chunk[pos++] !== LF) {
            fail('chunk size line not ended by CRLF');
          } else if (remaining === 0) {
            state = TRAILER_LINE_START;
            sectionBytes = 0;
          } else {
            state = CHUNK_DATA;
          }
          break;
        case CHUNK_DATA: {
          const end = pos + Math.min(remaining, limit - pos);
          remaining -= end - pos;
          if (remaining === 0) state = CHUNK_DATA_CR;
          const more = events.onBody(chunk, pos, end);
          pos = end;
          if (!more) return pos;
          break;
        }
        case CHUNK_DATA_CR:
          if (chunk[pos++] !== CR) fail('chunk data not followed by CRLF');
          else state = CHUNK_DATA_LF;
          break;
        case CHUNK_DATA_LF:
          if (chunk[pos++] !== LF) fail('chunk data not followed by CRLF');
          else {
            state = CHUNK_SIZE;
            chunkDigits = 0;
          }
          break;
        case TRAILER_LINE_START: {
          const c = chunk[pos++];
          if (c === LF) fail('stray LF in trailer section');
          else state = c === CR ? TRAILER_END_LF : TRAILER_LINE;
          sectionBytes++;
          break;
        }
        case TRAILER_LINE: {
          const start = pos;
          while (pos < limit && chunk[pos] !== CR) pos++;
          sectionBytes += pos - start;
          if (sectionBytes > MAX_HEAD_BYTES) fail('trailer section too large');
          else if (pos < limit) {
            pos++;
            state = TRAILER_LINE_LF;
          }
          break;
        }
        case TRAILER_LINE_LF:
          if (chunk[pos++] !== LF) fail('trailer line not ended by CRLF');
          else state = TRAILER_LINE_START;
          break;
        case TRAILER_END_LF:
          if (chunk[pos++] !== LF) fail('trailer section not ended by CRLF');
          else state = DONE;
          break;
        default:
          // DONE or FAILED: the rest belongs to no response this parser will read.
          return pos;
      }
      if (state === DONE || state === FAILED) return pos;
    }
    return pos;
  }

  return {
    execute,
    finish() {
      if (state !== BODY_UNTIL_CLOSE) return false;
      state = DONE;
      return true;
    },
    reset() {
      state = HEAD;
      error = undefined;
      keepAlive = true;
      headLength = 0;
      remaining = 0;
    },
    get done() {
      return state === DONE;
    },
    get error() {
      return error;
    },
    get keepAlive() {
      return keepAlive;
    },
  };
}
