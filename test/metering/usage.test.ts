import t from 'tap';
import { createLedger } from '../../src/metering/ledger.js';
import { createUsageRollUp } from '../../src/metering/usage.js';
import { createDirectory } from '../../src/tenancy/directory.js';
import { addOwner, invariantGaps, tempStore } from '../store/temp-store.js';

const HOUR = 3600;
const DAY = 86_400;
const T0 = Date.UTC(2025, 2, 10, 0, 0, 0) / 1000; // a midnight, in unix seconds

/** The counts of a stats figure, without its success rate and latency (tested on their own below). */
function counts<F extends { requests: number; ru: number; errors: number; t?: number; method?: string }>(f: F): object {
  const { requests, ru, errors } = f;
  return { ...(f.method !== undefined ? { method: f.method } : {}), ...(f.t !== undefined ? { t: f.t } : {}), requests, ru, errors };
}

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
  t.same(counts(all.totals), { requests: 7, ru: 50, errors: 4 });
  t.same(all.methods.map(counts), [
    { method: 'eth_call', requests: 6, ru: 30, errors: 4 },
    { method: 'eth_estimateGas', requests: 1, ru: 20, errors: 0 },
  ]);
  t.same(all.series.map(counts), [
    { t: T0, requests: 1, ru: 15, errors: 0 },
    { t: T0 + DAY, requests: 1, ru: 20, errors: 0 },
    { t: T0 + 2 * DAY, requests: 5, ru: 15, errors: 4 },
  ]);
  const minutes = dir.stats(owner, { endpointId: 'ep_a', from: T0 + 2 * DAY, to: T0 + 3 * DAY, interval: 'minute' });
  t.same(minutes.series.map(counts), [{ t: T0 + 2 * DAY + 13 * HOUR + 60, requests: 5, ru: 15, errors: 4 }]);
  const hours = dir.stats(owner, { from: T0, to: T0 + 3 * DAY, interval: 'hour' });
  t.same(
    hours.series.map((p) => p.t),
    [T0, T0 + DAY + HOUR, T0 + 2 * DAY + 13 * HOUR],
    'older usage at its coarser start',
  );
  t.same(
    counts(dir.stats(owner, { endpointId: 'ep_x', from: T0, to: T0 + 3 * DAY, interval: 'day' }).totals),
    { requests: 0, ru: 0, errors: 0 },
    "another owner's endpoint shows nothing",
  );
  t.same(counts(dir.stats(other, { from: T0, to: T0 + 3 * DAY, interval: 'day' }).totals), { requests: 1, ru: 15, errors: 0 });
  t.same(
    counts(dir.stats(owner, { from: T0 + DAY, to: T0 + 2 * DAY, interval: 'day' }).totals),
    { requests: 1, ru: 20, errors: 0 },
    'to is exclusive',
  );
});

t.test('latency histograms merge on roll-up: the percentiles of an hour and a day stay those of its calls', async (t) => {
  const store = tempStore(t);
  const owner = addOwner(store.db, 1_000_000);
  let clock = T0 * 1000;
  const ledger = createLedger(store, { flushIntervalMs: 60_000, now: () => clock });
  t.teardown(() => ledger.close());
  // Two days; each minute of the first hour of each day, calls of 1 … 100 ms in turn (with a refusal, untimed
  // in the figures), so every minute's own percentiles differ from the hour's and the day's.
  for (const day of [0, 1]) {
    for (let m = 0; m < 60; m++) {
      clock = (T0 + day * DAY + m * 60 + 1) * 1000;
      for (let k = 0; k < 5; k++) {
        const latencyMs = ((m * 5 + k) % 100) + 1;
        ledger.settle(ledger.reserve(owner, 1)!, 1, { endpointId: 'ep_a', method: 'eth_call', status: 0, latencyMs });
      }
      ledger.recordUsage(owner, { endpointId: 'ep_a', method: 'eth_call', status: 429, latencyMs: 0.01 });
    }
  }
  t.ok(ledger.flush());
  const dir = createDirectory(store);
  const query = { from: T0, to: T0 + 2 * DAY, interval: 'day' } as const;
  const before = dir.stats(owner, query);
  const hourBefore = dir.stats(owner, { ...query, interval: 'hour' });
  // 300 calls a day, 1 … 100 ms three times: p50 is 50 ms, in the (30, 50] bucket; p95 and p99 in (70, 100].
  const day1 = before.series[0]!;
  t.equal(day1.requests, 360);
  t.equal(day1.success_rate, 0.8333);
  t.ok(day1.latency_ms.p50! > 30 && day1.latency_ms.p50! <= 50, `p50 ${day1.latency_ms.p50}`);
  t.ok(day1.latency_ms.p95! > 70 && day1.latency_ms.p95! <= 100, `p95 ${day1.latency_ms.p95}`);
  t.ok(day1.latency_ms.p99! > day1.latency_ms.p95!, 'p99 above p95');

  createUsageRollUp(store, { keepMinutesH: 1, keepHoursD: 1 }).rollUp((T0 + 2 * DAY + 2 * HOUR) * 1000);
  t.equal(count(store.db, 'usage_minute').rows, 0);
  t.equal(count(store.db, 'usage_day').rows, 2, 'day 1: its two rows (success, refusal)');
  t.equal(count(store.db, 'usage_hour').rows, 2, 'day 2: its hour, two rows');
  t.same(dir.stats(owner, query), before, 'read from day and hour rows: the same figures as from the minutes');
  t.same(dir.stats(owner, { from: T0 + DAY, to: T0 + 2 * DAY, interval: 'hour' }).series, hourBefore.series.slice(1));
  t.same(invariantGaps(store.db), [{ id: owner, gap: 0 }]);
});
