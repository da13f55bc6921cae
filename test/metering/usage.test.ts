import t from 'tap';
import { createLedger } from '../../src/metering/ledger.js';
import { createUsageRollUp } from '../../src/metering/usage.js';
import { createDirectory } from '../../src/tenancy/directory.js';
import { addOwner, invariantGaps, tempStore } from '../store/temp-store.js';

const HOUR = 3600;
const DAY = 86_400;
const T0 = Date.UTC(2025, 2, 10, 0, 0, 0) / 1000; // a midnight, in unix seconds

function count(db: ReturnType<typeof tempStore>['db'], table: string): { rows: number; requests: number; ru: number } {
  return db
    .prepare(`SELECT count(*) AS rows, coalesce(sum(requests), 0) AS requests, coalesce(sum(ru), 0) AS ru FROM ${table}`)
    .get() as never;
}

t.test('minute rows roll into hours, hours into days; totals and the invariant stay exact', async (t) => {
  const store = tempStore(t);
  const owner = addOwner(store.db, 1_000_000);
  let clock = T0 * 1000;
  const ledger = createLedger(store, { flushIntervalMs: 60_000, now: () => clock });
  t.teardown(() => ledger.close());
  // Three days of traffic: each 10 minutes, two successes and one refusal, on two endpoints.
  for (let m = 0; m < 3 * 24 * 60; m += 10) {
    clock = (T0 + m * 60 + 5) * 1000;
    for (const endpointId of ['ep_a', 'ep_b']) {
      ledger.settle(ledger.reserve(owner, 20)!, 20, { endpointId, method: 'eth_call', status: 0 });
      ledger.settle(ledger.reserve(owner, 20)!, 30, { endpointId, method: 'eth_getLogs', status: 0 });
      ledger.recordUsage(owner, { endpointId, method: 'eth_call', status: 429 });
    }
  }
  t.ok(ledger.flush());
  const before = count(store.db, 'usage_minute');
  t.same(before, { rows: 432 * 6, requests: 432 * 6, ru: 432 * 100 });

  const rollUp = createUsageRollUp(store, { keepMinutesH: 24, keepHoursD: 1 });
  const now = (T0 + 2 * DAY + 12 * HOUR + 30 * 60) * 1000; // day 3, 12:30
  // Minutes before day 2, 12:00 go to hours; hours before day 2, 00:00 go to days.
  const moved = rollUp.rollUp(now);
  t.equal(moved.minuteRows, 6 * 6 * (36 * 1), 'minutes of the first 36 hours');
  const all = ['usage_minute', 'usage_hour', 'usage_day'].map((table) => count(store.db, table));
  t.same(
    all.reduce((a, b) => ({ rows: 0, requests: a.requests + b.requests, ru: a.ru + b.ru }), { rows: 0, requests: 0, ru: 0 }),
    { rows: 0, requests: before.requests, ru: before.ru },
    'nothing lost or doubled',
  );
  t.equal(count(store.db, 'usage_minute').rows, 6 * 6 * 36, 'the last 36 hours stay per minute');
  t.equal(count(store.db, 'usage_day').rows, 2 * 3, 'day 1: endpoints × (method, status)');
  t.equal(count(store.db, 'usage_hour').rows, 12 * 6, 'day 2 until noon: 12 hours × 6 keys');
  t.same(store.db.prepare('SELECT DISTINCT t FROM usage_day').pluck().all(), [T0]);
  t.equal(store.db.prepare('SELECT min(t) FROM usage_minute').pluck().get(), T0 + DAY + 12 * HOUR);
  t.same(invariantGaps(store.db), [{ id: owner, gap: 0 }]);

  // Rolling up again moves nothing; later usage into an already rolled hour is added, not replaced.
  t.same(rollUp.rollUp(now), { minuteRows: 0, hourRows: 0 });
  clock = (T0 + DAY + 5 * 60) * 1000;
  ledger.settle(ledger.reserve(owner, 20)!, 20, { endpointId: 'ep_a', method: 'eth_call', status: 0 });
  t.ok(ledger.flush());
  rollUp.rollUp(now);
  const hour = store.db
    .prepare(`SELECT requests, ru FROM usage_hour WHERE endpoint_id = 'ep_a' AND method = 'eth_call' AND status = 0 AND t = ?`)
    .get(T0 + DAY);
  t.same(hour, { requests: 7, ru: 140 });
  t.same(invariantGaps(store.db), [{ id: owner, gap: 0 }]);
});

t.test('stats read minutes, hours and days together, per owner and endpoint', async (t) => {
  const store = tempStore(t);
  const owner = addOwner(store.db, 1_000_000);
  const other = addOwner(store.db, 1_000_000);
  let clock = T0 * 1000;
  const ledger = createLedger(store, { flushIntervalMs: 60_000, now: () => clock });
  t.teardown(() => ledger.close());
  const at = (seconds: number): void => void (clock = seconds * 1000);
  at(T0 + 10); // day 1, to be rolled into a day row
  ledger.settle(ledger.reserve(owner, 15)!, 15, { endpointId: 'ep_a', method: 'eth_call', status: 0 });
  at(T0 + DAY + HOUR + 10); // day 2, to be rolled into an hour row
  ledger.settle(ledger.reserve(owner, 20)!, 20, { endpointId: 'ep_b', method: 'eth_estimateGas', status: 0 });
  at(T0 + 2 * DAY + 13 * HOUR + 61); // day 3, stays per minute
  ledger.settle(ledger.reserve(owner, 15)!, 15, { endpointId: 'ep_a', method: 'eth_call', status: 0 });
  ledger.recordUsage(owner, { endpointId: 'ep_a', method: 'eth_call', status: 429 }, 4);
  ledger.settle(ledger.reserve(other, 15)!, 15, { endpointId: 'ep_x', method: 'eth_call', status: 0 });
  t.ok(ledger.flush());
  createUsageRollUp(store, { keepMinutesH: 24, keepHoursD: 1 }).rollUp((T0 + 2 * DAY + 14 * HOUR) * 1000);
  t.equal(count(store.db, 'usage_day').rows, 1);
  t.equal(count(store.db, 'usage_hour').rows, 1);

  const dir = createDirectory(store);
  const all = dir.stats(owner, { from: T0, to: T0 + 3 * DAY, interval: 'day' });
  t.same(all.totals, { requests: 7, ru: 50, errors: 4 });
  t.same(all.methods, [
    { method: 'eth_call', requests: 6, ru: 30, errors: 4 },
    { method: 'eth_estimateGas', requests: 1, ru: 20, errors: 0 },
  ]);
  t.same(all.series, [
    { t: T0, requests: 1, ru: 15, errors: 0 },
    { t: T0 + DAY, requests: 1, ru: 20, errors: 0 },
    { t: T0 + 2 * DAY, requests: 5, ru: 15, errors: 4 },
  ]);
  const minutes = dir.stats(owner, { endpointId: 'ep_a', from: T0 + 2 * DAY, to: T0 + 3 * DAY, interval: 'minute' });
  t.same(minutes.series, [{ t: T0 + 2 * DAY + 13 * HOUR + 60, requests: 5, ru: 15, errors: 4 }]);
  const hours = dir.stats(owner, { from: T0, to: T0 + 3 * DAY, interval: 'hour' });
  t.same(
    hours.series.map((p) => p.t),
    [T0, T0 + DAY + HOUR, T0 + 2 * DAY + 13 * HOUR],
    'older usage at its coarser start',
  );
  t.same(
    dir.stats(owner, { endpointId: 'ep_x', from: T0, to: T0 + 3 * DAY, interval: 'day' }).totals,
    { requests: 0, ru: 0, errors: 0 },
    "another owner's endpoint shows nothing",
  );
  t.same(dir.stats(other, { from: T0, to: T0 + 3 * DAY, interval: 'day' }).totals, { requests: 1, ru: 15, errors: 0 });
  t.same(
    dir.stats(owner, { from: T0 + DAY, to: T0 + 2 * DAY, interval: 'day' }).totals,
    { requests: 1, ru: 20, errors: 0 },
    'to is exclusive',
  );
});
