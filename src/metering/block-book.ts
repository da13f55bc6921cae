import type { BalanceBook } from './balance-book.js';
import { giveBackSoon, viaCall } from './block-calls.js';
import { topUpSoon, viaBlock } from './block-refill.js';
import type { CallsGrant } from './ledger-store.js';
import { type Block, blockOf, feedsHere, spendable } from './owner-block.js';

/**
 * What a block book needs of the fleet store: RU set aside from an owner's shared balance for this
 * instance (a reservation that expires unless renewed), and RU given back.
 */
export interface BlockSource {
  /** Sets aside up to `ru` of the owner's balance for this instance; resolves with the RU granted (0..ru). */
  reserve(ownerId: number, ru: number): Promise<number>;
  /** Gives back `giveBack` RU, then sets aside each call's RU that the owner still covers (CallReservations.reserveCalls). */
  reserveCalls(ownerId: number, giveBack: number, calls: readonly number[]): Promise<CallsGrant>;
  /** Gives back `ru` RU of the owner's reservation; a failure leaves them to the store (a clean stop or the expiry frees them). */
  release(ownerId: number, ru: number): Promise<void>;
}

export interface BlockBookOptions {
  /** RU asked for at once when an owner's block runs low (config `cluster.reservation_block_ru`). */
  blockRu: number;
  /**
   * Until when (ms, `now`'s clock) the instance's reservation of an owner's RU is known to be alive in
   * the store: the last renewal or reservation of it that passed, plus the TTL, less a margin. Past it
   * the store may have let it expire and granted the RU to another instance, so nothing more is spent
   * from it.
   */
  validUntil: (ownerId: number) => number;
  /** Clock in ms; default Date.now. */
  now?: () => number;
  /**
   * How long the store's word that an owner has less than a call costs, and nobody else holds any of it,
   * answers such calls 402 without asking again, in ms; default 1000. A top-up (`reload`) ends it at once.
   */
  dryRetryMs?: number;
}

/**
 * The balance book of an instance in a fleet (the way prepaid telecom charging reserves units): each
 * owner's RU come in blocks reserved from the shared balance in PostgreSQL, are spent here without a
 * round trip per call, and are given back (or expire) later.
 *
 * Per owner: `held` = RU the store granted this instance and no flush has yet written as debits;
 * `unflushed` = RU spent here and not yet written; `open` = RU of calls in flight. So
 * `available = held − unflushed − open`, and a flush that writes `d` RU of debits lowers both `held`
 * and `unflushed` by `d` (the store lowers the reservation by the same `d` in the same transaction).
 *
 * The hot path is synchronous: `reserve` only spends what is held. `prepare` is the asynchronous step
 * before it: when an owner holds less than a call needs, it reserves a block (at least what is missing)
 * and resolves when the block is there. A block is also asked for in the background once an owner's
 * available RU fall under half a block, so a steady stream of calls rarely waits. Two instances can
 * never spend the same RU: each spends only what the store granted it, and the store grants at most the
 * balance less every live reservation.
 *
 * Near the end of a balance blocks would strand RU: the remainder split between instances' blocks, none
 * of them enough for a call. So once the store grants less than a block asked for (the owner is *low*),
 * the instance reserves call by call (`reserveCalls`): the calls waiting go to the store together, each
 * set aside whole or refused, with whatever the instance holds unspent given back in the same
 * transaction; and whatever it holds with no call waiting goes back at once. The store sees then every
 * RU not in a call in flight or spent, so a balance of K calls serves K calls on any number of
 * instances. An answer showing a block free again ends it; so does a top-up (`reload`). Except for an
 * owner whose deliveries are charged here (FEEDS_HOLD_MS): a delivery cannot wait for the store, so that
 * owner's RU are held and refilled as when not low, and spent by its subscriptions here.
 */
export interface BlockBook extends BalanceBook {
  /**
   * Null when `available(ownerId) >= ru` now (the caller goes on at once); otherwise a promise that
   * resolves once a block was asked for (granted or not: `reserve` then decides) and rejects when the
   * store failed (answer 503).
   */
  prepare(ownerId: number, ru: number): Promise<void> | null;
  /** RU the owner spent here that no flush has written yet (what the shared balance does not show yet). */
  unwritten(ownerId: number): number;
  /** RU held per owner (granted and not yet written), for the flush and for a clean stop's release. */
  held(): Map<number, number>;
  /** How many grants have come back so far: a mark to pass to `expired`. */
  grants(): number;
  /**
   * The store, asked after the first `grantsBefore` grants had come back, no longer has the owner's
   * reservation: nothing of it is spent any more (a refill asks again). A grant that came back later may
   * have been committed after the store answered: then the reservation is the instance's, and is kept.
   */
  expired(ownerId: number, grantsBefore: number): void;
  /** Owners holding RU unused here since `before` (ms), deliveries too (FEEDS_HOLD_MS): their blocks may go back (`drop`). */
  idle(before: number): number[];
  /** Forgets an owner's held RU where nothing is unflushed, open or asked for: the caller gives them back, nothing else. */
  drop(ownerId: number): number;
}

/**
 * A block book's state: the owners' blocks (owner-block.ts) and the grants counted so far. The steps that
 * ask the store are module functions taking it: refills in block-refill.ts, call by call in block-calls.ts.
 */
export class ReservedBlocks implements BlockBook {
  readonly source: BlockSource;
  readonly options: BlockBookOptions;
  readonly now: () => number;
  readonly dryRetryMs: number;
  readonly blocks = new Map<number, Block>();
  /** Grants with RU in them so far (see `grants`). */
  grantCount = 0;

  constructor(source: BlockSource, options: BlockBookOptions) {
    this.source = source;
    this.options = options;
    this.now = options.now ?? Date.now;
    this.dryRetryMs = options.dryRetryMs ?? 1000;
  }

  available(ownerId: number): number {
    const b = this.blocks.get(ownerId);
    return b === undefined ? 0 : spendable(this, ownerId, b);
  }

  prepare(ownerId: number, ru: number): Promise<void> | null {
    const b = blockOf(this, ownerId);
    b.usedAt = this.now();
    // What calls already waiting will spend is not this call's: it waits with them.
    if (spendable(this, ownerId, b) - b.waiting >= ru) return null;
    if (!b.low) return viaBlock(this, ownerId, b, ru);
    // The store said a moment ago that the owner has less than this call in all: answer 402 without asking.
    if (ru > b.ceiling && this.now() - b.ceilingAt < this.dryRetryMs) return null;
    return viaCall(this, ownerId, b, ru);
  }

  reserve(ownerId: number, ru: number): boolean {
    const b = blockOf(this, ownerId);
    if (spendable(this, ownerId, b) < ru) return false;
    b.open += ru;
    topUpSoon(this, ownerId, b);
    return true;
  }

  close(ownerId: number, reserved: number, debited: number): void {
    const b = blockOf(this, ownerId);
    b.open -= reserved;
    b.unflushed += debited;
    if (debited < reserved) giveBackSoon(this, ownerId, b);
  }

  charge(ownerId: number, ru: number): boolean {
    const b = blockOf(this, ownerId);
    b.chargedAt = b.usedAt = this.now();
    // An empty block (never filled, or given back idle), the store not known short: one delivery on credit, the
    // block asked for now (a charge cannot wait for the store), rather than closing subscriptions it pays for.
    const credit = b.held === 0 && b.unflushed === 0 && b.open === 0 && !b.low && this.now() - b.dryAt >= this.dryRetryMs;
    const ok = credit || spendable(this, ownerId, b) >= ru;
    if (ok) b.unflushed += ru;
    topUpSoon(this, ownerId, b);
    return ok;
  }

  written(ownerId: number, debited: number): void {
    const b = this.blocks.get(ownerId);
    if (b === undefined) return;
    b.unflushed -= debited;
    if (b.refill !== null || b.asking) b.writtenMeanwhile += debited;
    // A surcharge may have spent past the block: the store's reservation stops at zero, so does `held`.
    b.held = Math.max(0, b.held - debited);
  }

  reload(ownerId?: number): void {
    // A top-up or a plan change in the store: blocks again, and an owner the store had too little for is asked again at once.
    const reset = (b: Block): void => {
      b.low = false;
      b.ceilingAt = Number.NEGATIVE_INFINITY;
      b.dryAt = Number.NEGATIVE_INFINITY;
    };
    if (ownerId === undefined) for (const b of this.blocks.values()) reset(b);
    else {
      const b = this.blocks.get(ownerId);
      if (b !== undefined) reset(b);
    }
  }

  unwritten(ownerId: number): number {
    return this.blocks.get(ownerId)?.unflushed ?? 0;
  }

  grants(): number {
    return this.grantCount;
  }

  expired(ownerId: number, grantsBefore: number): void {
    const b = this.blocks.get(ownerId);
    if (b !== undefined && b.grant <= grantsBefore) b.held = 0;
  }

  held(): Map<number, number> {
    const out = new Map<number, number>();
    for (const [ownerId, b] of this.blocks) if (b.held > 0) out.set(ownerId, b.held);
    return out;
  }

  idle(before: number): number[] {
    const out: number[] = [];
    for (const [ownerId, b] of this.blocks) if (b.usedAt < before && b.held > 0 && !feedsHere(this, b)) out.push(ownerId);
    return out;
  }

  drop(ownerId: number): number {
    const b = this.blocks.get(ownerId);
    if (b === undefined || b.unflushed !== 0 || b.open !== 0 || b.refill !== null || b.asking || b.waiting !== 0) return 0;
    this.blocks.delete(ownerId);
    const held = b.held;
    b.held = 0;
    return held;
  }
}

export function createBlockBook(source: BlockSource, options: BlockBookOptions): BlockBook {
  if (!Number.isSafeInteger(options.blockRu) || options.blockRu < 1)
    throw new RangeError(`blockRu must be a positive integer, got ${options.blockRu}`);
  return new ReservedBlocks(source, options);
}
