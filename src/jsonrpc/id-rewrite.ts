/**
 * Gives a client back its own id in an upstream answer. The gateway sends nodes ids of its own; the
 * answer's top-level `id` value is swapped for the client's id text while the answer streams, so a
 * node writing `id` after a 50 MB `result` costs neither a buffer nor a second parse.
 *
 * Given the id the gateway sent, the same pass checks the answer is that call's: its top-level `id` has
 * exactly the bytes sent, and no second top-level `id` follows (a client's parser would read the last
 * one). A node or balancer that mixed up answers would otherwise hand one tenant another's answer. The
 * check reads the whole answer, nested values skipped by a tight loop (bench/history/2026-11-29.md).
 */
export interface IdRewriter {
  /**
   * Feeds the next chunk of the upstream answer and returns what to send the client, in order. Bytes
   * before the id are passed on as they are scanned and the original id's bytes are dropped, so
   * nothing is ever held. Returns [] once `invalid`.
   */
  push(chunk: Buffer): Buffer[];
  /** True once the top-level id value has been replaced; from then on push() passes chunks through unscanned. */
  readonly replaced: boolean;
  /**
   * True when the answer is not a JSON object, its top-level `id` is not a number, string or null,
   * or the object ended or broke before an id was found. Bytes already returned may have been sent:
   * the caller must treat the answer as failed (abort the client's response if it has begun).
   */
  readonly invalid: boolean;
  /** Byte length of the client's id minus that of the original one; 0 until `replaced`. Adjusts a Content-Length. */
  readonly delta: number;
  /**
   * Set with `invalid` when the id the gateway sent was given and the answer's top-level id is another, or a
   * second top-level id member follows it, or the object closes without one: the answer is not the call's.
   */
  readonly wrongId: boolean;
  /**
   * Whether the answer's top-level object has closed (only whitespace may follow). Known only when the id the
   * gateway sent was given (the scan then reads to the end); an answer that ends before is cut off.
   */
  readonly closed: boolean;
}

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
 * A rewriter giving the client `clientIdText`. With `sentIdText` (the id the gateway sent the node) the answer
 * is also checked to be that call's (see above); without it, the scan stops at the id.
 */
export function createIdRewriter(clientIdText: string, sentIdText?: string): IdRewriter {
  const clientId = Buffer.from(clientIdText, 'utf8');
  const sentId = sentIdText === undefined ? null : Buffer.from(sentIdText, 'utf8');
  // Plain data fields, not getters: an object literal with accessors costs more to build than the whole scan.
  const self: { -readonly [K in keyof IdRewriter]: IdRewriter[K] } = {
    push,
    replaced: false,
    invalid: false,
    delta: 0,
    wrongId: false,
    closed: false,
  };
  let state = START;
  let replaced = false;
  let depth = 0;
  // The previous chunk ended inside a string on an unpaired backslash: the next byte is escaped.
  let escaped = false;
  let keyLength = 0;
  let keyFirst = 0;
  let keySecond = 0;
  // A member name written with escapes is collected to be decoded: nodes do not write one, but it would still be "id".
  let escapedKey: string | null = null;
  let isIdMember = false;
  let originalIdBytes = 0;
  let nullMatched = 0;
  // Where the client's bytes resume in the chunk that finished the original id.
  let resumeAt = 0;
  // The original id's bytes matched against the sent id's so far: -1 once they differ.
  let sentMatched = 0;
  // Scanning goes on after the id while checking: nested values are then skipped in skipNested.
  const scanAll = sentId !== null;
  // Inside a string of a nested value being skipped.
  let nestedString = false;

  function finishId(at: number): void {
    replaced = true;
    self.replaced = true;
    self.delta = clientId.length - originalIdBytes;
    resumeAt = at;
    if (sentId !== null && sentMatched !== sentId.length) wrongIdFound();
    state = AFTER_VALUE;
  }

  /** Matches the original id's bytes chunk[from, to) against the sent id's. */
  function matchSent(chunk: Buffer, from: number, to: number): void {
    if (sentId === null || sentMatched < 0) return;
    if (sentMatched + to - from > sentId.length) {
      sentMatched = -1;
      return;
    }
    for (let k = from; k < to; k++) {
      if (chunk[k] !== sentId[sentMatched]) {
        sentMatched = -1;
        return;
      }
      sentMatched++;
    }
  }

  function wrongIdFound(): void {
    self.wrongId = true;
    self.invalid = true;
  }

  /**
   * Skips nested-value bytes from i; returns where it stopped: the chunk's end, or just past the bracket
   * closing the top-level member's value (state is then AFTER_VALUE). One table read per byte outside
   * strings; a string's end is found by indexOf, since the hex strings of a large answer are most of its bytes.
   */
  function skipNested(chunk: Buffer, i: number): number {
    const n = chunk.length;
    let d = depth;
    let inString = nestedString;
    while (i < n) {
      if (inString) {
        const q = closingQuote(chunk, i);
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
        state = AFTER_VALUE;
        break;
      }
    }
    depth = d;
    nestedString = inString;
    return i;
  }

  /** Index of the closing quote of the string being scanned, or -1 when it goes on past the chunk. */
  function closingQuote(chunk: Buffer, i: number): number {
    if (escaped) {
      if (i >= chunk.length) return -1;
      escaped = false;
      i++;
    }
    for (;;) {
      const q = chunk.indexOf(QUOTE, i);
      const end = q < 0 ? chunk.length : q;
      let k = end - 1;
      while (k >= i && chunk[k] === BACKSLASH) k--;
      const odd = ((end - 1 - k) & 1) === 1;
      if (q < 0) {
        escaped = odd;
        return -1;
      }
      if (!odd) return q;
      i = q + 1;
    }
  }

  function keyByte(c: number, afterBackslash: boolean): void {
    if (escapedKey !== null) {
      if (escapedKey.length <= ESCAPED_KEY_MAX) escapedKey += String.fromCharCode(c);
    } else if (c === BACKSLASH && !afterBackslash && keyLength <= 2) {
      const before = keyLength === 0 ? '' : String.fromCharCode(keyFirst, keySecond).slice(0, keyLength);
      escapedKey = `${before}\\`;
    } else if (keyLength === 0) {
      keyFirst = c;
    } else if (keyLength === 1) {
      keySecond = c;
    }
    keyLength++;
  }

  function isIdKey(): boolean {
    if (escapedKey === null) return keyLength === 2 && keyFirst === 0x69 && keySecond === 0x64;
    if (escapedKey.length > ESCAPED_KEY_MAX) return false;
    try {
      return JSON.parse(`"${escapedKey}"`) === 'id';
    } catch {
      return false;
    }
  }

  function fail(): Buffer[] {
    self.invalid = true;
    return [];
  }

  function push(chunk: Buffer): Buffer[] {
    if (self.invalid) return [];
    if (replaced && !scanAll) return [chunk];
    const out: Buffer[] = [];
    const n = chunk.length;
    let i = 0;
    while (i < n && (scanAll || !replaced)) {
      const c = chunk[i]!;
      switch (state) {
        case START:
          if (c === 0x7b) state = KEY_OR_END;
          else if (!isWhitespace(c)) return fail();
          i++;
          break;
        case KEY_OR_END:
          if (c === QUOTE) {
            state = KEY;
            keyLength = 0;
            escapedKey = null;
          } else if (!isWhitespace(c)) {
            return fail();
          }
          i++;
          break;
        case KEY:
        case KEY_ESCAPE:
          if (state === KEY && c === QUOTE) state = COLON;
          else {
            keyByte(c, state === KEY_ESCAPE);
            state = state === KEY && c === BACKSLASH ? KEY_ESCAPE : KEY;
          }
          i++;
          break;
        case COLON:
          if (c === 0x3a) {
            state = VALUE;
            isIdMember = isIdKey();
            // A second top-level id: the client's parser would read this one, the node's.
            if (isIdMember && replaced) {
              wrongIdFound();
              return [];
            }
          } else if (!isWhitespace(c)) {
            return fail();
          }
          i++;
          break;
        case VALUE:
          if (isWhitespace(c)) {
            i++;
          } else if (isIdMember) {
            if (c === QUOTE) state = ID_STRING;
            else if (c === 0x6e) state = ID_NULL;
            else if (c === 0x2d || (c >= 0x30 && c <= 0x39)) state = ID_NUMBER;
            else return fail();
            if (i > 0) out.push(chunk.subarray(0, i));
            out.push(clientId);
            originalIdBytes = 1;
            nullMatched = 0;
            escaped = false;
            matchSent(chunk, i, i + 1);
            i++;
          } else if (c === QUOTE) {
            state = SKIP_STRING;
            escaped = false;
            i++;
          } else if (c === 0x7b || c === 0x5b) {
            state = SKIP_NESTED;
            depth = 1;
            nestedString = false;
            i++;
          } else {
            state = SKIP_SCALAR;
          }
          break;
        case SKIP_STRING:
        case SKIP_NESTED_STRING:
        case ID_STRING: {
          const q = closingQuote(chunk, i);
          const next = q < 0 ? n : q + 1;
          if (state === ID_STRING) {
            originalIdBytes += next - i;
            matchSent(chunk, i, next);
            if (q >= 0) finishId(next);
          } else if (q >= 0) {
            state = state === SKIP_STRING ? AFTER_VALUE : SKIP_NESTED;
          }
          i = next;
          break;
        }
        case SKIP_NESTED:
          if (scanAll) {
            i = skipNested(chunk, i);
            break;
          }
          if (c === QUOTE) {
            state = SKIP_NESTED_STRING;
            escaped = false;
          } else if (c === 0x7b || c === 0x5b) {
            depth++;
          } else if ((c === 0x7d || c === 0x5d) && --depth === 0) {
            state = AFTER_VALUE;
          }
          i++;
          break;
        case SKIP_SCALAR:
          if (c === 0x2c || c === 0x7d || isWhitespace(c)) state = AFTER_VALUE;
          else i++;
          break;
        case AFTER_VALUE:
          if (c === 0x2c) state = KEY_OR_END;
          else if (c === 0x7d && replaced) {
            state = CLOSED;
            self.closed = true;
          } else if (c === 0x7d && scanAll) {
            // An object without an id answers no call the gateway made.
            wrongIdFound();
            return [];
          } else if (!isWhitespace(c)) return fail(); // `}` before the id: the object closed without one
          i++;
          break;
        case CLOSED:
          if (!isWhitespace(c)) return fail();
          i++;
          break;
        case ID_NUMBER:
          if (isNumberByte(c)) {
            originalIdBytes++;
            matchSent(chunk, i, i + 1);
            i++;
          } else {
            finishId(i);
          }
          break;
        case ID_NULL:
          if (c !== NULL_TAIL[nullMatched]) return fail();
          originalIdBytes++;
          matchSent(chunk, i, i + 1);
          i++;
          if (++nullMatched === NULL_TAIL.length) finishId(i);
          break;
      }
    }
    if (self.invalid) return [];
    if (replaced) {
      if (resumeAt < n) out.push(resumeAt === 0 ? chunk : chunk.subarray(resumeAt));
      resumeAt = 0;
    } else if (state !== ID_STRING && state !== ID_NUMBER && state !== ID_NULL) {
      out.push(chunk);
    }
    return out;
  }

  return self;
}

/**
 * Whole-body form for small answers: the rewritten copy, or null when the body is invalid or has no id, or
 * (given `sentIdText`) is another call's or does not close.
 */
export function rewriteId(body: Buffer, clientIdText: string, sentIdText?: string): Buffer | null {
  const rewriter = createIdRewriter(clientIdText, sentIdText);
  const parts = rewriter.push(body);
  if (!rewriter.replaced || rewriter.invalid || (sentIdText !== undefined && !rewriter.closed)) return null;
  return parts.length === 1 ? parts[0]! : Buffer.concat(parts);
}
