/**
 * Reading an answer already accepted (rewriteWholeAnswer gave it, so it is JSON): its top-level members
 * walked without checking the JSON again (raw-result.ts), and a dedup follower's id put in.
 */
import { namesId, oldIdEnd, spliced, stringEnd } from './whole-answer.js';

const QUOTE = 0x22;
const COMMA = 0x2c;
const COLON = 0x3a;
const LBRACE = 0x7b;
const RBRACE = 0x7d;
const LBRACK = 0x5b;
const RBRACK = 0x5d;

// JSON's whitespace. A table of this module's own: the walk's loops read it per byte, as whole-answer.ts's read theirs.
const WS = new Uint8Array(256);
for (const c of [0x20, 0x09, 0x0a, 0x0d]) WS[c] = 1;

/**
 * For an answer `rewriteWholeAnswer` already gave (a dedup follower taking the leader's answer): the
 * same bytes as `rewriteId(body, clientIdText)`, found without checking the JSON again and without
 * reading past the id, which nodes write before the result. Other bodies get no promise but an end.
 */
export function reidAcceptedAnswer(body: Buffer, clientIdText: string): Buffer | null {
  let out: Buffer | null = null;
  forEachTopMember(body, (nameStart, nameEnd, valueStart) => {
    if (!namesId(body, nameStart + 1, nameEnd - 1)) return true;
    const end = oldIdEnd(body, valueStart);
    if (end >= 0) out = spliced(body, valueStart, end, clientIdText);
    return false;
  });
  return out;
}

/**
 * Walks the top-level members of an answer known to be JSON: `visit` gets each name's span (quotes
 * included) and where its value starts, and returns false to stop there; the value's end is read only
 * when the walk goes on. False when `body` is not an object or is cut off before the walk stopped.
 */
export function forEachTopMember(body: Buffer, visit: (nameStart: number, nameEnd: number, valueStart: number) => boolean): boolean {
  const n = body.length;
  let i = skipWs(body, 0);
  if (body[i] !== LBRACE) return false;
  i = skipWs(body, i + 1);
  while (body[i] === QUOTE) {
    const nameEnd = stringEnd(body, i + 1);
    if (nameEnd < 0) return false;
    let valueStart = nameEnd;
    while (valueStart < n && body[valueStart] !== COLON) valueStart++;
    valueStart = skipWs(body, valueStart + 1);
    if (!visit(i, nameEnd, valueStart)) return true;
    i = acceptedValueEnd(body, valueStart);
    if (i < 0) return false;
    i = skipWs(body, i);
    if (body[i] !== COMMA) return body[i] === RBRACE;
    i = skipWs(body, i + 1);
  }
  return body[i] === RBRACE;
}

function skipWs(body: Buffer, i: number): number {
  while (i < body.length && WS[body[i]!] === 1) i++;
  return i;
}

/** Index just past the value at `i` of text known to be JSON, or -1 when it is cut off. */
export function acceptedValueEnd(body: Buffer, i: number): number {
  const n = body.length;
  const c = body[i];
  if (c === QUOTE) return stringEnd(body, i + 1);
  if (c === LBRACE || c === LBRACK) {
    let depth = 0;
    for (; i < n; i++) {
      const d = body[i]!;
      if (d === QUOTE) {
        i = stringEnd(body, i + 1) - 1;
        if (i < 0) return -1;
      } else if (d === LBRACE || d === LBRACK) {
        depth++;
      } else if ((d === RBRACE || d === RBRACK) && --depth === 0) {
        return i + 1;
      }
    }
    return -1;
  }
  while (i < n && body[i] !== COMMA && body[i] !== RBRACE && body[i] !== RBRACK && WS[body[i]!] !== 1) i++;
  return i;
}
