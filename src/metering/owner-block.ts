import type { ReservedBlocks } from './block-book.js';

/** One owner's RU in a block book (see BlockBook for `held`, `unflushed` and `open`). */
export interface Block {
  held: number;
  unflushed: number;
  open: number;
  /** The block refill under way, if any. */
  refill: Promise<void> | null;
  /** The number of the last grant with RU in it (see `grants`). */
  grant: number;
  /** RU written as debits while a refill or a call reservation was in flight (see `refill`). */
  writtenMeanwhile: number;
  /** RU of the calls waiting in `prepare`: what the refills must cover, beyond what is spendable. */
  waiting: number;
  /** The store last granted less than asked, or showed less than a block free: RU are reserved call by call. */
  low: boolean;
  /** Low: the calls waiting for the next `reserveCalls`. */
  queue: WaitingCall[];
  /** Low: a `reserveCalls` is in flight, or due on the next turn. */
  asking: boolean;
  /** Low: a give-back of what is held unspent is due on the next turn. */
  givingBack: boolean;
  /** The RU the owner has left in all, as the store last said when no other instance held any (else Infinity). */
  ceiling: number;
  /** When the store said it (ms), or -Infinity: trusted for dryRetryMs. */
  ceilingAt: number;
  /** When a call or a delivery last asked for the owner's RU here (ms): an idle block goes back (`idle`). */
  usedAt: number;
  /** When deliveries (subscriptions, event streams) were last charged to the owner here (ms), or -Infinity. */
  chargedAt: number;
  /** When a background refill last got nothing (ms), or -Infinity: not asked again before dryRetryMs. */
  dryAt: number;
}

/**
 * How long after deliveries were charged to an owner here (ms) its block stays (not given back idle; held and
 * refilled when low): a delivery cannot wait for the store, one the held RU cannot pay closes the subscriptions.
 */
const FEEDS_HOLD_MS = 60_000;

export interface WaitingCall {
  ru: number;
  resolve: () => void;
  reject: (err: unknown) => void;
}

/** The owner's block, made empty at its first use. */
export function blockOf(book: ReservedBlocks, ownerId: number): Block {
  let b = book.blocks.get(ownerId);
  if (b === undefined) {
    b = {
      held: 0,
      unflushed: 0,
      open: 0,
      refill: null,
      grant: 0,
      writtenMeanwhile: 0,
      waiting: 0,
      low: false,
      queue: [],
      asking: false,
      givingBack: false,
      ceiling: Number.POSITIVE_INFINITY,
      ceilingAt: Number.NEGATIVE_INFINITY,
      usedAt: book.now(),
      chargedAt: Number.NEGATIVE_INFINITY,
      dryAt: Number.NEGATIVE_INFINITY,
    };
    book.blocks.set(ownerId, b);
  }
  return b;
}

/** Whether deliveries are charged to the owner here: its RU are then held, low or not (FEEDS_HOLD_MS). */
export const feedsHere = (book: ReservedBlocks, b: Block): boolean => book.now() - b.chargedAt < FEEDS_HOLD_MS;

/** What may be spent now: nothing once the reservations may have expired in the store. */
export function spendable(book: ReservedBlocks, ownerId: number, b: Block): number {
  return book.now() < book.options.validUntil(ownerId) ? b.held - b.unflushed - b.open : 0;
}

/**
 * The grant replaces what was held when asked once the reservation may have expired in the store: what
 * was held may be another instance's by now (the store starts an expired reservation afresh). A debit
 * written meanwhile may have lowered the new reservation: it is taken off the grant. Both err towards
 * spending less than the store holds for this instance (the old RU when the store had in fact kept them,
 * a debit written first), never more; the surplus idles until a clean stop.
 */
export function granted(book: ReservedBlocks, b: Block, stale: boolean, ru: number): void {
  b.held = stale ? Math.max(0, ru - b.writtenMeanwhile) : b.held + ru;
  if (ru > 0) b.grant = ++book.grantCount;
}
