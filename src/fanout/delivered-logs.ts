/**
 * The logs each logs feed delivered live, per filter (the feed key), by block hash and number, so a client that
 * resumes a logs subscription (replay.ts) can be sent `removed: true` for the logs it may hold from blocks a
 * reorg replaced while it was away. Kept on the thread that owns the feeds (the main thread with workers), so a
 * client finds it whichever worker it reconnects to.
 *
 * Bounds: per filter, the blocks within `blocks` (subscriptions.replay_blocks) of the newest it delivered; after
 * the filter's feed went (its last subscriber left and the linger ran out), its memory stays `graceMs`
 * (subscriptions.retract_grace_s), and at most `maxFilters` such filters are kept (subscriptions.retract_max_filters),
 * the one released first going first; in all at most `maxBytes` of logs' JSON (subscriptions.retract_max_bytes; 0
 * remembers nothing): past it the released filters go first, oldest first, then the lowest blocks remembered. What is dropped is
 * not retracted on a resume; nothing else is lost (the replay still sends the chain as it now is).
 *
 * Costs nothing when no logs feed exists; a delivered log costs a map lookup and a push, a block new to a
 * filter one pass over that filter's blocks. Released filters past their grace are dropped when a filter is
 * opened, released or looked up (never served after it).
 */

/** One block's logs as a feed delivered them: JSON text of each, in delivery order. */
export interface DeliveredBlock {
  readonly number: number;
  /** The block's hash as the logs carried it, lower case. */
  readonly hash: string;
  readonly logs: readonly string[];
}

export interface DeliveredLogsOptions {
  /** Blocks below a filter's newest whose logs are kept (subscriptions.replay_blocks). */
  blocks: number;
  /** How long a filter's memory outlives its feed, in ms (subscriptions.retract_grace_s). */
  graceMs: number;
  /** Filters remembered after their feed went, at most (subscriptions.retract_max_filters). */
  maxFilters: number;
  /** Bytes of remembered logs' JSON in all, at most (subscriptions.retract_max_bytes); 0: nothing is remembered. */
  maxBytes: number;
  /** Monotonic ms. */
  now(): number;
}

interface Block {
  readonly number: number;
  readonly hash: string;
  readonly logs: string[];
  bytes: number;
}

/** One filter's memory: a feed of its key writes to it while `feeds` > 0. */
export interface FilterMemory {
  readonly key: string;
  /** By block hash. */
  readonly blocks: Map<string, Block>;
  newest: number;
  bytes: number;
  /** Feeds of this key holding it now (one, or two while a dropped feed's successor opens). */
  feeds: number;
  /** When the last feed let go; meaningful while feeds is 0. */
  releasedAt: number;
  /** Dropped from the memory (a bound): writes to it are ignored. */
  gone: boolean;
}

export class DeliveredLogs {
  readonly opts: DeliveredLogsOptions;
  /** In the order each filter was opened or released last: the released ones are in release order. */
  readonly filters = new Map<string, FilterMemory>();
  bytes = 0;

  constructor(opts: DeliveredLogsOptions) {
    this.opts = opts;
  }
}

/** The memory a new logs feed of `key` writes to: the one kept for the key, if any, else a new one. */
export function openFilter(m: DeliveredLogs, key: string): FilterMemory {
  sweep(m);
  let f = m.filters.get(key);
  if (f === undefined) f = { key, blocks: new Map(), newest: -1, bytes: 0, feeds: 0, releasedAt: 0, gone: false };
  else m.filters.delete(key);
  f.feeds++;
  m.filters.set(key, f);
  return f;
}

/** A feed of the filter went (each feed releases once: feeds-state.ts retire): once none holds it, its grace starts. */
export function releaseFilter(m: DeliveredLogs, f: FilterMemory): void {
  if (f.gone || f.feeds === 0) return;
  f.feeds--;
  if (f.feeds > 0) return;
  f.releasedAt = m.opts.now();
  m.filters.delete(f.key);
  m.filters.set(f.key, f);
  sweep(m);
}

/** A log the feed of `f` delivered (the parsed result and its JSON text); `removed: true` ones are not kept. */
export function rememberLog(m: DeliveredLogs, f: FilterMemory, result: unknown, json: string): void {
  // maxBytes 0 turns the memory off: no log is kept (one would only be dropped again at once).
  if (f.gone || m.opts.maxBytes === 0 || typeof result !== 'object' || result === null) return;
  const log = result as Record<string, unknown>;
  if (log.removed === true || typeof log.blockHash !== 'string' || typeof log.blockNumber !== 'string') return;
  const hash = log.blockHash.toLowerCase();
  let block = f.blocks.get(hash);
  if (block === undefined) {
    const number = parseInt(log.blockNumber, 16);
    if (!Number.isSafeInteger(number)) return;
    if (!newBlock(m, f, number)) return;
    block = { number, hash, logs: [], bytes: 0 };
    f.blocks.set(hash, block);
  }
  block.logs.push(json);
  block.bytes += json.length;
  f.bytes += json.length;
  m.bytes += json.length;
  if (m.bytes > m.opts.maxBytes) shed(m);
}

/** Makes room for a block `number` new to the filter; false when it lies below the filter's window. */
function newBlock(m: DeliveredLogs, f: FilterMemory, number: number): boolean {
  if (number > f.newest) {
    f.newest = number;
    for (const [hash, b] of f.blocks) if (b.number <= number - m.opts.blocks) dropBlock(m, f, hash, b);
    return true;
  }
  if (f.newest - number < m.opts.blocks) return true;
  // Far below what the filter delivered: the feed went onto a new chain (log-feed.ts), whose logs are no reorg's.
  for (const [hash, b] of f.blocks) dropBlock(m, f, hash, b);
  f.newest = number;
  return true;
}

function dropBlock(m: DeliveredLogs, f: FilterMemory, hash: string, b: Block): void {
  f.blocks.delete(hash);
  f.bytes -= b.bytes;
  m.bytes -= b.bytes;
}

function dropFilter(m: DeliveredLogs, f: FilterMemory): void {
  m.filters.delete(f.key);
  m.bytes -= f.bytes;
  f.gone = true;
  f.blocks.clear();
  f.bytes = 0;
}

/** Drops released filters past their grace, and the oldest released ones past maxFilters. */
function sweep(m: DeliveredLogs): void {
  const now = m.opts.now();
  let released = 0;
  for (const f of m.filters.values()) if (f.feeds === 0) released++;
  for (const f of m.filters.values()) {
    if (f.feeds > 0) continue;
    if (released > m.opts.maxFilters || now - f.releasedAt >= m.opts.graceMs) {
      dropFilter(m, f);
      released--;
    }
  }
}

/**
 * Over maxBytes: the released filters go, oldest first, then the lowest blocks of any filter, down to 7/8 of it
 * (so a memory at its bound does not shed at every log). The blocks are gathered and sorted once per shed (a
 * stable sort: of equal numbers the filter opened first, then the block that came first, goes first).
 */
function shed(m: DeliveredLogs): void {
  const target = Math.floor((m.opts.maxBytes * 7) / 8);
  for (const f of m.filters.values()) {
    if (m.bytes <= target) return;
    if (f.feeds === 0) dropFilter(m, f);
  }
  if (m.bytes <= target) return;
  const all: Array<{ f: FilterMemory; hash: string; b: Block }> = [];
  for (const f of m.filters.values()) for (const [hash, b] of f.blocks) all.push({ f, hash, b });
  all.sort((x, y) => x.b.number - y.b.number);
  for (const { f, hash, b } of all) {
    if (m.bytes <= target) return;
    dropBlock(m, f, hash, b);
  }
}

/** The blocks of `key` at or above `from` whose logs a feed delivered, by number (then in the order they came). */
export function deliveredSince(m: DeliveredLogs, key: string, from: number): DeliveredBlock[] {
  sweep(m);
  const f = m.filters.get(key);
  if (f === undefined) return [];
  const out: DeliveredBlock[] = [];
  for (const b of f.blocks.values()) if (b.number >= from) out.push({ number: b.number, hash: b.hash, logs: [...b.logs] });
  return out.sort((a, b) => a.number - b.number);
}
