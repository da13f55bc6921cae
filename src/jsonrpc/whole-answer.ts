/**
 * A small upstream answer, held whole, given the client's id and checked in one pass: the same bytes
 * as `rewriteId` (id-rewrite.ts) and refused exactly when those bytes are not JSON that JSON.parse
 * takes, without building a rewriter, a string or a parsed value.
 *
 * The id is found as `rewriteId` finds it: the value of the first top-level member named "id"
 * (escapes in the name decoded). That value is replaced without being checked, as `rewriteId`
 * does: a number-like run `[-0-9][-+.eE0-9]*`, a string up to its unescaped closing quote, or
 * `null`. What is checked is the answer the client gets, so the client's id text is read as part of
 * it and may run on into the bytes after the old id: client `1` in `{"id":"x"5}` gives `{"id":15}`.
 */
import { createIdRewriter } from './id-rewrite.js';

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const COLON = 0x3a;
const LBRACE = 0x7b;
const RBRACE = 0x7d;
const LBRACK = 0x5b;
const RBRACK = 0x5d;

const IN_OBJECT = 0;
const IN_ARRAY = 1;

// Number states. A number may end only in ZERO, INT, FRAC or EXP.
const N_BAD = -1;
const N_END = 0;
const N_START = 1;
const N_MINUS = 2;
const N_ZERO = 3;
const N_INT = 4;
const N_DOT = 5;
const N_FRAC = 6;
const N_E = 7;
const N_E_SIGN = 8;
const N_EXP = 9;

// What the client's id text is. A string or literal closes itself; a number leaves its state, as it
// may go on into the bytes after the old id. Anything else is left to the slow path.
const CLIENT_CLOSED = 16;
const CLIENT_ODD = 32;

/** 1 for a byte a string may hold as it is: the loop over hex and text stays one table read per byte. */
const PLAIN = new Uint8Array(256);
for (let c = 0x20; c < 256; c++) PLAIN[c] = c === QUOTE || c === BACKSLASH ? 0 : 1;
const HEX = new Uint8Array(256);
for (const c of Buffer.from('0123456789abcdefABCDEF')) HEX[c] = 1;
/** The single-letter escapes JSON allows (`\u` is read apart). */
const SIMPLE_ESCAPE = new Uint8Array(256);
for (const c of Buffer.from('"\\/bfnrt')) SIMPLE_ESCAPE[c] = 1;
const WS = new Uint8Array(256);
for (const c of [0x20, 0x09, 0x0a, 0x0d]) WS[c] = 1;
/** The bytes `rewriteId` takes as part of a number id. */
const NUMBER_LIKE = new Uint8Array(256);
for (const c of Buffer.from('0123456789+-.eE')) NUMBER_LIKE[c] = 1;

// JSON.parse has no small depth limit, so nesting lives in a grown array, never in recursion.
let stack = new Uint8Array(256);

function isDigit(c: number): boolean {
  return c >= 0x30 && c <= 0x39;
}

function numberStep(state: number, c: number): number {
  switch (state) {
    case N_START:
      return c === 0x2d ? N_MINUS : c === 0x30 ? N_ZERO : isDigit(c) ? N_INT : N_BAD;
    case N_MINUS:
      return c === 0x30 ? N_ZERO : isDigit(c) ? N_INT : N_BAD;
    case N_ZERO:
      return c === 0x2e ? N_DOT : c === 0x65 || c === 0x45 ? N_E : N_END;
    case N_INT:
      return isDigit(c) ? N_INT : c === 0x2e ? N_DOT : c === 0x65 || c === 0x45 ? N_E : N_END;
    case N_DOT:
      return isDigit(c) ? N_FRAC : N_BAD;
    case N_FRAC:
      return isDigit(c) ? N_FRAC : c === 0x65 || c === 0x45 ? N_E : N_END;
    case N_E:
      return c === 0x2b || c === 0x2d ? N_E_SIGN : isDigit(c) ? N_EXP : N_BAD;
    case N_E_SIGN:
      return isDigit(c) ? N_EXP : N_BAD;
    case N_EXP:
      return isDigit(c) ? N_EXP : N_END;
    default:
      return N_BAD;
  }
}

function mayEndNumber(state: number): boolean {
  return state === N_ZERO || state === N_INT || state === N_FRAC || state === N_EXP;
}

/** Index just past the number going on at `i` in `state`, or -1 when it is malformed. */
function numberEnd(b: Buffer, i: number, state: number): number {
  const n = b.length;
  for (; i < n; i++) {
    const next = numberStep(state, b[i]!);
    if (next === N_END) return i;
    if (next === N_BAD) return -1;
    state = next;
  }
  return mayEndNumber(state) ? n : -1;
}

/** Index just past the closing quote of the string whose content starts at `i`, or -1 when it is malformed. */
export function stringEnd(b: Buffer, i: number): number {
  const n = b.length;
  for (;;) {
    while (i < n && PLAIN[b[i]!] === 1) i++;
    if (i >= n) return -1;
    const c = b[i]!;
    if (c === QUOTE) return i + 1;
    if (c !== BACKSLASH) return -1; // a control character
    const e = b[i + 1];
    if (e === 0x75) {
      if (i + 5 >= n || HEX[b[i + 2]!] !== 1 || HEX[b[i + 3]!] !== 1 || HEX[b[i + 4]!] !== 1 || HEX[b[i + 5]!] !== 1) return -1;
      i += 6;
    } else if (e !== undefined && SIMPLE_ESCAPE[e] === 1) {
      i += 2;
    } else {
      return -1;
    }
  }
}

/** Whether the valid member name between `from` and `to` (quotes excluded) reads "id"; its only spellings mix `id` and `\u0069\u0064`. */
export function namesId(b: Buffer, from: number, to: number): boolean {
  const length = to - from;
  if (length === 2) return b[from] === 0x69 && b[from + 1] === 0x64;
  if (length !== 7 && length !== 12) return false;
  const afterI = letterEnd(b, from, 0x69);
  return afterI > 0 && letterEnd(b, afterI, 0x64) === to;
}

/** Index past `letter` (0x60-0x69) at `i`, written as itself or as its `\u006_` escape; -1 when it is not there. */
function letterEnd(b: Buffer, i: number, letter: number): number {
  if (b[i] === letter) return i + 1;
  const escaped =
    b[i] === BACKSLASH &&
    b[i + 1] === 0x75 &&
    b[i + 2] === 0x30 &&
    b[i + 3] === 0x30 &&
    b[i + 4] === 0x36 &&
    b[i + 5] === 0x30 + (letter & 15);
  return escaped ? i + 6 : -1;
}

/**
 * The client's id text read as JSON: CLIENT_CLOSED for a string or literal, the number state it
 * ends in for a number, CLIENT_ODD for anything else.
 */
function classifyClientId(text: string): number {
  const n = text.length;
  if (text.charCodeAt(0) === QUOTE) {
    for (let k = 1; k < n; k++) {
      const d = text.charCodeAt(k);
      if (d === QUOTE) return k === n - 1 ? CLIENT_CLOSED : CLIENT_ODD;
      if (d < 0x20) return CLIENT_ODD;
      if (d === BACKSLASH) {
        const e = text.charCodeAt(++k);
        if (e === 0x75) {
          for (let h = 1; h <= 4; h++) {
            const x = text.charCodeAt(k + h);
            if (!(x < 256 && HEX[x] === 1)) return CLIENT_ODD;
          }
          k += 4;
        } else if (!(e < 256 && SIMPLE_ESCAPE[e] === 1)) {
          return CLIENT_ODD;
        }
      }
    }
    return CLIENT_ODD;
  }
  if (text === 'null' || text === 'true' || text === 'false') return CLIENT_CLOSED;
  let state = N_START;
  for (let k = 0; k < n; k++) {
    state = numberStep(state, text.charCodeAt(k));
    if (state <= N_END) return CLIENT_ODD;
  }
  return mayEndNumber(state) ? state : CLIENT_ODD;
}

/**
 * Index just past the value of the "id" member starting at `i`, as `rewriteId` takes it, or -1 when
 * `rewriteId` would refuse it (not a number, string or null, or cut off).
 */
export function oldIdEnd(b: Buffer, i: number): number {
  const n = b.length;
  const c = b[i]!;
  if (c === QUOTE) {
    for (let j = i + 1; j < n; j++) {
      const d = b[j]!;
      if (d === QUOTE) return j + 1;
      if (d === BACKSLASH) j++;
    }
    return -1;
  }
  if (c === 0x6e) return b[i + 1] === 0x75 && b[i + 2] === 0x6c && b[i + 3] === 0x6c ? i + 4 : -1;
  if (c === 0x2d || isDigit(c)) {
    let j = i + 1;
    while (j < n && NUMBER_LIKE[b[j]!] === 1) j++;
    // Cut off inside the number: `rewriteId` cannot know the id has ended.
    return j < n ? j : -1;
  }
  return -1;
}

/** What rewriteWholeAnswer gives for an answer that is another call's (see there). */
export const WRONG_ID: unique symbol = Symbol('wrong id');

/**
 * The answer with the client's id in place of its own: the same bytes as `rewriteId(body, clientIdText)`,
 * or null exactly when `rewriteId` gives null or JSON.parse would refuse what it gives. `body` itself
 * when the ids are the same ASCII bytes, else one new buffer.
 *
 * With `sentIdText`, the id the gateway sent the node, a valid answer is also checked to be that call's, in
 * the same pass: WRONG_ID when its top-level id is not exactly those bytes, or a second top-level `id`
 * member follows (the client's parser would read the last one), or it has none.
 */
export function rewriteWholeAnswer(body: Buffer, clientIdText: string): Buffer | null;
export function rewriteWholeAnswer(body: Buffer, clientIdText: string, sentIdText: string): Buffer | null | typeof WRONG_ID;
export function rewriteWholeAnswer(body: Buffer, clientIdText: string, sentIdText?: string): Buffer | null | typeof WRONG_ID {
  const client = classifyClientId(clientIdText);
  // Client ids come from parse.ts as valid JSON: anything else is checked the slow, certain way.
  if (client === CLIENT_ODD) return rewriteIdChecked(body, clientIdText, sentIdText);
  const n = body.length;
  let i = 0;
  while (i < n && WS[body[i]!] === 1) i++;
  if (body[i] !== LBRACE) return null;

  let depth = 0;
  let idStart = -1;
  let idEnd = -1;
  let expectName = false;
  let idNext = false;
  let secondId = false;
  value: for (;;) {
    while (i < n && WS[body[i]!] === 1) i++;
    if (expectName) {
      expectName = false;
      if (body[i] !== QUOTE) return null;
      const end = stringEnd(body, i + 1);
      if (end < 0) return null;
      if (depth === 1 && namesId(body, i + 1, end - 1)) {
        // A second top-level id is judged once the answer is known to be JSON.
        if (idStart < 0) idNext = true;
        else secondId = true;
      }
      i = end;
      while (i < n && WS[body[i]!] === 1) i++;
      if (body[i] !== COLON) return null;
      i++;
      while (i < n && WS[body[i]!] === 1) i++;
    }
    const c = body[i];
    if (idNext) {
      idNext = false;
      idStart = i;
      idEnd = oldIdEnd(body, i);
      if (idEnd < 0) return null;
      i = client === CLIENT_CLOSED ? idEnd : numberEnd(body, idEnd, client);
    } else if (c === QUOTE) {
      i = stringEnd(body, i + 1);
    } else if (c === LBRACE || c === LBRACK) {
      if (depth === stack.length) {
        const grown = new Uint8Array(depth * 2);
        grown.set(stack);
        stack = grown;
      }
      stack[depth++] = c === LBRACE ? IN_OBJECT : IN_ARRAY;
      i++;
      while (i < n && WS[body[i]!] === 1) i++;
      if (c === LBRACE ? body[i] !== RBRACE : body[i] !== RBRACK) {
        expectName = c === LBRACE;
        continue;
      }
      depth--;
      i++;
    } else if (c === 0x74) {
      i = body[i + 1] === 0x72 && body[i + 2] === 0x75 && body[i + 3] === 0x65 ? i + 4 : -1;
    } else if (c === 0x66) {
      i = body[i + 1] === 0x61 && body[i + 2] === 0x6c && body[i + 3] === 0x73 && body[i + 4] === 0x65 ? i + 5 : -1;
    } else if (c === 0x6e) {
      i = body[i + 1] === 0x75 && body[i + 2] === 0x6c && body[i + 3] === 0x6c ? i + 4 : -1;
    } else if (c !== undefined && (c === 0x2d || isDigit(c))) {
      i = numberEnd(body, i, N_START);
    } else {
      return null;
    }
    if (i < 0) return null;
    // After a value: close what ends here, then go on to the next element or member.
    for (;;) {
      while (i < n && WS[body[i]!] === 1) i++;
      if (depth === 0) {
        if (i !== n) return null;
        if (sentIdText === undefined) return idStart < 0 ? null : spliced(body, idStart, idEnd, clientIdText);
        if (idStart < 0 || secondId || !sameBytes(body, idStart, idEnd, sentIdText)) return WRONG_ID;
        return spliced(body, idStart, idEnd, clientIdText);
      }
      const d = body[i];
      const open = stack[depth - 1];
      if (d === COMMA) {
        i++;
        expectName = open === IN_OBJECT;
        continue value;
      }
      if ((d === RBRACE && open === IN_OBJECT) || (d === RBRACK && open === IN_ARRAY)) {
        depth--;
        i++;
        continue;
      }
      return null;
    }
  }
}

/** Whether body[from, to) holds exactly `text`, an ASCII id the gateway made. */
function sameBytes(body: Buffer, from: number, to: number, text: string): boolean {
  if (to - from !== text.length) return false;
  for (let k = 0; k < text.length; k++) if (body[from + k] !== text.charCodeAt(k)) return false;
  return true;
}

/**
 * The answer's bytes with `[idStart, idEnd)` replaced by the client's id. An ASCII id already there
 * (client and gateway both at id 1, a follower with its leader's id) costs no copy: `body` is returned.
 */
export function spliced(body: Buffer, idStart: number, idEnd: number, clientIdText: string): Buffer {
  const length = clientIdText.length;
  let ascii = true;
  for (let k = 0; k < length; k++) if (clientIdText.charCodeAt(k) > 0x7f) ascii = false;
  const idBytes = ascii ? length : Buffer.byteLength(clientIdText);
  if (ascii && idBytes === idEnd - idStart) {
    let k = 0;
    while (k < idBytes && body[idStart + k] === clientIdText.charCodeAt(k)) k++;
    if (k === idBytes) return body;
  }
  const out = Buffer.allocUnsafe(body.length - (idEnd - idStart) + idBytes);
  body.copy(out, 0, 0, idStart);
  if (ascii) for (let k = 0; k < idBytes; k++) out[idStart + k] = clientIdText.charCodeAt(k);
  else out.write(clientIdText, idStart, idBytes, 'utf8');
  body.copy(out, idStart + idBytes, idEnd);
  return out;
}

/**
 * The former two-step path, kept as the reference: the streaming rewriter's bytes, kept only when
 * JSON.parse takes them. Used for a client id that is not itself a JSON scalar (parse.ts never makes one).
 */
export function rewriteIdChecked(body: Buffer, clientIdText: string): Buffer | null;
export function rewriteIdChecked(body: Buffer, clientIdText: string, sentIdText: string | undefined): Buffer | null | typeof WRONG_ID;
export function rewriteIdChecked(body: Buffer, clientIdText: string, sentIdText?: string): Buffer | null | typeof WRONG_ID {
  const rewriter = createIdRewriter(clientIdText, sentIdText);
  const parts = rewriter.push(body);
  if (rewriter.wrongId) return isJson(body) ? WRONG_ID : null;
  if (!rewriter.replaced || rewriter.invalid) return null;
  const out = parts.length === 1 ? parts[0]! : Buffer.concat(parts);
  return isJson(out) ? out : null;
}

function isJson(body: Buffer): boolean {
  try {
    JSON.parse(body.toString());
    return true;
  } catch {
    return false;
  }
}
