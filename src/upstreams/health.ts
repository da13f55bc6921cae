/**
 * How one upstream node of a chain is doing: its head, its error rate and latency over a sliding window,
 * and whether it is taken out of rotation for failing.
 *
 * Failing (out of rotation, reason 'failing'), judged on every failed outcome:
 * - FAILURE_STREAK (3) failed outcomes in a row: a node that refuses connections or hangs is out after three
 *   calls, whatever the traffic, so a single-node chain answers 502 at once instead of after timeouts;
 * - or at least MIN_CALLS_JUDGED (10) outcomes in the last 10 s (counted in 1 s steps), of which at least
 *   ERROR_RATE_LIMIT (50%) failed: a node that fails every other call is out even between successes;
 * - or one head probe left unanswered until the prober gave up on it (reportProbe with `hung`): a node that
 *   cannot tell its block number within the probe timeout serves nothing well, and waiting for three such
 *   probes would keep a hanging node in rotation for about 9 s;
 * - or eject(): a node whose answers kept differing from those its chain's other nodes agreed on
 *   (pipeline/quorum-call.ts).
 * Suspected (still in rotation): a head probe has gone unanswered for SUSPECT_AFTER_MS. A head answer is a few
 * bytes, so a node this late with one is likely hanging; until the probe answers or is given up, while some node
 * in rotation is not suspected, selection sends calls there and calls already waiting on it are hedged at once
 * (route-call.ts) instead of after half their deadline.
 * A failing node stays out until a successful probe (reportProbe with a head): calls that complete meanwhile
 * are counted but do not restore it, since only probes reach it once it is out. Restoring forgets the
 * outcomes counted so far, so the spell that took it out does not take it out again at the next failure.
 *
 * Each figure above is the default of the chain's breaker (config chains.<slug>.failover.breaker, BreakerPolicy):
 * with `open_s` a node taken out stays out that long whatever its probes say, then comes back at a good probe
 * half-open, and is out again at its first failure until `half_open_probes` calls have been answered.
 *
 * Lagging (out of rotation, reason 'lagging') is not this tracker's verdict alone: it needs the chain's best
 * head, which the chain passes in (see selection.ts). A node with no head yet cannot be judged and is in
 * rotation: a fresh node must serve before anything is known about it.
 *
 * A node whose head goes back more than DEEPEST_REORG blocks is taken to be on a new chain (a devnet reset, a
 * resync from scratch), not in a reorg: newChainFrom says so until its head passes the old one again. The
 * latest report still wins, so such a node lags behind nodes still on the old chain and leaves rotation by the
 * lag rule; once no node in rotation is ahead of it, the chain follows it (selection.ts, fanout/head-feed.ts).
 *
 * Latency (p50 and EWMA) counts answered calls only: a refused connection fails in a millisecond and a
 * timeout takes the whole deadline, and neither says how fast the node answers.
 */
import { performance } from 'node:perf_hooks';
import { BUILT_IN_BREAKER, type BreakerPolicy } from './breaker-policy.js';

export { BUILT_IN_BREAKER, type BreakerPolicy, ERROR_RATE_LIMIT, FAILURE_STREAK, MIN_CALLS_JUDGED, WINDOW_MS } from './breaker-policy.js';
/** A head probe unanswered this long makes its node suspected, in ms: a local node answers one in about a
 *  millisecond, a remote one in a round trip, and the prober gives up at 2.5 s (chain/node-probes.ts). */
export const SUSPECT_AFTER_MS = 1_000;
const BUCKET_MS = 1000;
/**
 * Blocks a node's head may go back and still be a reorg; deeper, the node is taken to be on a new chain. Real
 * reorgs are a few blocks deep; the newHeads feed remembers as many heads as this (fanout/head-feed.ts).
 */
export const DEEPEST_REORG = 128;
/** Weight of the newest answered call in the latency EWMA. */
const EWMA_WEIGHT = 0.2;
/** Latency histogram bins per doubling: each bin spans about 9%, so p50 is reported within about ±5%. */
const BINS_PER_OCTAVE = 8;
/** 128 bins reach 2^16 ms (65 s); slower answers land in the last bin. */
const BINS = 128;

/** Why an upstream is out of rotation: 'cordoned' when the operator took it out (chain/cordons.ts), which outranks
 *  the rest; 'wrong_chain' when it serves another chain than its chain's (chain/chain-identity.ts), which outranks
 *  the other two. */
export type OutOfRotationReason = 'failing' | 'lagging' | 'wrong_chain' | 'cordoned';

/** A snapshot of one upstream, for selection and for /healthz and /readyz. */
export interface UpstreamStatus {
  inRotation: boolean;
  /** Set only when out of rotation. */
  reason?: OutOfRotationReason;
  /** Latest reported head; null until one is reported. */
  head: number | null;
  /** Blocks behind the chain's best head (0 when at or ahead of it); null when either head is unknown. */
  lag: number | null;
  /** Failed share of the outcomes in the window (since the last restore); 0 with none. */
  errorRate: number;
  /** Outcomes in the window (since the last restore). */
  calls: number;
  /** Median latency of answered calls in the window, in ms; null with none. */
  p50Ms: number | null;
  /** Exponentially weighted latency of answered calls, in ms; null until one is answered. */
  ewmaMs: number | null;
  inflight: number;
}

export interface UpstreamHealth {
  /** The upstream's label: its configured name, or scheme://host:port; never a URL or credentials. */
  readonly label: string;
  /** Calls in flight to this upstream: the caller increments it before a call and decrements it when it settles. */
  inflight: number;
  /** Answers still streaming from this node after their call settled at the head (chain/attempts.ts streamBegan). */
  streaming: number;
  /** Clock time the head probe in flight to this node started, null with none: the prober sets it when a probe
   *  starts and clears it when the probe settles or is given up. */
  probeSince: number | null;
  /** Outcome of a forwarded call: 'ok' for any JSON-RPC answer (an error object included), 'failed' for a
   *  connection error, timeout, 5xx or unparseable answer. A non-finite or negative latency counts the outcome only. */
  record(outcome: 'ok' | 'failed', latencyMs: number): void;
  /** The node's head, from its newHeads feed or a poll. The latest report wins, so a reorg or a resync shows. */
  reportHead(number: number): void;
  /** A probe's result: the head it read, or null when it failed; `hung` when the prober gave up waiting for it,
   *  which takes the node out at once. A successful probe restores a failing node. */
  reportProbe(head: number | null, latencyMs: number, hung?: boolean): void;
  /** Takes the node out of rotation as failing, until its next good probe, as a hung probe does: the quorum's
   *  verdict on a node that keeps disagreeing with the answer the others agree on (pipeline/quorum-call.ts). */
  eject(): void;
  /** Out of rotation for failures (lag aside). */
  readonly failing: boolean;
  /** Clock time the node last started failing; null while it is not failing. A node coming back needs a chain
   *  identity answered since then (chain/chain-identity.ts). */
  readonly failingSince: number | null;
  /** Out of rotation for serving another chain: its chain id (or a beacon node's genesis) is not its chain's. */
  readonly wrongChain: boolean;
  /** The identity check's verdict (chain/chain-identity.ts): true when the node serves another chain, false when
   *  it serves its own or cannot tell; the node leaves or rejoins rotation at once. */
  reportWrongChain(wrong: boolean): void;
  /** Taken out of rotation by the operator (`chaingate upstream cordon`, chain/cordons.ts) until uncordoned; its
   *  probes and head go on being heard. */
  readonly cordoned: boolean;
  /** Cordons the node (true) or lets it back (false); the node leaves or rejoins rotation at once. */
  setCordoned(cordoned: boolean): void;
  /** Not cordoned, not failing, not serving another chain: in rotation unless it lags. */
  readonly usable: boolean;
  /** A head probe has been unanswered for SUSPECT_AFTER_MS or more (see the top of this file); says nothing of
   *  rotation. */
  readonly suspected: boolean;
  /** Latest reported head, or null. */
  readonly head: number | null;
  /** The head the node had when its head last went back more than DEEPEST_REORG blocks (a new chain: a reset,
   *  a resync), until a report reaches that head again; null when it never did. */
  readonly newChainFrom: number | null;
  /** Clock time of the latest head report, or null. */
  readonly headAt: number | null;
  /** Latency EWMA of answered calls in ms, or null. */
  readonly ewmaMs: number | null;
  /** Failed share of the outcomes in the window since the last restore; 0 with none. */
  errorRate(): number;
  /** The snapshot, with lag judged against the chain's best head. */
  status(): UpstreamStatus;
}

export interface UpstreamHealthOptions {
  /** The breaker; default BUILT_IN_BREAKER. */
  breaker?: BreakerPolicy;
  /** Monotonic ms; default performance.now. */
  now?: () => number;
  /** The chain's best head among its upstreams in rotation; default: none known (lag never judged). */
  bestHead?: () => number | null;
  /** Blocks a node may be behind the best head and stay in rotation; default 5. */
  maxLagBlocks?: number;
  /** Called after every head report with the head before it (null for the first): the chain watches its
   *  best head and logs a node's head going back (selection.ts). */
  onHead?(previous: number | null, head: number): void;
  /** Called when the node starts or stops failing, so the chain can tell rotation changes (selection.ts). */
  onFailing?(failing: boolean): void;
  /** Called when the node is found on another chain or back on its own (reportWrongChain). */
  onWrongChain?(wrong: boolean): void;
  /** Called when the node is cordoned or uncordoned (setCordoned). */
  onCordoned?(cordoned: boolean): void;
}

/** Whether a node at `head` is more than maxLagBlocks behind `best`; unknown heads are not lagging. */
export function isLagging(head: number | null, best: number | null, maxLagBlocks: number): boolean {
  return head !== null && best !== null && best - head > maxLagBlocks;
}

export function checkMaxLagBlocks(value: number): void {
  if (!Number.isSafeInteger(value) || value < 0) throw new RangeError(`maxLagBlocks must be a non-negative integer, got ${value}`);
}

function latencyBin(ms: number): number {
  return Math.min(BINS - 1, Math.floor(Math.log2(1 + ms) * BINS_PER_OCTAVE));
}

/** The geometric middle of a bin's span, in ms. */
function binMiddle(bin: number): number {
  return 2 ** ((bin + 0.5) / BINS_PER_OCTAVE) - 1;
}

export function createUpstreamHealth(label: string, opts: UpstreamHealthOptions = {}): UpstreamHealth {
  return new NodeHealth(label, opts);
}

/**
 * One node's tracker, its state in fields: every forwarded call reads it (selection) and records into it, so
 * the state lives in one object of a fixed shape rather than a closure's variables behind getters.
 */
class NodeHealth implements UpstreamHealth {
  readonly label: string;
  inflight = 0;
  streaming = 0;
  probeSince: number | null = null;
  failing = false;
  failingSince: number | null = null;
  wrongChain = false;
  cordoned = false;
  head: number | null = null;
  headAt: number | null = null;
  newChainFrom: number | null = null;
  ewmaMs: number | null = null;
  private streak = 0;
  private readonly breaker: BreakerPolicy;
  /** Seconds in the window: one bucket each, in a ring indexed by the second it holds. */
  private readonly buckets: number;
  private readonly second: Float64Array;
  private readonly okCount: Uint32Array;
  private readonly failedCount: Uint32Array;
  private readonly histogram: Uint32Array;
  /** Half-open (breaker.openMs set): answered calls still needed to close; 0 when closed or open. */
  private halfOpenLeft = 0;
  private readonly now: () => number;
  private readonly bestHead: () => number | null;
  private readonly maxLagBlocks: number;
  private readonly opts: UpstreamHealthOptions;

  constructor(label: string, opts: UpstreamHealthOptions) {
    this.label = label;
    this.now = opts.now ?? (() => performance.now());
    this.bestHead = opts.bestHead ?? (() => null);
    this.maxLagBlocks = opts.maxLagBlocks ?? 5;
    this.opts = opts;
    checkMaxLagBlocks(this.maxLagBlocks);
    this.breaker = opts.breaker ?? BUILT_IN_BREAKER;
    const buckets = Math.max(1, Math.round(this.breaker.windowMs / BUCKET_MS));
    this.buckets = buckets;
    this.second = new Float64Array(buckets).fill(-Infinity);
    this.okCount = new Uint32Array(buckets);
    this.failedCount = new Uint32Array(buckets);
    this.histogram = new Uint32Array(buckets * BINS);
  }

  /** The bucket for `now`, emptied first when it still holds an older second. */
  private bucketAt(now: number): number {
    const sec = Math.floor(now / BUCKET_MS);
    const n = this.buckets;
    const i = ((sec % n) + n) % n;
    if (this.second[i] !== sec) {
      this.second[i] = sec;
      this.okCount[i] = 0;
      this.failedCount[i] = 0;
      this.histogram.fill(0, i * BINS, (i + 1) * BINS);
    }
    return i;
  }

  private isLive(i: number, nowSecond: number): boolean {
    return this.second[i]! > nowSecond - this.buckets && this.second[i]! <= nowSecond;
  }

  private counts(): { ok: number; failed: number } {
    const nowSecond = Math.floor(this.now() / BUCKET_MS);
    let ok = 0;
    let failed = 0;
    for (let i = 0; i < this.buckets; i++) {
      if (!this.isLive(i, nowSecond)) continue;
      ok += this.okCount[i]!;
      failed += this.failedCount[i]!;
    }
    return { ok, failed };
  }

  errorRate(): number {
    const { ok, failed } = this.counts();
    return ok + failed === 0 ? 0 : failed / (ok + failed);
  }

  private p50Ms(): number | null {
    const nowSecond = Math.floor(this.now() / BUCKET_MS);
    const merged = new Uint32Array(BINS);
    let total = 0;
    for (let i = 0; i < this.buckets; i++) {
      if (!this.isLive(i, nowSecond)) continue;
      for (let b = 0; b < BINS; b++) merged[b]! += this.histogram[i * BINS + b]!;
      total += this.okCount[i]!;
    }
    if (total === 0) return null;
    const rank = Math.ceil(total / 2);
    let seen = 0;
    for (let b = 0; b < BINS; b++) {
      seen += merged[b]!;
      if (seen >= rank) return binMiddle(b);
    }
    return binMiddle(BINS - 1);
  }

  record(outcome: 'ok' | 'failed', latencyMs: number): void {
    const i = this.bucketAt(this.now());
    if (outcome === 'ok') {
      this.okCount[i]!++;
      this.streak = 0;
      if (this.halfOpenLeft > 0) this.halfOpenLeft--;
      if (Number.isFinite(latencyMs) && latencyMs >= 0) {
        this.histogram[i * BINS + latencyBin(latencyMs)]!++;
        const ewmaMs = this.ewmaMs;
        this.ewmaMs = ewmaMs === null ? latencyMs : ewmaMs + (latencyMs - ewmaMs) * EWMA_WEIGHT;
      }
      return;
    }
    this.failedCount[i]!++;
    this.streak++;
    if (this.failing) return;
    const b = this.breaker;
    if (this.streak >= b.failureStreak || this.halfOpenLeft > 0) {
      this.setFailing(true);
      return;
    }
    const { ok, failed } = this.counts();
    if (ok + failed >= b.minCalls && failed >= b.failureRate * (ok + failed)) this.setFailing(true);
  }

  reportHead(number: number): void {
    if (!Number.isSafeInteger(number) || number < 0) throw new RangeError(`head must be a non-negative integer, got ${number}`);
    const previous = this.head;
    if (previous !== null && previous - number > DEEPEST_REORG) this.newChainFrom = Math.max(this.newChainFrom ?? 0, previous);
    else if (this.newChainFrom !== null && number >= this.newChainFrom) this.newChainFrom = null;
    this.head = number;
    this.headAt = this.now();
    this.opts.onHead?.(previous, number);
  }

  private setFailing(value: boolean): void {
    this.failing = value;
    this.halfOpenLeft = 0;
    this.failingSince = value ? this.now() : null;
    this.opts.onFailing?.(value);
  }

  private restore(): void {
    this.setFailing(false);
    this.streak = 0;
    this.okCount.fill(0);
    this.failedCount.fill(0);
  }

  reportProbe(probedHead: number | null, latencyMs: number, hung = false): void {
    if (probedHead === null) {
      this.record('failed', latencyMs);
      if (hung && !this.failing) this.setFailing(true);
      return;
    }
    // Restored before the head is reported, so whoever watches the report sees the node back; under an open_s
    // breaker only once open that long, and half-open: its next calls decide.
    const closing = this.failing && this.mayClose();
    if (closing) this.restore();
    this.reportHead(probedHead);
    this.record('ok', latencyMs);
    if (closing && this.breaker.openMs !== null) this.halfOpenLeft = this.breaker.halfOpenProbes;
  }

  /** Whether a failing node may come back at a good probe: at once, or once open for breaker.openMs. */
  private mayClose(): boolean {
    const openMs = this.breaker.openMs;
    return openMs === null || this.now() - (this.failingSince ?? -Infinity) >= openMs;
  }

  eject(): void {
    if (!this.failing) this.setFailing(true);
  }

  reportWrongChain(wrong: boolean): void {
    if (wrong === this.wrongChain) return;
    this.wrongChain = wrong;
    this.opts.onWrongChain?.(wrong);
  }

  setCordoned(cordoned: boolean): void {
    if (cordoned === this.cordoned) return;
    this.cordoned = cordoned;
    this.opts.onCordoned?.(cordoned);
  }

  get usable(): boolean {
    return !this.cordoned && !this.failing && !this.wrongChain;
  }

  get suspected(): boolean {
    const since = this.probeSince;
    return since !== null && this.now() - since >= SUSPECT_AFTER_MS;
  }

  status(): UpstreamStatus {
    const head = this.head;
    const best = this.bestHead();
    const lagging = isLagging(head, best, this.maxLagBlocks);
    const { ok, failed } = this.counts();
    const status: UpstreamStatus = {
      inRotation: this.usable && !lagging,
      head,
      lag: head === null || best === null ? null : Math.max(0, best - head),
      errorRate: ok + failed === 0 ? 0 : failed / (ok + failed),
      calls: ok + failed,
      p50Ms: this.p50Ms(),
      ewmaMs: this.ewmaMs,
      inflight: this.inflight,
    };
    if (this.cordoned) status.reason = 'cordoned';
    else if (this.wrongChain) status.reason = 'wrong_chain';
    else if (this.failing) status.reason = 'failing';
    else if (lagging) status.reason = 'lagging';
    return status;
  }
}
