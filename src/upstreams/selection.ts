/**
 * The choice of upstream for each call among a chain's nodes.
 *
 * In rotation: not cordoned (chain/cordons.ts), not failing (health.ts), not on another chain (chain-identity.ts),
 * not more than maxLagBlocks behind the best head (the highest of the nodes the first three leave, never lagging).
 *
 * Among the nodes in rotation a call goes to one drawn at random with weight 1 / cost, where
 * cost = latency EWMA × (calls in flight + 1) / (1 − error rate). The fastest node gets most calls but not all:
 * against one twice as slow it gets two thirds, against one ten times as slow ten elevenths; and a node that
 * gathers calls in flight, or errors, is weighed down until it drains. Every node in rotation keeps getting
 * some calls, so its latency stays measured. Power of two choices would send nothing at all to the slower
 * of two idle nodes.
 *
 * A call may be restricted to some nodes (NodeChoice: those that serve its method), and may prefer some of
 * those (archive nodes, for a state read about an old block) whenever one of them is in rotation; the draw is
 * then made among those alone, the same way.
 *
 * A call about a block (chain/node-routes.ts: its block reference, resolved against the served head and the
 * chain's finality) names the lowest head its node must have reached (minHead): nodes in rotation whose known
 * head is below it, or not known yet, are left out, so a read at `latest` never lands on a node behind the head
 * the chain serves and a read at block N never on one that has not seen N. When no node allowed reaches it, the
 * call goes to those with the highest known head (any, when none is known): a node still behind answers as it can
 * (a "not found" the retry of route-call.ts may take elsewhere), which is better than no answer; a caller that
 * would rather have none (a retry only worth making on a node further ahead) asks for 'none'.
 *
 * Tiers (node-tiers.ts): the draw is among the lowest tier the rules and budgets leave; a retry excludes the first
 * attempt's node, so it goes up a tier when that was its tier's last. Budgets (node-budget.ts: rps, max_in_flight,
 * a 429's cooldown): a node without room is left out; none left: pick() null, `shortOfBudget` (503 upstream_budget).
 *
 * A suspected node (a head probe unanswered for a second, see health.ts) stays in rotation but gets no call
 * while another node in rotation is not: it is likely hanging, which its weight cannot say (it answered nothing).
 *
 * The chain watches its best head on every head report: a node whose own head goes back more than DEEPEST_REORG
 * is logged (it is on a new chain, see health.ts), and the best head going back more than finalityDepth below
 * the highest it had means blocks once final are gone (a reset, a reorg that deep, or the only nodes ahead
 * failing), which the chain is told of (chain/runtime.ts stops serving its cached answers).
 */
import { performance } from 'node:perf_hooks';
import { type ChainMetrics, noMetrics, type UpstreamMetrics } from '../metrics/registry.js';
import { ChainBudgets } from './node-budget.js';
import type { ChainHealthOptions } from './selection-options.js';
import { keepLowestTier, tiersOf } from './node-tiers.js';
import { checkMaxLagBlocks, createUpstreamHealth, DEEPEST_REORG, isLagging, type UpstreamHealth } from './health.js';

export type { ChainHealthOptions } from './selection-options.js';

/** Latencies below this count as this, in ms: sub-millisecond differences between local nodes are noise. */
const LATENCY_FLOOR_MS = 1;
/** The error-rate factor is capped so a node with a bad streak of few calls is weighed down, not zeroed. */
const MIN_SUCCESS_SHARE = 0.1;

/**
 * Which nodes of a chain may take a call, by index: those `serves` marks (every node when null), and among
 * them the ones `prefer` marks whenever one of those is in rotation (a subset of `serves`). Made once per
 * chain and method (chain/node-routes.ts), so a call carries a reference and nothing is made per call.
 */
export interface NodeChoice {
  readonly serves: readonly boolean[] | null;
  readonly prefer: readonly boolean[] | null;
}

/** What pick() does when no node allowed has reached the call's minHead: take the highest ones, or none. */
export type ShortOfHead = 'highest' | 'none';

export interface ChainHealth {
  readonly upstreams: readonly UpstreamHealth[];
  readonly maxLagBlocks: number;
  /** The clock the trackers use (headAt and the window are in its time). */
  readonly now: () => number;
  /** Best head among nodes that are not failing (the answer eth_blockNumber may give); null when none is known. */
  bestHead(): number | null;
  /**
   * Index of the upstream for the next call, never one in `exclude` nor one `choice` leaves out, a suspected one
   * only when every other is; null when no such node is in rotation (the caller answers 502 at once). With
   * `minHead`, only a node whose known head is at least that; when none is, `short` says what then: 'highest'
   * (default) the nodes with the highest known head (any, when none is known), 'none' null.
   */
  pick(exclude?: ReadonlySet<number>, choice?: NodeChoice | null, minHead?: number | null, short?: ShortOfHead): number | null;
  /** The last pick() that found no node left one out for its budget alone: 503 upstream_budget, not upstream_error. */
  readonly shortOfBudget: boolean;
  /** A call goes to node `index` at `at` (the health clock's time): counted against its `rps`. */
  charge(index: number, at: number): void;
  /**
   * A call's request is about to be written to node `index` a second time (its upstream client moves it off a
   * stalled socket, or re-sends it after its socket was lost: UpstreamOptions.sendAgain): true, counted against the
   * node's `rps` now, when its budget has room; else false. `stillOnItsSocket`: the first copy is in flight still,
   * one call more for `max_in_flight`.
   */
  chargeAgain(index: number, stillOnItsSocket: boolean): boolean;
  /** Node `index` answered 429, with `retryAfterMs` from its Retry-After (null without one): it gets no call until
   *  its cooldown ends (node-budget.ts), logged, counted and told to `shareCooldowns`' listener once per cooldown.
   *  `heard`: another worker thread's cooldown of the node (`retryAfterMs` then what is left of it), kept only. */
  coolDown(index: number, retryAfterMs: number | null, heard?: boolean): void;
  /** Each cooldown this thread starts is told to `tell` (chain/relay.ts: to the other worker threads). */
  shareCooldowns(tell: ((index: number, ms: number) => void) | null): void;
  /** Indices in rotation, ascending (e.g. for broadcasting eth_sendRawTransaction). */
  healthyIndices(): number[];
  /** Those of `indices` with room in their budget now, for a call sent to several at once (a broadcast); none left
   *  sets `shortOfBudget` as pick() does. */
  withRoom(indices: number[]): number[];
  /** Node `index` reports `head` (a feed heard it): true when it went onto a new chain (its head went back more than
   *  DEEPEST_REORG, health.ts) and no node in rotation is more than maxLagBlocks ahead, so the chain follows it. */
  followsNewChain(index: number, head: number): boolean;
  /** Each upstream's metrics (indices match `upstreams`): attempts are measured into them (chain/attempts.ts). */
  readonly meters: readonly UpstreamMetrics[];
}

/** One health tracker per label, in the order given (indices match the chain's upstreams). */
export function createChainHealth(labels: readonly string[], opts: ChainHealthOptions): ChainHealth {
  return new ChainSelection(labels, opts);
}

/**
 * A chain's trackers and the state of its node choice in fields: pick() runs for every forwarded call, so its
 * scratch lists are kept here and refilled in place, and nothing is made per call.
 */
class ChainSelection implements ChainHealth {
  readonly upstreams: readonly UpstreamHealth[];
  readonly maxLagBlocks: number;
  readonly now: () => number;
  readonly meters: readonly UpstreamMetrics[];
  private readonly random: () => number;
  private readonly labels: readonly string[];
  private readonly names: readonly string[];
  private readonly chainMetrics: ChainMetrics;
  private readonly opts: ChainHealthOptions;
  /** Each upstream's rotation as last told (watchRotation). */
  private readonly rotation: boolean[];
  /** The highest best head since the chain's final blocks were last undone; null before the first. */
  private top: number | null = null;
  /** pick()'s scratch: the nodes it may choose from, their weights, the fastest EWMA among them, how many are suspected.
   *  Filled up to `candidateCount`, never shortened: `length = 0` would free the store, and each pick() allocate. */
  private readonly candidates: number[] = [];
  private candidateCount = 0;
  private readonly weights: number[] = [];
  private fastestKnown = Infinity;
  private suspects = 0;
  /** The highest known head among the nodes the last gather() left out for being below its minHead; null: none. */
  private highestShort: number | null = null;
  /** Each node's tier; null when every node is at tier 0 (the tier step is skipped). */
  private readonly tiers: readonly number[] | null;
  /** Each node's room to send (rps, max_in_flight, cooldown). */
  private readonly budgets: ChainBudgets;
  shortOfBudget = false;

  constructor(labels: readonly string[], opts: ChainHealthOptions) {
    checkMaxLagBlocks(opts.maxLagBlocks);
    if (labels.length === 0) throw new RangeError('a chain needs at least one upstream');
    this.maxLagBlocks = opts.maxLagBlocks;
    const now = opts.now ?? (() => performance.now());
    this.now = now;
    this.random = opts.random ?? Math.random;
    this.labels = labels;
    this.opts = opts;
    this.names = opts.names ?? labels;
    this.chainMetrics = opts.metrics ?? noMetrics().chain('');
    const chainMetrics = this.chainMetrics;
    this.meters = this.names.map((name) => chainMetrics.upstream(name));
    this.rotation = labels.map(() => true);
    this.tiers = tiersOf(opts.tiers);
    this.budgets = new ChainBudgets(labels.length, opts.budgets);
    for (const m of this.meters) m.inRotation.set(1);
    const bestHead = (): number | null => this.bestHead();
    this.upstreams = labels.map((label, i) =>
      createUpstreamHealth(label, {
        now,
        bestHead,
        maxLagBlocks: this.maxLagBlocks,
        ...(opts.breaker !== undefined ? { breaker: opts.breaker } : {}),
        onHead: (previous, head) => this.noteHead(i, previous, head),
        // A node restored is looked at when the head its probe brought is reported, just after.
        onFailing: (failing) => failing && this.watchRotation(),
        onWrongChain: () => this.watchRotation(),
        onCordoned: () => this.watchRotation(),
      }),
    );
  }

  bestHead(): number | null {
    let best: number | null = null;
    for (const u of this.upstreams) {
      const head = u.head;
      if (u.usable && head !== null && (best === null || head > best)) best = head;
    }
    return best;
  }

  /** Tells each change of an upstream's rotation since the last look, once; then onHeads (every head report
   *  and every change of failing or chain comes through here). */
  private watchRotation(): void {
    const best = this.bestHead();
    const upstreams = this.upstreams;
    for (let i = 0; i < upstreams.length; i++) {
      const u = upstreams[i]!;
      const now = this.inRotation(u, best);
      if (now === this.rotation[i]) continue;
      this.rotation[i] = now;
      this.meters[i]!.inRotation.set(now ? 1 : 0);
      this.opts.onRotation?.(this.names[i]!, now, now ? 'recovered' : (u.status().reason ?? 'lagging'));
    }
    this.opts.onHeads?.();
  }

  private noteHead(index: number, previous: number | null, head: number): void {
    this.meters[index]!.head.set(head);
    if (previous !== null && previous - head > DEEPEST_REORG) {
      this.opts.log?.('warn', `node head went back from ${previous} to ${head}, deeper than a reorg: treated as a new chain`, {
        upstream: this.labels[index]!,
        from: previous,
        to: head,
      });
    }
    this.watchRotation();
    const best = this.bestHead();
    if (best === null) return;
    this.chainMetrics.head.set(best);
    const top = this.top;
    if (top === null || best > top) {
      this.top = best;
    } else if (this.opts.finalityDepth !== undefined && top - best > this.opts.finalityDepth) {
      this.top = best;
      this.opts.onFinalUndone?.(top, best);
    }
  }

  private inRotation(u: UpstreamHealth, best: number | null): boolean {
    return u.usable && !isLagging(u.head, best, this.maxLagBlocks);
  }

  /** Drops the suspected candidates when some are not. */
  private dropSuspected(): void {
    const candidates = this.candidates;
    let kept = 0;
    for (let k = 0; k < this.candidateCount; k++) {
      const i = candidates[k]!;
      if (!this.upstreams[i]!.suspected) candidates[kept++] = i;
    }
    if (kept > 0) this.candidateCount = kept;
  }

  /** Fills `candidates` with the nodes in rotation not in `exclude` that `serves` and `only` mark (all when null)
   *  and whose known head is at least `minHead` (when given). */
  private gather(
    best: number | null,
    exclude: ReadonlySet<number> | undefined,
    serves: readonly boolean[] | null,
    only: readonly boolean[] | null,
    minHead: number | null,
  ): number {
    const candidates = this.candidates;
    const upstreams = this.upstreams;
    const budgets = this.budgets.active() ? this.budgets : null;
    let count = 0;
    this.fastestKnown = Infinity;
    this.suspects = 0;
    this.highestShort = null;
    for (let i = 0; i < upstreams.length; i++) {
      const u = upstreams[i]!;
      if (exclude?.has(i) || (serves !== null && !serves[i]) || (only !== null && !only[i]) || !this.inRotation(u, best)) continue;
      if (budgets !== null && !budgets.hasRoom(i, u.inflight)) continue;
      if (minHead !== null) {
        const head = u.head;
        if (head === null || head < minHead) {
          if (head !== null && (this.highestShort === null || head > this.highestShort)) this.highestShort = head;
          continue;
        }
      }
      candidates[count++] = i;
      if (u.suspected) this.suspects++;
      if (u.ewmaMs !== null && u.ewmaMs < this.fastestKnown) this.fastestKnown = u.ewmaMs;
    }
    this.candidateCount = count;
    return count;
  }

  /** gather() among the preferred nodes when one of them is in rotation, else among all that `serves` marks. */
  private gatherChoice(
    best: number | null,
    exclude: ReadonlySet<number> | undefined,
    serves: readonly boolean[] | null,
    prefer: readonly boolean[] | null,
    minHead: number | null,
  ): number {
    if (prefer !== null && this.gather(best, exclude, serves, prefer, minHead) > 0) return this.candidateCount;
    return this.gather(best, exclude, serves, null, minHead);
  }

  pick(
    exclude?: ReadonlySet<number>,
    choice?: NodeChoice | null,
    minHead: number | null = null,
    short: ShortOfHead = 'highest',
  ): number | null {
    const best = this.bestHead();
    const serves = choice?.serves ?? null;
    const prefer = choice?.prefer ?? null;
    if (this.budgets.active()) this.budgets.look(this.now());
    if (this.gatherChoice(best, exclude, serves, prefer, minHead) === 0) {
      if (minHead === null || short === 'none') return this.none();
      // None has reached it: the least behind, or any when no head is known.
      if (this.gatherChoice(best, exclude, serves, prefer, this.highestShort) === 0) return this.none();
    }
    if (this.suspects > 0) this.dropSuspected();
    // A node not measured yet then weighs as the fastest of any tier: it still gets its share, and is measured.
    if (this.tiers !== null) this.candidateCount = keepLowestTier(this.candidates, this.candidateCount, this.tiers);
    const candidates = this.candidates;
    const count = this.candidateCount;
    if (count === 1) return candidates[0]!;
    // A node not measured yet is taken to be as fast as the fastest, so it gets its share and is measured.
    const unknownMs = this.fastestKnown === Infinity ? LATENCY_FLOOR_MS : this.fastestKnown;
    const weights = this.weights;
    let total = 0;
    for (let k = 0; k < count; k++) {
      const u = this.upstreams[candidates[k]!]!;
      const latency = Math.max(LATENCY_FLOOR_MS, u.ewmaMs ?? unknownMs);
      const cost = (latency * (Math.max(0, u.inflight) + 1)) / Math.max(MIN_SUCCESS_SHARE, 1 - u.errorRate());
      const weight = 1 / cost;
      weights[k] = weight;
      total += weight;
    }
    let r = this.random() * total;
    for (let k = 0; k < count; k++) {
      r -= weights[k]!;
      if (r < 0) return candidates[k]!;
    }
    // Rounding can leave r at a hair above zero after the last weight.
    return candidates[count - 1]!;
  }

  /** pick() found no node: why is kept for the caller (shortOfBudget). */
  private none(): null {
    this.shortOfBudget = this.budgets.active() && this.budgets.short > 0;
    return null;
  }

  charge(index: number, at: number): void {
    this.budgets.charge(index, at);
  }

  chargeAgain(index: number, stillOnItsSocket: boolean): boolean {
    if (!this.budgets.active()) return true;
    // The call is in flight once already: only a first copy still on its socket makes one more at the node.
    const inflight = this.upstreams[index]!.inflight - (stillOnItsSocket ? 0 : 1);
    return this.budgets.takeIfRoom(index, this.now(), inflight);
  }

  coolDown(index: number, retryAfterMs: number | null, heard = false): void {
    const ms = this.budgets.coolDown(index, this.now(), retryAfterMs, heard);
    if (ms === 0) return;
    this.meters[index]!.cooledDown();
    this.opts.onCooldown?.(this.names[index]!, ms);
  }

  shareCooldowns(tell: ((index: number, ms: number) => void) | null): void {
    this.budgets.tell = tell;
  }

  healthyIndices(): number[] {
    const best = this.bestHead();
    const out: number[] = [];
    for (let i = 0; i < this.upstreams.length; i++) if (this.inRotation(this.upstreams[i]!, best)) out.push(i);
    return out;
  }

  withRoom(indices: number[]): number[] {
    const out = this.budgets.withRoom(indices, this.now, (i) => this.upstreams[i]!.inflight);
    if (out.length === 0) this.none();
    return out;
  }

  followsNewChain(index: number, head: number): boolean {
    const u = this.upstreams[index]!;
    u.reportHead(head);
    // Failing nodes are not asked: a node down since before the reset must not hold the chain on the old one.
    return u.newChainFrom !== null && !isLagging(head, this.bestHead(), this.maxLagBlocks);
  }
}
