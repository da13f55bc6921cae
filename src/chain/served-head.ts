/**
 * The head a chain serves (issue 32 §1, docs/consistency.md): the highest block that k nodes in rotation have
 * reached, never lower than a head it already served unless every node in rotation is below it.
 *
 * k is consistency.min_nodes, or by default a majority of the nodes in rotation (floor(n/2) + 1). A node in
 * rotation whose head is not known yet counts in n but has reached nothing, so at a start the head is served
 * only once k nodes have told theirs: the first node to answer does not set a head the others never reach. When
 * fewer nodes are in rotation than min_nodes, k is all of them: the head every node in rotation has reached (the
 * lowest of their heads), so the chain goes on serving when nodes leave rotation instead of standing still.
 *
 * Going back: a head already served stays served while some node in rotation has it, so a node failing or
 * lagging out of rotation never takes it back. Once every node in rotation (every one with a known head) is
 * below it, which is a reorg to a shorter chain, a reset, or the nodes ahead all gone from rotation, the
 * chain follows them down to the head k of them have reached, and says so (a warn per event, from and to).
 *
 * now() is read by every eth_blockNumber and every read routed at `latest`, so it is a field: update() works it
 * out again after each head report and each rotation change (ChainHealthOptions.onHeads), never per call.
 * Nothing here keeps time: the head moves only on reports, so a test drives it with a fake health and clock.
 */
import type { FeedsLog } from '../fanout/feeds.js';
import type { GaugeChild } from '../metrics/families.js';
import type { ChainHealth } from '../upstreams/selection.js';
import type { HeadCell } from './shared-heads.js';

export interface ServedHead {
  /** The head served now, or null while none is known (fewer than k nodes in rotation have told a head). */
  now(): number | null;
  /**
   * Calls `listener` with the new head after each change of now() (up, or down when every node went back),
   * synchronously, in the health report that moved it; returns the undo. The newHeads feed releases the heads
   * it holds from here (fanout/head-feed.ts).
   */
  watch(listener: (head: number) => void): () => void;
}

/** The runtime's side of the served head: update() runs on every head report and rotation change. */
export interface ServedHeadTracker extends ServedHead {
  /** Works the served head out again from the health's heads and rotation (ChainHealthOptions.onHeads). */
  update(): void;
}

export interface ServedHeadOptions {
  /** Nodes in rotation that must have reached a block (config chains.<slug>.consistency.min_nodes); default a
   *  majority of the nodes in rotation. */
  minNodes?: number | undefined;
  /** Where the head following its nodes down is logged (a warn per event); default nowhere (a worker's copy). */
  log?: FeedsLog;
  /** Set to each served head (chaingate_chain_served_head{chain}). */
  gauge?: Pick<GaugeChild, 'set'>;
  /**
   * The chain's served head in memory every thread reads (shared-heads.ts): now() is the higher of it and this
   * thread's, each head this thread serves raises it, and following the nodes down lowers it.
   */
  shared?: HeadCell;
  /** Forget the shared head at the start (the main thread's chain, made at the start or a reload). */
  fresh?: boolean;
}

/** What the served head reads of its chain's health. */
export type ServedHeadSource = Pick<ChainHealth, 'upstreams' | 'healthyIndices'>;

export function createServedHead(health: ServedHeadSource, opts: ServedHeadOptions = {}): ServedHeadTracker {
  return new AgreedHead(health, opts);
}

/** The nodes a head must reach among `n` in rotation. */
export function nodesToAgree(n: number, minNodes: number | undefined): number {
  return Math.min(minNodes ?? Math.floor(n / 2) + 1, n);
}

class AgreedHead implements ServedHeadTracker {
  private served: number | null = null;
  private readonly listeners = new Set<(head: number) => void>();

  constructor(
    private readonly health: ServedHeadSource,
    private readonly opts: ServedHeadOptions,
  ) {
    if (opts.fresh === true) opts.shared?.store(null);
  }

  now(): number | null {
    const local = this.served;
    const shared = this.opts.shared?.load() ?? null;
    return shared === null || (local !== null && local >= shared) ? local : shared;
  }

  watch(listener: (head: number) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  update(): void {
    const upstreams = this.health.upstreams;
    const rotation = this.health.healthyIndices();
    const n = rotation.length;
    // No node in rotation: calls fail at once, and the head stays what it was until one is back.
    if (n === 0) return;
    const heads: number[] = [];
    for (const i of rotation) {
      const head = upstreams[i]!.head;
      if (head !== null) heads.push(head);
    }
    if (heads.length === 0) return;
    heads.sort((a, b) => b - a);
    const k = nodesToAgree(n, this.opts.minNodes);
    const reached = heads.length >= k ? heads[k - 1]! : null;
    const served = this.now();
    if (reached !== null && (served === null || reached > served)) return this.set(reached, 'up');
    // Another thread served this head first: this thread's feeds and filters catch up with it.
    if (reached !== null && (this.served === null || reached > this.served)) this.set(reached, 'local');
    // Down only from a head this thread served itself: one another thread heard first (a forwarded eth_blockNumber
    // there) may not have reached this thread's reports yet, and is no sign that every node went back.
    const mine = this.served;
    if (mine === null || heads.length < n || heads[0]! >= mine) return;
    // Every node in rotation is below the head served (heads.length === n >= k, so `reached` is known).
    this.opts.log?.('warn', `served head went back from ${mine} to ${reached}: every node in rotation is below it`, {
      from: mine,
      to: reached!,
    });
    this.set(reached!, 'down');
  }

  /** `how`: a new highest head (raised for every thread), one going down (lowered for all), or this thread's only. */
  private set(head: number, how: 'up' | 'down' | 'local'): void {
    this.served = head;
    if (how === 'up') this.opts.shared?.raise(head);
    else if (how === 'down') this.opts.shared?.store(head);
    this.opts.gauge?.set(head);
    for (const listener of this.listeners) listener(head);
  }
}
