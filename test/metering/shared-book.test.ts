/**
 * The bank property over the shared book: whatever mix of reservations, settlements (with surcharges),
 * refunds, deliveries, shipments, flushes and top-ups from another connection, every view answers
 * `available` = credits the host has read − every debit made − open reservations, a reservation passes
 * exactly when that covers it, and after the last flush the file holds credits − debits with the usage
 * rows to match.
 */
import t from 'tap';
import { createLedgerHost } from '../../src/metering/ledger-host.js';
import { createLedgerView } from '../../src/metering/ledger-view.js';
import type { Ledger, Reservation } from '../../src/metering/ledger.js';
import { seeded } from '../support/seeded.js';
import { addOwner, invariantGaps, tempDbPath, tempStore, topUp } from '../store/temp-store.js';

// An endpoint belongs to one owner (usage rows are keyed by endpoint), hence the owner id in each.
interface Account {
  id: number;
  /** Credits the host has read (opening balance and noticed top-ups). */
  read: number;
  /** Credits committed by the CLI that the host has not read yet. */
  unread: number;
  /** Every debit made (settled, charged), written or not. */
  debits: number;
  /** Debits made since the last flush: a flush reads the owner's balance (RETURNING) when not 0. */
  unflushed: number;
  reserved: number;
}

for (const seed of [1, 2, 3]) {
  t.test(`bank property, seed ${seed}`, async (t) => {
    const random = seeded(seed);
    const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
    const int = (max: number): number => Math.floor(random() * (max + 1));
    const path = tempDbPath(t);
    const store = tempStore(t, path);
    const cli = tempStore(t, path);
    const accounts: Account[] = [0, 150, 400, 1000].map((ru) => ({
      id: addOwner(store.db, ru),
      read: ru,
      unread: 0,
      debits: 0,
      unflushed: 0,
      reserved: 0,
    }));
    const host = createLedgerHost(store, { flushIntervalMs: 3_600_000 });
    t.teardown(() => host.close());
    const views: Ledger[] = [host];
    for (let i = 0; i < 3; i++) views.push(createLedgerView(host.attach().handoff, tempStore(t, path)));
    const open: Array<{ r: Reservation; a: Account; view: Ledger }> = [];
    const expected = (a: Account): number => a.read - a.debits - a.reserved;
    const debit = (a: Account, ru: number): void => {
      a.debits += ru;
      a.unflushed += ru;
    };
    let reservations = 0;
    let refusals = 0;

    for (let step = 0; step < 4000; step++) {
      const a = pick(accounts);
      const view = pick(views);
      const roll = random();
      if (roll < 0.35) {
        const ru = int(30);
        const r = view.reserve(a.id, ru);
        t.equal(r !== null, expected(a) >= ru, `step ${step}: reserve ${ru} with ${expected(a)} available`);
        if (r !== null) {
          a.reserved += ru;
          open.push({ r, a, view });
          reservations++;
        } else refusals++;
      } else if (roll < 0.6 && open.length > 0) {
        // Settled by the view that reserved it, as a call is; now and then with a size surcharge.
        const { r, a: owner, view: by } = open.splice(int(open.length - 1), 1)[0]!;
        owner.reserved -= r.ru;
        const kind = random();
        if (kind < 0.2) by.refund(r);
        else if (kind < 0.4) {
          const charges = [int(r.ru), int(10)].map((ru) => ({ endpointId: `ep_b${owner.id}`, method: 'eth_call', status: 0, ru }));
          by.settleBatch(r, charges);
          debit(owner, charges[0]!.ru + charges[1]!.ru);
        } else {
          const ru = random() < 0.1 ? r.ru + int(40) : int(r.ru);
          by.settle(r, ru, { endpointId: `ep_a${owner.id}`, method: 'eth_getLogs', status: 0 });
          debit(owner, ru);
        }
      } else if (roll < 0.7) {
        const ru = int(20);
        const charged = view.chargeDeliveries(a.id, ru, { endpointId: `ep_s${a.id}`, method: 'eth_subscription', status: 0 }, 1);
        t.equal(charged, expected(a) >= ru, `step ${step}: deliveries of ${ru} with ${expected(a)} available`);
        if (charged) debit(a, ru);
      } else if (roll < 0.78) {
        pick(views.slice(1)).flush(); // a worker's view ships (the host's own flush writes: next case)
      } else if (roll < 0.86) {
        for (const v of views) v.flush();
        t.ok(host.flush());
        // The flush's RETURNING balance brings in the top-ups of every owner it debited.
        for (const o of accounts) {
          if (o.unflushed !== 0) {
            o.read += o.unread;
            o.unread = 0;
          }
          o.unflushed = 0;
        }
      } else if (roll < 0.93) {
        const ru = 1 + int(60);
        topUp(cli.db, a.id, ru);
        a.unread += ru;
      } else {
        if (random() < 0.5) {
          host.reload(a.id);
          a.read += a.unread;
          a.unread = 0;
        } else {
          host.reload();
          for (const o of accounts) {
            o.read += o.unread;
            o.unread = 0;
          }
        }
      }
      const check = pick(accounts);
      t.equal(pick(views).available(check.id), expected(check), `step ${step}: owner ${check.id} available`);
    }

    for (const { r, a, view } of open) {
      view.settle(r, r.ru, { endpointId: `ep_a${a.id}`, method: 'eth_call', status: 0 });
      a.reserved -= r.ru;
      debit(a, r.ru);
    }
    for (const v of views) v.flush();
    t.ok(host.flush());
    host.reload();
    t.ok(reservations > 100 && refusals > 100, `${reservations} reservations, ${refusals} refusals`);
    const debited = accounts.reduce((sum, a) => sum + a.debits, 0);
    t.equal(store.db.prepare('SELECT sum(ru) FROM usage_minute').pluck().get(), debited, 'usage rows carry every debit once');
    for (const a of accounts) {
      t.equal(store.sql.ledger.balance.get(a.id), a.read + a.unread - a.debits, `owner ${a.id} stored balance`);
      for (const v of views) t.equal(v.available(a.id), a.read + a.unread - a.debits);
    }
    t.same(
      invariantGaps(store.db).filter((g) => g.gap !== 0),
      [],
    );
  });
}
