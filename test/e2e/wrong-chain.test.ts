/**
 * A node on another chain than its chain's: real anvils (31337 by default, one started with --chain-id 1
 * as the right node of a chain configured chain_id 1), and the devnet's beacon node beside a stand-in one
 * whose genesis differs. A node on another chain is out of rotation (reason wrong_chain) in /healthz,
 * /readyz, GET /status and the metrics, logged once, and no call reaches it; a chain with no node on its
 * chain is not ready.
 */
import t, { type Test } from 'tap';
import { type AddressInfo, connect, createServer, type Socket } from 'node:net';
import { startBeaconNode } from '../../src/devnet/beacon/beacon-node.js';
import { scrape } from '../support/exposition.js';
import { fakeBeacon } from '../support/fake-beacon.js';
import { anvilFor, gatewayFor, type TestGateway } from '../support/gateway.js';
import { rpc, send } from '../support/rpc.js';
import { waitFor } from '../support/wait-for.js';

type UpstreamStatus = { name: string; in_rotation: boolean; reason: string | null; serves: string | null };
type Status = { chains: Record<string, { ready: boolean; upstreams: UpstreamStatus[] }> };

async function statusOf(g: TestGateway): Promise<Status> {
  return (await send('GET', `http://127.0.0.1:${g.gateway.metricsPort!}/status`)).json as Status;
}

async function upstreamOf(g: TestGateway, chain: string, name: string): Promise<UpstreamStatus | undefined> {
  return (await statusOf(g)).chains[chain]?.upstreams.find((u) => u.name === name);
}

const ADDRESS = '0x00000000000000000000000000000000000c0ffe';
const MARK = '0x1234567';

t.test('a node on another chain id is out of rotation; calls go to the one on the configured chain', async (t: Test) => {
  const wrong = await anvilFor(t);
  const right = await anvilFor(t, { chainId: 1 });
  // The same address holds a balance on the right node only, so each answer tells which node gave it.
  t.equal((await rpc(right.url, 'anvil_setBalance', [ADDRESS, MARK])).status, 200);
  const g = await gatewayFor(t, {
    chains: {
      mainnet: {
        chain_id: 1,
        upstreams: [
          { name: 'wrong', url: wrong.url },
          { name: 'right', url: right.url },
        ],
      },
    },
  });
  await waitFor(async () => (await upstreamOf(g, 'mainnet', 'wrong'))?.reason === 'wrong_chain', {
    what: 'status shows the node on 31337 out for wrong_chain',
    ms: 5000,
  });
  t.match(await upstreamOf(g, 'mainnet', 'wrong'), { in_rotation: false, reason: 'wrong_chain', serves: '31337' });
  t.match(await upstreamOf(g, 'mainnet', 'right'), { in_rotation: true, reason: null, serves: '1' });

  for (let i = 0; i < 20; i++) {
    const r = await rpc(`${g.base}/v1/rpc/public`, 'eth_getBalance', [ADDRESS, 'latest'], i);
    t.same(r.json, { jsonrpc: '2.0', id: i, result: MARK }, `call ${i} is answered by the node on chain 1`);
  }
  t.equal((await send('GET', `${g.base}/readyz`)).status, 200, '/readyz: the chain has a node on its chain');
  const health = (await send('GET', `${g.base}/healthz`)).json as {
    chains: Record<string, { upstreams: Array<{ label: string; reason: string | null }> }>;
  };
  t.match(health.chains.mainnet!.upstreams, [
    { label: 'wrong', reason: 'wrong_chain' },
    { label: 'right', reason: null },
  ]);

  const metrics = await scrape(g.gateway.metricsPort!);
  t.equal(metrics.value('chaingate_upstream_wrong_chain', { chain: 'mainnet', upstream: 'wrong' }), 1);
  t.equal(metrics.value('chaingate_upstream_wrong_chain', { chain: 'mainnet', upstream: 'right' }), 0);
  t.equal(metrics.value('chaingate_upstream_in_rotation', { chain: 'mainnet', upstream: 'wrong' }), 0);

  // Probes of nodes out of rotation ask it again every 1.5 s: the verdict is logged once, not per probe.
  await new Promise((r) => setTimeout(r, 3500));
  const told = g.logLines.filter((l) => l.includes('upstream serves another chain'));
  t.equal(told.length, 1, 'logged once');
  t.match(told[0], /upstream=wrong expected=1 served=31337/);
});

t.test('a chain whose only nodes serve another chain is not ready, with one worker thread or several', async (t: Test) => {
  for (const workers of [1, 2]) {
    await t.test(`workers: ${workers}`, async (t) => {
      const a = await anvilFor(t);
      const b = await anvilFor(t);
      const g = await gatewayFor(t, {
        server: { workers },
        chains: { mainnet: { chain_id: 1, upstreams: [{ url: a.url }, { url: b.url }] } },
      });
      await waitFor(async () => (await send('GET', `${g.base}/readyz`)).status === 503, { what: '/readyz is 503', ms: 5000 });
      const ready = (await send('GET', `${g.base}/readyz`)).json as { not_ready: string[] };
      t.same(ready.not_ready, ['mainnet']);
      const r = await rpc(`${g.base}/v1/rpc/public`, 'eth_getBalance', [ADDRESS, 'latest']);
      t.equal(r.status, 502, 'no read is served from chain 31337');
      t.same((await statusOf(g)).chains.mainnet!.ready, false);
    });
  }
});

/** A TCP relay on 127.0.0.1 whose target can be switched: an upstream address that starts reaching another node. */
async function switchableRelay(t: Test, targetPort: number): Promise<{ url: string; switchTo(port: number): void }> {
  let target = targetPort;
  const open = new Set<Socket>();
  const server = createServer((client) => {
    const node = connect(target, '127.0.0.1');
    for (const s of [client, node]) {
      open.add(s);
      s.on('close', () => open.delete(s));
      s.on('error', () => {});
    }
    client.pipe(node).pipe(client);
    client.on('close', () => node.destroy());
    node.on('close', () => client.destroy());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => {
    for (const s of open) s.destroy();
    return new Promise<void>((r) => server.close(() => r()));
  });
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    switchTo(port) {
      target = port;
      for (const s of open) s.destroy();
    },
  };
}

const portOf = (url: string): number => Number(new URL(url).port);

t.test('a node that comes back on the configured chain rejoins rotation; a reload checks again', async (t: Test) => {
  const wrong = await anvilFor(t);
  const right = await anvilFor(t, { chainId: 1 });
  const relay = await switchableRelay(t, portOf(wrong.url));
  const g = await gatewayFor(t, { chains: { mainnet: { chain_id: 1, upstreams: [{ name: 'node', url: relay.url }] } } });
  const readyz = async (): Promise<number> => (await send('GET', `${g.base}/readyz`)).status;
  await waitFor(async () => (await readyz()) === 503, { what: 'out while it serves 31337', ms: 5000 });

  relay.switchTo(portOf(right.url));
  await waitFor(async () => (await readyz()) === 200, { what: 'back once its address reaches a node on chain 1', ms: 5000 });
  t.equal((await rpc(`${g.base}/v1/rpc/public`, 'eth_getBalance', [ADDRESS, 'latest'])).status, 200);
  t.equal(g.logLines.filter((l) => l.includes('upstream serves this chain again')).length, 1, 'its return logged once');

  // The address reaches the wrong node again: a node in rotation is checked again every few minutes, and at
  // once when the config is reloaded (the same config here: the chain's runtime stays).
  relay.switchTo(portOf(wrong.url));
  await new Promise((r) => setTimeout(r, 2000));
  t.equal(await readyz(), 200, 'not checked again within seconds without a reload');
  await g.gateway.reload(g.gateway.context.config);
  await waitFor(async () => (await readyz()) === 503, { what: 'a reload checks it again: out', ms: 5000 });
  t.equal(g.logLines.filter((l) => l.includes('upstream serves another chain')).length, 2, 'each change logged once');
});

t.test('a beacon node whose genesis differs from the chain’s others is out of rotation', async (t: Test) => {
  const anvil = await anvilFor(t);
  const one = await startBeaconNode({ executionUrl: anvil.url, pollMs: 50 });
  t.teardown(() => one.stop());
  const two = await startBeaconNode({ executionUrl: anvil.url, pollMs: 50 });
  t.teardown(() => two.stop());
  const genesis = (await (await fetch(`${one.url}/eth/v1/beacon/genesis`)).json()) as { data: Record<string, string> };
  // A node of another network: the same genesis time and root, another fork version.
  const other = await fakeBeacon(t, {
    answer(req, res) {
      const body =
        req.url === '/eth/v1/beacon/genesis'
          ? { data: { ...genesis.data, genesis_fork_version: '0x10000038' } }
          : { data: { header: { message: { slot: '1' } } } };
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    },
  });
  const g = await gatewayFor(t, {
    chains: {
      beacon: {
        kind: 'beacon',
        upstreams: [
          { name: 'other', url: other.url },
          { name: 'one', url: one.url },
          { name: 'two', url: two.url },
        ],
      },
    },
  });
  await waitFor(async () => (await upstreamOf(g, 'beacon', 'other'))?.reason === 'wrong_chain', {
    what: 'the node with another fork version is out, though configured first',
    ms: 5000,
  });
  t.match(await upstreamOf(g, 'beacon', 'one'), { in_rotation: true });
  t.match(await upstreamOf(g, 'beacon', 'two'), { in_rotation: true });
  t.equal((await send('GET', `${g.base}/readyz`)).status, 200);
  const before = other.requests.length;
  for (let i = 0; i < 10; i++) t.equal((await send('GET', `${g.base}/beacon/v1/rpc/public/eth/v1/node/version`)).status, 200);
  const reached = other.requests.slice(before).filter((r) => r.target === '/eth/v1/node/version');
  t.equal(reached.length, 0, 'no call reaches the node of another network');
  const metrics = await scrape(g.gateway.metricsPort!);
  t.equal(metrics.value('chaingate_upstream_wrong_chain', { chain: 'beacon', upstream: 'other' }), 1);
});
