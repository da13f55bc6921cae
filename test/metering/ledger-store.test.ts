/**
 * One table of cases run against both ledger stores, SQLite and PostgreSQL, each with two instances on
 * their own connections; after every write the ledger invariant is asserted (test/support/ledger-stores.ts).
 */
import t, { type Test } from 'tap';
import type { PendingFailure, PendingRow } from '../../src/metering/usage-rows.js';
import { type LedgerEngine, pgEngine, sqliteEngine } from '../support/ledger-stores.js';
import { startPostgres } from '../support/servers.js';

const MINUTE = Date.UTC(2025, 2, 10, 12, 0, 0) / 1000; // unix s
const HOUR = 3600;
const DAY = 86_400;

function row(ownerId: number, ru: number, more: Partial<PendingRow> = {}): PendingRow {
  return { endpointId: 'ep_a', ownerId, method: 'eth_call', t: MINUTE, status: 0, requests: 1, ru, ...more };
}

interface UsageTotals {
  rows: number;
  requests: number;
  ru: number;
}
async function totals(e: LedgerEngine, table: string): Promise<UsageTotals> {
  const [r] = await e.rows<UsageTotals>(
    `SELECT count(*) AS rows, coalesce(sum(requests), 0) AS requests, coalesce(sum(ru), 0) AS ru FROM ${table}`,
  );
  return { rows: Number(r!.rows), requests: Number(r!.requests), ru: Number(r!.ru) };
}

const cases: Record<string, (t: Test, e: LedgerEngine) => Promise<void>> = {
  async 'writeUsage adds the rows and debits each owner the RU of its rows'(t, e) {
    const one = await e.addOwner(1000);
    const two = await e.addOwner(500);
    const rows = [
      row(one, 60, { requests: 3 }),
      row(one, 40, { method: 'eth_getLogs' }),
      row(two, 0, { endpointId: 'ep_b', status: 429, requests: 2 }),
    ];
    t.same(
      await e.a.writeUsage({ id: 'a-1', instance: 'a', rows, ttlS: 60 }),
      new Map([
        [one, 900],
        [two, 500],
      ]),
    );
    // The same keys again, from the other instance: added to the rows, not beside them.
    t.same(await e.b.writeUsage({ id: 'b-1', instance: 'b', rows: [row(one, 15)], ttlS: 60 }), new Map([[one, 885]]));
    t.equal(await e.a.balance(one), 885);
    t.equal(await e.b.balance(two), 500);
    t.equal(await e.a.balance(999), undefined, 'an unknown owner has no balance');
    t.same(await e.rows(`SELECT endpoint_id, owner_id, method, t, status, requests, ru FROM usage_minute ORDER BY endpoint_id, method`), [
      { endpoint_id: 'ep_a', owner_id: one, method: 'eth_call', t: MINUTE, status: 0, requests: 4, ru: 75 },
      { endpoint_id: 'ep_a', owner_id: one, method: 'eth_getLogs', t: MINUTE, status: 0, requests: 1, ru: 40 },
      { endpoint_id: 'ep_b', owner_id: two, method: 'eth_call', t: MINUTE, status: 429, requests: 2, ru: 0 },
    ]);
    // A usage row is stored even for an owner without a row (no foreign key: a debit must never fail on one).
    t.same(await e.a.writeUsage({ id: 'a-2', instance: 'a', rows: [row(999, 5, { endpointId: 'ep_gone' })], ttlS: 60 }), new Map());
    t.same(await totals(e, 'usage_minute'), { rows: 4, requests: 8, ru: 120 });
  },

  async 'the same batch written twice is applied once, and answers the current balances'(t, e) {
    const owner = await e.addOwner(1000);
    const batch = { id: 'a-7', instance: 'a', rows: [row(owner, 50)], ttlS: 60 };
    t.same(await e.a.writeUsage(batch), new Map([[owner, 950]]));
    await e.topUp(owner, 100);
    t.same(await e.a.writeUsage(batch), new Map([[owner, 1050]]), 'a retry after a lost answer');
    // Even at once, on two connections.
    const again = { ...batch, id: 'a-8' };
    const answers = await Promise.all([e.a.writeUsage(again), e.b.writeUsage(again)]);
    t.same(answers, [new Map([[owner, 1000]]), new Map([[owner, 1000]])]);
    t.same(await totals(e, 'usage_minute'), { rows: 1, requests: 2, ru: 100 });
    t.same(await e.rows('SELECT id, instance FROM usage_batches ORDER BY id'), [
      { id: 'a-7', instance: 'a' },
      { id: 'a-8', instance: 'a' },
    ]);
  },

  async 'reservations never grant beyond the balance less the live reservations of every instance'(t, e) {
    const owner = await e.addOwner(100);
    t.equal(await e.a.reserve('a', owner, 60, 60), 60);
    t.equal(await e.b.reserve('b', owner, 60, 60), 40, 'what is left');
    t.equal(await e.a.reserve('a', owner, 10, 60), 0);
    t.equal(await e.b.reserve('b', owner, 1, 60), 0);
    t.equal(await e.a.balance(owner), 100, 'the balance counts RU spent, not RU reserved');
    // a spends 50 of its 60 and writes them: the balance and its reservation both drop by 50.
    t.same(await e.a.writeUsage({ id: 'a-1', instance: 'a', rows: [row(owner, 50)], ttlS: 60 }), new Map([[owner, 50]]));
    t.same(await e.rows('SELECT instance, ru FROM reservations ORDER BY instance'), [
      { instance: 'a', ru: 10 },
      { instance: 'b', ru: 40 },
    ]);
    t.equal(await e.b.reserve('b', owner, 1, 60), 0, 'still nothing available');
    // A surcharge past the reservation: the reservation stops at 0.
    await e.a.writeUsage({ id: 'a-2', instance: 'a', rows: [row(owner, 20, { method: 'eth_getLogs' })], ttlS: 60 });
    t.same(await e.rows(`SELECT ru FROM reservations WHERE instance = 'a'`), [{ ru: 0 }]);
    t.equal(await e.a.balance(owner), 30);
    await e.topUp(owner, 30);
    t.equal(await e.a.reserve('a', owner, 100, 60), 20, 'balance 60 − b’s 40');
    t.equal(await e.a.reserve('a', 999, 10, 60), 0, 'an unknown owner has nothing');
    await t.rejects(e.a.reserve('a', owner, -1, 60), RangeError);
    await t.rejects(e.a.reserve('a', owner, 1.5, 60), RangeError);
  },

  async 'an expired reservation counts for nothing; writes and heartbeats keep one alive'(t, e) {
    const [held, spent, lost] = [await e.addOwner(100), await e.addOwner(100), await e.addOwner(100)];
    t.equal(await e.a.reserve('a', held, 100, 1), 100);
    t.equal(await e.a.reserve('a', spent, 100, 1), 100);
    t.same(
      await e.a.renew('a', 60, { version: '1.0.0' }),
      new Map([
        [held, 100],
        [spent, 100],
      ]),
      'the heartbeat answers the live ones',
    );
    t.equal(await e.a.reserve('a', lost, 100, 1), 100);
    await e.a.writeUsage({ id: 'a-1', instance: 'a', rows: [row(spent, 10)], ttlS: 60 });
    t.equal(await e.b.reserve('b', lost, 100, 60), 0, 'live until its expiry');
    await e.pass(1.2);
    t.same(
      await e.a.renew('a', 60),
      new Map([
        [held, 100],
        [spent, 90],
      ]),
      'the expired one is no longer a’s',
    );
    t.equal(await e.b.reserve('b', held, 100, 60), 0, 'kept alive by the heartbeat');
    t.equal(await e.b.reserve('b', spent, 100, 60), 0, 'kept alive by the write');
    t.equal(await e.b.reserve('b', lost, 100, 60), 100, 'freed at its expiry');
    await e.b.release('b', lost);
    t.equal(await e.a.reserve('a', lost, 30, 60), 30);
    t.same(await e.rows(`SELECT ru FROM reservations WHERE owner_id = ${lost}`), [{ ru: 30 }], 'an expired row starts afresh');
  },

  async 'release gives back some of one owner’s RU, all of one owner’s, or all'(t, e) {
    const [one, two] = [await e.addOwner(100), await e.addOwner(100)];
    await e.a.reserve('a', one, 100, 60);
    await e.a.reserve('a', two, 100, 60);
    await e.a.release('a', one, 30);
    t.equal(await e.b.reserve('b', one, 100, 60), 30);
    await e.a.release('a', one);
    t.equal(await e.b.reserve('b', one, 100, 60), 70);
    t.equal(await e.b.reserve('b', two, 100, 60), 0);
    await e.a.release('a', two, 500);
    t.same(await e.rows(`SELECT ru FROM reservations WHERE instance = 'a'`), [{ ru: 0 }], 'never below 0');
    await e.b.release('b');
    t.same(await e.rows('SELECT instance FROM reservations'), [{ instance: 'a' }], 'a clean stop leaves nothing of b');
    t.equal(await e.a.reserve('a', one, 100, 60), 100);
    await t.rejects(e.a.release('a', one, -5), RangeError);
  },

  async 'instances are listed with their first and last heartbeats'(t, e) {
    t.same(await e.a.instances(), []);
    await e.a.renew('a', 60, { version: '1.0.0', pid: 7 });
    await e.b.renew('b', 60);
    const [a1, b1] = await e.b.instances();
    t.match(a1, { id: 'a', info: { version: '1.0.0', pid: 7 } });
    t.match(b1, { id: 'b', info: {} });
    t.equal(a1!.startedAt, a1!.heartbeatAt);
    await e.pass(0.05);
    await e.a.renew('a', 60);
    const [a2] = await e.a.instances();
    t.equal(a2!.startedAt, a1!.startedAt);
    t.ok(a2!.heartbeatAt > a1!.heartbeatAt, 'the heartbeat moves');
    t.same(a2!.info, { version: '1.0.0', pid: 7 }, 'the info is kept when not sent');
  },

  async 'rollUp moves minutes into hours and hours into days with every total kept'(t, e) {
    const owner = await e.addOwner(1_000_000);
    const day = MINUTE - (MINUTE % DAY);
    // Two days and a half of rows, one each 10 minutes, two keys each.
    let batch = 0;
    for (let at = day; at < day + 2.5 * DAY; at += 6 * 600) {
      const rows = [];
      for (let m = at; m < at + 6 * 600; m += 600) rows.push(row(owner, 20, { t: m }), row(owner, 5, { t: m, status: 429 }));
      await (batch % 2 === 0 ? e.a : e.b).writeUsage({ id: `w-${batch++}`, instance: 'a', rows, ttlS: 60 });
    }
    const before = await totals(e, 'usage_minute');
    t.same(before, { rows: 720, requests: 720, ru: 9000 });
    const nowMs = (day + 2 * DAY + 12 * HOUR + 1800) * 1000; // day 3, 12:30
    // Both instances at once: every minute row moves once.
    const [x, y] = await Promise.all([e.a.rollUp(nowMs), e.b.rollUp(nowMs)]);
    t.equal(x.minuteRows + y.minuteRows, 36 * 6 * 2, 'the first 36 hours of minutes');
    t.equal(x.hourRows + y.hourRows, 24 * 2, 'the first day of hours');
    const all = await Promise.all(['usage_minute', 'usage_hour', 'usage_day'].map((table) => totals(e, table)));
    t.same(
      all.map((a) => a.rows),
      [720 - 36 * 6 * 2, 12 * 2, 2],
    );
    t.same(
      { requests: all.reduce((s, a) => s + a.requests, 0), ru: all.reduce((s, a) => s + a.ru, 0) },
      { requests: before.requests, ru: before.ru },
      'nothing lost or doubled',
    );
    t.same(await e.a.rollUp(nowMs), { minuteRows: 0, hourRows: 0 });
  },

  async "failures: written with a fresh batch only, each endpoint's ring cut to its newest (failuresKept 3)"(t, e) {
    const one = await e.addOwner(1000);
    const failure = (endpointId: string, i: number): PendingFailure => ({
      endpointId,
      ownerId: one,
      at: MINUTE * 1000 + i,
      method: 'eth_call',
      httpStatus: 502,
      code: -32603,
      error: 'upstream_error',
      message: 'Upstream node error',
      upstream: `node-${i}`,
    });
    const failures = [0, 1, 2, 3, 4].map((i) => failure('ep_a', i)).concat([failure('ep_b', 9)]);
    const batch = { id: 'a-1', instance: 'a', rows: [row(one, 0, { status: 502, requests: 6 })], failures, ttlS: 60 };
    await e.a.writeUsage(batch);
    await e.b.writeUsage(batch);
    const kept = async (): Promise<Array<{ endpoint_id: string; upstream: string }>> =>
      e.rows('SELECT endpoint_id, upstream FROM call_failures ORDER BY endpoint_id, seq');
    t.same(
      await kept(),
      [
        { endpoint_id: 'ep_a', upstream: 'node-2' },
        { endpoint_id: 'ep_a', upstream: 'node-3' },
        { endpoint_id: 'ep_a', upstream: 'node-4' },
        { endpoint_id: 'ep_b', upstream: 'node-9' },
      ],
      'the newest three of ep_a, once although the batch was sent twice',
    );
    await e.a.writeUsage({ id: 'a-2', instance: 'a', rows: [row(one, 0, { status: 502 })], failures: [failure('ep_a', 5)], ttlS: 60 });
    t.same(
      (await kept()).map((k) => k.upstream),
      ['node-3', 'node-4', 'node-5', 'node-9'],
      'one more: the oldest of ep_a goes',
    );
  },

  async 'latency histograms are added on upsert and summed bucket by bucket on roll-up'(t, e) {
    const one = await e.addOwner(1000);
    const latency = (bucket: number, n: number): number[] => Array.from({ length: 24 }, (_, i) => (i === bucket ? n : 0));
    await e.a.writeUsage({ id: 'a-1', instance: 'a', rows: [row(one, 1, { latency: latency(3, 2) })], ttlS: 60 });
    await e.b.writeUsage({ id: 'b-1', instance: 'b', rows: [row(one, 1, { latency: latency(5, 1) })], ttlS: 60 });
    await e.a.writeUsage({ id: 'a-2', instance: 'a', rows: [row(one, 1, { t: MINUTE + 60, latency: latency(3, 4) })], ttlS: 60 });
    const sums = 'SELECT sum(lat_3) AS l3, sum(lat_5) AS l5, count(*) AS n FROM';
    t.same(
      (await e.rows<{ l3: number; l5: number; n: number }>(`${sums} usage_minute`)).map((r) => [Number(r.l3), Number(r.l5), Number(r.n)]),
      [[6, 1, 2]],
      'same key: added',
    );
    await e.a.rollUp((MINUTE + 3 * DAY) * 1000);
    const all = await e.rows<{ l3: number; l5: number; n: number }>(
      `SELECT sum(lat_3) AS l3, sum(lat_5) AS l5 FROM (SELECT lat_3, lat_5 FROM usage_minute UNION ALL SELECT lat_3, lat_5 FROM usage_hour
        UNION ALL SELECT lat_3, lat_5 FROM usage_day) u`,
    );
    t.same(
      all.map((r) => [Number(r.l3), Number(r.l5)]),
      [[6, 1]],
      'nothing lost or doubled',
    );
    t.same((await e.rows<{ l3: number }>('SELECT lat_3 AS l3 FROM usage_minute')).length, 0, 'the minutes moved');
  },

  async 'prune forgets old batch ids, silent instances and long-expired reservations'(t, e) {
    const owner = await e.addOwner(100);
    await e.a.writeUsage({ id: 'a-1', instance: 'a', rows: [row(owner, 10)], ttlS: 60 });
    await e.a.reserve('a', owner, 10, 0.2);
    await e.a.renew('a', 0.2);
    await e.pass(1);
    await e.b.renew('b', 60);
    await e.b.reserve('b', owner, 10, 60);
    // Older than half a second: what a did (its reservation expired 0.8 s ago), not what b just did.
    t.same(await e.b.prune(0.5), { batches: 1, instances: 1, reservations: 1 });
    t.same(
      (await e.b.instances()).map((i) => i.id),
      ['b'],
    );
    t.same(await e.rows('SELECT instance FROM reservations'), [{ instance: 'b' }]);
    // Which is why a batch must not be retried after that long.
    t.same(await e.a.writeUsage({ id: 'a-1', instance: 'a', rows: [row(owner, 10)], ttlS: 60 }), new Map([[owner, 80]]));
  },

  async 'a closed store refuses new calls after those in flight'(t, e) {
    const owner = await e.addOwner(100);
    const inFlight = e.a.reserve('a', owner, 10, 60);
    const closing = e.a.close();
    t.equal(await inFlight, 10);
    await closing;
    await t.rejects(e.a.balance(owner), { message: 'the ledger store is closed' });
    t.equal(await e.b.balance(owner), 100, 'the other instance is not concerned');
  },
};

t.test('sqlite', async (t) => {
  for (const [name, run] of Object.entries(cases)) t.test(name, (t) => run(t, sqliteEngine(t)));
});

t.test('postgres', async (t) => {
  const server = await startPostgres(t);
  for (const [name, run] of Object.entries(cases)) t.test(name, async (t) => run(t, await pgEngine(t, server)));
});
