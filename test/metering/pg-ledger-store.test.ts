/**
 * The PostgreSQL ledger store under concurrency: two instances (two pools) reserving and writing for the
 * same owners at once never grant more than the balance, never deadlock, and keep the ledger exact.
 */
import t, { type Test } from 'tap';
import type { CallReservations, LedgerStore } from '../../src/metering/ledger-store.js';
import { createPgLedgerStore } from '../../src/metering/pg-ledger-store.js';
import type { PendingRow } from '../../src/metering/usage-rows.js';
import { openPgStore, type PgStore } from '../../src/store/pg-open.js';
import { addPgOwner, RETENTION } from '../support/ledger-stores.js';
import { startPostgres } from '../support/servers.js';
import { INVARIANT_GAPS_SQL } from '../store/temp-store.js';

const MINUTE = Date.UTC(2025, 2, 10, 12, 0, 0) / 1000;

const server = await startPostgres(t);

/** Two instances' stores, each on a pool of its own. */
async function twoInstances(t: Test): Promise<{ pools: PgStore[]; stores: Array<LedgerStore & CallReservations> }> {
  const pools = await Promise.all([openPgStore(server.url), openPgStore(server.url)]);
  t.teardown(() => Promise.all(pools.map((p) => p.close())));
  return { pools, stores: pools.map((p) => createPgLedgerStore(p, RETENTION)) };
}

t.test('200 concurrent reservations from two instances for a balance of K grant exactly K in total', async (t) => {
  const { pools, stores } = await twoInstances(t);
  const K = 1000;
  const owner = await addPgOwner(pools[0]!.pool, K);
  // 200 asks of 1..30 RU (3,100 in all), half through each instance, all at once.
  const grants = await Promise.all(
    Array.from({ length: 200 }, (_, i) => stores[i % 2]!.reserve(i % 2 === 0 ? 'a' : 'b', owner, (i % 30) + 1, 60)),
  );
  t.equal(
    grants.reduce((s, g) => s + g, 0),
    K,
    'never more than K, and all of it to someone',
  );
  t.ok(
    grants.every((g, i) => g >= 0 && g <= (i % 30) + 1),
    'each grant within its ask',
  );
  const reserved = await pools[1]!.pool.query<{ instance: string; ru: number }>('SELECT instance, ru FROM reservations ORDER BY instance');
  t.equal(
    reserved.rows.reduce((s, r) => s + r.ru, 0),
    K,
  );
  for (const r of reserved.rows) {
    t.equal(
      r.ru,
      grants.filter((_, i) => (i % 2 === 0 ? 'a' : 'b') === r.instance).reduce((s, g) => s + g, 0),
      `${r.instance}'s row is its grants`,
    );
  }
  t.equal(await stores[0]!.balance(owner), K, 'reserved is not spent');
});

t.test('reserveCalls gives back first, then sets each call aside whole or not at all, and says what is left', async (t) => {
  const { pools, stores } = await twoInstances(t);
  const [a, b] = stores as [LedgerStore & CallReservations, LedgerStore & CallReservations];
  const owner = await addPgOwner(pools[0]!.pool, 40);
  t.equal(await a.reserve('a', owner, 25, 60), 25);
  t.equal(await b.reserve('b', owner, 25, 60), 15, 'the rest');
  // Neither can pay a call of 30 from its part; b gives its 15 back and asks for the call whole: not there.
  t.same(await b.reserveCalls('b', owner, 15, [30], 60), { granted: [0], free: 15, othersHeld: 25 }, 'refused whole, not in part');
  // a gives its 25 back: with b's 15, the call is paid, and a call of 20 after it is not; one of 10 is.
  t.same(await a.reserveCalls('a', owner, 25, [30, 20, 10], 60), { granted: [30, 0, 10], free: 0, othersHeld: 0 });
  const rows = await pools[0]!.pool.query('SELECT instance, ru FROM reservations WHERE owner_id = $1 ORDER BY instance', [owner]);
  t.same(rows.rows, [
    { instance: 'a', ru: 40 },
    { instance: 'b', ru: 0 },
  ]);
  t.same(await a.reserveCalls('a', 999, 0, [1], 60), { granted: [0], free: 0, othersHeld: 0 }, 'an unknown owner has nothing');
  await t.rejects(a.reserveCalls('a', owner, -1, [1], 60), RangeError);
  await t.rejects(a.reserveCalls('a', owner, 0, [1.5], 60), RangeError);
});

t.test('reserving, spending, writing and heartbeats at once on two instances: no overdraft, no deadlock, exact totals', async (t) => {
  const { pools, stores } = await twoInstances(t);
  const pool = pools[0]!.pool;
  const K = 2000;
  const owners = [await addPgOwner(pool, K), await addPgOwner(pool, K)];
  let running = true;

  // Looks at every snapshot it can while the instances work: live reservations never pass a balance.
  const overdrafts: unknown[] = [];
  const watch = (async () => {
    while (running) {
      const { rows } = await pool.query<{ id: number; free: number; balance: number }>(`
        SELECT o.id, o.ru_balance AS balance, o.ru_balance - coalesce((SELECT sum(ru) FROM reservations r
          WHERE r.owner_id = o.id AND r.expires_at > clock_timestamp()), 0) AS free FROM owners o`);
      overdrafts.push(...rows.filter((r) => r.free < 0 || r.balance < 0));
    }
  })();

  let batches = 0;
  const spentBy = new Map<number, number>(owners.map((o) => [o, 0]));
  async function instance(name: string, store: LedgerStore): Promise<void> {
    const local = new Map<number, number>(owners.map((o) => [o, 0]));
    // Four workers per instance share its reservations, as the calls of one daemon would. Balances, asks
    // and spends are even, so a spend splits into two rows of whole RU.
    const worker = async (w: number): Promise<void> => {
      for (let round = 0; ; round++) {
        for (const o of owners) {
          const granted = await store.reserve(name, o, 40, 60);
          local.set(o, local.get(o)! + granted);
        }
        const rows: PendingRow[] = [];
        for (const o of owners) {
          const spend = Math.min(local.get(o)!, 16 + 2 * ((w + round) % 7));
          local.set(o, local.get(o)! - spend);
          spentBy.set(o, spentBy.get(o)! + spend);
          // Every instance adds to the same few usage keys, in an order of its own.
          for (const ep of ['x', 'y'])
            rows.push({ endpointId: `ep_${o}_${ep}`, ownerId: o, method: 'eth_call', t: MINUTE, status: 0, requests: 1, ru: spend / 2 });
        }
        if (rows.every((r) => r.ru === 0)) return;
        if ((w + round) % 2 === 1) rows.reverse();
        await store.writeUsage({ id: `${name}-${w}-${round}`, instance: name, rows, ttlS: 60 });
        batches++;
        if (round % 5 === w) await store.renew(name, 60);
      }
    };
    await Promise.all([0, 1, 2, 3].map(worker));
    await store.release(name);
  }
  await Promise.all([instance('a', stores[0]!), instance('b', stores[1]!)]);
  running = false;
  await watch;

  t.same(overdrafts, [], 'no snapshot saw reservations beyond a balance');
  t.ok(batches > 50, `${batches} batches written`);
  for (const o of owners) {
    t.equal(spentBy.get(o), K, 'every RU was spent by someone');
    t.equal(await stores[1]!.balance(o), 0);
  }
  const gaps = (await pool.query<{ id: number; gap: number }>(INVARIANT_GAPS_SQL)).rows;
  t.same(
    gaps.filter((g) => owners.includes(g.id)),
    owners.map((id) => ({ id, gap: 0 })),
    'credits − usage = balance',
  );
  t.same((await pool.query('SELECT owner_id FROM reservations WHERE owner_id = ANY($1) AND ru > 0', [owners])).rows, [], 'all released');
});

t.test('while PostgreSQL is down calls fail and apply nothing; back up, the batch retried is applied once', async (t) => {
  const { pools, stores } = await twoInstances(t);
  const [a, b] = stores as [LedgerStore & CallReservations, LedgerStore & CallReservations];
  const owner = await addPgOwner(pools[0]!.pool, 100);
  t.equal(await a.reserve('a', owner, 50, 60), 50);
  const batch = {
    id: 'a-down-1',
    instance: 'a',
    rows: [{ endpointId: 'ep_a', ownerId: owner, method: 'eth_call', t: MINUTE, status: 0, requests: 2, ru: 20 }],
    ttlS: 60,
  };
  // A clean stop: the test server runs with synchronous_commit off, so a kill could lose what was committed.
  await server.stop();
  await t.rejects(a.writeUsage(batch), 'refused while down');
  await t.rejects(a.reserve('a', owner, 10, 60));
  await server.start();
  t.same(await a.writeUsage(batch), new Map([[owner, 80]]), 'the retry, on a connection made anew');
  t.same(await b.writeUsage(batch), new Map([[owner, 80]]), 'once only, whoever retries');
  const pool = pools[1]!.pool;
  t.same((await pool.query('SELECT instance, ru FROM reservations WHERE owner_id = $1', [owner])).rows, [{ instance: 'a', ru: 30 }]);
  t.same((await pool.query('SELECT requests, ru FROM usage_minute WHERE owner_id = $1', [owner])).rows, [{ requests: 2, ru: 20 }]);
  t.equal(await b.reserve('b', owner, 100, 60), 50, 'balance 80 less a’s 30');
});
