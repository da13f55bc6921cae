/**
 * What `safe` and `finalized` mean on a chain (issue 32 §3): the execution blocks of the Beacon chain's
 * justified and finalized checkpoints when the chain names its beacon chain (chains.<slug>.beacon), else the
 * nodes' own `safe` and `finalized` blocks (finality-reads.ts reads either). The cache's "final" follows the
 * finalized block (finalThrough).
 *
 * When it is read: checkpoints move once an epoch (6.4 minutes on mainnet), so a reading every FINALITY_POLL_MS
 * is never far behind. Polled rather than taken from the beacon chain's `finalized_checkpoint` events: that event
 * says nothing of the justified checkpoint (`safe`), a stream held by the gateway would count as a client of the
 * beacon chain's hub (which keeps a retired runtime alive while it has one), and the chains without a beacon
 * need polls anyway.
 *
 * The thread that probes the chain (alone, or the main thread of workers) reads, at most once per
 * FINALITY_POLL_MS and one reading at a time: on a timer from startHealthChecks, so status, /healthz and the
 * gauges stay current on an idle chain, at one small call per chain every few seconds (the prober asks each node
 * for its head about as often), and when asked (finalized() or safe()) with its last reading due, as head.ts does
 * (a runtime whose health checks never started). A worker thread's copy reads nothing: the main thread relays
 * each change to every worker (chain/relay.ts, hear()) as it relays probes, so every worker holds the same blocks
 * within a message of each other, a new worker gets them when it attaches, and no worker adds calls to the nodes.
 *
 * Never going back: a reading lower than what is held (a node behind, a beacon node not yet at the checkpoint) is
 * ignored, and one that does not tell a block (unknown tag, zero root, no node answered) keeps the block held.
 * Only the chain's final blocks being undone (its cacheScope changes: runtime.ts, a reset or a reorg deeper than
 * finality_depth) drops what is held, and a reading started before that is thrown away.
 */
import { performance } from 'node:perf_hooks';
import type { GaugeChild } from '../metrics/families.js';

/** A block the gateway takes as safe or finalized. */
export interface FinalBlock {
  readonly number: number;
  /** 0x hash, lowercase. */
  readonly hash: string;
}

export interface ChainFinality {
  /** The finalized block, or null while none is known. */
  finalized(): FinalBlock | null;
  /** The safe block (the justified checkpoint's), or null while none is known. */
  safe(): FinalBlock | null;
  /** Stops its polls and streams (once, when the chain closes). */
  close(): void;
}

/** The finality the runtime makes: a ChainFinality whose timer the probing thread starts. */
export interface PolledFinality extends ChainFinality {
  /** Reads now and every FINALITY_POLL_MS until close() (the thread that probes the chain; idempotent). */
  start(): void;
  /** Takes blocks read elsewhere (a worker's copy hears the main thread's, chain/relay.ts), by the same rules. */
  hear(held: FinalityReading): void;
}

/** One reading: each block, or null when this reading could not tell it. */
export interface FinalityReading {
  finalized: FinalBlock | null;
  safe: FinalBlock | null;
}

/** Reads the chain's finality once; never rejects (what could not be read is null). */
export type ReadFinality = (signal: AbortSignal) => Promise<FinalityReading>;

/** How often finality is read, in ms: a few seconds, against checkpoints that move once an epoch. */
export const FINALITY_POLL_MS = 4_000;

/** The timer the polling thread uses; tests pass a fake one. Handles are opaque. */
export interface FinalityTimers {
  setInterval(fn: () => void, ms: number): unknown;
  clearInterval(handle: unknown): void;
}

export interface FinalityOptions {
  /** How the chain's finality is read; absent in a worker thread's copy, which only hears the main thread's. */
  read?: ReadFinality;
  /** Told the blocks held after each reading that changed them (the main thread relays them to its workers). */
  onChange?: (held: FinalityReading) => void;
  /** The chain's cacheScope now: when it changes, the chain's final blocks were undone and what is held goes. */
  scope: () => string;
  /** Clock in ms (default performance.now). */
  now?: () => number;
  /** Default FINALITY_POLL_MS. */
  pollMs?: number;
  /** Default the global ones, unref'd. */
  timers?: FinalityTimers;
  /** The chain's gauge chaingate_chain_finalized_block or chaingate_chain_safe_block, set at each reading once a
   *  block is known (a chain that never knows one has no series). */
  gauge?: (tag: 'finalized' | 'safe') => Pick<GaugeChild, 'set'>;
}

const GLOBAL_TIMERS: FinalityTimers = {
  setInterval(fn, ms) {
    const h = setInterval(fn, ms);
    h.unref();
    return h;
  },
  clearInterval: (h) => clearInterval(h as ReturnType<typeof setInterval>),
};

export function createChainFinality(opts: FinalityOptions): PolledFinality {
  return new FinalityTracker(opts);
}

/** The highest of two blocks, the held one on a tie: a block at the same height never replaces the held one. */
function higher(held: FinalBlock | null, read: FinalBlock | null): FinalBlock | null {
  if (read === null) return held;
  return held === null || read.number > held.number ? read : held;
}

/** The tracker's state in fields: finalized() runs on the cache's path, so it is a clock read and two compares. */
class FinalityTracker implements PolledFinality {
  private held: FinalityReading = { finalized: null, safe: null };
  /** The cacheScope `held` belongs to. */
  private heldScope: string;
  /** When the last reading started (-Infinity before the first). */
  private startedAt = -Infinity;
  private running = false;
  private timer: unknown = null;
  private closed = false;
  private readonly stop = new AbortController();
  private readonly now: () => number;
  private readonly pollMs: number;
  private readonly timers: FinalityTimers;

  constructor(private readonly opts: FinalityOptions) {
    this.heldScope = opts.scope();
    this.now = opts.now ?? (() => performance.now());
    this.pollMs = opts.pollMs ?? FINALITY_POLL_MS;
    this.timers = opts.timers ?? GLOBAL_TIMERS;
  }

  finalized(): FinalBlock | null {
    this.look();
    return this.held.finalized;
  }

  safe(): FinalBlock | null {
    this.look();
    return this.safeNow();
  }

  start(): void {
    if (this.timer !== null || this.closed) return;
    this.timer = this.timers.setInterval(() => this.readIfDue(), this.pollMs);
    this.readIfDue();
  }

  hear(held: FinalityReading): void {
    this.adopt(held, this.opts.scope());
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    if (this.timer !== null) this.timers.clearInterval(this.timer);
    this.timer = null;
    this.stop.abort();
  }

  /** Drops what is held when the chain's final blocks were undone, and starts a reading when one is due. */
  private look(): void {
    if (this.opts.scope() !== this.heldScope) this.undo();
    this.readIfDue();
  }

  private undo(): void {
    this.heldScope = this.opts.scope();
    const dropped = this.held.finalized !== null || this.held.safe !== null;
    this.held = { finalized: null, safe: null };
    // Told too, so a worker started from now on is not given the blocks of the chain as it was.
    if (dropped) this.opts.onChange?.(this.held);
    // Read again at once: the blocks of the chain as it is now.
    this.startedAt = -Infinity;
  }

  private readIfDue(): void {
    const read = this.opts.read;
    if (read === undefined || this.running || this.closed || this.now() - this.startedAt < this.pollMs) return;
    this.running = true;
    this.startedAt = this.now();
    const scope = this.opts.scope();
    void read(this.stop.signal)
      .then(
        (reading) => this.adopt(reading, scope),
        () => {
          // A reader never rejects; one that does taught nothing.
        },
      )
      .finally(() => {
        this.running = false;
      });
  }

  /** Takes a reading made under `scope`: each block only when higher than the one held. */
  private adopt(reading: FinalityReading, scope: string): void {
    if (this.closed) return;
    if (this.opts.scope() !== this.heldScope) this.undo();
    // Read about the chain before its final blocks were undone: nothing of it is kept.
    if (scope !== this.heldScope) return;
    const before = this.held;
    const held = { finalized: higher(before.finalized, reading.finalized), safe: higher(before.safe, reading.safe) };
    if (held.finalized === before.finalized && held.safe === before.safe) return;
    this.held = held;
    this.opts.onChange?.(held);
    const gauge = this.opts.gauge;
    if (gauge === undefined) return;
    if (held.finalized !== null) gauge('finalized').set(held.finalized.number);
    const safe = this.safeNow();
    if (safe !== null) gauge('safe').set(safe.number);
  }

  /** Safe is never below finalized, whichever reading told which. */
  private safeNow(): FinalBlock | null {
    const { safe, finalized } = this.held;
    return safe !== null && (finalized === null || safe.number >= finalized.number) ? safe : finalized;
  }
}

/**
 * The highest block the response cache takes as final now: the finalized block when finality knows one, else
 * `head` − finality_depth; null while neither is known. A number compare on the cache's path.
 */
export function finalThrough(finality: ChainFinality, head: number | null, finalityDepth: number): number | null {
  const finalized = finality.finalized();
  if (finalized !== null) return finalized.number;
  return head === null ? null : head - finalityDepth;
}
