/**
 * The bytes of a JSON-RPC answer's top-level `result` member, found by one pass over the bytes instead
 * of JSON.parse: a large answer (a wide eth_getLogs) parsed only to be written back costs its size
 * several times over in short-lived objects, which is what grows a busy process's heap.
 *
 * The body must be valid JSON (the caller has checked it). Strings are skipped with their escapes, so a
 * `"result"` inside a value is never taken for the member.
 */

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COLON = 0x3a;
const COMMA = 0x2c;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const RESULT_KEY = Buffer.from('"result"');
const ERROR_KEY = Buffer.from('"error"');

/** The index just past the string starting at `i` (a quote). */
function skipString(body: Buffer, i: number): number {
  for (let j = i + 1; j < body.length; j++) {
    const c = body[j]!;
    if (c === BACKSLASH) j++;
    else if (c === QUOTE) return j + 1;
  }
  return body.length;
}

const isSpace = (c: number): boolean => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;

/**
 * The `result` value's bytes (a view into `body`), or null when the answer is not an object, has an
 * `error` member, or has no `result`.
 */
export function rawResult(body: Buffer): Buffer | null {
  let i = 0;
  while (i < body.length && isSpace(body[i]!)) i++;
  if (body[i] !== OPEN_BRACE) return null;
  let depth = 0;
  let found: Buffer | null = null;
  // At depth 1, a string followed by a colon is a member name; the value runs to the next comma or
  // closing brace at depth 1.
  let valueStart = -1;
  let capturing = false;
  for (; i < body.length; i++) {
    const c = body[i]!;
    if (c === QUOTE) {
      const end = skipString(body, i);
      if (depth === 1 && valueStart < 0) {
        let k = end;
        while (k < body.length && isSpace(body[k]!)) k++;
        if (body[k] === COLON) {
          const name = body.subarray(i, end);
          if (name.equals(ERROR_KEY)) return null;
          capturing = name.equals(RESULT_KEY);
          valueStart = k + 1;
          i = k;
          continue;
        }
      }
      i = end - 1;
    } else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      depth++;
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
      depth--;
      if (depth === 0) {
        if (capturing) found = trimmed(body, valueStart, i);
        return found;
      }
    } else if (c === COMMA && depth === 1) {
      if (capturing) {
        found = trimmed(body, valueStart, i);
        capturing = false;
      }
      valueStart = -1;
    }
  }
  return null;
}

function trimmed(body: Buffer, start: number, end: number): Buffer {
  while (start < end && isSpace(body[start]!)) start++;
  while (end > start && isSpace(body[end - 1]!)) end--;
  return body.subarray(start, end);
}
