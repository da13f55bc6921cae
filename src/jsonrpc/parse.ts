import { isUtf8 } from 'node:buffer';

/** Deepest nesting accepted inside `params`, counting the params array itself as level 1. */
export const MAX_PARAMS_DEPTH = 32;

/** One request of a body: either ready to check against the method table, or already refused. */
export type ParsedItem =
  /**
   * `paramsText` is the params' JSON text as the client wrote it (a slice of the body, '[]' when absent),
   * walked by the same pass as JSON.parse's result: forwarded as it came when the checks leave params unchanged.
   * null when a number in it is not written as JSON.stringify writes its value (`1e1`, `10.0`, `-0`, digits
   * beyond a double's precision): the checks read the value, so the node must get the value's own text, and
   * two spellings of one value must not share a cache or in-flight key while the node reads them apart.
   */
  | { ok: true; idText: string; method: string; params: unknown[]; paramsText: string | null }
  | { ok: false; idText: string; error: 'invalid_request' | 'invalid_params'; message: string };

/** A whole body. `error` is answered once, with id null; a batch always holds at least one item. */
export type ParsedBody =
  | { kind: 'single'; item: ParsedItem }
  | { kind: 'batch'; items: ParsedItem[] }
  | { kind: 'error'; error: 'parse_error' | 'invalid_request'; message: string };

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const LBRACE = 0x7b;
const RBRACE = 0x7d;
const LBRACK = 0x5b;
const RBRACK = 0x5d;
const COMMA = 0x2c;

const bodyError = (error: 'parse_error' | 'invalid_request', message: string): ParsedBody =>
  Object.freeze({ kind: 'error', error, message });
const NOT_UTF8 = bodyError('parse_error', 'parse error: body is not valid UTF-8');
const NOT_JSON = bodyError('parse_error', 'parse error: body is not valid JSON');
const EMPTY_BATCH = bodyError('invalid_request', 'invalid request: empty batch');
const NOT_A_REQUEST = bodyError('invalid_request', 'invalid request: body must be a request object or a batch array');
const ELEMENT_NOT_OBJECT: ParsedItem = Object.freeze({
  ok: false,
  idText: 'null',
  error: 'invalid_request',
  message: 'invalid request: batch element must be a request object',
});

/**
 * JSON.parse validates the text and builds the values; a second pass over the same text recovers
 * what JSON.parse hides: each id's exact source text, duplicate member names (JSON.parse silently
 * keeps the last) and the nesting depth of params. The pass trusts the text to be valid JSON.
 */
export function parseBody(body: Buffer): ParsedBody {
  if (!isUtf8(body)) return NOT_UTF8;
  const text = body.toString('utf8');
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return NOT_JSON;
  }
  if (value === null || typeof value !== 'object') return NOT_A_REQUEST;
  const scan: Scan = { text, pos: skipWs(text, 0), problem: '', oddNumber: false };
  if (!Array.isArray(value)) return { kind: 'single', item: scanRequest(scan, value as Record<string, unknown>) };
  if (value.length === 0) return EMPTY_BATCH;
  const items: ParsedItem[] = new Array(value.length);
  scan.pos++;
  for (let k = 0; k < value.length; k++) {
    scan.pos = skipWs(text, scan.pos);
    const element: unknown = value[k];
    if (element !== null && typeof element === 'object' && !Array.isArray(element)) {
      items[k] = scanRequest(scan, element as Record<string, unknown>);
    } else {
      items[k] = ELEMENT_NOT_OBJECT;
      scan.pos = valueEnd(text, scan.pos);
    }
    scan.pos = skipWs(text, scan.pos) + 1;
  }
  return { kind: 'batch', items };
}

interface Scan {
  readonly text: string;
  /** Index of the next character to read. */
  pos: number;
  /** Why the params were refused, set when a params walk returns -1. */
  problem: string;
  /** Whether the params walk met a number not in its value's own form (see ParsedItem's paramsText). */
  oddNumber: boolean;
}

const JSONRPC = 1;
const METHOD = 2;
const PARAMS = 4;
const ID = 8;
const MEMBER_NAMES = ['', 'jsonrpc', 'method', '', 'params', '', '', '', 'id'];

function scanRequest(scan: Scan, request: Record<string, unknown>): ParsedItem {
  const text = scan.text;
  let i = skipWs(text, scan.pos + 1);
  let seen = 0;
  let others: string[] | undefined;
  let duplicate: string | undefined;
  let idStart = -1;
  let idEnd = -1;
  let paramsStart = -1;
  let paramsEnd = -1;
  let paramsProblem: string | undefined;
  if (text.charCodeAt(i) !== RBRACE) {
    for (;;) {
      const keyStart = i;
      i = stringEnd(text, i);
      const bit = knownMember(text, keyStart, i);
      if (bit !== 0) {
        if ((seen & bit) !== 0) duplicate ??= MEMBER_NAMES[bit];
        seen |= bit;
      } else {
        const name = memberName(text, keyStart, i);
        if (others === undefined) others = [name];
        else if (others.includes(name)) duplicate ??= name;
        else others.push(name);
      }
      i = skipWs(text, skipWs(text, i) + 1);
      const valueStart = i;
      if (bit === PARAMS && text.charCodeAt(i) === LBRACK) {
        scan.oddNumber = false;
        i = nestedEnd(scan, i, 1);
        if (i < 0) {
          paramsProblem ??= scan.problem;
          i = valueEnd(text, valueStart);
        }
        paramsStart = valueStart;
        paramsEnd = i;
      } else {
        i = valueEnd(text, i);
      }
      if (bit === ID) {
        idStart = valueStart;
        idEnd = i;
      }
      i = skipWs(text, i);
      if (text.charCodeAt(i++) !== COMMA) break;
      i = skipWs(text, i);
    }
  } else {
    i++;
  }
  scan.pos = i;

  const id = request.id;
  const idValid = (seen & ID) !== 0 && (typeof id === 'string' || typeof id === 'number') && duplicate !== 'id';
  const idText = idValid ? text.slice(idStart, idEnd) : 'null';
  let refusal: string | undefined;
  if (duplicate !== undefined) refusal = `duplicate member '${duplicate}'`;
  else if (request.jsonrpc !== '2.0') refusal = `'jsonrpc' must be "2.0"`;
  else if (typeof request.method !== 'string') refusal = `'method' must be a string`;
  else if (request.params !== undefined && !Array.isArray(request.params)) refusal = `'params' must be an array`;
  else if ((seen & ID) === 0) refusal = `missing 'id' (notifications are not served)`;
  else if (!idValid) refusal = `'id' must be a number or a string`;
  if (refusal !== undefined) return { ok: false, idText, error: 'invalid_request', message: `invalid request: ${refusal}` };
  if (paramsProblem !== undefined) {
    return { ok: false, idText, error: 'invalid_params', message: `invalid params: ${paramsProblem}` };
  }
  const params = request.params as unknown[] | undefined;
  // A duplicate params was refused above: the one slice seen is the value JSON.parse kept.
  if (params === undefined) return { ok: true, idText, method: request.method as string, params: [], paramsText: '[]' };
  const paramsText = scan.oddNumber ? null : text.slice(paramsStart, paramsEnd);
  return { ok: true, idText, method: request.method as string, params, paramsText };
}

/** Walks an array or object inside params; returns the index after it, or -1 with `scan.problem` set. */
function nestedEnd(scan: Scan, i: number, depth: number): number {
  if (depth > MAX_PARAMS_DEPTH) {
    scan.problem = `nested deeper than ${MAX_PARAMS_DEPTH} levels`;
    return -1;
  }
  const text = scan.text;
  const isArray = text.charCodeAt(i) === LBRACK;
  i = skipWs(text, i + 1);
  if (text.charCodeAt(i) === (isArray ? RBRACK : RBRACE)) return i + 1;
  // Objects in params are small; a linear search beats a Set until a state override lists many accounts.
  let names: string[] | undefined;
  let nameSet: Set<string> | undefined;
  for (;;) {
    if (!isArray) {
      const keyStart = i;
      i = stringEnd(text, i);
      const name = memberName(text, keyStart, i);
      if (nameSet !== undefined ? nameSet.has(name) : names?.includes(name)) {
        scan.problem = `duplicate member '${name}'`;
        return -1;
      }
      if (nameSet !== undefined) nameSet.add(name);
      else if (names === undefined) names = [name];
      else if (names.push(name) > 16) nameSet = new Set(names);
      i = skipWs(text, skipWs(text, i) + 1);
    }
    const c = text.charCodeAt(i);
    if (c === LBRACK || c === LBRACE) {
      i = nestedEnd(scan, i, depth + 1);
      if (i < 0) return -1;
    } else if (c === QUOTE) {
      i = stringEnd(text, i);
    } else {
      const start = i;
      i = scalarEnd(text, i);
      // Not true, false or null: a number, which JSON.parse has read; compare its text with its value's.
      if (c !== 0x74 && c !== 0x66 && c !== 0x6e && !scan.oddNumber) {
        const written = text.slice(start, i);
        if (String(Number(written)) !== written) scan.oddNumber = true;
      }
    }
    i = skipWs(text, i);
    if (text.charCodeAt(i++) !== COMMA) return i;
    i = skipWs(text, i);
  }
}

function knownMember(text: string, start: number, end: number): number {
  const len = end - start - 2;
  const first = text.charCodeAt(start + 1);
  if (len === 2 && first === 0x69 && text.charCodeAt(start + 2) === 0x64) return ID;
  if (len === 6 && first === 0x6d && text.startsWith('ethod', start + 2)) return METHOD;
  if (len === 6 && first === 0x70 && text.startsWith('arams', start + 2)) return PARAMS;
  if (len === 7 && first === 0x6a && text.startsWith('sonrpc', start + 2)) return JSONRPC;
  if (!hasBackslash(text, start, end)) return 0;
  switch (JSON.parse(text.slice(start, end)) as string) {
    case 'id':
      return ID;
    case 'method':
      return METHOD;
    case 'params':
      return PARAMS;
    case 'jsonrpc':
      return JSONRPC;
    default:
      return 0;
  }
}

function memberName(text: string, start: number, end: number): string {
  return hasBackslash(text, start, end) ? (JSON.parse(text.slice(start, end)) as string) : text.slice(start + 1, end - 1);
}

/** Bounded by the member name: an unbounded indexOf would rescan the rest of the body for every name. */
function hasBackslash(text: string, start: number, end: number): boolean {
  for (let i = start + 1; i < end - 1; i++) if (text.charCodeAt(i) === BACKSLASH) return true;
  return false;
}

function skipWs(text: string, i: number): number {
  for (;;) {
    const c = text.charCodeAt(i);
    if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) return i;
    i++;
  }
}

/** `i` is at an opening quote; returns the index after the closing one. */
function stringEnd(text: string, i: number): number {
  let q = text.indexOf('"', i + 1);
  for (;;) {
    let k = q - 1;
    while (text.charCodeAt(k) === BACKSLASH) k--;
    if (((q - 1 - k) & 1) === 0) return q + 1;
    q = text.indexOf('"', q + 1);
  }
}

/** End of a number or literal: the first structural character or whitespace. */
function scalarEnd(text: string, i: number): number {
  for (;;) {
    const c = text.charCodeAt(i);
    if (c === COMMA || c === RBRACE || c === RBRACK || c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09 || Number.isNaN(c)) {
      return i;
    }
    i++;
  }
}

/** Skips any value without recursion, so hostile nesting outside params cannot exhaust the stack. */
function valueEnd(text: string, i: number): number {
  const first = text.charCodeAt(i);
  if (first === QUOTE) return stringEnd(text, i);
  if (first !== LBRACE && first !== LBRACK) return scalarEnd(text, i);
  let depth = 0;
  for (;;) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      i = stringEnd(text, i);
      continue;
    }
    if (c === LBRACE || c === LBRACK) depth++;
    else if ((c === RBRACE || c === RBRACK) && --depth === 0) return i + 1;
    i++;
  }
}

/**
 * The ids of a body's requests, for answering a refusal made before the body is checked (401, 415, 413
 * for a batch): one id text for a single request, one per item of a batch, null when the body is not a
 * JSON request or batch. Only the members' names are walked: no params rule or method check runs, so a
 * caller without a valid key never reaches the parser's costlier steps. Each id follows parseBody's rule.
 */
export function requestIds(body: Buffer): string | string[] | null {
  if (!isUtf8(body)) return null;
  const text = body.toString('utf8');
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return null;
  }
  if (value === null || typeof value !== 'object') return null;
  let i = skipWs(text, 0);
  if (!Array.isArray(value)) return idTextOf(text, i, value as Record<string, unknown>);
  if (value.length === 0) return null;
  const ids: string[] = new Array(value.length);
  i++;
  for (let k = 0; k < value.length; k++) {
    i = skipWs(text, i);
    const element: unknown = value[k];
    ids[k] =
      element !== null && typeof element === 'object' && !Array.isArray(element)
        ? idTextOf(text, i, element as Record<string, unknown>)
        : 'null';
    i = skipWs(text, valueEnd(text, i)) + 1;
  }
  return ids;
}

/** The id text of the request object starting at `start`: as written when it is a string or number given once. */
function idTextOf(text: string, start: number, request: Record<string, unknown>): string {
  const id = request.id;
  if (typeof id !== 'string' && typeof id !== 'number') return 'null';
  let i = skipWs(text, start + 1);
  let idText = 'null';
  if (text.charCodeAt(i) === RBRACE) return idText;
  for (;;) {
    const keyStart = i;
    i = stringEnd(text, i);
    const isId = knownMember(text, keyStart, i) === ID;
    i = skipWs(text, skipWs(text, i) + 1);
    const valueStart = i;
    i = valueEnd(text, i);
    if (isId) {
      // A duplicate id is refused by parseBody with id null: the same here.
      if (idText !== 'null') return 'null';
      idText = text.slice(valueStart, i);
    }
    i = skipWs(text, i);
    if (text.charCodeAt(i++) !== COMMA) return idText;
    i = skipWs(text, i);
  }
}
