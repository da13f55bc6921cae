/**
 * Two worker threads on one port behave as one gateway: each test spreads at least 32 connections over them
 * (a fresh connection per call, so the kernel's SO_REUSEPORT hash picks a worker each time) and checks what a
 * single-threaded gateway promises: filters, keys, one prober, and a worker that dies.
 */
import t, { type Test } from 'tap';
import WebSocket from 'ws';
import { createOwnerAdmin } from '../../src/tenancy/owners.js';
import { countingProxy } from '../support/counting-proxy.js';
import { until } from '../support/fake-beacon.js';
import { scrape } from '../support/exposition.js';
import { anvilFor, evmChain, gatewayFor, type TestGateway } from '../support/gateway.js';
import { rpc, send } from '../support/rpc.js';

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

function wsCall(ws: WebSocket, method: string, id: number): Promise<Record<string, unknown>> {
  return new Promise((resolve) => {
    const onMessage = (data: Buffer): void => {
      const m = JSON.parse(data.toString()) as Record<string, unknown>;
      if (m.id !== id) return;
      ws.off('message', onMessage);
      resolve(m);
    };
    ws.on('message', onMessage);
    ws.send(JSON.stringify({ jsonrpc: '2.0', id, method, params: [] }));
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
  const owner = createOwnerAdmin(g.gateway.context.tenancy.store).createOwner('o', 'growth', 1_000_000);
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

  const endings = sockets.map(closed);
  t.equal((await api(g, owner.managementKey, 'DELETE', `/api/dashboard/endpoints?id=${ep.id}`)).status, 200);
  const after = await Promise.all(Array.from({ length: CONNECTIONS }, (_, i) => rpc(url, 'eth_chainId', [], i)));
  t.same(
    after.map((r) => r.status),
    after.map(() => 401),
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
  await until('worker 1 restarted', () => g.logLines.some((l) => l.startsWith('info worker restarted worker=1')), 10_000);
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

  await until('the dead worker’s sockets closed', () => lost.filter((l) => l.gone).length === before[0], 10_000);
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
