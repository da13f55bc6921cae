/**
 * Worker threads that end abruptly or hang, with two workers and WebSockets open on both: the process and
 * the other worker go on, the faulty one is replaced, and what its clients were answered is in the ledger.
 * Each fault is a drill (WorkerPool.crash): process.exit() in the worker, a heap past
 * server.worker_max_heap_mb, a thread that never returns to its event loop.
 */
import t, { type Test } from 'tap';
import Database from 'better-sqlite3';
import WebSocket from 'ws';
import { createOwnerAdmin } from '../../src/tenancy/owners.js';
import type { WorkerFault } from '../../src/server/worker-pool.js';
import { waitFor } from '../support/wait-for.js';
import { scrape } from '../support/exposition.js';
import { anvilFor, evmChain, gatewayFor, type TestGateway } from '../support/gateway.js';
import { send } from '../support/rpc.js';

const CONNECTIONS = 24;

interface Client {
  ws: WebSocket;
  answers: number;
  closed: Promise<number>;
  gone: boolean;
}

/** An owner with a big balance and a key of it: the WebSocket URL, and the owner's id. */
async function keyed(g: TestGateway): Promise<{ url: string; owner: number }> {
  const owner = createOwnerAdmin(g.gateway.context.tenancy.store!).createOwner('o', 'open', 10_000_000);
  const made = await send('POST', `${g.base}/api/dashboard/endpoints`, JSON.stringify({ network: 'devnet' }), {
    authorization: `Bearer ${owner.managementKey}`,
    'content-type': 'application/json',
  });
  const key = (made.json as { data: { api_key: string } }).data.api_key;
  return { url: `${g.base.replace('http', 'ws')}/v1/rpc/${key}`, owner: owner.id };
}

/** `n` WebSockets, each answered once, so each is served by a worker. */
async function openClients(t: Test, url: string, n: number): Promise<Client[]> {
  const clients = await Promise.all(
    Array.from(
      { length: n },
      () =>
        new Promise<Client>((resolve, reject) => {
          const ws = new WebSocket(url);
          const c: Client = {
            ws,
            answers: 0,
            gone: false,
            closed: new Promise((done) => ws.once('close', (code) => done(code))),
          };
          void c.closed.then(() => (c.gone = true));
          ws.on('message', (data: Buffer) => {
            if ('result' in (JSON.parse(data.toString()) as object)) c.answers++;
          });
          ws.once('open', () => resolve(c));
          ws.once('error', reject);
        }),
    ),
  );
  t.teardown(() => {
    for (const c of clients) c.ws.terminate();
  });
  for (const c of clients) c.ws.send(JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'eth_chainId' }));
  await waitFor(() => clients.every((c) => c.answers === 1), { what: 'every client answered once', ms: 10_000 });
  return clients;
}

/** Every client calls on, one call at a time, until `stop()`: the load a fault lands in. */
function keepCalling(clients: Client[]): { stop(): void } {
  let on = true;
  let id = 1;
  for (const c of clients) {
    c.ws.on('message', () => {
      if (on && c.ws.readyState === WebSocket.OPEN) c.ws.send(JSON.stringify({ jsonrpc: '2.0', id: id++, method: 'eth_chainId' }));
    });
    c.ws.send(JSON.stringify({ jsonrpc: '2.0', id: id++, method: 'eth_chainId' }));
  }
  return {
    stop: () => {
      on = false;
    },
  };
}

/** Waits for `ready` (throwing, named, after `ms`): true for a t.ok that says what held. */
async function holds(what: string, ready: () => boolean, ms: number): Promise<boolean> {
  await waitFor(ready, { what: what, ms: ms });
  return true;
}

const logged = (g: TestGateway, re: RegExp): boolean => g.logLines.some((l) => re.test(l));

async function twoWorkers(t: Test, server: Record<string, unknown> = {}): Promise<TestGateway> {
  const node = await anvilFor(t);
  return gatewayFor(t, {
    server: { workers: 2, ...server },
    chains: { devnet: evmChain([node.url]) },
    plans: { open: { rps: 1_000_000, max_endpoints: 5 } },
  });
}

/** The worker faults that end a thread: each must cost only that worker's sockets, and no answered call's RU. */
const endings: Array<{ fault: WorkerFault; server: Record<string, unknown>; first: RegExp; code: number }> = [
  { fault: 'exit', server: {}, first: /^error worker died; starting it again worker=1 exit_code=3/, code: 3 },
  {
    fault: 'leak',
    server: { worker_max_heap_mb: 160 },
    first: /^error worker over its heap limit; closing its connections worker=1 heap_mb=\d+ limit_mb=160/,
    code: 1,
  },
  { fault: 'hang', server: { worker_stall_s: 1 }, first: /^error worker stalled; ending it worker=1 silent_ms=\d+/, code: 1 },
];

for (const { fault, server, first, code } of endings) {
  t.test(`a worker ended by ${fault}: replaced, the other worker's sockets untouched, every answer in the ledger`, async (t) => {
    const g = await twoWorkers(t, server);
    const { url, owner } = await keyed(g);
    const clients = await openClients(t, url, CONNECTIONS);
    const before = (await g.gateway.streamStats()).wsConnectionsByWorker;
    t.ok(
      before.every((n) => n > 0),
      `sockets on both workers (${before.join(', ')})`,
    );
    const load = keepCalling(clients);
    await waitFor(() => clients.every((c) => c.answers > 3), { what: 'calls flowing', ms: 10_000 });

    g.gateway.workers!.crash(1, fault);
    t.ok(await holds(`${fault} logged`, () => logged(g, first), 20_000), 'the fault is logged with the worker number');
    t.ok(await holds('worker 1 restarted', () => logged(g, /^info worker restarted worker=1/), 20_000), 'and the worker is started again');
    t.ok(logged(g, new RegExp(`^error worker died; starting it again worker=1 exit_code=${code}`)), 'its end logged');
    await waitFor(() => clients.filter((c) => c.gone).length >= before[0]!, { what: 'the dead worker’s sockets closed', ms: 10_000 });
    load.stop();
    const codes = await Promise.all(clients.filter((c) => c.gone).map((c) => c.closed));
    t.same(
      codes,
      codes.map(() => 1001),
      "its clients' WebSockets are closed with 1001, the close frame sent before the sockets closed",
    );
    const survivors = clients.filter((c) => !c.gone);
    t.equal(survivors.length, before[1], "worker 2's sockets are all still open");
    const counts = survivors.map((c) => c.answers);
    await waitFor(() => survivors.every((c, i) => c.answers > counts[i]!), { what: 'the survivors answered again', ms: 10_000 });
    t.ok(
      survivors.every((c, i) => c.answers > counts[i]!),
      'and still answered',
    );
    const exposition = await scrape(g.gateway.metricsPort!);
    t.equal(exposition.value('chaingate_worker_restarts_total', { worker: '1' }), 1, 'the restart counted');
    t.equal(exposition.value('chaingate_worker_up', { worker: '1' }), 1, 'the new worker 1 answers scrapes');

    // Settle: the survivors' last calls answered, then every shipped row written.
    await new Promise((r) => setTimeout(r, 300));
    const seen = clients.reduce((sum, c) => sum + c.answers, 0);
    const ledger = g.gateway.context.tenancy.ledger;
    await waitFor(() => ledger.flush() && ledger.pending().rows === 0, { what: 'every debit written', ms: 10_000 });
    const requests = g.gateway.context.tenancy
      .store!.db.prepare("SELECT SUM(requests) FROM usage_minute WHERE status = 0 AND method = 'eth_chainId' AND owner_id = ?")
      .pluck()
      .get(owner) as number;
    t.equal(requests, seen, `the ledger holds every answer the clients saw (${seen}), the dead worker's too`);
  });
}

t.test(
  'while a worker hangs: /healthz, /metrics and /status answer, naming the silent worker; a reload fails, the next works',
  async (t) => {
    const g = await twoWorkers(t, { worker_stall_s: 4 });
    g.gateway.workers!.crash(1, 'hang');
    await new Promise((r) => setTimeout(r, 200));
    const config = g.gateway.context.config;
    // Asked while worker 1 is silent: the reload waits server.worker_stall_s for it, as the watchdog does.
    const reloading = g.gateway.reload(config);
    // Handled at once: on a loaded machine it may fail before the checks below are done (t.rejects reads it after).
    reloading.catch(() => undefined);
    const started = Date.now();
    const exposition = await scrape(g.gateway.metricsPort!);
    t.ok(Date.now() - started < 3_000, `/metrics answered in ${Date.now() - started} ms`);
    t.equal(exposition.value('chaingate_worker_up', { worker: '1' }), 0, 'worker 1 did not answer');
    t.equal(exposition.value('chaingate_worker_up', { worker: '2' }), 1, 'worker 2 did');
    const status = await fetch(`http://127.0.0.1:${g.gateway.metricsPort}/status`);
    t.equal(status.status, 200);
    t.same(((await status.json()) as { workers?: unknown }).workers, { count: 2, unanswered: [1] }, '/status names the silent worker');

    await t.rejects(reloading, /worker 1 did not answer within server\.worker_stall_s \(4 s\)/, 'the reload fails, saying why');
    t.ok(await holds('worker 1 replaced', () => logged(g, /^info worker restarted worker=1/), 20_000));
    t.ok(logged(g, /^error worker stalled; ending it worker=1/), 'the stall is logged');
    t.equal((await scrape(g.gateway.metricsPort!)).value('chaingate_worker_stalls_total', { worker: '1' }), 1, 'and counted');
    await t.resolves(g.gateway.reload(config), 'the next reload is not stuck behind it');
    const health = await Promise.all(Array.from({ length: 16 }, () => send('GET', `${g.base}/healthz`)));
    t.same(
      health.map((h) => h.status),
      health.map(() => 200),
      '/healthz answers on every new connection',
    );
  },
);

t.test('a stop that must end a hung worker still flushes the ledger and ends', async (t) => {
  // The watchdog left out (an hour), so the stop itself meets the hung worker.
  const g = await twoWorkers(t, { worker_stall_s: 3600, stop_timeout_s: 1 });
  const { url, owner } = await keyed(g);
  const clients = await openClients(t, url, CONNECTIONS);
  const load = keepCalling(clients);
  await waitFor(() => clients.every((c) => c.answers > 3), { what: 'calls flowing', ms: 10_000 });
  load.stop();
  await new Promise((r) => setTimeout(r, 300));
  const seen = clients.reduce((sum, c) => sum + c.answers, 0);
  g.gateway.workers!.crash(1, 'hang');
  await new Promise((r) => setTimeout(r, 200));
  await g.gateway.stop();
  t.ok(logged(g, /^error worker did not stop in time; ending it worker=1/), 'the late worker is ended');
  t.notOk(logged(g, /last ledger flush failed/), 'the last flush ran');
  const db = new Database(g.gateway.context.config.storage.path, { readonly: true });
  t.teardown(() => db.close());
  const requests = db
    .prepare("SELECT SUM(requests) FROM usage_minute WHERE status = 0 AND method = 'eth_chainId' AND owner_id = ?")
    .pluck()
    .get(owner) as number;
  t.equal(requests, seen, `every answer the clients saw is written (${seen})`);
});
