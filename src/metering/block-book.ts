import type { BalanceBook } from './balance-book.js';
import type { CallsGrant } from './ledger-store.js';

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

interface Block {
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

interface WaitingCall {
  ru: number;
  resolve: () => void;
  reject: (err: unknown) => void;
}

const sumOf = (ru: readonly number[]): number => ru.reduce((n, r) => n + r, 0);

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
        usedAt: now(),
        chargedAt: Number.NEGATIVE_INFINITY,
        dryAt: Number.NEGATIVE_INFINITY,
      };
      blocks.set(ownerId, b);
    }
    return b;
  }

  /** Whether deliveries are charged to the owner here: its RU are then held, low or not (FEEDS_HOLD_MS). */
  const feedsHere = (b: Block): boolean => now() - b.chargedAt < FEEDS_HOLD_MS;

  /** What may be spent now: nothing once the reservations may have expired in the store. */
  function spendable(ownerId: number, b: Block): number {
    return now() < options.validUntil(ownerId) ? b.held - b.unflushed - b.open : 0;
  }

  /**
   * The grant replaces what was held when asked once the reservation may have expired in the store: what
   * was held may be another instance's by now (the store starts an expired reservation afresh). A debit
   * written meanwhile may have lowered the new reservation: it is taken off the grant. Both err towards
   * spending less than the store holds for this instance (the old RU when the store had in fact kept them,
   * a debit written first), never more; the surplus idles until a clean stop.
   */
  function granted(b: Block, stale: boolean, ru: number): void {
    b.held = stale ? Math.max(0, ru - b.writtenMeanwhile) : b.held + ru;
    if (ru > 0) b.grant = ++grants;
  }

  function refill(ownerId: number, b: Block, atLeast: number): Promise<void> {
    if (b.refill !== null) return b.refill;
    const want = Math.max(options.blockRu, atLeast);
    const stale = now() >= options.validUntil(ownerId);
    b.writtenMeanwhile = 0;
    b.refill = source.reserve(ownerId, want).then(
      (ru) => {
        b.refill = null;
        granted(b, stale, ru);
        if (ru === 0) b.dryAt = now();
        // Less than asked: the owner's balance is nearly spent (or held elsewhere); a block would strand it.
        b.low = ru < want;
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
      // Low: call by call from now on. No gain: the RU are not spendable yet (renewals failing), asking again would not help.
      if (b.low || spendable(ownerId, b) <= before) return;
    }
  }

  async function viaBlock(ownerId: number, b: Block, ru: number): Promise<void> {
    b.waiting += ru;
    try {
      await fill(ownerId, b);
    } finally {
      b.waiting -= ru;
    }
    // The store had less than asked: every call that waited is asked for on its own, what the short
    // block brought given back in the same transaction (the calls would otherwise race for it here).
    if (b.low) await viaCall(ownerId, b, ru);
  }

  /** Low: the call waits for the next `reserveCalls`, which sets its RU aside whole or refuses it (402). */
  function viaCall(ownerId: number, b: Block, ru: number): Promise<void> {
    return new Promise((resolve, reject) => {
      b.queue.push({ ru, resolve, reject });
      b.waiting += ru;
      askSoon(ownerId, b);
    });
  }

  /**
   * On the next turn, so that calls arriving meanwhile go in the same transaction, and the calls an answer
   * just granted have reserved their RU before the rest is given back.
   */
  function askSoon(ownerId: number, b: Block): void {
    if (b.asking) return;
    b.asking = true;
    setImmediate(() => askCalls(ownerId, b));
  }

  function askCalls(ownerId: number, b: Block): void {
    const calls = b.queue.splice(0);
    const asked = calls.map((c) => c.ru);
    // What is held with no call waiting for it goes back first: the store then sees it, for this instance's calls or another's.
    const giveBack = feedsHere(b) ? 0 : Math.max(0, spendable(ownerId, b) - (b.waiting - sumOf(asked)));
    const stale = now() >= options.validUntil(ownerId);
    b.held -= giveBack;
    b.writtenMeanwhile = 0;
    const answered = (end: (c: WaitingCall) => void): void => {
      b.asking = false;
      for (const c of calls) {
        b.waiting -= c.ru;
        end(c);
      }
      if (b.queue.length > 0) askSoon(ownerId, b);
      else giveBackSoon(ownerId, b);
    };
    source.reserveCalls(ownerId, giveBack, asked).then(
      (answer) => {
        granted(b, stale, sumOf(answer.granted));
        b.low = answer.free < options.blockRu;
        b.ceiling = answer.othersHeld === 0 ? answer.free : Number.POSITIVE_INFINITY;
        b.ceilingAt = now();
        answered((c) => c.resolve());
      },
      (err: unknown) => answered((c) => c.reject(err)),
    );
  }

  /** Low: on the next turn, what is held with no call waiting for it goes back to the store. */
  function giveBackSoon(ownerId: number, b: Block): void {
    if (!b.low || b.givingBack || feedsHere(b)) return;
    b.givingBack = true;
    setImmediate(() => {
      b.givingBack = false;
      // Dropped meanwhile: the caller of `drop` gives its RU back; releasing them here too would free them twice.
      if (blocks.get(ownerId) !== b) return;
      // Calls waiting: their `reserveCalls` gives it back. A refill in flight: its answer decides.
      if (!b.low || b.asking || b.refill !== null || b.waiting > 0) return;
      const ru = spendable(ownerId, b);
      if (ru <= 0) return;
      b.held -= ru;
      // The store has more left than it last said.
      b.ceilingAt = Number.NEGATIVE_INFINITY;
      // Failed: the store keeps them for this instance until a clean stop or their expiry; never spent twice.
      source.release(ownerId, ru).catch(() => {});
    });
  }

  /**
   * A background refill once the owner holds less than half a block (when low, only for deliveries charged
   * here); its failure waits for the next call, a refill that got nothing for dryRetryMs.
   */
  function topUpSoon(ownerId: number, b: Block): void {
    if (b.low && !feedsHere(b)) return;
    if (b.refill === null && spendable(ownerId, b) < options.blockRu / 2 && now() - b.dryAt >= dryRetryMs)
      refill(ownerId, b, 0).catch(() => {});
  }

  return {
    available(ownerId) {
      const b = blocks.get(ownerId);
      return b === undefined ? 0 : spendable(ownerId, b);
    },
    prepare(ownerId, ru) {
      const b = blockOf(ownerId);
      b.usedAt = now();
      // What calls already waiting will spend is not this call's: it waits with them.
      if (spendable(ownerId, b) - b.waiting >= ru) return null;
      if (!b.low) return viaBlock(ownerId, b, ru);
      // The store said a moment ago that the owner has less than this call in all: answer 402 without asking.
      if (ru > b.ceiling && now() - b.ceilingAt < dryRetryMs) return null;
      return viaCall(ownerId, b, ru);
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
      if (debited < reserved) giveBackSoon(ownerId, b);
    },
    charge(ownerId, ru) {
      const b = blockOf(ownerId);
      b.chargedAt = b.usedAt = now();
      // An empty block (never filled, or given back idle), the store not known short: one delivery on credit, the
      // block asked for now (a charge cannot wait for the store), rather than closing subscriptions it pays for.
      const credit = b.held === 0 && b.unflushed === 0 && b.open === 0 && !b.low && now() - b.dryAt >= dryRetryMs;
      const ok = credit || spendable(ownerId, b) >= ru;
      if (ok) b.unflushed += ru;
      topUpSoon(ownerId, b);
      return ok;
    },
    written(ownerId, debited) {
      const b = blocks.get(ownerId);
      if (b === undefined) return;
      b.unflushed -= debited;
      if (b.refill !== null || b.asking) b.writtenMeanwhile += debited;
      // A surcharge may have spent past the block: the store's reservation stops at zero, so does `held`.
      b.held = Math.max(0, b.held - debited);
    },
    reload(ownerId) {
      // A top-up or a plan change in the store: blocks again, and an owner the store had too little for is asked again at once.
      const reset = (b: Block): void => {
        b.low = false;
        b.ceilingAt = Number.NEGATIVE_INFINITY;
        b.dryAt = Number.NEGATIVE_INFINITY;
      };
      if (ownerId === undefined) for (const b of blocks.values()) reset(b);
      else {
        const b = blocks.get(ownerId);
        if (b !== undefined) reset(b);
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
    idle(before) {
      const out: number[] = [];
      for (const [ownerId, b] of blocks) if (b.usedAt < before && b.held > 0 && !feedsHere(b)) out.push(ownerId);
      return out;
    },
    drop(ownerId) {
      const b = blocks.get(ownerId);
      if (b === undefined || b.unflushed !== 0 || b.open !== 0 || b.refill !== null || b.asking || b.waiting !== 0) return 0;
      blocks.delete(ownerId);
      const held = b.held;
      b.held = 0;
      return held;
    },
  };
}
