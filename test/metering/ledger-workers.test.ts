/**
 * The ledger across real worker threads: each worker makes a view from the host's handoff, on its own
 * connection to one SQLite file, and reserves from the shared book with no message to the main thread.
 */
import t from 'tap';
import Database from 'better-sqlite3';
import type { Worker } from 'node:worker_threads';
import { createLedgerHost, type LedgerHost } from '../../src/metering/ledger-host.js';
import type { Store } from '../../src/store/open.js';
import { tsWorker } from '../support/ts-worker.js';
import { addOwner, invariantGaps, type Teardown, tempDbPath, tempStore, topUp } from '../store/temp-store.js';
import type { HammerResult, LedgerWorkerCall, LedgerWorkerData } from './fixtures/ledger-worker.js';
import { waitFor } from '../support/wait-for.js';

const script = new URL('./fixtures/ledger-worker.ts', import.meta.url);

interface LedgerWorker {
  worker: Worker;
  call<R>(call: LedgerWorkerCall): Promise<R>;
  /** Resolves when the worker said it waits at the start line. */
  ready(): Promise<void>;
}

function startWorker(t: Teardown, host: LedgerHost, path: string, start: SharedArrayBuffer): LedgerWorker {
  const { handoff, transferList } = host.attach();
  const workerData: LedgerWorkerData = { handoff, path, start };
  const worker = tsWorker(script, { workerData, transferList });
  t.teardown(() => worker.terminate());
  let next = 0;
  const waiting = new Map<number, (result: unknown) => void>();
  let readyWaiter: (() => void) | undefined;
  let readyCount = 0;
  worker.on('message', (m: { id: number; result: unknown } | { ready: true }) => {
    if ('ready' in m) {
      readyCount++;
      readyWaiter?.();
    } else waiting.get(m.id)?.(m.result);
  });
  const failed = new Promise<never>((_, reject) => worker.once('error', reject));
  failed.catch(() => {});
  return {
    worker,
    call: <R>(call: LedgerWorkerCall) => {
      const id = next++;
      worker.postMessage({ id, call });
      return Promise.race([new Promise<R>((resolve) => waiting.set(id, resolve as (r: unknown) => void)), failed]);
    },
    ready: () => (readyCount > 0 ? Promise.resolve() : Promise.race([new Promise<void>((r) => (readyWaiter = r)), failed])),
  };
}

function totals(store: Store, owner: number): { requests: number; ru: number } {
  return store.db
    .prepare(
      'SELECT coalesce(sum(requests), 0) AS requests, coalesce(sum(ru), 0) AS ru FROM usage_minute WHERE owner_id = ? AND status = 0',
    )
    .get(owner) as never;
}

const races = [
  { name: '3 workers, cost 1, K = 5000', workers: 3, cost: 1, k: 5000, mixed: false },
  { name: '2 workers, cost 3 by reservations, batches and deliveries, K = 3000', workers: 2, cost: 3, k: 3000, mixed: true },
];

for (const race of races) {
  t.test(`${race.name}: exactly K calls pass over every worker, then only refusals`, async (t) => {
    const path = tempDbPath(t);
    const store = tempStore(t, path);
    const owner = addOwner(store.db, race.k * race.cost);
    const host = createLedgerHost(store, { flushIntervalMs: 20 });
    t.teardown(() => host.close());
    const start = new SharedArrayBuffer(8);
    const workers = Array.from({ length: race.workers }, () => startWorker(t, host, path, start));
    // Every worker meets the owner for the first time at the same moment: one adds it, the others use its entry.
    const results = workers.map((w) =>
      w.call<HammerResult>({ op: 'hammer', owner, cost: race.cost, mixed: race.mixed, racers: race.workers }),
    );
    await Promise.all(workers.map((w) => w.ready()));
    Atomics.store(new Int32Array(start), 0, 1);
    Atomics.notify(new Int32Array(start), 0);
    const done = await Promise.all(results);
    t.equal(
      done.reduce((sum, r) => sum + r.successes, 0),
      race.k,
      'exactly K successes in total: no overdraft, no refusal while RU remained',
    );
    t.same(
      done.map((r) => r.afterRefusal),
      done.map(() => 0),
      'no worker passed a call after one was refused',
    );
    t.ok(
      done.every((r) => r.successes > 0),
      `every worker served some: ${done.map((r) => r.successes).join(', ')}`,
    );
    t.equal(host.available(owner), 0);
    for (const w of workers) t.equal(await w.call({ op: 'close' }), true);
    t.ok(host.flush());
    t.equal(store.sql.ledger.balance.get(owner), 0, 'the file holds balance 0');
    const stored = totals(store, owner);
    t.equal(stored.ru, race.k * race.cost, 'usage rows carry every debit once');
    if (!race.mixed) t.equal(stored.requests, race.k);
    t.equal(
      store.db.prepare('SELECT sum(requests) FROM usage_minute WHERE status = 402').pluck().get(),
      done.reduce((sum, r) => sum + r.refusals, 0),
      'every refusal counted',
    );
    t.same(invariantGaps(store.db), [{ id: owner, gap: 0 }]);
  });
}

t.test('a top-up on another connection reaches every worker; a worker that dies gives its reservations back', async (t) => {
  const path = tempDbPath(t);
  const store = tempStore(t, path);
  const cli = tempStore(t, path);
  const owner = addOwner(store.db, 0);
  const host = createLedgerHost(store, { flushIntervalMs: 20 });
  t.teardown(() => host.close());
  const start = new SharedArrayBuffer(4);
  const [a, b] = [startWorker(t, host, path, start), startWorker(t, host, path, start)];
  t.equal(await a!.call({ op: 'reserve', owner, ru: 1 }), false);
  t.equal(await b!.call({ op: 'available', owner }), 0);
  topUp(cli.db, owner, 100);
  await waitFor(async () => (await a!.call({ op: 'available', owner })) === 100 && (await b!.call({ op: 'available', owner })) === 100, {
    what: 'the top-up on both workers',
    ms: 20_000,
  });
  t.equal(await a!.call({ op: 'reserve', owner, ru: 60 }), true);
  t.equal(await a!.call({ op: 'settle', owner, ru: 5 }), true);
  t.equal(await b!.call({ op: 'reserve', owner, ru: 36 }), false, 'the other worker sees the reservation');
  t.equal(await b!.call({ op: 'reserve', owner, ru: 35 }), true);
  await a!.worker.terminate();
  // Its 60 come back when its port closes; the 5 it settled and shipped stay debited.
  await waitFor(async () => (await b!.call({ op: 'available', owner })) === 60, { what: 'the release', ms: 20_000 });
  t.ok(host.flush());
  t.equal(store.sql.ledger.balance.get(owner), 95);
  t.same(invariantGaps(store.db), [{ id: owner, gap: 0 }]);
});

t.test('a shipment from a worker is written once by the main flush, after failed tries', async (t) => {
  const path = tempDbPath(t);
  const store = tempStore(t, path, { busyTimeoutMs: 20 });
  const owner = addOwner(store.db, 1000);
  const host = createLedgerHost(store, { flushIntervalMs: 3_600_000 });
  t.teardown(() => host.close());
  const w = startWorker(t, host, path, new SharedArrayBuffer(4));
  const other = new Database(path);
  t.teardown(() => other.close());
  other.exec('BEGIN IMMEDIATE'); // the CLI holding the write lock
  t.equal(await w.call({ op: 'settle', owner, ru: 70 }), true);
  t.equal(host.flush(), false);
  t.equal(host.flush(), false);
  t.equal(await w.call({ op: 'close' }), false, 'the worker answers with the writer health');
  other.exec('COMMIT');
  t.equal(host.close(), true, 'a clean stop writes what the closed worker shipped');
  t.equal(store.sql.ledger.balance.get(owner), 930);
  t.same(totals(store, owner), { requests: 1, ru: 70 });
  t.same(invariantGaps(store.db), [{ id: owner, gap: 0 }]);
});
