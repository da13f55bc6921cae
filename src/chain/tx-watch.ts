/**
 * Transactions sent through the gateway, watched until they land (config `transactions`): each one sent with
 * eth_sendRawTransaction and accepted is looked at on every new served head until it is included (its receipt),
 * replaced (another transaction of its sender and nonce was included) or expired (`watch_blocks` heads after it
 * was sent: dropped). Meanwhile, every few heads (RESEND_EVERY_BLOCKS), each node its broadcast would go to (in
 * rotation, serving the method, with room in its budget) is asked whether its pool holds it; when none does, it is
 * sent again to each one (a node restarted, a pool evicted it, a peer never heard it). Its status is read with chaingate_getTransactionStatus and streamed to `transactionStatus`
 * subscribers at each change (tx-watch-steps.ts runs the looks and says their order).
 *
 * One watch per chain and process: the thread that probes the chain (alone, or the main thread of workers) owns
 * it, as it owns the filters; a worker reaches it over the filters' relay (relay.ts: the watch and the status read
 * travel as two calls of the chain's filters, withTxWatch below) and its subscribers over the feeds' relay. The
 * memory is bounded: `max_watched` in all and `max_watched_per_key` per caller's limit key, the oldest going first
 * (a settled one is kept for status reads until it is pushed out so).
 */
import type { FeedHold, FeedListener, FeedsLog } from '../fanout/feeds.js';
import type { ChainFilters } from './filters.js';
import type { ChainRuntime } from './runtime.js';
import { DEFAULTS } from '../config/defaults.js';
import { lookAt } from './tx-watch-steps.js';

/** The internal call of the chain's filters that watches a transaction ([raw, hash]); never a client's method. */
export const WATCH_CALL = 'chaingate_watchTransaction';
/** The client's status read, answered by the watch (the catalogue's row sends it down the filters' road). */
export const STATUS_CALL = 'chaingate_getTransactionStatus';

/** What a watched transaction became. Block numbers are 0x quantities, as the node gave them. */
export type TxStatus =
  | { status: 'pending'; hash: string }
  | { status: 'included'; hash: string; blockNumber: string; blockHash: string }
  | { status: 'replaced'; hash: string; replacedBy: string | null }
  | { status: 'dropped'; hash: string };

export interface TxWatchBounds {
  watch_blocks: number;
  max_watched: number;
  max_watched_per_key: number;
}

export interface TxWatchOptions {
  bounds: TxWatchBounds;
  /** The chain (its nodes' pools are asked, and each is sent the transaction again; reads go by `call`). */
  chain: Pick<ChainRuntime, 'call' | 'upstreams' | 'health' | 'routes' | 'served' | 'timeoutMs'>;
  log: FeedsLog;
}

export interface TxWatch {
  /** A transaction `scope` (a caller's limit key) sent and a node accepted. */
  watch(scope: string, raw: string, hash: string): void;
  /** What the watched transaction `hash` is now; null when it is not watched. */
  status(hash: string): TxStatus | null;
  /** Tells `listener` each change of `hash`'s status (a hash not watched yet is told once it is). */
  subscribe(hash: string, listener: FeedListener): FeedHold;
  close(): void;
}

/** One watched transaction. */
export interface Watched {
  readonly hash: string;
  readonly raw: string;
  readonly scope: string;
  /** Its sender (lower case) and nonce, decoded once; null when its bytes could not be decoded. */
  sender: { from: string; nonce: number } | null | undefined;
  /** The served head when the watch first looked at it (null before); it expires watch_blocks after. */
  since: number | null;
  /** The head of its last look at the pools. */
  pooledAt: number;
  state: TxStatus;
}

/** Transactions looked at together on a head. */
const LOOKS_AT_ONCE = 8;

class TxWatchState {
  readonly entries = new Map<string, Watched>();
  readonly byScope = new Map<string, Set<string>>();
  readonly listeners = new Map<string, Set<FeedListener>>();
  /** A round of looks is under way; `again` asks for another when it ends (a head came meanwhile). */
  running = false;
  again = false;
  closed = false;
  unwatch: () => void = () => {};

  constructor(readonly opts: TxWatchOptions) {}
}

/** The watch of `chain` (the thread that probes it); `bounds` default to DEFAULTS.transactions. */
export function createTxWatch(chain: TxWatchOptions['chain'], bounds: TxWatchBounds | undefined, log: FeedsLog): TxWatch {
  const w = new TxWatchState({ chain, bounds: bounds ?? DEFAULTS.transactions, log });
  w.unwatch = chain.served.watch(() => startRound(w));
  return {
    watch: (scope, raw, hash) => watch(w, scope, raw, hash.toLowerCase()),
    status: (hash) => w.entries.get(hash.toLowerCase())?.state ?? null,
    subscribe: (hash, listener) => subscribe(w, hash.toLowerCase(), listener),
    close() {
      w.closed = true;
      w.unwatch();
      w.listeners.clear();
    },
  };
}

function watch(w: TxWatchState, scope: string, raw: string, hash: string): void {
  const { max_watched, max_watched_per_key } = w.opts.bounds;
  if (w.closed || max_watched === 0) return;
  const held = w.entries.get(hash);
  // Sent again by its client: watched as it was, unless it had been given up.
  if (held !== undefined && held.state.status !== 'dropped') return;
  if (held !== undefined) forget(w, held);
  // Room first: forget() drops a scope's set once it is empty, so the set is fetched only after the evictions.
  const ours = w.byScope.get(scope);
  while (ours !== undefined && ours.size >= max_watched_per_key) forget(w, w.entries.get(ours.values().next().value!)!);
  while (w.entries.size >= max_watched) forget(w, w.entries.values().next().value!);
  let mine = w.byScope.get(scope);
  if (mine === undefined) w.byScope.set(scope, (mine = new Set()));
  const e: Watched = { hash, raw, scope, sender: undefined, since: null, pooledAt: 0, state: { status: 'pending', hash } };
  w.entries.set(hash, e);
  mine.add(hash);
  tell(w, e);
}

function forget(w: TxWatchState, e: Watched): void {
  w.entries.delete(e.hash);
  const mine = w.byScope.get(e.scope);
  mine?.delete(e.hash);
  if (mine?.size === 0) w.byScope.delete(e.scope);
}

function tell(w: TxWatchState, e: Watched): void {
  const listeners = w.listeners.get(e.hash);
  if (listeners === undefined) return;
  const json = JSON.stringify(e.state);
  for (const l of listeners) {
    try {
      l.notify(json);
    } catch (err) {
      w.opts.log('warn', 'transaction status listener threw', { error: String(err).slice(0, 200) });
    }
  }
}

function subscribe(w: TxWatchState, hash: string, listener: FeedListener): FeedHold {
  let set = w.listeners.get(hash);
  if (set === undefined) w.listeners.set(hash, (set = new Set()));
  set.add(listener);
  return {
    remove() {
      const s = w.listeners.get(hash);
      s?.delete(listener);
      if (s?.size === 0) w.listeners.delete(hash);
    },
    live: () => true,
    whenLive: async () => null,
  };
}

/** A new served head: each pending transaction is looked at, LOOKS_AT_ONCE at a time; one round at a time. */
function startRound(w: TxWatchState): void {
  if (w.closed) return;
  if (w.running) {
    w.again = true;
    return;
  }
  const head = w.opts.chain.served.now();
  const pending = [...w.entries.values()].filter((e) => e.state.status === 'pending');
  if (head === null || pending.length === 0) return;
  w.running = true;
  void (async () => {
    for (let i = 0; i < pending.length && !w.closed; i += LOOKS_AT_ONCE)
      await Promise.all(
        pending.slice(i, i + LOOKS_AT_ONCE).map(async (e) => {
          const became = await lookAt(w.opts, e, head);
          // Forgotten meanwhile (pushed out by newer ones): nobody reads it any more.
          if (became === null || w.entries.get(e.hash) !== e) return;
          e.state = became;
          tell(w, e);
        }),
      );
  })().finally(() => {
    w.running = false;
    if (w.again) {
      w.again = false;
      startRound(w);
    }
  });
}

/** The chain's filters with the watch's two calls (WATCH_CALL, STATUS_CALL) answered by `watch`. */
export function withTxWatch(filters: ChainFilters, watch: TxWatch): ChainFilters {
  return {
    size: () => filters.size(),
    call(scope, method, params) {
      if (method === STATUS_CALL) return Promise.resolve(watch.status(String(params[0])));
      if (method !== WATCH_CALL) return filters.call(scope, method, params);
      watch.watch(scope, String(params[0]), String(params[1]));
      return Promise.resolve(null);
    },
    takesSentTransactions: () => filters.takesSentTransactions(),
    notePendingTransaction: (hash) => filters.notePendingTransaction(hash),
    close() {
      watch.close();
      filters.close();
    },
  };
}
