import t from 'tap';
import Database from 'better-sqlite3';
import { closeSync, ftruncateSync, openSync, statSync, writeSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { createLedger, type Ledger, type LedgerOptions } from '../../src/metering/ledger.js';
import { openStore, type Store } from '../../src/store/open.js';
import { addOwner, invariantGaps, type Teardown, tempDbPath, tempStore } from '../store/temp-store.js';
import { smallVolume } from '../support/small-volume.js';

const EP = 'ep_aaaaaaaaaaaaaaaa';
const ok = { endpointId: EP, method: 'eth_call', status: 0 };

function ledgerOn(t: Teardown, store: Store, options: Partial<LedgerOptions> = {}): Ledger {
  // A long interval: the tests flush by hand unless they test the timer.
  const ledger = createLedger(store, { flushIntervalMs: 60_000, ...options });
  t.teardown(() => ledger.close());
  return ledger;
}

function usageRows(store: Store): Array<{ owner_id: number; method: string; status: number; requests: number; ru: number; t: number }> {
  return store.db
    .prepare('SELECT owner_id, method, status, requests, ru, t FROM usage_minute ORDER BY owner_id, method, status')
    .all() as never;
}

t.test('100 parallel reservations against a balance for exactly 10: exactly 10 succeed', async (t) => {
  const store = tempStore(t);
  const owner = addOwner(store.db, 150);
  const ledger = ledgerOn(t, store);
  const results = await Promise.all(
    Array.from({ length: 100 }, async (_, i) => {
      await new Promise((r) => setTimeout(r, i % 7));
      const r = ledger.reserve(owner, 15);
      if (r === null) return false;
      await new Promise((r) => setTimeout(r, 5));
      ledger.settle(r, 15, ok);
      return true;
    }),
  );
  t.equal(results.filter(Boolean).length, 10);
  t.equal(ledger.available(owner), 0);
  t.ok(ledger.flush());
  t.equal(store.sql.ledger.balance.get(owner), 0);
  t.same(
    usageRows(store).map((r) => [r.requests, r.ru]),
    [[10, 150]],
  );
  t.same(invariantGaps(store.db), [{ id: owner, gap: 0 }]);
});

t.test('open reservations hold RU until settled or refunded', async (t) => {
  const store = tempStore(t);
  const owner = addOwner(store.db, 100);
  const ledger = ledgerOn(t, store);
  const a = ledger.reserve(owner, 60)!;
  t.equal(ledger.available(owner), 40);
  t.equal(ledger.reserve(owner, 41), null, 'never below zero');
  const b = ledger.reserve(owner, 40)!;
  t.equal(ledger.available(owner), 0);
  ledger.refund(a);
  t.equal(ledger.available(owner), 60, 'a refund costs nothing');
  ledger.settle(b, 25, ok);
  t.equal(ledger.available(owner), 75, 'settling below the reservation releases the rest');
  t.throws(() => ledger.settle(b, 1, ok), /already settled/);
  t.throws(() => ledger.refund(a), /already settled/);
  t.throws(() => ledger.reserve(owner, -1), RangeError);
  t.throws(() => ledger.reserve(owner, 1.5), RangeError);
  t.equal(ledger.available(999), 0, 'an unknown owner has nothing');
  t.equal(ledger.reserve(999, 1), null);
});

t.test('a surcharge may take the balance below zero; then reserve fails until a top-up', async (t) => {
  const path = tempDbPath(t);
  const store = tempStore(t, path);
  const cli = tempStore(t, path);
  const owner = addOwner(store.db, 100);
  const ledger = ledgerOn(t, store);
  const r = ledger.reserve(owner, 90)!;
  ledger.settle(r, 130, { ...ok, method: 'eth_getLogs' });
  t.equal(ledger.available(owner), -30);
  t.equal(ledger.reserve(owner, 1), null);
  t.equal(ledger.reserve(owner, 0), null, 'not even a free call while in debt');
  t.ok(ledger.flush());
  t.equal(store.sql.ledger.balance.get(owner), -30);
  // The CLI tops up on its own connection; the daemon re-reads when told.
  cli.db.prepare('INSERT INTO credits (owner_id, ru, at) VALUES (?, 50, 0)').run(owner);
  cli.db.prepare('UPDATE owners SET ru_balance = ru_balance + 50 WHERE id = ?').run(owner);
  t.equal(ledger.available(owner), -30, 'until reload');
  ledger.reload(owner);
  t.equal(ledger.available(owner), 20);
  t.ok(ledger.reserve(owner, 20));
  t.same(invariantGaps(store.db), [{ id: owner, gap: 0 }]);
});

t.test('a CLI top-up between two flushes composes with the debits', async (t) => {
  const path = tempDbPath(t);
  const store = tempStore(t, path);
  const cli = tempStore(t, path);
  const owner = addOwner(store.db, 100);
  const ledger = ledgerOn(t, store);
  ledger.settle(ledger.reserve(owner, 30)!, 30, ok);
  const open = ledger.reserve(owner, 20)!;
  cli.db.prepare('INSERT INTO credits (owner_id, ru, at) VALUES (?, 1000, 0)').run(owner);
  cli.db.prepare('UPDATE owners SET ru_balance = ru_balance + 1000 WHERE id = ?').run(owner);
  ledger.reload();
  t.equal(ledger.available(owner), 1100 - 30 - 20, 'stored − unflushed − reserved');
  ledger.settle(ledger.reserve(owner, 5)!, 5, ok);
  cli.db.prepare('INSERT INTO credits (owner_id, ru, at) VALUES (?, 7, 0)').run(owner);
  cli.db.prepare('UPDATE owners SET ru_balance = ru_balance + 7 WHERE id = ?').run(owner);
  t.ok(ledger.flush());
  t.equal(store.sql.ledger.balance.get(owner), 1107 - 35);
  t.equal(ledger.available(owner), 1107 - 35 - 20, 'the flush brought the newest balance back');
  ledger.settle(open, 20, ok);
  t.ok(ledger.close());
  t.same(invariantGaps(store.db), [{ id: owner, gap: 0 }]);
});

t.test('usage rows: per endpoint, method, minute and status; refusals count at 0 RU; batches', async (t) => {
  let clock = Date.UTC(2025, 0, 1, 12, 0, 30);
  const store = tempStore(t);
  const alice = addOwner(store.db, 1000);
  const bob = addOwner(store.db, 1000);
  const ledger = ledgerOn(t, store, { now: () => clock });
  ledger.settle(ledger.reserve(alice, 15)!, 15, ok);
  ledger.settle(ledger.reserve(alice, 15)!, 17, ok);
  ledger.recordUsage(alice, { ...ok, status: 429 });
  ledger.recordUsage(alice, { ...ok, status: 402 }, 3);
  ledger.settleBatch(ledger.reserve(bob, 40)!, [
    { endpointId: 'ep_b', method: 'eth_call', status: 0, ru: 15 },
    { endpointId: 'ep_b', method: 'eth_estimateGas', status: 0, ru: 20 },
    { endpointId: 'ep_b', method: 'eth_call', status: -32602, ru: 0 },
  ]);
  clock += 60_000;
  ledger.settle(ledger.reserve(alice, 15)!, 15, ok);
  t.same(ledger.pending(), { ru: 82, rows: 7 });
  t.ok(ledger.flush());
  t.same(ledger.pending(), { ru: 0, rows: 0 });
  const minute = Date.UTC(2025, 0, 1, 12, 0, 0) / 1000;
  t.same(
    usageRows(store),
    [
      { owner_id: alice, method: 'eth_call', status: 0, requests: 2, ru: 32, t: minute },
      { owner_id: alice, method: 'eth_call', status: 0, requests: 1, ru: 15, t: minute + 60 },
      { owner_id: alice, method: 'eth_call', status: 402, requests: 3, ru: 0, t: minute },
      { owner_id: alice, method: 'eth_call', status: 429, requests: 1, ru: 0, t: minute },
      { owner_id: bob, method: 'eth_call', status: -32602, requests: 1, ru: 0, t: minute },
      { owner_id: bob, method: 'eth_call', status: 0, requests: 1, ru: 15, t: minute },
      { owner_id: bob, method: 'eth_estimateGas', status: 0, requests: 1, ru: 20, t: minute },
    ].sort((a, b) => a.owner_id - b.owner_id || (a.method < b.method ? -1 : a.method > b.method ? 1 : 0) || a.status - b.status),
  );
  // A second flush adds to the same rows rather than replacing them.
  ledger.settle(ledger.reserve(alice, 15)!, 15, ok);
  t.ok(ledger.flush());
  t.equal(usageRows(store).find((r) => r.owner_id === alice && r.t === minute + 60)!.requests, 2);
  t.same(invariantGaps(store.db), [
    { id: alice, gap: 0 },
    { id: bob, gap: 0 },
  ]);
});

t.test('SQLITE_BUSY during a flush: nothing lost, nothing applied twice, unhealthy until it passes', async (t) => {
  const path = tempDbPath(t);
  const store = tempStore(t, path, { busyTimeoutMs: 20 });
  const owner = addOwner(store.db, 1000);
  const errors: unknown[] = [];
  const ledger = ledgerOn(t, store, { onFlushError: (e) => errors.push(e) });
  ledger.settle(ledger.reserve(owner, 100)!, 100, ok);
  const other = new Database(path);
  t.teardown(() => other.close());
  other.exec('BEGIN IMMEDIATE'); // the CLI holding the write lock
  t.equal(ledger.flush(), false);
  t.equal(ledger.healthy(), false);
  t.match((errors[0] as { code: string }).code, 'SQLITE_BUSY');
  ledger.settle(ledger.reserve(owner, 50)!, 50, ok);
  t.equal(ledger.available(owner), 850, 'the balance in memory is still exact');
  t.equal(ledger.flush(), false);
  other.exec('COMMIT');
  t.equal(ledger.flush(), true);
  t.equal(ledger.healthy(), true);
  t.equal(store.sql.ledger.balance.get(owner), 850);
  t.same(
    usageRows(store).map((r) => [r.requests, r.ru]),
    [[2, 150]],
  );
  t.same(invariantGaps(store.db), [{ id: owner, gap: 0 }]);
});

t.test('SQLITE_FULL during a flush: kept in memory and written once there is room', async (t) => {
  const store = tempStore(t);
  const owner = addOwner(store.db, 1_000_000);
  const errors: unknown[] = [];
  const ledger = ledgerOn(t, store, { onFlushError: (e) => errors.push(e) });
  const pages = store.db.pragma('page_count', { simple: true }) as number;
  store.db.pragma(`max_page_count = ${pages}`);
  // Enough distinct rows to need new pages.
  for (let i = 0; i < 2000; i++) ledger.settle(ledger.reserve(owner, 3)!, 3, { endpointId: `ep_${i}`, method: 'eth_call', status: 0 });
  t.equal(ledger.flush(), false);
  t.equal(ledger.healthy(), false);
  t.match((errors[0] as { code: string }).code, 'SQLITE_FULL');
  t.equal(store.sql.ledger.balance.get(owner), 1_000_000, 'the debit was rolled back with the rows');
  t.equal(store.db.prepare('SELECT count(*) FROM usage_minute').pluck().get(), 0);
  store.db.pragma('max_page_count = 1073741823');
  t.equal(ledger.flush(), true);
  t.equal(ledger.healthy(), true);
  t.equal(store.sql.ledger.balance.get(owner), 1_000_000 - 6000);
  t.same(invariantGaps(store.db), [{ id: owner, gap: 0 }]);
});

t.test('a WAL that filled the disk is checkpointed at once; with no room at all, debits wait until room exists', async (t) => {
  const path = join(smallVolume(t, '2m'), 'chaingate.db');
  const seed = openStore(path);
  const owner = addOwner(seed.db, 10_000_000);
  seed.close();
  const store = tempStore(t, path, { busyTimeoutMs: 100 });
  const errors: unknown[] = [];
  const ledger = ledgerOn(t, store, { onFlushError: (e) => errors.push(e) });
  let debited = 0;
  let failed = 0;
  // Each flush appends the pages it changed to the WAL; SQLite's own checkpoint waits for 4 MB.
  while (errors.length === 0 && debited < 10_000) {
    ledger.settle(ledger.reserve(owner, 1)!, 1, ok);
    debited++;
    if (!ledger.flush()) failed++;
  }
  t.match(errors, [{ code: 'SQLITE_FULL' }], 'the WAL filled the volume once');
  t.equal(failed, 0, 'yet every flush wrote');
  t.equal(ledger.healthy(), true, 'the checkpoint freed it and the same flush wrote');
  t.ok(statSync(`${path}-wal`).size < 100_000, 'the WAL was emptied');
  t.equal(store.sql.ledger.balance.get(owner), 10_000_000 - debited);

  // Now something else takes every byte left: no checkpoint can make room.
  const filler = openSync(join(dirname(path), 'filler'), 'w');
  t.teardown(() => closeSync(filler));
  const block = Buffer.alloc(4096, 1);
  for (;;) {
    try {
      writeSync(filler, block);
    } catch {
      break;
    }
  }
  for (let i = 0; i < 50; i++) ledger.settle(ledger.reserve(owner, 3)!, 3, { ...ok, endpointId: `ep_${i}` });
  debited += 150;
  t.equal(ledger.flush(), false);
  t.equal(ledger.healthy(), false);
  t.equal(ledger.flush(), false, 'still no room');
  t.same(ledger.pending(), { ru: 150, rows: 50 }, 'the debits wait in memory');
  t.equal(ledger.available(owner), 10_000_000 - debited);
  ftruncateSync(filler, 0);
  t.equal(ledger.flush(), true, 'room again: written with no restart');
  t.equal(ledger.healthy(), true);
  t.equal(store.sql.ledger.balance.get(owner), 10_000_000 - debited);
  t.same(invariantGaps(store.db), [{ id: owner, gap: 0 }]);
});

t.test('the timer flushes on its own and close() flushes the rest', async (t) => {
  const store = tempStore(t);
  const owner = addOwner(store.db, 1000);
  const ledger = createLedger(store, { flushIntervalMs: 20 });
  ledger.settle(ledger.reserve(owner, 10)!, 10, ok);
  await new Promise((r) => setTimeout(r, 80));
  t.equal(store.sql.ledger.balance.get(owner), 990);
  ledger.settle(ledger.reserve(owner, 10)!, 10, ok);
  t.equal(ledger.close(), true);
  t.equal(store.sql.ledger.balance.get(owner), 980);
  t.same(invariantGaps(store.db), [{ id: owner, gap: 0 }]);
});
