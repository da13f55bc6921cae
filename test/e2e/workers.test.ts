/**
 * Two worker threads on one port behave as one gateway: each test spreads at least 32 connections over them
 * (a fresh connection per call, so the kernel's SO_REUSEPORT hash picks a worker each time) and checks what a
 * single-threaded gateway promises: filters, keys, one prober, and a worker that dies.
 */
import t, { type Test } from 'tap';
import { Agent, request as httpRequest } from 'node:http';
import { availableParallelism } from 'node:os';
import WebSocket from 'ws';
import { createOwnerAdmin } from '../../src/tenancy/owners.js';
import { countingProxy } from '../support/counting-proxy.js';
import { waitFor } from '../support/wait-for.js';
import { scrape } from '../support/exposition.js';
import { anvilFor, evmChain, gatewayFor, type TestGateway } from '../support/gateway.js';
import { rpc, send } from '../support/rpc.js';
import { openSubscriber, type Subscriber, waitUntil } from '../support/subscriber.js';
import { clearOfMinuteEnd } from '../support/wait-for.js';

const CONNECTIONS = 32;

function api(g: TestGateway, key: string, method: string, path: string, body?: unknown) {
  return send(method, `${g.base}${path}`, body === undefined ? undefined : JSON.stringify(body), {
    authorization: `Bearer ${key}`,
    'content-type': 'application/json',
  });
}

/** WebSockets open on `url`, each answered once (so each is served), spread over the workers. */
async function openSockets(t: Test, url: string, n: number): Promise<WebSocket[]> {
  const sockets = await Promise.all(
    Array.from(
      { length: n },
      () =>
        new Promise<WebSocket>((resolve, reject) => {
          const ws = new WebSocket(url);
          ws.once('open', () => resolve(ws));
          ws.once('error', reject);
        }),
    ),
  );
  t.teardown(() => {
    for (const ws of sockets) ws.terminate();
  });
  return sockets;
}

function closed(ws: WebSocket): Promise<{ code: number; reason: string }> {
  if (ws.readyState === WebSocket.CLOSED) return Promise.resolve({ code: -1, reason: 'already closed' });
  return new Promise((resolve) => ws.once('close', (code, reason) => resolve({ code, reason: reason.toString() })));
}

function wsCall(ws: WebSocket, method: string, id: number, params: unknown[] = []): Promise<Record<string, unknown>> {
  return new Promise((resolve) => {
    const onMessage = (data: Buffer): void => {
      const m = JSON.parse(data.toString()) as Record<string, unknown>;
      if (m.id !== id) return;
      ws.off('message', onMessage);
      resolve(m);
    };
    ws.on('message', onMessage);
    ws.send(JSON.stringify({ jsonrpc: '2.0', id, method, params }));
  });
}

t.test('a filter made through one worker is read through every connection', async (t) => {
  const node = await anvilFor(t);
  const g = await gatewayFor(t, { server: { workers: 2 }, chains: { devnet: evmChain([node.url]) } });
  t.equal(g.gateway.workers?.count, 2);
  const url = `${g.base}/v1/rpc/public`;
  const made = await rpc(url, 'eth_newBlockFilter');
  const id = (made.json as { result: string }).result;
  t.match(id, /^0x[0-9a-f]+$/);
  await rpc(node.url, 'evm_mine');
  // The filters hear of the block within a second (no ws upstream: a poll of the latest block).
  await new Promise((r) => setTimeout(r, 2_000));
  const reads = await Promise.all(Array.from({ length: CONNECTIONS }, (_, i) => rpc(url, 'eth_getFilterChanges', [id], i)));
  t.same(
    reads.map((r) => Array.isArray((r.json as { result?: unknown }).result)),
    reads.map(() => true),
    'every connection reads the filter (none answers "filter not found")',
  );
  const hashes = reads.flatMap((r) => (r.json as { result: string[] }).result);
  t.equal(hashes.length, 1, 'the mined block is reported once over all the reads: one filter, not one per worker');
  t.same((await rpc(url, 'eth_uninstallFilter', [id])).json, { jsonrpc: '2.0', id: 1, result: true });
  t.match((await rpc(url, 'eth_getFilterChanges', [id])).json, { error: { code: -32000, message: 'filter not found' } });
});

t.test('a key made works at once on every worker; deleted, it is refused at once and its sockets close', async (t) => {
  const node = await anvilFor(t);
  const g = await gatewayFor(t, { server: { workers: 2 }, chains: { devnet: evmChain([node.url]) } });
  const owner = createOwnerAdmin(g.gateway.context.tenancy.store!).createOwner('o', 'growth', 1_000_000);
  const made = await api(g, owner.managementKey, 'POST', '/api/dashboard/endpoints', { network: 'devnet' });
  const ep = (made.json as { data: { id: string; api_key: string } }).data;
  const url = `${g.base}/v1/rpc/${ep.api_key}`;
  const first = await Promise.all(Array.from({ length: CONNECTIONS }, (_, i) => rpc(url, 'eth_chainId', [], i)));
  t.same(
    first.map((r) => r.status),
    first.map(() => 200),
    'the new key works on every connection',
  );

  const sockets = await openSockets(t, url.replace('http', 'ws'), CONNECTIONS);
  for (const [i, ws] of sockets.entries()) t.match(await wsCall(ws, 'eth_chainId', i), { result: '0x7a69' });
  const byWorker = (await g.gateway.streamStats()).wsConnectionsByWorker;
  t.equal(byWorker.length, 2);
  t.ok(
    byWorker.every((n) => n > 0),
    `sockets on both workers (${byWorker.join(', ')})`,
  );

  await clearOfMinuteEnd();
  const endings = sockets.map(closed);
  t.equal((await api(g, owner.managementKey, 'DELETE', `/api/dashboard/endpoints?id=${ep.id}`)).status, 200);
  const after = (await Promise.all(Array.from({ length: CONNECTIONS }, (_, i) => rpc(url, 'eth_chainId', [], i)))).sort(
    (a, b) => a.status - b.status,
  );
  // 401, until the unknown-key throttle (20 a minute for the IP) answers 429 instead.
  t.same(
    after.map((r) => r.status),
    after.map((_, i) => (i < 20 ? 401 : 429)).sort(),
    'refused on every connection right after the delete',
  );
  const ended = await Promise.all(endings);
  t.same(
    ended.map((e) => e.code),
    ended.map(() => 1008),
    'every socket of the key, on both workers, is closed (1008)',
  );
  t.equal(ended[0]!.reason, 'API key revoked');
});

t.test('one prober per chain for the process, whatever the number of workers', async (t) => {
  const node = await anvilFor(t);
  const proxy = await countingProxy(t, node.url);
  const g = await gatewayFor(t, { server: { workers: 2 }, chains: { devnet: evmChain([proxy.url]) } });
  // No client calls: every eth_blockNumber the node sees is a probe (about one a second per prober).
  const from = proxy.count('eth_blockNumber');
  await new Promise((r) => setTimeout(r, 3_200));
  const probes = proxy.count('eth_blockNumber') - from;
  t.ok(probes >= 1 && probes <= 5, `${probes} probes in 3.2 s: one prober (two would make about 7)`);
  // The workers' copies of the chain hear those probes: they know the head and answer from it.
  const answers = await Promise.all(
    Array.from({ length: CONNECTIONS }, (_, i) => rpc(`${g.base}/v1/rpc/public`, 'eth_blockNumber', [], i)),
  );
  t.same(
    answers.map((a) => a.status),
    answers.map(() => 200),
  );
  t.equal(proxy.count('eth_blockNumber') - from - probes <= 2, true, 'eth_blockNumber answered from the probed head, not asked again');
});

t.test('a worker that dies is started again; the other keeps its clients', async (t) => {
  const node = await anvilFor(t);
  const g = await gatewayFor(t, { server: { workers: 2 }, chains: { devnet: evmChain([node.url]) } });
  const url = `${g.base}/v1/rpc/public`;
  const sockets = await openSockets(t, url.replace('http', 'ws'), CONNECTIONS);
  for (const [i, ws] of sockets.entries()) await wsCall(ws, 'eth_chainId', i);
  const before = (await g.gateway.streamStats()).wsConnectionsByWorker;
  t.ok(
    before.every((n) => n > 0),
    `sockets on both workers (${before.join(', ')})`,
  );
  const lost = sockets.map((ws) => ({ ws, end: closed(ws), gone: false }));
  for (const l of lost) void l.end.then(() => (l.gone = true));

  g.gateway.workers!.crash(1);
  await waitFor(() => g.logLines.some((l) => l.startsWith('info worker restarted worker=1')), { what: 'worker 1 restarted', ms: 10_000 });
  t.ok(
    g.logLines.some((l) => /^error worker failed; closing its connections worker=1 error=.*crash drill/.test(l)),
    'the failure is logged with the worker number',
  );
  t.ok(
    g.logLines.some((l) => l.startsWith('error worker died; starting it again worker=1 exit_code=1')),
    'and its death',
  );
  const exposition = await scrape(g.gateway.metricsPort!);
  t.equal(exposition.value('chaingate_worker_restarts_total', { worker: '1' }), 1, 'and counted');

  await waitFor(() => lost.filter((l) => l.gone).length === before[0], { what: 'the dead worker’s sockets closed', ms: 10_000 });
  const survivors = lost.filter((l) => !l.gone);
  t.equal(survivors.length, before[1], "worker 2's sockets are all still open");
  for (const [i, s] of survivors.entries()) t.match(await wsCall(s.ws, 'eth_chainId', 1000 + i), { result: '0x7a69' }, 'and answered');
  const fresh = await Promise.all(Array.from({ length: CONNECTIONS }, (_, i) => rpc(url, 'eth_chainId', [], i)));
  t.same(
    fresh.map((r) => r.status),
    fresh.map(() => 200),
    'new connections are served by both workers again',
  );
  const now = (await g.gateway.streamStats()).wsConnectionsByWorker;
  t.equal(now.length, 2);
});

t.test('an owner with a balance for exactly K calls gets exactly K answers over 64 connections, then 402', async (t) => {
  const node = await anvilFor(t);
  const g = await gatewayFor(t, {
    server: { workers: 2 },
    chains: { devnet: evmChain([node.url]) },
    plans: { open: { rps: 1_000_000, max_endpoints: 5 } },
  });
  const K = 400;
  const cost = g.gateway.context.tenancy.ruCost('eth_chainId');
  const owner = createOwnerAdmin(g.gateway.context.tenancy.store!).createOwner('o', 'open', K * cost);
  const made = await api(g, owner.managementKey, 'POST', '/api/dashboard/endpoints', { network: 'devnet' });
  const url = `${g.base}/v1/rpc/${(made.json as { data: { api_key: string } }).data.api_key}`;
  let served = 0;
  let refused = 0;
  let other = 0;
  // 64 clients, each a fresh connection per call (spread over both workers), until each has been refused.
  await Promise.all(
    Array.from({ length: 64 }, async () => {
      for (;;) {
        const r = await rpc(url, 'eth_chainId');
        if (r.status === 200) served++;
        else if (r.status === 402) {
          refused++;
          return;
        } else {
          other++;
          return;
        }
      }
    }),
  );
  t.equal(served, K, `exactly ${K} calls served`);
  t.equal(refused, 64, 'then every client gets 402');
  t.equal(other, 0);
  const ledger = g.gateway.context.tenancy.ledger;
  t.equal(ledger.available(owner.id), 0, 'nothing left, never below zero');
  await waitFor(() => ledger.flush() && ledger.pending().rows === 0 && storedBalance(g, owner.id) === 0, { what: 'every debit written' });
  const used = g.gateway.context.tenancy
    .store!.db.prepare("SELECT SUM(ru) FROM usage_minute WHERE status = 0 AND method = 'eth_chainId' AND owner_id = ?")
    .pluck()
    .get(owner.id) as number;
  t.equal(used, K * cost, 'the usage rows hold every served call');
});

function storedBalance(g: TestGateway, ownerId: number): number {
  return g.gateway.context.tenancy.store!.db.prepare('SELECT ru_balance FROM owners WHERE id = ?').pluck().get(ownerId) as number;
}

t.test('one upstream subscription for the process; every subscriber on every worker gets every head once', async (t) => {
  const node = await anvilFor(t);
  const g = await gatewayFor(t, {
    server: { workers: 2 },
    chains: { devnet: { chain_id: 31337, upstreams: [{ url: node.url, ws: node.wsUrl }] } },
  });
  const sockets = await openSockets(t, `${g.base.replace('http', 'ws')}/v1/rpc/public`, CONNECTIONS);
  const heads: number[][] = sockets.map(() => []);
  for (const [i, ws] of sockets.entries()) {
    t.match(await wsCall(ws, 'eth_subscribe', i, ['newHeads']), { result: /^0x/ });
    ws.on('message', (data: Buffer) => {
      const m = JSON.parse(data.toString()) as { method?: string; params?: { result: { number: string } } };
      if (m.method === 'eth_subscription') heads[i]!.push(Number(m.params!.result.number));
    });
  }
  const byWorker = (await g.gateway.streamStats()).wsConnectionsByWorker;
  t.ok(
    byWorker.every((n) => n > 0),
    `subscribers on both workers (${byWorker.join(', ')})`,
  );
  const start = Number(((await rpc(node.url, 'eth_blockNumber')).json as { result: string }).result);
  for (let i = 0; i < 5; i++) await rpc(node.url, 'evm_mine');
  await waitFor(() => heads.every((h) => h.length >= 5), { what: 'every subscriber has the 5 heads', ms: 10_000 });
  await new Promise((r) => setTimeout(r, 300));
  const expected = [1, 2, 3, 4, 5].map((k) => start + k);
  t.same(
    heads,
    heads.map(() => expected),
    'each head once, in order, on every connection',
  );
  const stats = await g.gateway.streamStats();
  t.equal(stats.upstreamSubscriptions, 1, 'one upstream subscription');
  t.equal(stats.subscriptions, CONNECTIONS);
});

t.test("an owner's subscribers on both workers: each charged per notification, each closed at its first refused one", async (t) => {
  const node = await anvilFor(t);
  const g = await gatewayFor(t, {
    server: { workers: 2 },
    chains: { devnet: { chain_id: 31337, upstreams: [{ url: node.url, ws: node.wsUrl }] } },
  });
  const notificationRu = (bytes: number): number => 5 * Math.ceil(bytes / 250);
  // The price of one head, as a public subscriber receives it (the id and envelope are the same length on every worker).
  const pub = await openSubscriber(t, `${g.base.replace('http', 'ws')}/v1/rpc/public`);
  const pubId = await pub.subscribe('newHeads');
  await rpc(node.url, 'evm_mine');
  await waitUntil(() => pub.resultsOf(pubId).length === 1, 10_000, 'a head for the public subscriber');
  const price = notificationRu(pub.notifications[0]!.bytes);

  // A balance for the two subscribes and K notifications, and half of one more.
  const K = 3;
  const subscribeRu = g.gateway.context.tenancy.ruCost('eth_subscribe');
  const start = 2 * subscribeRu + K * price + Math.floor(price / 2);
  const owner = createOwnerAdmin(g.gateway.context.tenancy.store!).createOwner('o', 'growth', start);
  const made = await api(g, owner.managementKey, 'POST', '/api/dashboard/endpoints', { network: 'devnet' });
  const url = `${g.base.replace('http', 'ws')}/v1/rpc/${(made.json as { data: { api_key: string } }).data.api_key}`;
  // One connection on each worker: the kernel picks, so connections are opened until both have one.
  const onWorker: Array<Subscriber | undefined> = [];
  for (let tries = 0; tries < 32 && !(onWorker[0] && onWorker[1]); tries++) {
    const before = (await g.gateway.streamStats()).wsConnectionsByWorker;
    const s = await openSubscriber(t, url);
    const after = (await g.gateway.streamStats()).wsConnectionsByWorker;
    const worker = after.findIndex((n, i) => n > before[i]!);
    if (worker >= 0 && onWorker[worker] === undefined) onWorker[worker] = s;
    else {
      s.ws.close(1000);
      await s.closed;
    }
  }
  const [p, q] = onWorker;
  if (p === undefined || q === undefined) throw new Error('32 connections did not reach both workers');
  const ids = [await p.subscribe('newHeads'), await q.subscribe('newHeads')] as const;

  // Each block is one notification per subscriber, each charged by its own worker: K are paid in all, so
  // within K + 1 blocks each worker has had one refused, whichever worker wins the earlier charges.
  const pubBefore = pub.resultsOf(pubId).length;
  for (let i = 0; i <= K; i++) await rpc(node.url, 'evm_mine');
  const deadline = new Promise<null>((r) => setTimeout(() => r(null), 10_000));
  t.same(
    await Promise.all([p, q].map((s) => Promise.race([s.closed, deadline]))),
    [p, q].map(() => ({ code: 1008, reason: 'Insufficient RU balance' })),
    'both closed with 1008, on either worker, once a notification was refused',
  );
  t.comment(
    `notification sizes ${[...new Set([...p.notifications, ...q.notifications].map((n) => n.bytes))].join(', ')} bytes, ${price} RU each`,
  );
  const got = [p.resultsOf(ids[0]).length, q.resultsOf(ids[1]).length];
  t.equal(got[0]! + got[1]!, K, `${K} notifications delivered over both (${got.join(' + ')})`);
  const ledger = g.gateway.context.tenancy.ledger;
  await waitFor(() => ledger.flush() && ledger.pending().rows === 0, { what: 'every debit shipped' });
  const paid = [...p.notifications, ...q.notifications].reduce((sum, n) => sum + notificationRu(n.bytes), 0);
  t.equal(ledger.available(owner.id), start - 2 * subscribeRu - paid, 'charged exactly what they received');
  await waitUntil(() => pub.resultsOf(pubId).length === pubBefore + K + 1, 5000, 'the public subscriber has every block');
  t.notOk(pub.isClosed, 'and stays open');
});

t.test('the cache and calls in flight are per worker: a client hits its worker’s cache; a burst costs one call per worker', async (t) => {
  const node = await anvilFor(t);
  await rpc(node.url, 'anvil_mine', ['0x80']);
  const proxy = await countingProxy(t, node.url);
  const g = await gatewayFor(t, { server: { workers: 2 }, chains: { devnet: evmChain([proxy.url]) } });
  await waitFor(() => proxy.count('eth_blockNumber') > 0, { what: 'a head' });
  // One keep-alive connection: one worker, whose cache answers the second call.
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  t.teardown(() => agent.destroy());
  const params = ['0x3', false];
  const first = await fetchRpc(g.base, agent, 'eth_getBlockByNumber', params);
  const second = await fetchRpc(g.base, agent, 'eth_getBlockByNumber', params);
  t.same(second, first);
  t.equal(proxy.count('eth_getBlockByNumber', params), 1, 'the second call on the connection was a hit');

  proxy.delay((c) => (c.method === 'eth_getBlockByNumber' && JSON.stringify(c.params) === '["latest",false]' ? 400 : 0));
  const answers = await Promise.all(
    Array.from({ length: CONNECTIONS * 2 }, (_, i) => rpc(`${g.base}/v1/rpc/public`, 'eth_getBlockByNumber', ['latest', false], i)),
  );
  t.ok(answers.every((a) => a.status === 200));
  const calls = proxy.count('eth_getBlockByNumber', ['latest', false]);
  t.ok(calls >= 1 && calls <= 2, `64 identical calls over both workers: ${calls} upstream calls (one per worker at most)`);
});

/** One JSON-RPC call over `agent` (a kept-alive connection); its result. */
function fetchRpc(base: string, agent: Agent, method: string, params: unknown[]): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method, params });
    const req = httpRequest(`${base}/v1/rpc/public`, { method: 'POST', agent, headers: { 'content-type': 'application/json' } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve((JSON.parse(Buffer.concat(chunks).toString()) as { result: unknown }).result));
    });
    req.on('error', reject);
    req.end(body);
  });
}

t.test('limits hold for the process: a plan rps, the unknown-key throttle, the connections per key', async (t) => {
  const node = await anvilFor(t);
  const RPS = 50;
  const g = await gatewayFor(t, {
    server: { workers: 2 },
    chains: { devnet: evmChain([node.url]) },
    plans: { capped: { rps: RPS, max_endpoints: 5 } },
    websocket: { max_connections_per_key: 5 },
  });
  const owner = createOwnerAdmin(g.gateway.context.tenancy.store!).createOwner('o', 'capped', 100_000_000);
  const made = await api(g, owner.managementKey, 'POST', '/api/dashboard/endpoints', { network: 'devnet' });
  const url = `${g.base}/v1/rpc/${(made.json as { data: { api_key: string } }).data.api_key}`;
  await rpc(url, 'eth_chainId');
  await new Promise((r) => setTimeout(r, 1_100));

  // Every call sent within 0.6 s, over 32 connections at a time: all admissions fall in one second. A machine
  // too loaded to offer twice the rate in that time tries again in a fresh second (at most three times).
  let statuses: number[] = [];
  for (let trial = 0; trial < 3 && statuses.length <= 2 * RPS; trial++) {
    if (trial > 0) await new Promise((r) => setTimeout(r, 1_100));
    const until = performance.now() + 600;
    const offered: number[] = [];
    await Promise.all(
      Array.from({ length: CONNECTIONS }, async () => {
        while (performance.now() < until) offered.push((await rpc(url, 'eth_chainId')).status);
      }),
    );
    statuses = offered;
  }
  const served = statuses.filter((s) => s === 200).length;
  t.ok(statuses.length > 2 * RPS, `${statuses.length} calls offered`);
  t.ok(served <= RPS, `${served} served: never over the plan's ${RPS}/s across both workers`);
  t.ok(served >= 0.98 * RPS, `${served} served: never refused below 98 % of it`);
  t.ok(
    statuses.every((s) => s === 200 || s === 429),
    'the rest are 429',
  );

  await clearOfMinuteEnd();
  const guesses = await Promise.all(
    Array.from({ length: 40 }, (_, i) => rpc(`${g.base}/v1/rpc/${'q'.repeat(31)}${i % 10}`, 'eth_chainId')),
  );
  const statusesOf = guesses.map((r) => r.status);
  t.equal(statusesOf.filter((s) => s === 401).length, 20, 'the unknown-key throttle lets 20 a minute through for the IP');
  t.equal(statusesOf.filter((s) => s === 429).length, 20, 'then 429, whichever worker is asked');

  const opened = await Promise.allSettled(
    Array.from(
      { length: CONNECTIONS },
      () =>
        new Promise<WebSocket>((resolve, reject) => {
          const ws = new WebSocket(url.replace('http', 'ws'));
          ws.once('open', () => resolve(ws));
          ws.once('unexpected-response', (_req, res) => reject(new Error(String(res.statusCode))));
          ws.once('error', reject);
        }),
    ),
  );
  const open = opened.filter((o) => o.status === 'fulfilled').map((o) => (o as PromiseFulfilledResult<WebSocket>).value);
  t.teardown(() => {
    for (const ws of open) ws.terminate();
  });
  t.equal(open.length, 5, 'websocket.max_connections_per_key: 5 open across both workers');
  t.ok(
    opened.every((o) => o.status === 'fulfilled' || String((o.reason as Error).message) === '429'),
    'the others refused with 429',
  );
});

t.test('more workers than cores is allowed, with a warning', async (t) => {
  const node = await anvilFor(t);
  const cores = availableParallelism();
  const g = await gatewayFor(t, { server: { workers: cores + 1 }, chains: { devnet: evmChain([node.url]) } });
  t.equal(g.gateway.workers?.count, cores + 1);
  t.ok(g.logLines.includes(`warn more worker threads than cores workers=${cores + 1} cores=${cores}`), 'warned');
  const answers = await Promise.all(Array.from({ length: CONNECTIONS }, (_, i) => rpc(`${g.base}/v1/rpc/public`, 'eth_chainId', [], i)));
  t.ok(
    answers.every((a) => a.status === 200),
    'and served',
  );
});
