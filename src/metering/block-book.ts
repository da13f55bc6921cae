import type { BalanceBook } from './balance-book.js';

/**
 * What a block book needs of the fleet store: RU set aside from an owner's shared balance for this
 * instance (a reservation that expires unless renewed), and RU given back.
 */
export interface BlockSource {
  /** Sets aside up to `ru` of the owner's balance for this instance; resolves with the RU granted (0..ru). */
  reserve(ownerId: number, ru: number): Promise<number>;
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
  /** After the store granted nothing to an owner, how long before it is asked again, in ms; default 1000. */
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
  /** Forgets an owner's held RU (given back to the store by the caller) where nothing is unflushed or open. */
  drop(ownerId: number): number;
}

interface Block {
  held: number;
  unflushed: number;
  open: number;
  /** The refill under way, if any. */
  refill: Promise<void> | null;
  /** When the store last granted nothing (ms), or -Infinity: asked again only after dryRetryMs. */
  dryAt: number;
  /** The number of the last grant with RU in it (see `grants`). */
  grant: number;
  /** RU written as debits while the refill under way was in flight (see `refill`). */
  writtenMeanwhile: number;
  /** RU of the calls waiting in `prepare`: what the refills must cover, beyond what is spendable. */
  waiting: number;
  /** Whether the last grant came back short of what was asked (the store had no more to give). */
  short: boolean;
}

export function createBlockBook(source: BlockSource, options: BlockBookOptions): BlockBook {
  const now = options.now ?? Date.now;
  const dryRetryMs = options.dryRetryMs ?? 1000;
  if (!Number.isSafeInteger(options.blockRu) || options.blockRu < 1)
    throw new RangeError(`blockRu must be a positive integer, got ${options.blockRu}`);
  const blocks = new Map<number, Block>();
  let grants = 0;

  function blockOf(ownerId: number): Block {
    let b = blocks.get(ownerId);
    if (b === undefined) {
      b = { held: 0, unflushed: 0, open: 0, refill: null, dryAt: -Infinity, grant: 0, writtenMeanwhile: 0, waiting: 0, short: false };
      blocks.set(ownerId, b);
    }
    return b;
  }

  /** What may be spent now: nothing once the reservations may have expired in the store. */
  function spendable(ownerId: number, b: Block): number {
    return now() < options.validUntil(ownerId) ? b.held - b.unflushed - b.open : 0;
  }

  function refill(ownerId: number, b: Block, atLeast: number): Promise<void> {
    if (b.refill !== null) return b.refill;
    const want = Math.max(options.blockRu, atLeast);
    // Asked once the reservation may have expired in the store: what was held may be another instance's
    // by now (the store starts an expired reservation afresh), so the grant replaces it rather than adds
    // to it. A debit written meanwhile may have lowered the new reservation: it is taken off the grant.
    // Both err towards spending less than the store holds for this instance (the old RU when the store
    // had in fact kept them, a debit written first), never more; the surplus idles until a clean stop.
    const stale = now() >= options.validUntil(ownerId);
    b.writtenMeanwhile = 0;
    b.refill = source.reserve(ownerId, want).then(
      (granted) => {
        b.refill = null;
        b.held = stale ? Math.max(0, granted - b.writtenMeanwhile) : b.held + granted;
        b.short = granted < want;
        if (granted === 0) b.dryAt = now();
        else b.grant = ++grants;
      },
      (err: unknown) => {
        b.refill = null;
        throw err;
      },
    );
    return b.refill;
  }

  /**
   * Refills until what may be spent covers every call waiting, or the store gave less than asked (it has no
   * more): a burst of calls that all wait on one refill too small for them asks again, rather than being
   * refused 402 while the shared balance still holds RU.
   */
  async function fill(ownerId: number, b: Block): Promise<void> {
    for (;;) {
      const before = spendable(ownerId, b);
      const missing = b.waiting - before;
      if (missing <= 0) return;
      await refill(ownerId, b, missing);
      // A short grant: the store has no more. No gain: the RU are not spendable yet (renewals failing), asking again would not help.
      if (b.short || spendable(ownerId, b) <= before) return;
    }
  }

  /** A background refill once the owner holds less than half a block; its failure waits for the next call. */
  function topUpSoon(ownerId: number, b: Block): void {
    if (b.refill === null && spendable(ownerId, b) < options.blockRu / 2 && now() - b.dryAt >= dryRetryMs) {
      refill(ownerId, b, 0).catch(() => {});
    }
  }

  return {
    available(ownerId) {
      const b = blocks.get(ownerId);
      return b === undefined ? 0 : spendable(ownerId, b);
    },
    prepare(ownerId, ru) {
      const b = blockOf(ownerId);
      // What calls already waiting will spend is not this call's: it waits with them.
      if (spendable(ownerId, b) - b.waiting >= ru) return null;
      // The store had nothing for this owner a moment ago: answer 402 now rather than ask on every call.
      if (b.refill === null && now() - b.dryAt < dryRetryMs) return null;
      // When the store has too little for every waiting call, `reserve` refuses the ones it cannot pay (402).
      b.waiting += ru;
      return fill(ownerId, b).finally(() => {
        b.waiting -= ru;
      });
    },
    reserve(ownerId, ru) {
      const b = blockOf(ownerId);
      if (spendable(ownerId, b) < ru) return false;
      b.open += ru;
      topUpSoon(ownerId, b);
      return true;
    },
    close(ownerId, reserved, debited) {
      const b = blockOf(ownerId);
      b.open -= reserved;
      b.unflushed += debited;
    },
    charge(ownerId, ru) {
      const b = blockOf(ownerId);
      const ok = spendable(ownerId, b) >= ru;
      if (ok) b.unflushed += ru;
      topUpSoon(ownerId, b);
      return ok;
    },
    written(ownerId, debited) {
      const b = blocks.get(ownerId);
      if (b === undefined) return;
      b.unflushed -= debited;
      if (b.refill !== null) b.writtenMeanwhile += debited;
      // A surcharge may have spent past the block: the store's reservation stops at zero, so does `held`.
      b.held = Math.max(0, b.held - debited);
    },
    reload(ownerId) {
      // A top-up or a plan change in the store: an owner the store had nothing for is asked again at once.
      if (ownerId === undefined) for (const b of blocks.values()) b.dryAt = -Infinity;
      else {
        const b = blocks.get(ownerId);
        if (b !== undefined) b.dryAt = -Infinity;
      }
    },
    unwritten: (ownerId) => blocks.get(ownerId)?.unflushed ?? 0,
    grants: () => grants,
    expired(ownerId, grantsBefore) {
      const b = blocks.get(ownerId);
      if (b !== undefined && b.grant <= grantsBefore) b.held = 0;
    },
    held() {
      const out = new Map<number, number>();
      for (const [ownerId, b] of blocks) if (b.held > 0) out.set(ownerId, b.held);
      return out;
    },
    drop(ownerId) {
      const b = blocks.get(ownerId);
      if (b === undefined || b.unflushed !== 0 || b.open !== 0 || b.refill !== null) return 0;
      blocks.delete(ownerId);
      return b.held;
    },
  };
}
