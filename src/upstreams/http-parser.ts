import {
  BODY_LENGTH,
  BODY_UNTIL_CLOSE,
  CHUNK_DATA,
  CHUNK_DATA_CR,
  CHUNK_DATA_LF,
  CHUNK_EXTENSION,
  CHUNK_SIZE,
  CHUNK_SIZE_LF,
  CR,
  DONE,
  FAILED,
  HEAD,
  LF,
  MAX_HEAD_BYTES,
  readHead,
  TRAILER_END_LF,
  TRAILER_LINE,
  TRAILER_LINE_LF,
  TRAILER_LINE_START,
} from './http-head.js';

export { MAX_HEAD_BYTES } from './http-head.js';

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

// chunk-size is hex; 13 digits keep it below 2^53.
const MAX_CHUNK_SIZE_DIGITS = 13;

function hexValue(c: number): number {
  if (c >= 48 && c <= 57) return c - 48;
  const lower = c | 0x20;
  if (lower >= 97 && lower <= 102) return lower - 87;
  return -1;
}

/**
 * One connection's parser: its state in fields, set in the constructor in one order so that every parser
 * has one shape and the byte loops see one, and the steps as methods shared by all (the head's steps, in
 * http-head.ts, take the parser and work on the same fields).
 */
export class HttpResponseParser implements ResponseParser {
  readonly events: ResponseEvents;
  state: number;
  error: string | undefined;
  keepAlive: boolean;
  /** A head split across reads is gathered here; the common single-read head is parsed in place. */
  headBuffer: Buffer | null;
  headLength: number;
  remaining: number;
  chunkDigits: number;
  sectionBytes: number;

  constructor(events: ResponseEvents) {
    this.events = events;
    this.state = HEAD;
    this.error = undefined;
    this.keepAlive = true;
    this.headBuffer = null;
    this.headLength = 0;
    this.remaining = 0;
    this.chunkDigits = 0;
    this.sectionBytes = 0;
  }

  get done(): boolean {
    return this.state === DONE;
  }

  fail(reason: string): void {
    this.state = FAILED;
    this.error = reason;
    this.keepAlive = false;
  }

  execute(chunk: Buffer, from: number, limit: number): number {
    let pos = from;
    while (pos < limit) {
      switch (this.state) {
        case HEAD:
          pos = readHead(this, chunk, pos, limit);
          break;
        case BODY_LENGTH: {
          const end = pos + Math.min(this.remaining, limit - pos);
          this.remaining -= end - pos;
          if (this.remaining === 0) this.state = DONE;
          const more = this.events.onBody(chunk, pos, end);
          pos = end;
          if (!more) return pos;
          break;
        }
        case BODY_UNTIL_CLOSE:
          if (!this.events.onBody(chunk, pos, limit)) return limit;
          pos = limit;
          break;
        case CHUNK_SIZE: {
          const c = chunk[pos]!;
          const digit = hexValue(c);
          pos++;
          if (digit >= 0) {
            if (++this.chunkDigits > MAX_CHUNK_SIZE_DIGITS) this.fail('chunk size too large');
            this.remaining = this.remaining * 16 + digit;
          } else if (this.chunkDigits === 0) {
            this.fail('invalid chunk size');
          } else if (c === CR) {
            this.state = CHUNK_SIZE_LF;
          } else if (c === 59 /* ; */ || c === 32 || c === 9) {
            this.state = CHUNK_EXTENSION;
            this.sectionBytes = 0;
          } else {
            this.fail('invalid chunk size');
          }
          break;
        }
        case CHUNK_EXTENSION: {
          // Extensions carry nothing chaingate uses: skipped up to the CR that ends the size line.
          const start = pos;
          let c = 0;
          while (pos < limit && (c = chunk[pos]!) !== CR && c !== LF) pos++;
          this.sectionBytes += pos - start;
          if (pos === limit) {
            if (this.sectionBytes > MAX_HEAD_BYTES) this.fail('chunk extension too large');
          } else if (c === LF) {
            this.fail('stray LF in chunk extension');
          } else {
            pos++;
            this.state = CHUNK_SIZE_LF;
          }
          break;
        }
        case CHUNK_SIZE_LF:
          if (chunk[pos++] !== LF) {
            this.fail('chunk size line not ended by CRLF');
          } else if (this.remaining === 0) {
            this.state = TRAILER_LINE_START;
            this.sectionBytes = 0;
          } else {
            this.state = CHUNK_DATA;
          }
          break;
        case CHUNK_DATA: {
          const end = pos + Math.min(this.remaining, limit - pos);
          this.remaining -= end - pos;
          if (this.remaining === 0) this.state = CHUNK_DATA_CR;
          const more = this.events.onBody(chunk, pos, end);
          pos = end;
          if (!more) return pos;
          break;
        }
        case CHUNK_DATA_CR:
          if (chunk[pos++] !== CR) this.fail('chunk data not followed by CRLF');
          else this.state = CHUNK_DATA_LF;
          break;
        case CHUNK_DATA_LF:
          if (chunk[pos++] !== LF) this.fail('chunk data not followed by CRLF');
          else {
            this.state = CHUNK_SIZE;
            this.chunkDigits = 0;
          }
          break;
        case TRAILER_LINE_START: {
          const c = chunk[pos++];
          if (c === LF) this.fail('stray LF in trailer section');
          else this.state = c === CR ? TRAILER_END_LF : TRAILER_LINE;
          this.sectionBytes++;
          break;
        }
        case TRAILER_LINE: {
          const start = pos;
          while (pos < limit && chunk[pos] !== CR) pos++;
          this.sectionBytes += pos - start;
          if (this.sectionBytes > MAX_HEAD_BYTES) this.fail('trailer section too large');
          else if (pos < limit) {
            pos++;
            this.state = TRAILER_LINE_LF;
          }
          break;
        }
        case TRAILER_LINE_LF:
          if (chunk[pos++] !== LF) this.fail('trailer line not ended by CRLF');
          else this.state = TRAILER_LINE_START;
          break;
        case TRAILER_END_LF:
          if (chunk[pos++] !== LF) this.fail('trailer section not ended by CRLF');
          else this.state = DONE;
          break;
        default:
          // DONE or FAILED: the rest belongs to no response this parser will read.
          return pos;
      }
      if (this.state === DONE || this.state === FAILED) return pos;
    }
    return pos;
  }

  finish(): boolean {
    if (this.state !== BODY_UNTIL_CLOSE) return false;
    this.state = DONE;
    return true;
  }

  reset(): void {
    this.state = HEAD;
    this.error = undefined;
    this.keepAlive = true;
    this.headLength = 0;
    this.remaining = 0;
  }
}

export function createResponseParser(events: ResponseEvents): ResponseParser {
  return new HttpResponseParser(events);
}
