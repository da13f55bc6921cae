/**
 * The block book's arithmetic: RU are spent only from blocks the store granted, a block is asked for when
 * a call needs it (and in the background at half a block), nothing is spent once the reservations may
 * have expired, and an owner the store had nothing for is not asked again on every call.
 */
import t from 'tap';
import { createBlockBook } from '../../src/metering/block-book.js';

/**
 * A store with `balance` RU free for owner 1, granting what it has; `asked` records each block asked,
 * `calls` each reservation call by call ([given back, ...calls]).
 */
function source(balance: number) {
  const state = { balance, asked: [] as number[], calls: [] as number[][], fail: false, gate: null as Promise<void> | null };
  return {
    state,
    async reserve(_ownerId: number, ru: number): Promise<number> {
      state.asked.push(ru);
      if (state.gate !== null) await state.gate;
      if (state.fail) throw new Error('store unreachable');
      const granted = Math.min(ru, state.balance);
      state.balance -= granted;
      return granted;
    },
    async reserveCalls(_ownerId: number, giveBack: number, calls: readonly number[]) {
      state.calls.push([giveBack, ...calls]);
      if (state.fail) throw new Error('store unreachable');
      state.balance += giveBack;
      const granted = calls.map((ru) => {
        if (ru > state.balance) return 0;
        state.balance -= ru;
        return ru;
      });
      return { granted, free: state.balance, othersHeld: 0 };
    },
    async release(_ownerId: number, ru: number): Promise<void> {
      state.balance += ru;
    },
  };
}

t.test('a call waits for its first block, then the RU are spent locally and flushed off', async (t) => {
  let clock = 1000;
  const s = source(250);
  const book = createBlockBook(s, { blockRu: 100, validUntil: () => Infinity, now: () => clock });
  t.equal(book.available(1), 0);
  t.equal(book.reserve(1, 10), false, 'nothing held yet');
  const wait = book.prepare(1, 10);
  t.ok(wait instanceof Promise, 'the first call waits');
  await wait;
  t.same(s.state.asked, [100], 'one block');
  t.equal(book.prepare(1, 10), null, 'held now: no wait');
  t.equal(book.reserve(1, 10), true);
  t.equal(book.available(1), 90);
  book.close(1, 10, 7);
  t.equal(book.available(1), 93, 'the unspent part of the call is back');
  t.equal(book.charge(1, 3), true);
  t.equal(book.available(1), 90);
  // The flush wrote the 10 RU spent: the store lowered the reservation by as much.
  book.written(1, 10, undefined);
  t.equal(book.available(1), 90);
  t.same(book.held(), new Map([[1, 90]]));
  clock += 1;
});

t.test('under half a block a refill starts in the background; a call needing more than a block asks for all of it', async (t) => {
  const s = source(1000);
  const book = createBlockBook(s, { blockRu: 100, validUntil: () => Infinity });
  await book.prepare(1, 1);
  t.ok(book.reserve(1, 60));
  t.same(s.state.asked, [100, 100], 'a second block asked for at 40 left');
  await new Promise((r) => setImmediate(r));
  t.equal(book.available(1), 140);
  await book.prepare(1, 500);
  t.same(s.state.asked, [100, 100, 360], 'what was missing');
  t.equal(book.available(1), 500);
});

t.test(
  'low: calls are reserved one by one, what is left goes back, and a call over what the owner has is refused without asking',
  async (t) => {
    let clock = 0;
    const s = source(30);
    const book = createBlockBook(s, { blockRu: 100, validUntil: () => Infinity, now: () => clock, dryRetryMs: 1000 });
    await book.prepare(1, 10);
    t.same(s.state.asked, [100], 'a block asked for');
    t.same(s.state.calls, [[30, 10]], 'it came back short: what it brought given back, and the call asked for alone');
    t.equal(book.available(1), 10, 'the call’s RU, no more');
    t.ok(book.reserve(1, 10));
    book.close(1, 10, 10);
    await book.prepare(1, 15);
    t.same(s.state.calls[1], [0, 15], 'the next call on its own');
    t.ok(book.reserve(1, 15));
    book.close(1, 15, 7);
    await new Promise((r) => setImmediate(r));
    t.equal(book.available(1), 0, 'what the call did not spend went back at once');
    t.equal(s.state.balance, 13, 'to the store');
    t.same(s.state.asked, [100], 'no block asked for while low');
    t.equal(await book.prepare(1, 13), undefined);
    t.ok(book.reserve(1, 13), 'the last RU pay the last call');
    book.close(1, 13, 13);
    t.equal(s.state.balance, 0);
    await book.prepare(1, 5);
    t.notOk(book.reserve(1, 5), 'nothing left: 402');
    const asked = s.state.calls.length;
    t.equal(book.prepare(1, 5), null, 'the store just said the owner has nothing, held nowhere else: no wait');
    t.notOk(book.reserve(1, 5));
    t.equal(s.state.calls.length, asked, 'and no question to the store');
    clock += 1000;
    t.ok(book.prepare(1, 5), 'asked again after dryRetryMs');
    s.state.balance = 500;
    book.reload(1);
    await book.prepare(1, 5);
    t.same(s.state.asked, [100, 100], 'a top-up noticed through reload: blocks again');
    t.equal(book.available(1), 100);
  },
);

t.test('low: an owner whose deliveries are charged here keeps what it holds and refills it in the background', async (t) => {
  let clock = 0;
  const s = source(60);
  const book = createBlockBook(s, { blockRu: 100, validUntil: () => Infinity, now: () => clock });
  t.ok(book.charge(1, 5), 'nothing held yet: the first delivery goes on credit');
  await new Promise((r) => setImmediate(r));
  t.same(s.state.asked, [100], 'and a block asked for in the background');
  t.equal(book.available(1), 55, 'short: the owner is low, and what came (less the credit) is kept for the deliveries');
  t.ok(book.charge(1, 5));
  await book.prepare(1, 10);
  t.same(s.state.calls, [], 'a call is paid from what is held');
  t.ok(book.reserve(1, 10));
  book.close(1, 10, 3);
  await new Promise((r) => setImmediate(r));
  t.equal(book.available(1), 47, 'nothing given back while deliveries are charged here');
  clock += 60_000;
  t.ok(book.reserve(1, 10));
  book.close(1, 10, 3);
  await new Promise((r) => setImmediate(r));
  t.equal(book.available(1), 0, 'a minute without deliveries: what is left goes back');
  t.equal(s.state.balance, 44, 'the 16 spent here are not written in this test: the store does not see them');
});

t.test('a delivery on an empty block goes on credit once; the store out of RU, the next is refused', async (t) => {
  let clock = 0;
  const s = source(3);
  const book = createBlockBook(s, { blockRu: 100, validUntil: () => Infinity, now: () => clock });
  t.ok(book.charge(1, 5), 'the store not known short: on credit, a block asked for');
  t.notOk(book.charge(1, 5), 'one delivery only before the block comes');
  await new Promise((r) => setImmediate(r));
  t.same(s.state.asked, [100]);
  t.equal(book.available(1), -2, 'the credit is paid from the 3 granted, the rest is owed to the balance');
  book.written(1, 5, undefined);
  clock = 5000;
  t.notOk(book.charge(1, 5), 'the store said it is short (low): no credit again');
});

t.test('an owner whose deliveries are charged here is not idle; a minute without them it is', async (t) => {
  let clock = 0;
  const book = createBlockBook(source(1000), { blockRu: 100, validUntil: () => Infinity, now: () => clock });
  await book.prepare(1, 1);
  t.ok(book.charge(1, 5));
  book.written(1, 5, undefined);
  clock = 6000;
  t.same(book.idle(clock - 5000), [], 'a delivery 6 s ago: a head every 12 s must find its block');
  clock = 60_001;
  t.same(book.idle(clock - 5000), [1]);
});

t.test('a give-back scheduled before a block is dropped does not give its RU back again', async (t) => {
  const s = source(60);
  const released: number[] = [];
  const book = createBlockBook(
    {
      ...s,
      release: (ownerId, ru) => {
        released.push(ru);
        return s.release(ownerId, ru);
      },
    },
    { blockRu: 100, validUntil: () => Infinity },
  );
  await book.prepare(1, 10);
  t.same(s.state.calls, [[60, 10]], 'low: the call reserved on its own, the short block given back');
  t.ok(book.reserve(1, 10));
  // Refunded: what is held goes back on the next turn...
  book.close(1, 10, 0);
  // ...but the idle flush comes first, and gives it back itself.
  t.equal(book.drop(1), 10);
  await new Promise((r) => setImmediate(r));
  t.same(released, [], 'the scheduled give-back found the block dropped');
  t.same(book.held(), new Map(), 'nothing held');
});

t.test('nothing is spent once the reservations may have expired in the store', async (t) => {
  let clock = 0;
  let until = 5000;
  const s = source(1000);
  const book = createBlockBook(s, { blockRu: 100, validUntil: () => until, now: () => clock });
  await book.prepare(1, 1);
  t.ok(book.reserve(1, 10));
  clock = 5000;
  t.equal(book.available(1), 0);
  t.equal(book.reserve(1, 10), false);
  t.equal(book.charge(1, 1), false);
  until = 10_000;
  t.equal(book.available(1), 90, 'a renewal that passed makes them spendable again');
});

t.test('a store failure rejects prepare (answer 503); concurrent calls share one refill', async (t) => {
  const s = source(1000);
  const book = createBlockBook(s, { blockRu: 100, validUntil: () => Infinity });
  let open!: () => void;
  s.state.gate = new Promise((r) => {
    open = r;
  });
  const a = book.prepare(1, 10);
  const b = book.prepare(1, 10);
  open();
  await Promise.all([a, b]);
  t.same(s.state.asked, [100], 'one refill for both');
  s.state.gate = null;
  s.state.fail = true;
  await t.rejects(book.prepare(2, 10)!, { message: 'store unreachable' });
  t.equal(book.available(2), 0);
  t.throws(() => createBlockBook(s, { blockRu: 0, validUntil: () => 0 }), RangeError);
});

t.test('drop gives back an idle owner only', async (t) => {
  const s = source(1000);
  const book = createBlockBook(s, { blockRu: 100, validUntil: () => Infinity });
  await book.prepare(1, 1);
  t.ok(book.reserve(1, 5));
  t.equal(book.drop(1), 0, 'a call in flight');
  book.close(1, 5, 5);
  t.equal(book.drop(1), 0, 'unflushed RU');
  book.written(1, 5, undefined);
  await new Promise((r) => setImmediate(r));
  t.equal(book.drop(1), 95);
  t.equal(book.available(1), 0);
});

t.test('an expiry the store reported keeps a block granted after the store was asked', async (t) => {
  const s = source(1000);
  const book = createBlockBook(s, { blockRu: 100, validUntil: () => Infinity });
  const before = book.grants();
  await book.prepare(1, 1);
  // The renewal was sent before this grant came back and did not list the owner: the grant is still ours.
  book.expired(1, before);
  t.equal(book.available(1), 100);
  // A renewal sent after it that does not list the owner means the store let it expire.
  book.expired(1, book.grants());
  t.equal(book.available(1), 0);
});

t.test('a block asked for once the reservations may have expired replaces what was held: the store freed it', async (t) => {
  let clock = 1000;
  let validUntil = 5000;
  const s = source(1000);
  // As the fleet ledger does: a reservation answered sets the expiry again, from when it was sent.
  const reserve = async (ownerId: number, ru: number): Promise<number> => {
    const sent = clock;
    const granted = await s.reserve(ownerId, ru);
    validUntil = sent + 4000;
    return granted;
  };
  const book = createBlockBook({ ...s, reserve }, { blockRu: 100, validUntil: () => validUntil, now: () => clock });
  await book.prepare(1, 10);
  t.equal(book.available(1), 100);
  clock = 6000;
  t.equal(book.available(1), 0, 'nothing spent past the known expiry');
  // The store let the reservation expire (the 100 are free again in it): the grant is not added to them.
  await book.prepare(1, 10);
  t.equal(book.available(1), 100, 'only what the store granted again');
  t.same(book.held(), new Map([[1, 100]]));
  // A debit written while such a refill is in flight may lower the new reservation: it is not spent twice.
  t.ok(book.charge(1, 30));
  clock = 20_000;
  let open!: () => void;
  s.state.gate = new Promise((r) => {
    open = r;
  });
  const refill = book.prepare(1, 10);
  book.written(1, 30, undefined);
  open();
  await refill;
  t.equal(book.available(1), 70, 'the grant less what was written meanwhile');
});

t.test('a burst too large for one refill asks again until every waiting call is covered', async (t) => {
  const s = source(1000);
  const book = createBlockBook(s, { blockRu: 100, validUntil: () => Infinity });
  const waits = Array.from({ length: 25 }, () => book.prepare(1, 10));
  await Promise.all(waits);
  t.same(s.state.asked, [100, 150], 'the first block, then what the 25 calls still missed');
  t.equal(Array.from({ length: 25 }, () => book.reserve(1, 10)).filter(Boolean).length, 25, 'every waiting call is paid');
  const poor = createBlockBook(source(55), { blockRu: 100, validUntil: () => Infinity });
  await Promise.all(Array.from({ length: 10 }, () => poor.prepare(1, 10)));
  t.equal(
    Array.from({ length: 10 }, () => poor.reserve(1, 10)).filter(Boolean).length,
    5,
    'a store with less pays what it has: no more asking',
  );
});
