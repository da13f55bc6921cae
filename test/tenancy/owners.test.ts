import t from 'tap';
import { createLedger } from '../../src/metering/ledger.js';
import { createOwnerAdmin, MAX_RU } from '../../src/tenancy/owners.js';
import { invariantGaps, tempStore } from '../store/temp-store.js';

t.test('balances stay at most 2^53 - 1 RU, so the ledger stays exact', async (t) => {
  const store = tempStore(t);
  const admin = createOwnerAdmin(store);
  t.equal(MAX_RU, 9_007_199_254_740_991);
  const { id } = admin.createOwner('whale', 'free', 1e15);
  // Repeated top-ups once took the balance to 10^16, where the relative debit (bound as a double) rounds.
  const results = Array.from({ length: 9 }, () => admin.topUp(id, 1e15));
  t.same(
    results.slice(0, 8).map((r) => (r as { balance?: number }).balance),
    [2e15, 3e15, 4e15, 5e15, 6e15, 7e15, 8e15, 9e15],
  );
  t.same(results[8], { kind: 'refused', error: 'over_max', balance: 9e15 }, 'the top-up past the maximum is refused');
  t.same(admin.topUp(id, MAX_RU - 9e15 + 1), { kind: 'refused', error: 'over_max', balance: 9e15 }, 'one RU past is refused too');
  t.same(admin.topUp(id, MAX_RU - 9e15), { kind: 'credited', balance: MAX_RU }, 'exactly the maximum is allowed');
  t.same(admin.topUp(id + 1, 1), { kind: 'refused', error: 'no_owner' });

  const ledger = createLedger(store, { flushIntervalMs: 60_000 });
  t.teardown(() => ledger.close());
  for (let i = 0; i < 13; i++) {
    ledger.settle(ledger.reserve(id, 7)!, 7, { endpointId: 'ep_a', method: 'eth_call', status: 0 });
    t.ok(ledger.flush());
  }
  const exact = store.db.prepare('SELECT ru_balance FROM owners WHERE id = ?').safeIntegers().pluck().get(id);
  t.equal(exact, BigInt(MAX_RU) - 91n, 'every debit of 7 RU landed exactly');
  t.equal(ledger.available(id), MAX_RU - 91);
  t.same(invariantGaps(store.db), [{ id, gap: 0 }]);
  t.same(
    store.db.prepare('SELECT count(*) AS n, sum(ru) AS ru FROM credits').get(),
    { n: 10, ru: MAX_RU },
    'refused top-ups left no credit',
  );
});

t.test('RU amounts and names are checked before anything is written', async (t) => {
  const store = tempStore(t);
  const admin = createOwnerAdmin(store);
  for (const ru of [-1, 1.5, Number.NaN, MAX_RU + 1, 2 ** 60]) {
    t.throws(() => admin.createOwner('acme', 'free', ru), RangeError, `createOwner ru ${ru}`);
  }
  t.throws(
    () => admin.createOwner('row\nforged', 'free', 1),
    new RangeError('owner name must not contain control, format or line-separator characters (found U+000A)'),
  );
  t.throws(() => admin.createOwner('', 'free', 1), RangeError);
  t.throws(() => admin.createOwner('\ud800', 'free', 1), RangeError, 'a lone surrogate has no UTF-8 form');
  t.equal(store.db.prepare('SELECT count(*) FROM owners').pluck().get(), 0, 'no owner was written');
  const { id } = admin.createOwner('acme', 'free', MAX_RU);
  for (const ru of [0, -5, 0.5, MAX_RU + 1]) t.throws(() => admin.topUp(id, ru), RangeError, `topUp ru ${ru}`);
  t.same(store.db.prepare('SELECT ru FROM credits').pluck().all(), [MAX_RU]);
});
