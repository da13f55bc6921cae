/**
 * The fleet ledger over a real PostgreSQL: two instances spending one owner's balance give exactly the
 * calls it pays for; an instance cut off from the store stops spending at its reservations' expiry and the
 * other gets them; a store that goes away and returns loses and doubles nothing.
 */
import t, { type Test } from 'tap';
import { createFleetLedger, type FleetLedger, type FleetLedgerStore } from '../../src/metering/fleet-ledger.js';
import { createPgLedgerStore } from '../../src/metering/pg-ledger-store.js';
import { openPgStore } from '../../src/store/pg-open.js';
import { addPgOwner, RETENTION } from '../support/ledger-stores.js';
import { startPostgres } from '../support/servers.js';
import { INVARIANT_GAPS_SQL } from '../store/temp-store.js';
import { waitFor } from '../support/wait-for.js';

const USAGE = { endpointId: 'ep_test', method: 'eth_call', status: 0 };

/** An instance: its own pool, its ledger store and its fleet ledger. */
async function instance(t: Test, url: string, name: string, options: { ttlS?: number; blockRu?: number } = {}) {
  const pg = await openPgStore(url, { connectTimeoutMs: 500 });
  const store = createPgLedgerStore(pg, RETENTION);
  const ledger = createFleetLedger(store, {
    instance: name,
    reservationTtlS: options.ttlS ?? 5,
    blockRu: options.blockRu ?? 50,
    flushIntervalMs: 50,
  });
  let closed = false;
  let cut = false;
  const close = async (): Promise<void> => {
    if (closed) return;
    closed = true;
    await ledger.stop();
    if (!cut) await pg.close();
  };
  t.teardown(close);
  /** The instance loses the store for good (as a killed one would): every store call fails from now on. */
  const cutOff = async (): Promise<void> => {
    cut = true;
    await pg.close();
  };
  return { pg, ledger, close, cutOff };
}

/** One call of `ru` through `ledger`: true when served (and charged), false for a 402. Throws for a 503. */
async function call(ledger: FleetLedger, ownerId: number, ru: number): Promise<boolean> {
  const wait = ledger.prepare(ownerId, ru);
  if (wait !== null) await wait;
  const reservation = ledger.reserve(ownerId, ru);
  if (reservation === null) return false;
  // An answer takes a moment: calls overlap.
  await new Promise((r) => setImmediate(r));
  ledger.settle(reservation, ru, USAGE);
  return true;
}

/** Clients that each call until refused; resolves with the calls served. */
async function hammer(ledger: FleetLedger, ownerId: number, ru: number, clients: number): Promise<number> {
  let served = 0;
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (await call(ledger, ownerId, ru)) served++;
    }),
  );
  return served;
}

t.test('a balance for exactly K calls, hammered through two instances at once, serves exactly K', async (t) => {
  const server = await startPostgres(t);
  const a = await instance(t, server.url, 'gw-a');
  const b = await instance(t, server.url, 'gw-b');
  const K = 137;
  const owner = await addPgOwner(a.pg.pool, K * 5);
  const [onA, onB] = await Promise.all([hammer(a.ledger, owner, 5, 8), hammer(b.ledger, owner, 5, 8)]);
  t.equal(onA + onB, K, `${onA} on a + ${onB} on b`);
  t.ok(onA > 0 && onB > 0, 'both instances served');
  await a.close();
  await b.close();
  const check = await openPgStore(server.url);
  t.teardown(() => check.close());
  const q = async <R extends object>(sql: string): Promise<R[]> => (await check.pool.query<R>(sql)).rows;
  t.same(await q('SELECT ru_balance FROM owners'), [{ ru_balance: 0 }], 'every RU spent, none twice');
  t.same(await q('SELECT coalesce(sum(requests), 0)::int AS n, coalesce(sum(ru), 0)::int AS ru FROM usage_minute'), [{ n: K, ru: K * 5 }]);
  t.same(await q('SELECT * FROM reservations WHERE ru > 0'), [], 'a clean stop gives back what was held');
  t.same(
    (await q<{ gap: number }>(INVARIANT_GAPS_SQL)).filter((g) => g.gap !== 0),
    [],
  );
});

for (const n of [2, 3]) {
  t.test(`the last RU: ${n} instances with blocks of 1000 serve a balance of K calls of 15 RU exactly`, async (t) => {
    const server = await startPostgres(t);
    const fleet = await Promise.all(Array.from({ length: n }, (_, i) => instance(t, server.url, `gw-${i}`, { blockRu: 1000 })));
    const check = await openPgStore(server.url);
    t.teardown(() => check.close());
    // The issue's case (100 calls' worth), one short of a block's worth of calls, and a balance of K calls and some RU.
    for (const [calls, extra] of [
      [100, 0],
      [66, 0],
      [33, 14],
    ] as const) {
      const owner = await addPgOwner(fleet[0]!.pg.pool, calls * 15 + extra);
      const served = await Promise.all(fleet.map((i) => hammer(i.ledger, owner, 15, 16)));
      t.equal(
        served.reduce((a, b) => a + b, 0),
        calls,
        `${calls} calls' worth + ${extra} RU: ${served.join(' + ')} calls served`,
      );
      await Promise.all(fleet.map((i) => i.ledger.flushNow()));
      const left = (await check.pool.query<{ ru_balance: number }>('SELECT ru_balance FROM owners WHERE id = $1', [owner])).rows[0]!
        .ru_balance;
      t.equal(left, extra, `the balance ends at ${left}, under one call`);
    }
  });
}

t.test('an instance cut off from the store stops spending at its reservations expiry; the other then gets them', async (t) => {
  const server = await startPostgres(t);
  const a = await instance(t, server.url, 'gw-a', { ttlS: 1, blockRu: 100 });
  const b = await instance(t, server.url, 'gw-b', { ttlS: 1, blockRu: 100 });
  const owner = await addPgOwner(a.pg.pool, 100);
  t.ok(await call(a.ledger, owner, 10), 'a reserved the whole balance and spent 10');
  t.notOk(await call(b.ledger, owner, 10), 'nothing left for b');
  await a.ledger.flushNow();
  // a loses the store (as a killed instance would): its renewals fail from now on.
  await a.cutOff();
  const cutAt = Date.now();
  await waitFor(() => a.ledger.available(owner) === 0, { what: 'a to stop spending', ms: 5000 });
  t.ok(Date.now() - cutAt < 1500, 'a stopped spending within the TTL');
  await t.rejects(call(a.ledger, owner, 10), 'a call that needs the store is refused (503)');
  // b is refused until the store lets a's reservation expire, then gets its 90 RU.
  let served = 0;
  const deadline = Date.now() + 5000;
  while (served < 9 && Date.now() < deadline) {
    if (await call(b.ledger, owner, 10)) served++;
    else await new Promise((r) => setTimeout(r, 100));
  }
  t.equal(served, 9, 'b served what a had reserved and not spent');
  t.notOk(await call(b.ledger, owner, 10), 'and no more');
});

t.test('the store away and back: calls go on against what is held; each batch is written once', async (t) => {
  const server = await startPostgres(t);
  const a = await instance(t, server.url, 'gw-a', { ttlS: 10, blockRu: 1000 });
  const owner = await addPgOwner(a.pg.pool, 5000);
  for (let i = 0; i < 10; i++) t.ok(await call(a.ledger, owner, 7));
  t.ok(await a.ledger.flushNow());
  await server.stop();
  for (let i = 0; i < 20; i++) t.ok(await call(a.ledger, owner, 7), 'served from the block while the store is away');
  t.notOk(await a.ledger.flushNow(), 'the write fails');
  t.notOk(a.ledger.healthy());
  t.equal(a.ledger.pending().ru, 140, 'kept for the next try');
  await server.start();
  let written = false;
  for (let i = 0; i < 50 && !written; i++) {
    written = await a.ledger.flushNow();
    if (!written) await new Promise((r) => setTimeout(r, 100));
  }
  t.ok(written, 'written once the store is back');
  t.ok(a.ledger.healthy());
  await a.close();
  const check = await openPgStore(server.url);
  t.teardown(() => check.close());
  const q = async <R extends object>(sql: string): Promise<R[]> => (await check.pool.query<R>(sql)).rows;
  t.same(await q('SELECT ru_balance FROM owners'), [{ ru_balance: 5000 - 30 * 7 }], 'every call charged once');
  t.same(
    (await q<{ gap: number }>(INVARIANT_GAPS_SQL)).filter((g) => g.gap !== 0),
    [],
  );
});

/**
 * A fleet ledger (TTL 1 s, flush interval 100 ms, blocks of 100 RU) on a clock the test sets, over a store
 * whose renewals fail or whose reservations grant nothing on cue (`cut.renewing`, `cut.granting`): an
 * instance cut off from the store while a reservation passes, which a real PostgreSQL cannot be made to do.
 */
function cutOffLedger(t: Test) {
  const clock = { now: 0 };
  const cut = { renewing: true, granting: true };
  const store: FleetLedgerStore = {
    reserve: async (_instance, _ownerId, ru) => (cut.granting ? ru : 0),
    reserveCalls: async (_instance, _ownerId, _giveBack, calls) => ({
      granted: calls.map((ru) => (cut.granting ? ru : 0)),
      free: 0,
      othersHeld: 0,
    }),
    renew: async () => {
      if (!cut.renewing) throw new Error('store unreachable');
      return new Map([[1, 100]]);
    },
    writeUsage: async () => new Map(),
    release: async () => {},
  };
  const ledger = createFleetLedger(store, {
    instance: 'gw-a',
    reservationTtlS: 1,
    blockRu: 100,
    flushIntervalMs: 100,
    now: () => clock.now,
  });
  t.teardown(() => ledger.stop());
  return { ledger, cut, clock };
}

t.test("one owner's reservation passing does not keep another's alive while renewals fail", async (t) => {
  const { ledger, cut, clock } = cutOffLedger(t);
  t.ok(await call(ledger, 1, 10), 'owner 1 reserved a block and spent 10');
  t.ok(await ledger.flushNow(), 'renewed at 0: alive until 900');
  cut.renewing = false;
  clock.now = 800;
  t.ok(await call(ledger, 2, 10), 'owner 2 reserved at 800: alive until 1700');
  clock.now = 1000;
  t.equal(ledger.available(1), 0, "owner 1's reservation may have expired: nothing more is spent from it");
  t.equal(ledger.available(2), 90, "owner 2's is alive: its own reservation passed at 800");
  clock.now = 1700;
  t.equal(ledger.available(2), 0, 'and spent until its own margin');
});

t.test('a reservation that grants nothing extends nothing', async (t) => {
  // The store writes a reservation, and so moves its expiry, only when it grants RU.
  const { ledger, cut, clock } = cutOffLedger(t);
  t.ok(await call(ledger, 1, 40), 'a block of 100 reserved at 0 (alive until 900); 40 spent, 60 left');
  cut.renewing = false;
  cut.granting = false;
  clock.now = 800;
  // Under half a block left: the call asks for more in the background, and the store has none to give.
  t.ok(await call(ledger, 1, 20));
  await new Promise((r) => setImmediate(r));
  clock.now = 1000;
  t.equal(ledger.available(1), 0, 'the empty grant at 800 did not keep the block alive past 900');
});

/** A ledger on its own clock over a store that grants what is asked; `released` records each give-back. */
function idleLedger(t: Test) {
  const clock = { now: 0 };
  const released: Array<[string, number | undefined, number | undefined]> = [];
  const store: FleetLedgerStore = {
    reserve: async (_instance, _ownerId, ru) => ru,
    reserveCalls: async (_instance, _ownerId, _giveBack, calls) => ({ granted: [...calls], free: 1000, othersHeld: 0 }),
    renew: async () => new Map([[1, 90]]),
    writeUsage: async () => new Map(),
    release: async (instance, ownerId, ru) => {
      released.push([instance, ownerId, ru]);
    },
  };
  const ledger = createFleetLedger(store, {
    instance: 'gw-a',
    reservationTtlS: 10,
    blockRu: 100,
    flushIntervalMs: 100,
    now: () => clock.now,
  });
  t.teardown(() => ledger.stop());
  return { ledger, clock, released };
}

t.test("an owner's block unused for 5 s goes back at the next flush, the amount held only", async (t) => {
  const { ledger, clock, released } = idleLedger(t);
  t.ok(await call(ledger, 1, 10), 'a block of 100 reserved, 10 spent');
  clock.now = 4000;
  t.ok(await ledger.flushNow());
  t.same(released, [], 'used 4 s ago: kept');
  t.equal(ledger.available(1), 90);
  clock.now = 5001;
  t.ok(await ledger.flushNow());
  t.same(released, [['gw-a', 1, 90]], 'unused for 5 s: its 90 RU given back');
  t.equal(ledger.available(1), 0);
  t.ok(await call(ledger, 1, 10), 'the next call reserves afresh');
});

t.test('a subscriber charged here keeps its block past 5 s without calls; a delivery after a quiet minute goes on credit', async (t) => {
  const { ledger, clock, released } = idleLedger(t);
  t.ok(await call(ledger, 1, 10), 'eth_subscribe: a block of 100 reserved, 10 spent');
  t.ok(ledger.chargeDeliveries(1, 5, USAGE, 1), 'the first head');
  clock.now = 6000;
  t.ok(await ledger.flushNow());
  t.same(released, [], 'deliveries charged here 6 s ago: the block stays');
  clock.now = 12_000;
  t.ok(ledger.chargeDeliveries(1, 5, USAGE, 1), 'the second head is paid: the subscription stays open');
  clock.now = 80_000;
  t.ok(await ledger.flushNow());
  t.same(released, [['gw-a', 1, 80]], 'a minute without deliveries or calls: the block goes back');
  t.ok(ledger.chargeDeliveries(1, 5, USAGE, 1), 'a head after that goes on credit, not closing the subscription');
  await new Promise((r) => setImmediate(r));
  t.equal(ledger.available(1), 95, 'a block asked for at once, the credit paid from it');
});
