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

/**
 * A flight's end as its leader holds it: `finish` gives every joiner the outcome (once; later calls are
 * ignored).
 */
export interface FlightEnd<T> {
  finish(outcome: T): void;
}

/**
 * One caller of a shared call, as an object (Shared.joinWith): `lead` runs for the leader, as `start` does in
 * join, and `deliver` gets the outcome, as `onDone` does. A caller that is already an object costs no closure.
 */
export interface Joiner<T, S> {
  lead(end: FlightEnd<T>): S;
  deliver(outcome: T): void;
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
  /** join with the caller as one object: `joiner.lead(end)` is `start`, `end.finish` is `done`, `joiner.deliver` is `onDone`. */
  joinWith(key: string, joiner: Joiner<T, S>): S | undefined;
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
 *
 * The bound is in calls, and what it must beat is time: the span between two mark-compacts. At 1024, a
 * worker thread sharing its core (two workers on two cores beside the load) served those calls in
 * 150-300 ms, as long as the mark-compacts the pinned calls bring on were apart, and the state held for
 * the whole run: ~1.8 MB copied at every scavenge, promoted at the next, and one worker in two paying
 * ~40 % more CPU per call. Renewed every 64 calls, it was seen in no run (bench/PROFILE-workers.md). The
 * copy moves the calls in flight, so it waits for at least as many insertions as there are entries: never
 * more than one entry copied per call.
 */
export const RENEW_AFTER_SETS = 64;

/**
 * One key in flight, and the leader's FlightEnd. Emptied when its call ends: a discarded hash table may still
 * hold it (see above). The first joiner is a field: most calls are never joined by a second.
 */
class Entry<T, S> implements FlightEnd<T> {
  state: S | undefined = undefined;
  finished = false;
  first: Joiner<T, S> | null;
  more: Array<Joiner<T, S>> | null = null;

  constructor(
    private readonly registry: InFlight<T, S>,
    readonly key: string,
    first: Joiner<T, S>,
  ) {
    this.first = first;
  }

  finish(outcome: T): void {
    this.registry.finish(this, outcome);
  }
}

/** join's closures as a Joiner (the tests' and any caller's that has no object of its own). */
class ClosureJoiner<T, S> implements Joiner<T, S> {
  constructor(
    private readonly start: (done: (outcome: T) => void) => S,
    readonly deliver: (outcome: T) => void,
  ) {}

  lead(end: FlightEnd<T>): S {
    return this.start((outcome) => end.finish(outcome));
  }
}

class InFlight<T, S> implements Shared<T, S> {
  // Replaced by a copy every RENEW_AFTER_SETS insertions.
  private waiting = new Map<string, Entry<T, S>>();
  private sets = 0;

  constructor(private readonly reportError: ((err: unknown, key: string) => void) | undefined) {}

  private release(entry: Entry<T, S>): void {
    entry.finished = true;
    entry.state = undefined;
    if (this.waiting.get(entry.key) === entry) this.waiting.delete(entry.key);
  }

  finish(entry: Entry<T, S>, outcome: T): void {
    if (entry.finished) return;
    // Released before anyone is answered, so a joiner that calls again from its deliver starts a new call.
    this.release(entry);
    const first = entry.first;
    const more = entry.more;
    entry.first = null;
    entry.more = null;
    let failed = false;
    let firstError: unknown;
    const count = more === null ? 1 : 1 + more.length;
    for (let i = 0; i < count; i++) {
      const joiner = i === 0 ? first! : more![i - 1]!;
      try {
        joiner.deliver(outcome);
      } catch (err) {
        if (this.reportError !== undefined) this.reportError(err, entry.key);
        else if (!failed) {
          failed = true;
          firstError = err;
        }
      }
    }
    if (failed) throw firstError;
  }

  join(key: string, start: (done: (outcome: T) => void) => S, onDone: (outcome: T) => void): S | undefined {
    return this.joinWith(key, new ClosureJoiner(start, onDone));
  }

  joinWith(key: string, joiner: Joiner<T, S>): S | undefined {
    const joined = this.waiting.get(key);
    if (joined !== undefined) {
      (joined.more ??= []).push(joiner);
      return joined.state;
    }
    const entry = new Entry<T, S>(this, key, joiner);
    // Never sooner than one insertion per entry copied: with thousands in flight (a slow node under load)
    // a copy every 64 calls would cost each call far more than the entries it set.
    if (++this.sets >= RENEW_AFTER_SETS && this.sets >= this.waiting.size) {
      this.sets = 0;
      this.waiting = new Map(this.waiting);
    }
    this.waiting.set(key, entry);
    let state: S;
    try {
      state = joiner.lead(entry);
    } catch (err) {
      if (!entry.finished) this.release(entry);
      throw err;
    }
    if (entry.finished) return undefined;
    entry.state = state;
    return state;
  }

  inFlight(): number {
    return this.waiting.size;
  }
}

/**
 * Makes an in-flight registry. `reportError` receives what a joiner's onDone threw, after every
 * joiner has had the outcome; without it, the first such error is rethrown from `done` once all have
 * had it, so a bug in a caller is never silently lost.
 *
 * If `start` itself throws before calling `done`, the key is released and the error propagates to the
 * leader's `join`; followers can only have joined from inside that `start`, and are not answered.
 *
 * A class rather than closures: a registry is made per chain, and its entries per call, with no closure.
 */
export function createInFlight<T, S = void>(reportError?: (err: unknown, key: string) => void): Shared<T, S> {
  return new InFlight<T, S>(reportError);
}

/** Each chain's slug as JSON, the head of its keys: written once, not per call (a few configured chains). */
const quotedSlugs = new Map<string, string>();

/**
 * The sharing key of a call on a chain (canonical JSON of chain, method and normalized params), or
 * null when the call must never be shared (its row is not shareable: MethodRow.shareable). `paramsJson`:
 * the params' JSON text, when at hand (canonicalCallJson).
 */
export function dedupKeyFor(chainSlug: string, row: MethodRow, params: unknown[], paramsJson?: string): string | null {
  if (!row.shareable) return null;
  let quoted = quotedSlugs.get(chainSlug);
  if (quoted === undefined) quotedSlugs.set(chainSlug, (quoted = JSON.stringify(chainSlug)));
  return `${quoted}${canonicalCallJson(row.name, params, paramsJson)}`;
}
