/**
 * In-flight sharing: identical reads that arrive while one of them is already on its way to a node
 * ride on that one call instead of each costing the node a call of its own. The first caller with a
 * key is the leader and actually calls; callers with the same key while it is in flight join as
 * followers, and all of them get the same outcome. A key is released as soon as its call completes,
 * so sharing never serves an old answer: a later call starts afresh.
 *
 * Metering and ids stay per client: a follower pays its own RU exactly as if it had called, and gets
 * its own id, which the caller puts into the shared whole answer with `rewriteId`
 * (src/jsonrpc/id-rewrite.ts). Only whole answers are shared: the caller decides that an answer too
 * big to be held whole (one that streams, over WHOLE_ANSWER_BYTES) sends the followers to calls of
 * their own. The leader's client going away must not abort the shared call while followers wait.
 *
 * Each chain owns one table of calls in flight (ChainRuntime.inFlight); pipeline/shared-call.ts runs it.
 */
import { canonicalCallJson } from '../jsonrpc/cacheability.js';
import type { MethodRow } from '../jsonrpc/method-rule.js';

/**
 * What the callers sharing one upstream call get: its whole answer (with the leader's id), its
 * failure before any byte was sent, or word that it streams (too big to hold whole), after which
 * each follower makes a call of its own.
 */
export type SharedOutcome = { kind: 'whole'; body: Buffer } | { kind: 'failed'; reason: string; upstream: string } | { kind: 'streamed' };

/** One shared call while it is in flight, as the callers that joined it hold it (pipeline/shared-call.ts's Flight). */
export interface SharedFlight {
  /** Callers still waiting for it (the leader included); when the last one goes, the call is dropped. */
  attached: number;
  /** Set once the outcome was given. */
  readonly ended: boolean;
  /** The leader's upstream call, once made. */
  readonly call: { abort(): void } | null;
  /** Ends the flight with this outcome (once). */
  close(outcome: SharedOutcome): void;
}

export interface Shared<T, S = void> {
  /**
   * Runs `start` once per key in flight; every joiner's `onDone` gets the same outcome. `start` runs
   * synchronously for the leader and must call `done` exactly once (later calls are ignored). The
   * leader's onDone runs first, then the followers' in the order they joined. A joiner's onDone that
   * throws does not keep the outcome from the others (see createInFlight).
   *
   * Returns what the leader's `start` returned (the flight's own state, so that callers need no table
   * of their own beside this one) while the call is in flight, and undefined once it has ended.
   */
  join(key: string, start: (done: (outcome: T) => void) => S, onDone: (outcome: T) => void): S | undefined;
  /** Keys with a call in flight now. */
  inFlight(): number;
}

/**
 * A Map under constant insert/delete churn (one entry per call in flight) is copied into a fresh Map
 * this often. V8 allocates a Map's next hash table (on growth, shrink or compaction) in the generation
 * of the current one, and the table it leaves behind keeps the entries that were live at that moment.
 * Once one table has been promoted, every later table is born in old space, and each dead one pins the
 * calls it held until the next mark-compact: every call's closures get promoted (~80 MB/s at 15k
 * calls/s). A fresh Map starts young again, and under load its tables are replaced before they age.
 */
export const RENEW_AFTER_SETS = 1024;

/** One key in flight. Emptied when its call ends: a discarded hash table may still hold it (see above). */
class Entry<T, S> {
  joiners: Array<(outcome: T) => void>;
  state: S | undefined = undefined;
  finished = false;
  constructor(first: (outcome: T) => void) {
    this.joiners = [first];
  }
}

/**
 * Makes an in-flight registry. `reportError` receives what a joiner's onDone threw, after every
 * joiner has had the outcome; without it, the first such error is rethrown from `done` once all have
 * had it, so a bug in a caller is never silently lost.
 *
 * If `start` itself throws before calling `done`, the key is released and the error propagates to the
 * leader's `join`; followers can only have joined from inside that `start`, and are not answered.
 */
export function createInFlight<T, S = void>(reportError?: (err: unknown, key: string) => void): Shared<T, S> {
  // Replaced by a copy every RENEW_AFTER_SETS insertions.
  let waiting = new Map<string, Entry<T, S>>();
  let sets = 0;

  function release(key: string, entry: Entry<T, S>): void {
    entry.finished = true;
    entry.state = undefined;
    if (waiting.get(key) === entry) waiting.delete(key);
  }

  function finish(key: string, entry: Entry<T, S>, outcome: T): void {
    if (entry.finished) return;
    // Released before anyone is answered, so a joiner that calls again from its onDone starts a new call.
    release(key, entry);
    const joiners = entry.joiners;
    let failed = false;
    let firstError: unknown;
    for (const deliver of joiners) {
      try {
        deliver(outcome);
      } catch (err) {
        if (reportError !== undefined) reportError(err, key);
        else if (!failed) {
          failed = true;
          firstError = err;
        }
      }
    }
    joiners.length = 0;
    if (failed) throw firstError;
  }

  return {
    join(key, start, onDone) {
      const joined = waiting.get(key);
      if (joined !== undefined) {
        joined.joiners.push(onDone);
        return joined.state;
      }
      const entry = new Entry<T, S>(onDone);
      if (++sets >= RENEW_AFTER_SETS) {
        sets = 0;
        waiting = new Map(waiting);
      }
      waiting.set(key, entry);
      let state: S;
      try {
        state = start((outcome) => finish(key, entry, outcome));
      } catch (err) {
        if (!entry.finished) release(key, entry);
        throw err;
      }
      if (entry.finished) return undefined;
      entry.state = state;
      return state;
    },
    inFlight: () => waiting.size,
  };
}

/**
 * The sharing key of a call on a chain (canonical JSON of chain, method and normalized params), or
 * null when the call must never be shared (its row is not shareable: MethodRow.shareable). `paramsJson`:
 * the params' JSON text, when at hand (canonicalCallJson).
 */
export function dedupKeyFor(chainSlug: string, row: MethodRow, params: unknown[], paramsJson?: string): string | null {
  if (!row.shareable) return null;
  return `${JSON.stringify(chainSlug)}${canonicalCallJson(row.name, params, paramsJson)}`;
}
