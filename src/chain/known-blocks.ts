/**
 * The recent blocks a chain knows for itself, which its answer checks compare nodes' answers with
 * (answer-checks.ts): each block's number, hash and logsBloom, from the headers the chain's newHeads feed
 * delivers (fanout/head-feed.ts: every number once and in order, heads replaced by a reorg sent again from the
 * fork). Nothing is fetched to learn a block: a chain without a ws upstream knows none, and a block is known
 * from the moment its head is delivered (a moment after its node has it).
 *
 * The feed is listened to from the first checked call on (listen()), not at start, so a chain whose checked
 * methods nobody calls holds no upstream subscription for it. At most DEEPEST_REORG blocks below the newest
 * are kept: deeper reorgs are not expected, and older blocks are not checked.
 */
import type { FeedHold, Feeds } from '../fanout/feeds.js';
import { bloomOf } from '../jsonrpc/logs-bloom.js';
import { DEEPEST_REORG } from '../upstreams/health.js';

/** A block the chain knows: its hash (lowercase) and logsBloom (null when its header had none). */
export interface KnownBlock {
  readonly number: number;
  readonly hash: string;
  readonly bloom: Uint8Array | null;
}

/** After the feed dropped the listener (an outage past websocket.max_upstream_outage_s), it is asked again no sooner, in ms. */
export const RELISTEN_MS = 5_000;

/** Blocks kept below the newest. */
const KEPT = DEEPEST_REORG;

const isHex = (v: unknown): v is string => typeof v === 'string' && /^0x[0-9a-fA-F]{1,64}$/.test(v);

export class KnownBlocks {
  private readonly byNumber = new Map<number, KnownBlock>();
  private newest = -1;
  private hold: FeedHold | null = null;
  private droppedAt = -Infinity;
  private closed = false;

  constructor(
    /** The chain's feeds; null (no ws upstream): no block is ever known. */
    private readonly feeds: Feeds | null,
    /** Monotonic ms, for RELISTEN_MS. */
    private readonly now: () => number,
  ) {}

  /** Listens to the chain's heads, unless it does already (a field read) or the feed dropped it less than RELISTEN_MS ago. */
  listen(): void {
    if (this.hold !== null || this.feeds === null || this.closed) return;
    const now = this.now();
    if (now - this.droppedAt < RELISTEN_MS) return;
    this.droppedAt = now; // Also spaces the tries when subscribe throws.
    try {
      this.hold = this.feeds.subscribe('newHeads', undefined, {
        notify: (json) => this.heard(json),
        lost: () => {
          // What was known may be stale by the time heads come again: it is forgotten, not checked against.
          this.hold = null;
          this.droppedAt = this.now();
          this.forget();
        },
      });
    } catch {
      this.hold = null; // The feeds are closed: the chain is stopping.
    }
  }

  /** The block known at `number`, if any. */
  at(number: number): KnownBlock | undefined {
    return this.byNumber.get(number);
  }

  /** The block known with `hash` (any case), if any: a look through at most DEEPEST_REORG blocks. */
  withHash(hash: string): KnownBlock | undefined {
    const h = hash.toLowerCase();
    for (const b of this.byNumber.values()) if (b.hash === h) return b;
    return undefined;
  }

  /** Every block known, oldest first as heard. */
  all(): IterableIterator<KnownBlock> {
    return this.byNumber.values();
  }

  /** One head as the feed delivered it (JSON text of a header); a head without number or hash is ignored. */
  heard(json: string): void {
    let header: Record<string, unknown>;
    try {
      header = JSON.parse(json) as Record<string, unknown>;
    } catch {
      return;
    }
    if (header === null || typeof header !== 'object' || !isHex(header.number) || !isHex(header.hash)) return;
    this.add(parseInt(header.number, 16), header.hash, typeof header.parentHash === 'string' ? header.parentHash : null, header.logsBloom);
  }

  /**
   * Keeps block `number`: a head at or below the newest is a reorg, so what was known above it is dropped (the
   * feed sends the new branch's heads next); one whose parent is not the block known below it means the chain
   * under it changed too (a reset, a fork deeper than the feed sent again), so everything below is dropped.
   */
  add(number: number, hash: string, parentHash: string | null, logsBloom: unknown): void {
    const byNumber = this.byNumber;
    if (number <= this.newest) for (const k of byNumber.keys()) if (k > number) byNumber.delete(k);
    const below = byNumber.get(number - 1);
    if (below !== undefined && parentHash !== null && below.hash !== parentHash.toLowerCase()) byNumber.clear();
    byNumber.set(number, { number, hash: hash.toLowerCase(), bloom: bloomOf(logsBloom) });
    this.newest = number;
    if (byNumber.size > KEPT) for (const k of byNumber.keys()) if (k <= number - KEPT) byNumber.delete(k);
  }

  /** Forgets every block (the feed was lost). */
  forget(): void {
    this.byNumber.clear();
    this.newest = -1;
  }

  close(): void {
    this.closed = true;
    this.hold?.remove();
    this.hold = null;
  }
}
