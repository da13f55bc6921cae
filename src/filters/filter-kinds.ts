/**
 * What each kind of filter remembers between polls and how a poll is answered.
 *
 * Block and pending-transaction filters read from a shared journal of hashes: one ring per kind
 * holds the newest `capacity` hashes with consecutive sequence numbers, and a filter keeps only the
 * sequence number it has read up to. So memory is one ring per kind, whatever the number of filters,
 * and a filter left unpolled loses its oldest hashes first.
 *
 * A log filter keeps no logs at all: it remembers the last block it covered, and a poll asks
 * `eth_getLogs` (on whichever node is healthy) for the blocks after it. That is what lets a filter
 * outlive the node it was created on.
 */

/** Messages of the -32000 errors the filter methods answer; the texts are geth's. */
export type FilterErrorMessage =
  | 'filter not found'
  | 'too many filters'
  | 'invalid block range params'
  | 'pending logs are not supported'
  | 'exceed max topics';

/** An expected refusal of a filter call: answer it as the JSON-RPC error {code, message}. */
export interface FilterError {
  readonly code: -32000;
  readonly message: FilterErrorMessage;
}

const errors = new Map<FilterErrorMessage, FilterError>();
/** The one frozen FilterError per message, so callers and tests can compare them by value. */
export function filterError(message: FilterErrorMessage): FilterError {
  let e = errors.get(message);
  if (e === undefined) errors.set(message, (e = Object.freeze({ code: -32000, message })));
  return e;
}

/** Tells a refusal from a result (an id string or an array of hashes or logs). */
export function isFilterError(v: unknown): v is FilterError {
  return v !== null && typeof v === 'object' && (v as { code?: unknown }).code === -32000 && !Array.isArray(v);
}

/** Where filters get the chain from. */
export interface FilterSource {
  /** Current best head number, or null if unknown yet. */
  head(): number | null;
  /** eth_getLogs over a healthy upstream; rejects on failure (the caller answers it as an upstream error). */
  getLogs(filter: Record<string, unknown>): Promise<unknown[]>;
}

/** Most topic positions a log filter may name, as geth allows. */
const MAX_TOPICS = 4;

/** A bounded journal of hashes in arrival order; readers hold sequence numbers, not copies. */
export interface HashJournal {
  /** The sequence number the next hash will get: a new reader starts here. */
  readonly next: number;
  push(hash: string): void;
  /** The hashes from sequence number `from` on that are still kept (the oldest are dropped past capacity). */
  since(from: number): string[];
  /** Forgets every hash (when no reader is left); sequence numbers keep counting up. */
  clear(): void;
}

/** A journal keeping the newest `capacity` hashes. */
export function createHashJournal(capacity: number): HashJournal {
  let ring: string[] = [];
  let next = 0;
  let kept = 0;
  return {
    get next() {
      return next;
    },
    push(hash) {
      ring[next % capacity] = hash;
      next++;
      if (kept < capacity) kept++;
    },
    since(from) {
      const out: string[] = [];
      for (let seq = Math.max(from, next - kept); seq < next; seq++) out.push(ring[seq % capacity]!);
      return out;
    },
    clear() {
      ring = [];
      kept = 0;
    },
  };
}

/** A log filter's criteria and its progress through the chain. */
export interface LogFilterState {
  /** The filter as the client gave it, minus fromBlock, toBlock and blockHash. */
  readonly criteria: Readonly<Record<string, unknown>>;
  /** The client's fromBlock and toBlock as given (tags or hex), or undefined when absent. */
  readonly fromTag: string | undefined;
  readonly toTag: string | undefined;
  readonly blockHash: string | undefined;
  /** First block whose logs count (null: from the head at creation on, 'latest' in geth's terms). */
  readonly from: number | null;
  /** Last block whose logs count (null: open-ended). */
  readonly to: number | null;
  /** Last block whose logs were handed out or that was already mined at creation; null until a head is known. */
  covered: number | null;
  /** Set while a poll's eth_getLogs is in flight: the lowest block a reorg meanwhile asked to read again, minus one. */
  rewoundTo: number | null;
  polling: boolean;
}

/** A block tag of a log filter as a number: null for latest, an error for tags a filter cannot follow. */
function blockOf(tag: unknown): number | null | FilterError {
  if (tag === undefined || tag === null || tag === 'latest') return null;
  if (tag === 'earliest') return 0;
  if (tag === 'pending') return filterError('pending logs are not supported');
  // safe and finalized move by their own rules, which a filter over new blocks cannot follow (geth refuses them too).
  if (tag === 'safe' || tag === 'finalized') return filterError('invalid block range params');
  return Number.parseInt((tag as string).slice(2), 16);
}

/**
 * Reads a validated eth_newFilter object into a filter's state, refusing what geth's eth_newFilter
 * refuses: pending, safe and finalized bounds, a numeric toBlock after a latest fromBlock, toBlock
 * before fromBlock, more than 4 topic positions.
 */
export function createLogFilterState(filter: Record<string, unknown>, head: number | null): LogFilterState | FilterError {
  const { fromBlock, toBlock, blockHash, ...criteria } = filter;
  if (Array.isArray(criteria.topics) && criteria.topics.length > MAX_TOPICS) return filterError('exceed max topics');
  const from = blockOf(fromBlock);
  if (isFilterError(from)) return from;
  const to = blockOf(toBlock);
  if (isFilterError(to)) return to;
  if (to !== null && (from === null || to < from)) return filterError('invalid block range params');
  return {
    criteria,
    fromTag: typeof fromBlock === 'string' ? fromBlock : undefined,
    toTag: typeof toBlock === 'string' ? toBlock : undefined,
    blockHash: typeof blockHash === 'string' ? blockHash : undefined,
    from,
    to,
    covered: head,
    rewoundTo: null,
    polling: false,
  };
}

const hex = (n: number): string => `0x${n.toString(16)}`;

/**
 * The logs of blocks mined since the last poll: eth_getLogs from the block after the last one
 * covered (or the filter's fromBlock if later) to the head (or the filter's toBlock if earlier).
 * The filter advances only when eth_getLogs answered, so a failed poll loses nothing. A filter
 * pinned to one blockHash has no new blocks to report. The caller runs one poll of a filter at a time.
 */
export async function pollLogChanges(state: LogFilterState, source: FilterSource): Promise<unknown[]> {
  const head = source.head();
  if (head === null || state.blockHash !== undefined) return [];
  if (state.covered === null) {
    // Created before any head was known: it starts now.
    state.covered = head;
    return [];
  }
  const from = Math.max(state.covered + 1, state.from ?? 0);
  const to = state.to === null ? head : Math.min(head, state.to);
  if (from > to) return [];
  state.polling = true;
  state.rewoundTo = null;
  let logs: unknown[];
  try {
    logs = await source.getLogs({ ...state.criteria, fromBlock: hex(from), toBlock: hex(to) });
  } finally {
    state.polling = false;
  }
  state.covered = state.rewoundTo === null ? to : Math.min(to, state.rewoundTo);
  state.rewoundTo = null;
  return logs;
}

/**
 * Every log of the filter's range, as geth's eth_getFilterLogs: the bounds are the client's own,
 * so an absent or 'latest' fromBlock means the head at the time of this call.
 */
export function allFilterLogs(state: LogFilterState, source: FilterSource): Promise<unknown[]> {
  if (state.blockHash !== undefined) return source.getLogs({ ...state.criteria, blockHash: state.blockHash });
  return source.getLogs({ ...state.criteria, fromBlock: state.fromTag ?? 'latest', toBlock: state.toTag ?? 'latest' });
}

/** A new block `number` replaced the chain from there on: its logs and those after it are read again. */
export function rewindLogFilter(state: LogFilterState, number: number): void {
  const before = number - 1;
  if (state.covered !== null && state.covered > before) state.covered = before;
  if (state.polling) state.rewoundTo = state.rewoundTo === null ? before : Math.min(state.rewoundTo, before);
}
