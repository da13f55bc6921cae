/**
 * The memory of recent heads a subscription hub replays from (replay.ts): the newHeads feed's heads as sent,
 * their JSON text kept whole, the latest per number (a reorg's heads replace the ones above its fork, as the feed
 * sends them again from there), so what it holds is the chain as it now is. At most `max` blocks below the newest
 * are kept (subscriptions.replay_blocks).
 *
 * It listens while the hub holds a newHeads or logs subscription (so it holds no upstream subscription of its
 * own when nobody subscribes): a client that reconnects while others stayed finds the heads it missed here, and
 * what the memory lacks is fetched (replay.ts).
 */
import type { FeedSource } from './subscriptions.js';

/** A head remembered: its hash and its notification result as sent. */
export interface RememberedHead {
  readonly hash: string;
  readonly json: string;
}

/** The number and hash of a newHeads result, and its logsBloom as sent (log-completeness.ts); null without number or hash. */
export function headOf(json: string): { number: number; hash: string; logsBloom: unknown } | null {
  const head = JSON.parse(json) as Record<string, unknown>;
  const number = typeof head.number === 'string' ? parseInt(head.number, 16) : Number.NaN;
  if (!Number.isSafeInteger(number) || typeof head.hash !== 'string') return null;
  return { number, hash: head.hash, logsBloom: head.logsBloom };
}

/**
 * Drops the blocks of `byNumber` below `lowest`: usually the one block that fell out of the window, after heads
 * that jumped ahead every block now below it. The numbers must have been put in ascending order (a reorg's head
 * drops the heads above it before it is put), so the search stops at the first number kept.
 */
export function keepFrom(byNumber: Map<number, unknown>, lowest: number): void {
  for (const n of byNumber.keys()) {
    if (n >= lowest) return;
    byNumber.delete(n);
  }
}

export class RecentHeads {
  private readonly byNumber = new Map<number, RememberedHead>();
  private hold: { remove(): void } | null = null;
  /** The newest head remembered; -1 before the first. */
  newest = -1;

  constructor(
    /** Blocks kept below the newest. */
    readonly max: number,
  ) {}

  /** Listens to `feeds`' newHeads unless it does already. */
  listen(feeds: FeedSource): void {
    if (this.hold !== null) return;
    const hold = feeds.subscribe('newHeads', undefined, {
      notify: (json) => this.take(json),
      // The heads that come after the outage may not follow on: the memory starts over with them.
      lost: () => this.forget(),
    });
    this.hold = hold;
  }

  /** Stops listening and forgets every head: the hub's last newHeads or logs subscription went, and the
   *  upstream subscription may go with it. A replay then fetches what it needs. */
  stop(): void {
    const hold = this.hold;
    this.forget();
    hold?.remove();
  }

  private forget(): void {
    this.hold = null;
    this.byNumber.clear();
    this.newest = -1;
  }

  get(number: number): RememberedHead | undefined {
    return this.byNumber.get(number);
  }

  private take(json: string): void {
    const head = headOf(json);
    if (head === null) return;
    const { number } = head;
    // A head at or below the newest is a reorg's (the feed sends every number once otherwise): the heads above
    // belong to the abandoned branch.
    if (this.newest - number > this.max) this.byNumber.clear();
    else for (let n = this.newest; n > number; n--) this.byNumber.delete(n);
    this.byNumber.set(number, { hash: head.hash, json });
    this.newest = number;
    keepFrom(this.byNumber, number - this.max);
  }
}
