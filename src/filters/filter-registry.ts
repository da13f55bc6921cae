/**
 * The JSON-RPC polling filters (eth_newFilter, eth_newBlockFilter, eth_newPendingTransactionFilter,
 * eth_getFilterChanges, eth_getFilterLogs, eth_uninstallFilter), served by the gateway itself from
 * the chain's head stream and eth_getLogs, so a filter lives on when the node it started on dies.
 *
 * Filters belong to a scope (an endpoint key, or a client IP on the public path): another scope's
 * id gets exactly the answer of an unknown id. Ids are 0x + 16 random bytes in hex, leading zeros
 * trimmed as geth trims them; lookups ignore case and leading zeros, since clients rewrite both.
 * A filter not polled with eth_getFilterChanges for `idleTimeoutMs` is gone, as on a node
 * (eth_getFilterLogs does not keep it alive there either); one coarse, unref'd timer frees them.
 */
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import {
  allFilterLogs,
  createHashJournal,
  createLogFilterState,
  filterError,
  isFilterError,
  pollLogChanges,
  rewindLogFilter,
  type FilterError,
  type FilterSource,
  type HashJournal,
  type LogFilterState,
} from './filter-kinds.js';

export { filterError, isFilterError, type FilterError, type FilterErrorMessage, type FilterSource } from './filter-kinds.js';

export interface FilterRegistry {
  /**
   * Fed by the chain's head stream, in delivery order, reorgs included. A hash already delivered at
   * that number is ignored (a resubscription repeats the head); a number at or below the previous
   * head is a reorg: block filters get the new hash and log filters read that block again.
   */
  onHead(number: number, hash: string): void;
  /**
   * The newest head onHead was given since heads were last wanted, or null before the first. A log filter
   * reads no block above it, even when the source's head is newer: a reorg is known only once its heads
   * come in, so a block read ahead of them could be replaced unseen (its logs missed, and the new blocks'
   * read twice).
   */
  headSeen(): number | null;
  onPendingTransaction(hash: string): void;
  /**
   * What the registry needs fed: heads while a block or log filter is open, pending transaction
   * hashes while a pending filter is. The caller keeps its internal subscriptions only while true.
   */
  wants(): { heads: boolean; pending: boolean };
  /** eth_newFilter with its validated filter object: the id, or a -32000 refusal. */
  newFilter(scope: string, filter: Record<string, unknown>): string | FilterError;
  newBlockFilter(scope: string): string | FilterError;
  newPendingTransactionFilter(scope: string): string | FilterError;
  /** Block or transaction hashes, or logs, since the last poll; rejects when eth_getLogs does. */
  getFilterChanges(scope: string, id: string): Promise<unknown[] | FilterError>;
  /** Every log of a log filter's range; 'filter not found' for block and pending filters, as geth answers. */
  getFilterLogs(scope: string, id: string): Promise<unknown[] | FilterError>;
  /** eth_uninstallFilter: true when the scope had that filter. */
  uninstall(scope: string, id: string): boolean;
  /** Filters held, expired ones not yet swept included. */
  size(): number;
  /** Drops every filter and stops the sweep. */
  close(): void;
}

export interface FilterRegistryOptions {
  /** The chain's head and eth_getLogs over a healthy upstream. */
  source: FilterSource;
  /** Open filters per scope at most (config filters.max_per_key, default 100); more → 'too many filters'. */
  maxPerScope: number;
  /** A filter not polled for this long is gone, in ms (config filters.idle_timeout_s, default 300 s). */
  idleTimeoutMs: number;
  /** Filters held in all at most (default 100_000, about 30 MB): the bound when many client IPs make filters. */
  maxFilters?: number;
  /** Hashes a block or pending filter keeps between polls (default 10_000); the oldest are dropped. */
  maxQueuedPerFilter?: number;
  /** Monotonic ms (default performance.now). */
  now?: () => number;
  /** Runs `sweep` every `ms` until the returned function is called (default: an unref'd setInterval). */
  every?: (ms: number, sweep: () => void) => () => void;
  /** Called when wants() changes, so the caller can open or close its subscriptions at once. */
  onWantsChange?: (wants: { heads: boolean; pending: boolean }) => void;
}

type FilterKind = 'logs' | 'blocks' | 'pending';

interface Filter {
  readonly id: string;
  readonly scope: string;
  readonly kind: FilterKind;
  lastPolledAt: number;
  /** Block and pending filters: the journal sequence number read up to. */
  cursor: number;
  /** Log filters only. */
  readonly logs: LogFilterState | null;
  /** Log filters: the poll in progress, so that polls of one filter run one after the other. */
  queue: Promise<unknown>;
}

const DEFAULT_MAX_FILTERS = 100_000;
const DEFAULT_MAX_QUEUED = 10_000;
/** Head hashes remembered by number, to tell a repeated head from a reorg. */
const RECENT_HEADS = 128;
/** The sweep runs at most this often and at least every idle timeout (or every MAX_SWEEP_MS). */
const MIN_SWEEP_MS = 1000;
const MAX_SWEEP_MS = 30_000;

const NOT_FOUND = filterError('filter not found');
const TOO_MANY = filterError('too many filters');
const settled = Promise.resolve();

function positiveInteger(value: number | undefined, fallback: number | undefined, name: string): number {
  if (value === undefined && fallback !== undefined) return fallback;
  if (!Number.isSafeInteger(value) || value! <= 0) throw new TypeError(`${name} must be a positive integer`);
  return value!;
}

function everyUnref(ms: number, sweep: () => void): () => void {
  const timer = setInterval(sweep, ms);
  timer.unref();
  return () => clearInterval(timer);
}

/** The form an id is looked up by: lower case, no leading zeros ("0x0" for zero). */
function idKey(id: string): string {
  const digits = id.slice(2).toLowerCase().replace(/^0+/, '');
  return `0x${digits === '' ? '0' : digits}`;
}

/** One chain's filters. Throws TypeError naming the option when a bound is not a positive integer. */
export function createFilterRegistry(opts: FilterRegistryOptions): FilterRegistry {
  return new Registry(opts);
}

/** The filters by id and by scope, the journals of hashes they read and the heads seen, in fields. */
class Registry implements FilterRegistry {
  private readonly source: FilterSource;
  private readonly maxPerScope: number;
  private readonly idleTimeoutMs: number;
  private readonly maxFilters: number;
  private readonly clock: () => number;
  private readonly onWantsChange: FilterRegistryOptions['onWantsChange'];
  private readonly byId = new Map<string, Filter>();
  private readonly byScope = new Map<string, Set<Filter>>();
  private readonly counts: Record<FilterKind, number> = { logs: 0, blocks: 0, pending: 0 };
  private readonly logFilters = new Set<Filter>();
  private readonly blockHashes: HashJournal;
  private readonly pendingHashes: HashJournal;
  private readonly recentHeads = new Map<number, string>();
  private lastHead: number | null = null;
  private wanted = { heads: false, pending: false };
  private fullSweepAt = -Infinity;
  /** The source as log polls read it: up to the newest head seen, so every block read has its reorgs known. */
  private readonly seenSource: FilterSource;
  private readonly stopSweep: () => void;

  constructor(opts: FilterRegistryOptions) {
    const source = opts.source;
    this.source = source;
    this.maxPerScope = positiveInteger(opts.maxPerScope, undefined, 'maxPerScope');
    this.idleTimeoutMs = positiveInteger(opts.idleTimeoutMs, undefined, 'idleTimeoutMs');
    this.maxFilters = positiveInteger(opts.maxFilters, DEFAULT_MAX_FILTERS, 'maxFilters');
    const maxQueued = positiveInteger(opts.maxQueuedPerFilter, DEFAULT_MAX_QUEUED, 'maxQueuedPerFilter');
    this.clock = opts.now ?? (() => performance.now());
    this.onWantsChange = opts.onWantsChange;
    this.blockHashes = createHashJournal(maxQueued);
    this.pendingHashes = createHashJournal(maxQueued);
    this.seenSource = {
      head: () => {
        const head = source.head();
        const lastHead = this.lastHead;
        return head === null || lastHead === null ? head : Math.min(head, lastHead);
      },
      getLogs: (filter) => source.getLogs(filter),
    };
    const sweepEvery = Math.min(MAX_SWEEP_MS, Math.max(MIN_SWEEP_MS, this.idleTimeoutMs));
    this.stopSweep = (opts.every ?? everyUnref)(sweepEvery, () => this.sweep());
  }

  private expired(f: Filter, now: number): boolean {
    return now - f.lastPolledAt >= this.idleTimeoutMs;
  }

  private noticeWants(): void {
    const counts = this.counts;
    const now = { heads: counts.blocks + counts.logs > 0, pending: counts.pending > 0 };
    if (now.heads === this.wanted.heads && now.pending === this.wanted.pending) return;
    this.wanted = now;
    if (!now.heads) {
      // Heads stop coming: what was seen would be stale when they come again.
      this.lastHead = null;
      this.recentHeads.clear();
    }
    this.onWantsChange?.(now);
  }

  private remove(f: Filter): void {
    const counts = this.counts;
    this.byId.delete(f.id);
    const own = this.byScope.get(f.scope);
    own?.delete(f);
    if (own?.size === 0) this.byScope.delete(f.scope);
    counts[f.kind]--;
    if (f.kind === 'logs') this.logFilters.delete(f);
    if (counts.blocks === 0) this.blockHashes.clear();
    if (counts.pending === 0) this.pendingHashes.clear();
  }

  private sweep(): void {
    const now = this.clock();
    let removed = false;
    for (const f of this.byId.values()) {
      if (this.expired(f, now)) {
        this.remove(f);
        removed = true;
      }
    }
    if (removed) this.noticeWants();
  }

  /** The scope's live filter with that id, or undefined; an expired one found here is removed. */
  private find(scope: string, id: string): Filter | undefined {
    const f = this.byId.get(idKey(id));
    if (f === undefined || f.scope !== scope) return undefined;
    if (this.expired(f, this.clock())) {
      this.remove(f);
      this.noticeWants();
      return undefined;
    }
    return f;
  }

  private newId(): string {
    for (;;) {
      const id = idKey(`0x${randomBytes(16).toString('hex')}`);
      if (!this.byId.has(id)) return id;
    }
  }

  /** Room for one more filter in `scope`, after dropping its expired ones; fail-closed at the limits. */
  private hasRoom(scope: string): boolean {
    const { byId, clock } = this;
    const own = this.byScope.get(scope);
    if (own !== undefined && own.size >= this.maxPerScope) {
      const now = clock();
      for (const f of own) if (this.expired(f, now)) this.remove(f);
      if (own.size >= this.maxPerScope) return false;
    }
    // At the global bound, one full sweep a second at most: a flood of refused creations must not scan every filter each time.
    if (byId.size >= this.maxFilters && clock() - this.fullSweepAt >= MIN_SWEEP_MS) {
      this.fullSweepAt = clock();
      this.sweep();
    }
    return byId.size < this.maxFilters;
  }

  private install(scope: string, kind: FilterKind, logs: LogFilterState | null): string | FilterError {
    if (!this.hasRoom(scope)) {
      this.noticeWants();
      return TOO_MANY;
    }
    const cursor = kind === 'blocks' ? this.blockHashes.next : kind === 'pending' ? this.pendingHashes.next : 0;
    const f: Filter = { id: this.newId(), scope, kind, lastPolledAt: this.clock(), cursor, logs, queue: settled };
    this.byId.set(f.id, f);
    let own = this.byScope.get(scope);
    if (own === undefined) this.byScope.set(scope, (own = new Set()));
    own.add(f);
    this.counts[kind]++;
    if (kind === 'logs') this.logFilters.add(f);
    this.noticeWants();
    return f.id;
  }

  private pollLogs(f: Filter): Promise<unknown[]> {
    const logs = f.logs!;
    const run = f.queue.then(() => pollLogChanges(logs, this.seenSource));
    f.queue = run.catch(() => undefined);
    return run;
  }

  onHead(number: number, hash: string): void {
    const recentHeads = this.recentHeads;
    if (recentHeads.get(number) === hash) return;
    const lastHead = this.lastHead;
    const reorg = lastHead !== null && number <= lastHead;
    if (reorg) {
      if (lastHead - number > RECENT_HEADS) recentHeads.clear();
      else for (let n = number + 1; n <= lastHead; n++) recentHeads.delete(n);
    }
    recentHeads.set(number, hash);
    if (recentHeads.size > RECENT_HEADS) recentHeads.delete(recentHeads.keys().next().value!);
    this.lastHead = number;
    if (this.counts.blocks > 0) this.blockHashes.push(hash);
    if (reorg) for (const f of this.logFilters) rewindLogFilter(f.logs!, number);
  }

  headSeen(): number | null {
    return this.lastHead;
  }

  onPendingTransaction(hash: string): void {
    if (this.counts.pending > 0) this.pendingHashes.push(hash);
  }

  wants(): { heads: boolean; pending: boolean } {
    return { ...this.wanted };
  }

  newFilter(scope: string, filter: Record<string, unknown>): string | FilterError {
    const state = createLogFilterState(filter, this.source.head());
    return isFilterError(state) ? state : this.install(scope, 'logs', state);
  }

  newBlockFilter(scope: string): string | FilterError {
    return this.install(scope, 'blocks', null);
  }

  newPendingTransactionFilter(scope: string): string | FilterError {
    return this.install(scope, 'pending', null);
  }

  async getFilterChanges(scope: string, id: string): Promise<unknown[] | FilterError> {
    const f = this.find(scope, id);
    if (f === undefined) return NOT_FOUND;
    f.lastPolledAt = this.clock();
    if (f.kind === 'logs') return this.pollLogs(f);
    const journal = f.kind === 'blocks' ? this.blockHashes : this.pendingHashes;
    const hashes = journal.since(f.cursor);
    f.cursor = journal.next;
    return hashes;
  }

  async getFilterLogs(scope: string, id: string): Promise<unknown[] | FilterError> {
    const f = this.find(scope, id);
    if (f === undefined || f.logs === null) return NOT_FOUND;
    return allFilterLogs(f.logs, this.source);
  }

  uninstall(scope: string, id: string): boolean {
    const f = this.find(scope, id);
    if (f === undefined) return false;
    this.remove(f);
    this.noticeWants();
    return true;
  }

  size(): number {
    return this.byId.size;
  }

  close(): void {
    this.stopSweep();
    for (const f of [...this.byId.values()]) this.remove(f);
    this.noticeWants();
  }
}
