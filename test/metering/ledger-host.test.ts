/**
 * The host (main thread, the one writer) and views (what each worker makes) in one thread: several
 * views over one book behave like several workers, each with its own connection to one SQLite file.
 * test/metering/ledger-workers.test.ts runs the same parts in real worker threads.
 */
import t from 'tap';
import Database from 'better-sqlite3';
import { createLedger, type Ledger } from '../../src/metering/ledger.js';
import { createLedgerHost, type LedgerHost, type LedgerHostOptions } from '../../src/metering/ledger-host.js';
import { createLedgerView } from '../../src/metering/ledger-view.js';
import type { Store } from '../../src/store/open.js';
import { addOwner, invariantGaps, type Teardown, tempDbPath, tempStore, topUp } from '../store/temp-store.js';
import { waitFor } from '../support/wait-for.js';

const EP = 'ep_aaaaaaaaaaaaaaaa';
const ok = { endpointId: EP, method: 'eth_call', status: 0 };

function hostOn(t: Teardown, store: Store, options: Partial<LedgerHostOptions> = {}): LedgerHost {
  // A long interval: the tests flush by hand unless they test the timer.
  const host = createLedgerHost(store, { flushIntervalMs: 60_000, ...options });
  t.teardown(() => host.close());
  return host;
}

/** A view as a worker makes it, on its own connection to the host's file. */
function viewOn(t: Teardown, host: LedgerHost, path: string): Ledger {
  const { handoff } = host.attach();
  return createLedgerView(handoff, tempStore(t, path));
}

function usageTotals(store: Store): { requests: number; ru: number } {
  return store.db.prepare('SELECT coalesce(sum(requests), 0) AS requests, coalesce(sum(ru), 0) AS ru FROM usage_minute').get() as never;
}

// One table of cases for every shape of the ledger: the arithmetic is the same.
const shapes: Array<[string, (t: Teardown, path: string) => Ledger]> = [
  ['createLedger', (t, path) => createLedgerInto(t, path)],
  ['the host', (t, path) => hostOn(t, tempStore(t, path))],
  ['a view', (t, path) => viewOn(t, hostOn(t, tempStore(t, path)), path)],
];

function createLedgerInto(t: Teardown, path: string): Ledger {
  const ledger = createLedger(tempStore(t, path), { flushIntervalMs: 60_000 });
  t.teardown(() => ledger.close());
  return ledger;
}

for (const [name, make] of shapes) {
  t.test(`${name}: reservations hold RU until settled or refunded; a surcharge may go below zero`, async (t) => {
    const path = tempDbPath(t);
    const owner = addOwner(tempStore(t, path).db, 100);
    const ledger = make(t, path);
    const a = ledger.reserve(owner, 60)!;
    t.equal(ledger.available(owner), 40);
    t.equal(ledger.reserve(owner, 41), null, 'never below zero');
    const b = ledger.reserve(owner, 40)!;
    ledger.refund(a);
    t.equal(ledger.available(owner), 60, 'a refund costs nothing');
    ledger.settle(b, 25, ok);
    t.equal(ledger.available(owner), 75, 'settling below the reservation releases the rest');
    t.throws(() => ledger.settle(b, 1, ok), /already settled/);
    ledger.settleBatch(ledger.reserve(owner, 70)!, [
      { ...ok, ru: 50 },
      { ...ok, method: 'eth_getLogs', ru: 45 },
    ]);
    t.equal(ledger.available(owner), -20, 'a surcharge above the reservation');
    t.equal(ledger.reserve(owner, 0), null, 'not even a free call while in debt');
    t.equal(ledger.chargeDeliveries(owner, 1, ok, 1), false);
    t.equal(ledger.available(999), 0, 'an unknown owner has nothing');
    t.same(ledger.pending(), { ru: 120, rows: 2 });
  });
}

t.test("a view's rows are written by the host's flush, once, even when a flush fails and is retried", async (t) => {
  const path = tempDbPath(t);
  const store = tempStore(t, path, { busyTimeoutMs: 20 });
  const owner = addOwner(store.db, 1000);
  const errors: unknown[] = [];
  const host = hostOn(t, store, { onFlushError: (e) => errors.push(e) });
  const view = viewOn(t, host, path);
  view.settle(view.reserve(owner, 100)!, 100, ok);
  view.flush(); // shipped: the host has it
  t.same(view.pending(), { ru: 0, rows: 0 });
  t.same(host.pending(), { ru: 100, rows: 1 });
  const other = new Database(path);
  t.teardown(() => other.close());
  other.exec('BEGIN IMMEDIATE'); // the CLI holding the write lock
  t.equal(host.flush(), false);
  t.match((errors[0] as { code: string }).code, 'SQLITE_BUSY');
  t.equal(host.healthy(), false);
  t.equal(view.healthy(), false, 'the view answers with the writer health: 503 on every worker');
  view.settle(view.reserve(owner, 50)!, 50, ok);
  view.flush();
  t.equal(host.flush(), false);
  other.exec('COMMIT');
  t.equal(host.flush(), true);
  t.equal(view.healthy(), true);
  t.equal(view.lastFlushAt(), host.lastFlushAt());
  t.equal(host.flush(), true, 'nothing left to write twice');
  t.equal(store.sql.ledger.balance.get(owner), 850);
  t.same(usageTotals(store), { requests: 2, ru: 150 });
  t.equal(view.available(owner), 850);
  t.same(invariantGaps(store.db), [{ id: owner, gap: 0 }]);
});

t.test('views ship on their own within an event-loop turn, and the timer flushes', async (t) => {
  const path = tempDbPath(t);
  const store = tempStore(t, path);
  const owner = addOwner(store.db, 1000);
  const host = hostOn(t, store, { flushIntervalMs: 20 });
  const views = [viewOn(t, host, path), viewOn(t, host, path)];
  t.equal(views[0]!.lastFlushAt(), null, 'no flush yet');
  for (const [i, view] of views.entries()) view.settle(view.reserve(owner, 10 + i)!, 10 + i, ok);
  t.equal(host.available(owner), 1000 - 21, 'the host sees every debit at once');
  await waitFor(() => store.sql.ledger.balance.get(owner) === 979, { what: 'the flush', ms: 10_000 });
  t.same(views[1]!.pending(), { ru: 0, rows: 0 });
  t.ok(views[1]!.lastFlushAt() !== null);
  t.same(usageTotals(store), { requests: 2, ru: 21 });
});

t.test('a top-up made on another connection reaches every view once the host notices', async (t) => {
  const path = tempDbPath(t);
  const store = tempStore(t, path);
  const cli = tempStore(t, path);
  const owner = addOwner(store.db, 0);
  const host = hostOn(t, store, { flushIntervalMs: 20 });
  const views = [viewOn(t, host, path), viewOn(t, host, path)];
  for (const view of views) t.equal(view.reserve(owner, 1), null);
  topUp(cli.db, owner, 100);
  // The host's timer sees data_version move and reads the balance again; no view reads it itself.
  await waitFor(() => views.every((v) => v.available(owner) === 100), { what: 'the top-up', ms: 10_000 });
  const a = views[0]!.reserve(owner, 60)!;
  t.equal(views[1]!.reserve(owner, 41), null, 'the other view sees the reservation');
  views[1]!.settle(views[1]!.reserve(owner, 40)!, 40, ok);
  views[0]!.settle(a, 60, ok);
  // A top-up between two flushes composes with the debits.
  topUp(cli.db, owner, 7);
  for (const v of views) v.flush();
  t.ok(host.flush());
  t.equal(store.sql.ledger.balance.get(owner), 7);
  t.equal(views[0]!.available(owner), 7, 'the flush brought the newest balance back');
  topUp(cli.db, owner, 5);
  views[1]!.reload(owner); // a view may ask the host to read one owner now
  await waitFor(() => views[0]!.available(owner) === 12, { what: 'the reload', ms: 10_000 });
  t.same(invariantGaps(store.db), [{ id: owner, gap: 0 }]);
});

t.test('the timer reads again an owner a view added, even with no commit after the add', async (t) => {
  const path = tempDbPath(t);
  const store = tempStore(t, path);
  const cli = tempStore(t, path);
  const owner = addOwner(store.db, 100);
  const host = hostOn(t, store, { flushIntervalMs: 20 });
  const viewStore = tempStore(t, path);
  const view = createLedgerView(host.attach().handoff, viewStore);
  viewStore.db.exec('BEGIN');
  viewStore.db.prepare('SELECT count(*) FROM owners').get();
  topUp(cli.db, owner, 50);
  // Let the host see the commit (and find no entry to read) before the view adds the owner.
  const flushed = host.lastFlushAt();
  await waitFor(() => host.lastFlushAt() !== flushed, { what: 'a tick', ms: 10_000 });
  await new Promise((r) => setTimeout(r, 5));
  t.equal(view.available(owner), 100, 'added with the old balance');
  viewStore.db.exec('COMMIT');
  await waitFor(() => view.available(owner) === 150, { what: 'the re-read', ms: 10_000 });
  t.pass('read again by the host');
});

t.test('a clean stop: views ship what they hold, the host writes it all', async (t) => {
  const path = tempDbPath(t);
  const store = tempStore(t, path);
  const owner = addOwner(store.db, 1000);
  const host = createLedgerHost(store, { flushIntervalMs: 60_000 });
  const views = [viewOn(t, host, path), viewOn(t, host, path), viewOn(t, host, path)];
  for (const view of views) {
    view.settle(view.reserve(owner, 7)!, 7, ok);
    view.recordUsage(owner, { ...ok, status: 429 });
  }
  for (const view of views) t.equal(view.close(), true);
  t.equal(host.close(), true);
  t.equal(store.sql.ledger.balance.get(owner), 979);
  t.same(usageTotals(store), { requests: 6, ru: 21 });
  t.same(invariantGaps(store.db), [{ id: owner, gap: 0 }]);
});

t.test("a worker whose port closes with reservations open gets them back; another's stay held", async (t) => {
  const path = tempDbPath(t);
  const store = tempStore(t, path);
  const owner = addOwner(store.db, 100);
  const host = hostOn(t, store);
  const dying = viewOn(t, host, path);
  const living = viewOn(t, host, path);
  dying.reserve(owner, 30);
  dying.settle(dying.reserve(owner, 10)!, 10, ok);
  living.reserve(owner, 20);
  t.equal(host.available(owner), 40);
  dying.close(); // as when its thread ends: its port closes
  await waitFor(() => host.available(owner) === 70, { what: 'the release', ms: 10_000 });
  t.equal(living.available(owner), 70, 'the open 20 of the other view are still held');
  t.ok(host.flush());
  t.equal(store.sql.ledger.balance.get(owner), 90, 'what it settled before is written');
});

t.test('a book full of owners refuses a new one (answered 503) and keeps serving the others', async (t) => {
  const path = tempDbPath(t);
  const store = tempStore(t, path);
  const owners = [addOwner(store.db, 10), addOwner(store.db, 20), addOwner(store.db, 30)];
  const host = hostOn(t, store, { maxOwners: 2 });
  const view = viewOn(t, host, path);
  t.ok(view.reserve(owners[0]!, 10));
  t.equal(host.available(owners[1]!), 20);
  t.throws(() => view.reserve(owners[2]!, 1), /the shared ledger is full: it holds the balances of at most 2 owners/);
  t.throws(() => host.available(owners[2]!), /full/, 'in every thread');
  t.equal(view.available(owners[1]!), 20);
  t.throws(() => createLedgerHost(store, { flushIntervalMs: 1000, maxOwners: 0 }), /maxOwners must be an integer from 1/);
});

t.test('a re-read of a book with many owners reads them all at once and moves only what changed', async (t) => {
  const path = tempDbPath(t);
  const store = tempStore(t, path);
  const cli = tempStore(t, path);
  const owners = store.db.transaction(() => Array.from({ length: 1500 }, (_, i) => addOwner(store.db, 10 + i)))();
  const host = hostOn(t, store);
  const view = viewOn(t, host, path);
  for (const owner of owners) view.reserve(owner, 10);
  for (const owner of [owners[0]!, owners[777]!, owners[1499]!]) topUp(cli.db, owner, 1000);
  host.reload();
  t.same(
    owners.map((owner, i) => view.available(owner) - i),
    owners.map((owner) => ([owners[0], owners[777], owners[1499]].includes(owner) ? 1000 : 0)),
  );
});

t.test("latency and failures: a view's reach the store through the host's flush, as createLedger's do", async (t) => {
  const failure = {
    httpStatus: 502,
    code: -32603,
    error: 'upstream_error',
    message: 'Upstream node error',
    upstream: 'node-a',
  };
  const stored = (store: Store) => ({
    latency: store.db.prepare('SELECT lat_6 AS fast, lat_13 AS slow FROM usage_minute WHERE status = 0').get(),
    failures: store.db.prepare('SELECT endpoint_id, method, http_status, code, error, upstream FROM call_failures').all(),
  });
  const expected = {
    latency: { fast: 1, slow: 1 },
    failures: [{ endpoint_id: EP, method: 'eth_call', http_status: 502, code: -32603, error: 'upstream_error', upstream: 'node-a' }],
  };
  const use = (ledger: Ledger, owner: number): void => {
    ledger.settle(ledger.reserve(owner, 10)!, 10, { ...ok, latencyMs: 8 });
    ledger.settle(ledger.reserve(owner, 10)!, 10, { ...ok, latencyMs: 120 });
    ledger.recordUsage(owner, { ...ok, status: 502, latencyMs: 30, failure });
  };

  const alone = tempStore(t);
  const single = createLedger(alone, { flushIntervalMs: 60_000 });
  t.teardown(() => single.close());
  use(single, addOwner(alone.db, 100));
  t.ok(single.flush());
  t.same(stored(alone), expected, 'createLedger');

  const path = tempDbPath(t);
  const hostStore = tempStore(t, path);
  const owner = addOwner(hostStore.db, 100);
  const host = hostOn(t, hostStore);
  const view = viewOn(t, host, path);
  use(view, owner);
  view.flush();
  await waitFor(() => {
    host.flush();
    return (hostStore.db.prepare('SELECT count(*) FROM call_failures').pluck().get() as number) === 1;
  });
  t.same(stored(hostStore), expected, 'a view, through the host');
});
