/**
 * The byte scan behind id-rewrite.ts: a state machine over the answer's top-level object, fed chunk by
 * chunk, that swaps the top-level id's bytes for the client's and (given the id the gateway sent) reads
 * on to the end to check the answer is that call's.
 */
import type { IdRewriter } from './id-rewrite.js';

const START = 0;
const KEY_OR_END = 1;
const KEY = 2;
const KEY_ESCAPE = 3;
const COLON = 4;
const VALUE = 5;
const SKIP_STRING = 6;
const SKIP_NESTED = 7;
const SKIP_NESTED_STRING = 8;
const SKIP_SCALAR = 9;
const AFTER_VALUE = 10;
const ID_STRING = 11;
const ID_NUMBER = 12;
const ID_NULL = 13;
/** The top-level object closed: only whitespace may follow. */
const CLOSED = 14;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
// The longest spelling of the name "id" is `\u0069\u0064`; anything longer is another member.
const ESCAPED_KEY_MAX = 12;
const NULL_TAIL = [0x75, 0x6c, 0x6c]; // "ull"

function isWhitespace(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

/** 1 for a byte the skip of a nested value must look at: quotes, backslashes and brackets. */
const NESTED_STOP = new Uint8Array(256);
for (const c of [QUOTE, BACKSLASH, 0x7b, 0x7d, 0x5b, 0x5d]) NESTED_STOP[c] = 1;

function isNumberByte(c: number): boolean {
  return (c >= 0x30 && c <= 0x39) || c === 0x2d || c === 0x2b || c === 0x2e || c === 0x65 || c === 0x45;
}

/**
 * One answer's scan (createIdRewriter): its state in fields of one object, its steps as methods, so an
 * answer costs one object where a closure per step made ten. The fields the caller reads are plain
 * data, not getters (an object with accessors costs more to build than the whole scan).
 */
export class IdRewriteScan implements IdRewriter {
  replaced = false;
  invalid = false;
  delta = 0;
  wrongId = false;
  closed = false;
  private readonly clientId: Buffer;
  private readonly sentId: Buffer | null;
  // Scanning goes on after the id while checking: nested values are then skipped in skipNested.
  private readonly scanAll: boolean;
  private state = START;
  private depth = 0;
  // The previous chunk ended inside a string on an unpaired backslash: the next byte is escaped.
  private escaped = false;
  private keyLength = 0;
  private keyFirst = 0;
  private keySecond = 0;
  // A member name written with escapes is collected to be decoded: nodes do not write one, but it would still be "id".
  private escapedKey: string | null = null;
  private isIdMember = false;
  private originalIdBytes = 0;
  private nullMatched = 0;
  // Where the client's bytes resume in the chunk that finished the original id.
  private resumeAt = 0;
  // The original id's bytes matched against the sent id's so far: -1 once they differ.
  private sentMatched = 0;
  // Inside a string of a nested value being skipped.
  private nestedString = false;

  constructor(clientIdText: string, sentIdText: string | undefined) {
    this.clientId = Buffer.from(clientIdText, 'utf8');
    this.sentId = sentIdText === undefined ? null : Buffer.from(sentIdText, 'utf8');
    this.scanAll = this.sentId !== null;
  }

  push(chunk: Buffer): Buffer[] {
    if (this.invalid) return [];
    if (this.replaced && !this.scanAll) return [chunk];
    const out: Buffer[] = [];
    const n = chunk.length;
    let i = 0;
    while (i < n && (this.scanAll || !this.replaced)) {
      const c = chunk[i]!;
      switch (this.state) {
        case START:
          if (c === 0x7b) this.state = KEY_OR_END;
          else if (!isWhitespace(c)) return this.fail();
          i++;
          break;
        case KEY_OR_END:
          if (c === QUOTE) {
            this.state = KEY;
            this.keyLength = 0;
            this.escapedKey = null;
          } else if (!isWhitespace(c)) {
            return this.fail();
          }
          i++;
          break;
        case KEY:
        case KEY_ESCAPE:
          if (this.state === KEY && c === QUOTE) this.state = COLON;
          else {
            this.keyByte(c, this.state === KEY_ESCAPE);
            this.state = this.state === KEY && c === BACKSLASH ? KEY_ESCAPE : KEY;
          }
          i++;
          break;
        case COLON:
          if (c === 0x3a) {
            this.state = VALUE;
            this.isIdMember = this.isIdKey();
            // A second top-level id: the client's parser would read this one, the node's.
            if (this.isIdMember && this.replaced) {
              this.wrongIdFound();
              return [];
            }
          } else if (!isWhitespace(c)) {
            return this.fail();
          }
          i++;
          break;
        case VALUE:
          if (isWhitespace(c)) {
            i++;
          } else if (this.isIdMember) {
            if (!this.startId(chunk, i, c, out)) return this.fail();
            i++;
          } else if (c === QUOTE) {
            this.state = SKIP_STRING;
            this.escaped = false;
            i++;
          } else if (c === 0x7b || c === 0x5b) {
            this.state = SKIP_NESTED;
            this.depth = 1;
            this.nestedString = false;
            i++;
          } else {
            this.state = SKIP_SCALAR;
          }
          break;
        case SKIP_STRING:
        case SKIP_NESTED_STRING:
        case ID_STRING: {
          const q = this.closingQuote(chunk, i);
          const next = q < 0 ? n : q + 1;
          if (this.state === ID_STRING) {
            this.originalIdBytes += next - i;
            this.matchSent(chunk, i, next);
            if (q >= 0) this.finishId(next);
          } else if (q >= 0) {
            this.state = this.state === SKIP_STRING ? AFTER_VALUE : SKIP_NESTED;
          }
          i = next;
          break;
        }
        case SKIP_NESTED:
          if (this.scanAll) {
            i = this.skipNested(chunk, i);
            break;
          }
          if (c === QUOTE) {
            this.state = SKIP_NESTED_STRING;
            this.escaped = false;
          } else if (c === 0x7b || c === 0x5b) {
            this.depth++;
          } else if ((c === 0x7d || c === 0x5d) && --this.depth === 0) {
            this.state = AFTER_VALUE;
          }
          i++;
          break;
        case SKIP_SCALAR:
          if (c === 0x2c || c === 0x7d || isWhitespace(c)) this.state = AFTER_VALUE;
          else i++;
          break;
        case AFTER_VALUE:
          if (c === 0x2c) this.state = KEY_OR_END;
          else if (c === 0x7d && this.replaced) {
            this.state = CLOSED;
            this.closed = true;
          } else if (c === 0x7d && this.scanAll) {
            // An object without an id answers no call the gateway made.
            this.wrongIdFound();
            return [];
          } else if (!isWhitespace(c)) return this.fail(); // `}` before the id: the object closed without one
          i++;
          break;
        case CLOSED:
          if (!isWhitespace(c)) return this.fail();
          i++;
          break;
        case ID_NUMBER:
          if (isNumberByte(c)) {
            this.originalIdBytes++;
            this.matchSent(chunk, i, i + 1);
            i++;
          } else {
            this.finishId(i);
          }
          break;
        case ID_NULL:
          if (c !== NULL_TAIL[this.nullMatched]) return this.fail();
          this.originalIdBytes++;
          this.matchSent(chunk, i, i + 1);
          i++;
          if (++this.nullMatched === NULL_TAIL.length) this.finishId(i);
          break;
      }
    }
    if (this.invalid) return [];
    if (this.replaced) {
      if (this.resumeAt < n) out.push(this.resumeAt === 0 ? chunk : chunk.subarray(this.resumeAt));
      this.resumeAt = 0;
    } else if (this.state !== ID_STRING && this.state !== ID_NUMBER && this.state !== ID_NULL) {
      out.push(chunk);
    }
    return out;
  }

  /**
   * The top-level id's value starts at chunk[i] (`c`): the bytes before it go out, then the client's id in
   * its place. False when the value is not a number, string or null.
   */
  private startId(chunk: Buffer, i: number, c: number, out: Buffer[]): boolean {
    if (c === QUOTE) this.state = ID_STRING;
    else if (c === 0x6e) this.state = ID_NULL;
    else if (c === 0x2d || (c >= 0x30 && c <= 0x39)) this.state = ID_NUMBER;
    else return false;
    if (i > 0) out.push(chunk.subarray(0, i));
    out.push(this.clientId);
    this.originalIdBytes = 1;
    this.nullMatched = 0;
    this.escaped = false;
    this.matchSent(chunk, i, i + 1);
    return true;
  }

  private finishId(at: number): void {
    this.replaced = true;
    this.delta = this.clientId.length - this.originalIdBytes;
    this.resumeAt = at;
    if (this.sentId !== null && this.sentMatched !== this.sentId.length) this.wrongIdFound();
    this.state = AFTER_VALUE;
  }

  /** Matches the original id's bytes chunk[from, to) against the sent id's. */
  private matchSent(chunk: Buffer, from: number, to: number): void {
    if (this.sentId === null || this.sentMatched < 0) return;
    if (this.sentMatched + to - from > this.sentId.length) {
      this.sentMatched = -1;
      return;
    }
    for (let k = from; k < to; k++) {
      if (chunk[k] !== this.sentId[this.sentMatched]) {
        this.sentMatched = -1;
        return;
      }
      this.sentMatched++;
    }
  }

  private wrongIdFound(): void {
    this.wrongId = true;
    this.invalid = true;
  }

  /**
   * Skips nested-value bytes from i; returns where it stopped: the chunk's end, or just past the bracket
   * closing the top-level member's value (state is then AFTER_VALUE). One table read per byte outside
   * strings; a string's end is found by indexOf, since the hex strings of a large answer are most of its bytes.
   */
  private skipNested(chunk: Buffer, i: number): number {
    const n = chunk.length;
    let d = this.depth;
    let inString = this.nestedString;
    while (i < n) {
      if (inString) {
        const q = this.closingQuote(chunk, i);
        if (q < 0) {
          i = n;
          break;
        }
        inString = false;
        i = q + 1;
        continue;
      }
      const c = chunk[i]!;
      i++;
      if (NESTED_STOP[c] === 0) continue;
      if (c === QUOTE) inString = true;
      else if (c === 0x7b || c === 0x5b) d++;
      else if ((c === 0x7d || c === 0x5d) && --d === 0) {
        this.state = AFTER_VALUE;
        break;
      }
    }
    this.depth = d;
    this.nestedString = inString;
    return i;
  }

  /** Index of the closing quote of the string being scanned, or -1 when it goes on past the chunk. */
  private closingQuote(chunk: Buffer, i: number): number {
    if (this.escaped) {
      if (i >= chunk.length) return -1;
      this.escaped = false;
      i++;
    }
    for (;;) {
      const q = chunk.indexOf(QUOTE, i);
      const end = q < 0 ? chunk.length : q;
      let k = end - 1;
      while (k >= i && chunk[k] === BACKSLASH) k--;
      const odd = ((end - 1 - k) & 1) === 1;
      if (q < 0) {
        this.escaped = odd;
        return -1;
      }
      if (!odd) return q;
      i = q + 1;
    }
  }

  private keyByte(c: number, afterBackslash: boolean): void {
    if (this.escapedKey !== null) {
      if (this.escapedKey.length <= ESCAPED_KEY_MAX) this.escapedKey += String.fromCharCode(c);
    } else if (c === BACKSLASH && !afterBackslash && this.keyLength <= 2) {
      const before = this.keyLength === 0 ? '' : String.fromCharCode(this.keyFirst, this.keySecond).slice(0, this.keyLength);
      this.escapedKey = `${before}\\`;
    } else if (this.keyLength === 0) {
      this.keyFirst = c;
    } else if (this.keyLength === 1) {
      this.keySecond = c;
    }
    this.keyLength++;
  }

  private isIdKey(): boolean {
    if (this.escapedKey === null) return this.keyLength === 2 && this.keyFirst === 0x69 && this.keySecond === 0x64;
    if (this.escapedKey.length > ESCAPED_KEY_MAX) return false;
    try {
      return JSON.parse(`"${this.escapedKey}"`) === 'id';
    } catch {
      return false;
    }
  }

  private fail(): Buffer[] {
    this.invalid = true;
    return [];
  }
}
