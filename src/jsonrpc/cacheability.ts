/**
 * Which answers the response cache may keep. An answer is kept only when no later block can change
 * it: `net_version`, and reads pinned to one block (by number or by hash) once that block is final: at or
 * below the chain's finalized block, or `finality_depth` blocks below the head while no finalized block is
 * known (chain/finality.ts finalThrough). Everything that reads state at a tag, simulates, writes or
 * touches filters is never cached, whatever its block: a stale balance or nonce costs users money.
 * Which methods may be kept, and how each names its block, is a trait of the method's catalogue row
 * (MethodRow.cache, declared in methods-eth.ts and methods-trace.ts).
 */
import type { BlockSource, MethodRow } from './method-rule.js';
import { isHash, isPlainObject, isQuantity } from './param-types.js';

const HEX = /^0x[0-9a-fA-F]*$/;

/**
 * The canonical JSON text of a value, so calls that mean the same thing share one key: object members
 * sorted by name, null members dropped (a node reads a null field as absent), hex strings lower-cased
 * (hex is case-insensitive to nodes: a checksummed address and its lower-case form are the same).
 */
function canonicalJson(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(HEX.test(value) ? value.toLowerCase() : value);
  if (Array.isArray(value)) {
    let out = '[';
    for (let i = 0; i < value.length; i++) out += (i === 0 ? '' : ',') + canonicalJson(value[i]);
    return `${out}]`;
  }
  if (isPlainObject(value)) {
    const names = Object.keys(value)
      .filter((name) => value[name] != null)
      .sort();
    let out = '{';
    for (let i = 0; i < names.length; i++) {
      const name = names[i]!;
      out += `${i === 0 ? '' : ','}${JSON.stringify(name)}:${canonicalJson(value[name])}`;
    }
    return `${out}}`;
  }
  // Numbers, booleans and null; undefined (a hole) is written as null, which is how a node reads it.
  return JSON.stringify(value) ?? 'null';
}

/**
 * The JSON text of a params array that is already its own canonical form: nothing but arrays and strings,
 * no whitespace, no escape, and no 0x string with an upper-case A-F. Such a string reads back as written (a
 * body is valid UTF-8, so it holds no lone surrogate) and JSON.stringify writes it the same; anything else
 * (numbers, literals, objects, spaces) takes the walk over the values. The text is known to be valid JSON,
 * so only its characters are checked here; a regular expression does that at a few times the speed of a
 * loop over charCodeAt (measured).
 */
const CANONICAL_TEXT = /^\[[[\],]*(?:"(?:0x[^"\\A-F]*|(?!0x)[^"\\]*)"[[\],]*)*$/;

/**
 * The canonical JSON text of a call, `[method, ...params]`, with trailing null params dropped: a node
 * reads an omitted optional parameter and a null one alike. Shared by the cache and in-flight sharing.
 * `paramsJson`, the params' JSON text when the caller has it, is the answer's tail as it stands when it
 * is canonical already (the usual call: hex strings and tags), with no walk over the values.
 */
export function canonicalCallJson(method: string, params: unknown[], paramsJson?: string): string {
  if (paramsJson !== undefined && CANONICAL_TEXT.test(paramsJson)) {
    // Catalogue names need no escape; an empty list has no comma after the name.
    return params.length === 0 ? `["${method}"]` : `["${method}",${paramsJson.slice(1)}`;
  }
  let end = params.length;
  while (end > 0 && params[end - 1] == null) end--;
  let out = `[${JSON.stringify(method)}`;
  for (let i = 0; i < end; i++) out += `,${canonicalJson(params[i])}`;
  return `${out}]`;
}

/** True when a cache key can be made for these params: they pin the call to one block, or need none. */
function pinsOneBlock(source: BlockSource, params: unknown[]): boolean {
  const first = params[0];
  switch (source) {
    case 'chain':
      return true;
    case 'number-param':
      return isQuantity(first);
    case 'hash-param':
      return isHash(first);
    case 'reference-param':
      return isQuantity(first) || isHash(first) || (isPlainObject(first) && (isHash(first.blockHash) || isQuantity(first.blockNumber)));
    case 'filter':
      if (!isPlainObject(first)) return false;
      if (first.blockHash != null) return isHash(first.blockHash);
      // An omitted end means latest, which moves.
      return isQuantity(first.fromBlock) && isQuantity(first.toBlock);
  }
}

/**
 * The cache key of a call (canonical JSON of method and params, within one chain), or null when its
 * answer is never cacheable: the cheap check made before forwarding. A key does not promise the answer
 * will be kept; mayCache decides that once the answer and the head are known.
 */
export function cacheKeyFor(row: MethodRow, params: unknown[], paramsJson?: string): string | null {
  const source = row.cache;
  if (source === null || !pinsOneBlock(source, params)) return null;
  return canonicalCallJson(row.name, params, paramsJson);
}

function blockNumberOf(value: unknown): number | null {
  return isQuantity(value) ? Number(value) : null;
}

/** The block an answer belongs to, read from its `blockNumber` (or a block's `number`); null when it has none. */
function answerBlock(result: unknown, field: 'blockNumber' | 'number'): number | null {
  return isPlainObject(result) ? blockNumberOf(result[field]) : null;
}

/**
 * The highest block among a list of logs or receipts, or null when the list is empty or any entry
 * lacks a block number (a pending entry) or is a removed log: then nothing shows the list is settled.
 */
function highestBlockOf(result: unknown): number | null {
  if (!Array.isArray(result) || result.length === 0) return null;
  let highest = -1;
  for (const entry of result) {
    if (!isPlainObject(entry) || entry.removed === true) return null;
    const n = blockNumberOf(entry.blockNumber);
    if (n === null) return null;
    if (n > highest) highest = n;
  }
  return highest;
}

/** The block whose finality decides whether this answer may be kept, or null when it cannot be told. */
function decidingBlock(method: string, source: BlockSource, params: unknown[], result: unknown): number | null {
  const first = params[0];
  switch (source) {
    case 'chain':
      return null;
    case 'number-param':
      return blockNumberOf(first);
    case 'hash-param':
      return answerBlock(result, method === 'eth_getBlockByHash' ? 'number' : 'blockNumber');
    case 'reference-param': {
      // A 32-byte hash also reads as a quantity; nodes take a 66-character reference for a hash.
      const number = isPlainObject(first) ? blockNumberOf(first.blockNumber) : isHash(first) ? null : blockNumberOf(first);
      // A block asked for by hash: its receipts tell the number; a block without transactions has
      // none, so it stays uncached rather than guessed at.
      return number ?? highestBlockOf(result);
    }
    case 'filter': {
      const filter = first as Record<string, unknown>;
      // By hash: only the logs tell the block. An empty answer may mean a block not yet seen by this
      // node (or one reorged away), so it is never kept.
      if (filter.blockHash != null) return highestBlockOf(result);
      return blockNumberOf(filter.toBlock);
    }
  }
}

/**
 * The block that decides whether an answer may be kept when the call alone tells it (a block asked for
 * by number, an eth_getLogs range ending at a number): the answer then need not be read beyond being a
 * non-null result. Null when the call pins no block this way; undefined when the answer must be read
 * (see mayCache), or the call is not cacheable.
 */
export function blockOfCall(row: MethodRow, params: unknown[]): number | null | undefined {
  const source = row.cache;
  if (source === null || !pinsOneBlock(source, params)) return undefined;
  if (source === 'number-param') return blockNumberOf(params[0]);
  if (source === 'filter') {
    const filter = params[0] as Record<string, unknown>;
    return filter.blockHash != null ? undefined : blockNumberOf(filter.toBlock);
  }
  return undefined;
}

/**
 * Whether an answer's `result` may be cached: the call has a cache key, the result is not null, and
 * its block is at or below `finalBlock`, the highest block taken as final (chain/finality.ts finalThrough).
 * An unknown one (null) keeps only net_version. Error answers have no `result`: the caller passes only
 * successful results (undefined is refused).
 */
export function mayCache(row: MethodRow, params: unknown[], result: unknown, finalBlock: number | null): boolean {
  if (result === null || result === undefined) return false;
  const source = row.cache;
  if (source === null || !pinsOneBlock(source, params)) return false;
  if (source === 'chain') return true;
  if (finalBlock === null) return false;
  const block = decidingBlock(row.name, source, params, result);
  return block !== null && block <= finalBlock;
}
