/**
 * Several upstreams per chain end to end: a node killed under load, a lagging node, a node behind by a few
 * blocks, failing and hanging nodes, a node stopped (SIGSTOP) under calls, the broadcast of a raw
 * transaction, no healthy upstream, and /healthz and /readyz following a node's death and return. Real
 * anvils throughout; scripted HTTP nodes only for what anvil cannot be made to do (5xx, a hang on some
 * methods only, chosen rejections).
 */
import t, { type Test } from 'tap';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Transaction, Wallet } from 'ethers';
import { startAnvil } from '../../src/devnet/anvil.js';
import { startBeaconNode } from '../../src/devnet/beacon/beacon-node.js';
import { DEV_ADDRESS, minedReceipt, result as direct } from '../support/dev-chain.js';
import { anvilFor, evmChain, gatewayFor, type TestGateway } from '../support/gateway.js';
import { rpc, send } from '../support/rpc.js';
import { openSubscriber } from '../support/subscriber.js';
import { tcpRelay } from '../support/tcp-relay.js';
import { wsUrl } from '../support/ws.js';
import { waitFor } from '../support/wait-for.js';

/** How /healthz labels an upstream without a configured name: its host:port (config `name`'s default). */
const hostPort = (url: string): string => new URL(url).host;

const DEV_KEY = '0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80';
const DEV_BALANCE = '0x21e19e0c9bab2400000';
const UPSTREAM_ERROR = { code: -32603, message: 'Upstream node error' };

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** An address of its own per call, so no two calls are the same read (the gateway would share them). */
const addressFor = (i: number): string => `0x${(0x1000 + i).toString(16).padStart(40, '0')}`;

type Health = {
  status: string;
  chains: Record<
    string,
    {
      ready: boolean;
      best_head: number | null;
      upstreams: Array<{ label: string; in_rotation: boolean; reason: string | null; head: number | null }>;
    }
  >;
};

async function healthOf(g: TestGateway): Promise<Health> {
  return (await send('GET', `${g.base}/healthz`)).json as Health;
}

interface ScriptedCall {
  method: string;
  params: unknown[];
}
/** How a scripted node answers one call: a JSON-RPC result or error (after delayMs), an HTTP status, or never. */
type Script = (
  call: ScriptedCall,
) => { result: unknown; delayMs?: number } | { error: { code: number; message: string }; delayMs?: number } | { status: number } | 'hang';

/** An HTTP JSON-RPC node that answers as `script` says and records every call it gets. */
async function scriptedNode(t: Test, script: Script): Promise<{ url: string; calls: ScriptedCall[]; callsOf(method: string): number }> {
  const calls: ScriptedCall[] = [];
  const server = createServer({ keepAlive: true }, (req: IncomingMessage, res: ServerResponse) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString()));
    req.on('end', () => {
      const request = JSON.parse(body) as { id: unknown; method: string; params: unknown[] };
      const call = { method: request.method, params: request.params };
      calls.push(call);
      const answer = script(call);
      if (answer === 'hang') return;
      if ('status' in answer) {
        res.writeHead(answer.status, { 'content-type': 'text/plain' }).end('node trouble');
        return;
      }
      const { delayMs, ...rest } = answer;
      const text = JSON.stringify({ jsonrpc: '2.0', id: request.id, ...rest });
      setTimeout(() => res.writeHead(200, { 'content-type': 'application/json' }).end(text), delayMs ?? 0);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => {
    server.closeAllConnections();
    return new Promise<void>((r) => server.close(() => r()));
  });
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    calls,
    callsOf: (method) => calls.filter((c) => c.method === method).length,
  };
}

/** Answers the prober like a node at block 0; everything else as `rest` says. */
const withHead =
  (rest: Script): Script =>
  (call) =>
    call.method === 'eth_blockNumber' ? { result: '0x0' } : rest(call);

t.test('a node killed under load: 200 reads in flight over 2 s, none fails', async (t) => {
  const [a, b] = await Promise.all([anvilFor(t), anvilFor(t)]);
  const g = await gatewayFor(t, { chains: { devnet: evmChain([a.url, b.url], 31337, { timeout_s: 10 }) } });
  const url = `${g.base}/v1/rpc/public`;
  const answers: Array<Promise<{ status: number; json: unknown }>> = [];
  for (let i = 0; i < 200; i++) {
    if (i === 100) a.process.kill('SIGKILL');
    answers.push(rpc(url, 'eth_getBalance', [addressFor(i), 'latest'], i));
    await sleep(10);
  }
  const settled = await Promise.all(answers);
  const failed = settled.filter(
    (r, i) => r.status !== 200 || JSON.stringify(r.json) !== JSON.stringify({ jsonrpc: '2.0', id: i, result: '0x0' }),
  );
  t.equal(
    failed.length,
    0,
    `every client got its answer (${failed.length} did not: ${failed
      .slice(0, 3)
      .map((r) => `${r.status} ${JSON.stringify(r.json)}`)
      .join(' ')})`,
  );
  const health = await healthOf(g);
  t.match(
    health.chains.devnet!.upstreams,
    [
      { label: hostPort(a.url), in_rotation: false, reason: 'failing' },
      { label: hostPort(b.url), in_rotation: true },
    ],
    'the dead node is out of rotation',
  );
});

t.test('a node more than max_lag_blocks behind is skipped for latest reads', async (t) => {
  const [a, b] = await Promise.all([anvilFor(t), anvilFor(t)]);
  const g = await gatewayFor(t, { chains: { devnet: evmChain([a.url, b.url], 31337, { max_lag_blocks: 5 }) } });
  await direct(b.url, 'anvil_mine', ['0xa']);
  // A head poll answered while the ten blocks were being mined can report a head between 6 and 9 first.
  await waitFor(
    async () => {
      const devnet = (await healthOf(g)).chains.devnet!;
      return devnet.upstreams[0]!.reason === 'lagging' && devnet.best_head === 10;
    },
    { what: 'the node behind is seen lagging behind head 10', ms: 5000 },
  );
  const health = await healthOf(g);
  t.match(health.chains.devnet, {
    ready: true,
    best_head: 10,
    upstreams: [
      { head: 0, in_rotation: false },
      { head: 10, in_rotation: true },
    ],
  });
  const url = `${g.base}/v1/rpc/public`;
  for (let i = 0; i < 30; i++) {
    const r = await rpc(url, 'eth_getBlockByNumber', ['latest', false], i);
    if ((r.json as { result?: { number?: string } }).result?.number !== '0xa') {
      t.fail(`latest read ${i} came from the lagging node: ${r.text.slice(0, 200)}`);
      return;
    }
  }
  t.pass('30 latest reads, all from the node ahead');
  t.same(
    (await rpc(url, 'eth_blockNumber', [], 'bn')).json,
    { jsonrpc: '2.0', id: 'bn', result: '0xa' },
    'eth_blockNumber is the best head',
  );
});

t.test('a read of a block a node has not seen yet is answered by the node that has', async (t) => {
  const [a, b] = await Promise.all([anvilFor(t), anvilFor(t)]);
  await direct(b.url, 'anvil_mine', ['0x3']);
  // Three blocks behind: still in rotation, but reads of block 3 go to the node that has it (consistency.md).
  const g = await gatewayFor(t, { chains: { devnet: evmChain([a.url, b.url], 31337, { max_lag_blocks: 5 }) } });
  const url = `${g.base}/v1/rpc/public`;
  for (let i = 0; i < 20; i++) {
    const r = await rpc(url, 'eth_getBalance', [DEV_ADDRESS, '0x3'], i);
    t.same(r.json, { jsonrpc: '2.0', id: i, result: DEV_BALANCE }, `read ${i}`);
  }
  // A node that tells block 3 as its head yet answers "header not found" for it (a balancer over nodes a block
  // apart): the gateway cannot know from its head, so its answers are replaced by the other node's.
  const scripted = await scriptedNode(t, (call) =>
    call.method === 'eth_blockNumber' ? { result: '0x3' } : { error: { code: -32000, message: 'header not found' } },
  );
  const g2 = await gatewayFor(t, { chains: { devnet: evmChain([scripted.url, b.url], 31337) } });
  // At least 20 reads, and on until one went to the scripted node: on a loaded machine its head probe may
  // be late, and a node suspected of hanging gets no call while the other is not (upstreams.md).
  for (let i = 0; i < 20 || (scripted.callsOf('eth_getBalance') === 0 && i < 300); i++) {
    const r = await rpc(`${g2.base}/v1/rpc/public`, 'eth_getBalance', [DEV_ADDRESS, '0x3'], i);
    t.same(r.json, { jsonrpc: '2.0', id: i, result: DEV_BALANCE }, `read ${i} with a node answering "header not found"`);
  }
  t.ok(
    scripted.callsOf('eth_getBalance') > 0,
    `the node behind was asked ${scripted.callsOf('eth_getBalance')} times and its answers replaced`,
  );
});

t.test('a node answering 500, or hanging, is retried on the other within the deadline', async (t) => {
  const node = await anvilFor(t);
  const failing = await scriptedNode(
    t,
    withHead(() => ({ status: 500 })),
  );
  const g = await gatewayFor(t, { chains: { devnet: evmChain([failing.url, node.url], 31337) } });
  for (let i = 0; i < 20; i++) {
    const r = await rpc(`${g.base}/v1/rpc/public`, 'eth_getBalance', [DEV_ADDRESS, 'latest'], i);
    t.same(r.json, { jsonrpc: '2.0', id: i, result: DEV_BALANCE }, `read ${i}`);
  }
  t.ok(failing.callsOf('eth_getBalance') > 0, `the failing node got ${failing.callsOf('eth_getBalance')} of the reads`);

  const hanging = await scriptedNode(
    t,
    withHead(() => 'hang'),
  );
  const g2 = await gatewayFor(t, { chains: { devnet: evmChain([hanging.url, node.url], 31337, { timeout_s: 2 }) } });
  const started = Date.now();
  const answers = await Promise.all(
    Array.from({ length: 16 }, (_, i) =>
      rpc(`${g2.base}/v1/rpc/public`, 'eth_getBalance', [addressFor(i), 'latest'], i).then((r) => ({ r, took: Date.now() - started })),
    ),
  );
  for (const [i, { r }] of answers.entries())
    t.same(r.json, { jsonrpc: '2.0', id: i, result: '0x0' }, `read ${i} despite the hanging node`);
  const slowest = Math.max(...answers.map((a) => a.took));
  t.ok(hanging.callsOf('eth_getBalance') > 0, `the hanging node got ${hanging.callsOf('eth_getBalance')} of the reads`);
  t.ok(slowest < 2000, `every answer came before the 2 s timeout (slowest ${slowest} ms)`);
});

t.test('a node that stops answering (SIGSTOP) is out within about 3.5 s, and calls meanwhile do not wait for it', async (t) => {
  const b = await anvilFor(t);
  const a = await startAnvil();
  // A stopped process holds SIGTERM until it is continued: continue it first, whatever the test did.
  t.teardown(async () => {
    a.process.kill('SIGCONT');
    await a.stop();
  });
  const g = await gatewayFor(t, { chains: { devnet: evmChain([a.url, b.url], 31337, { timeout_s: 10 }) } });
  const upstreamA = async () => (await healthOf(g)).chains.devnet!.upstreams[0]!;
  await waitFor(async () => (await healthOf(g)).chains.devnet!.upstreams.every((u) => u.head === 0), {
    what: 'both nodes are probed',
    ms: 5000,
  });

  // Stopped, anvil's socket still accepts connections and takes requests; nothing is ever answered.
  a.process.kill('SIGSTOP');
  const calls: Array<Promise<{ json: unknown; took: number }>> = [];
  let calling = true;
  const caller = (async () => {
    for (let i = 0; calling; i++) {
      const started = Date.now();
      calls.push(
        rpc(`${g.base}/v1/rpc/public`, 'eth_getBalance', [addressFor(1000 + i), 'latest'], i).then((r) => ({
          json: r.json,
          took: Date.now() - started,
        })),
      );
      await sleep(100);
    }
  })();
  const out = await waitFor(
    async () => {
      const u = await upstreamA();
      return !u.in_rotation && u.reason === 'failing';
    },
    { what: 'the stopped node leaves the rotation', ms: 15_000 },
  );
  // Half a second more of calls: those started just before it left, and after.
  await sleep(500);
  calling = false;
  await caller;
  const answers = await Promise.all(calls);
  t.ok(out <= 5000, `out of rotation ${out} ms after it stopped (a poll within 1 s, given up 2.5 s later)`);
  const wrong = answers.filter((r, i) => JSON.stringify(r.json) !== JSON.stringify({ jsonrpc: '2.0', id: i, result: '0x0' }));
  t.equal(wrong.length, 0, `all ${answers.length} calls answered (by the other node)`);
  const slowest = Math.max(...answers.map((r) => r.took));
  t.ok(slowest < 4000, `the slowest call took ${slowest} ms, well under half of timeout_s (5 s, when the plain hedge fires)`);

  a.process.kill('SIGCONT');
  await waitFor(async () => (await upstreamA()).in_rotation, { what: 'the node is back once it answers again', ms: 10_000 });
});

t.test('eth_sendRawTransaction goes once to every upstream and is answered once', async (t) => {
  const [a, b] = await Promise.all([anvilFor(t), anvilFor(t)]);
  const g = await gatewayFor(t, { chains: { devnet: evmChain([a.url, b.url]) } });
  const wallet = new Wallet(DEV_KEY);
  const sign = (nonce: number): Promise<string> =>
    wallet.signTransaction({
      to: '0x000000000000000000000000000000000000dEaD',
      value: 1000n + BigInt(nonce),
      nonce,
      gasLimit: 21000n,
      maxFeePerGas: 10n ** 10n,
      maxPriorityFeePerGas: 10n ** 9n,
      chainId: 31337n,
      type: 2,
    });
  const raw = await sign(0);
  const hash = Transaction.from(raw).hash!;
  const sent = await rpc(`${g.base}/v1/rpc/public`, 'eth_sendRawTransaction', [raw], 'tx');
  t.same(sent.json, { jsonrpc: '2.0', id: 'tx', result: hash });
  for (const [name, node] of [
    ['a', a],
    ['b', b],
  ] as const) {
    t.match(await direct(node.url, 'eth_getTransactionByHash', [hash]), { hash, nonce: '0x0' }, `node ${name} has the transaction`);
    // anvil may answer the send before the block holding it is readable: the count below reads that block.
    await minedReceipt(node.url, hash);
  }
  t.same(await direct(a.url, 'eth_getTransactionCount', [DEV_ADDRESS, 'latest']), '0x1', 'node a got it once');
  t.same(await direct(b.url, 'eth_getTransactionCount', [DEV_ADDRESS, 'latest']), '0x1', 'node b got it once');

  // "already known" from one node is a success, whatever the other says; each node hears the transaction once.
  const known = await scriptedNode(
    t,
    withHead(() => ({ error: { code: -32000, message: 'already known' }, delayMs: 20 })),
  );
  const low = await scriptedNode(
    t,
    withHead(() => ({ error: { code: -32000, message: 'nonce too low' } })),
  );
  const g2 = await gatewayFor(t, { chains: { devnet: evmChain([known.url, low.url]) } });
  const again = await rpc(`${g2.base}/v1/rpc/public`, 'eth_sendRawTransaction', [raw], 7);
  t.same(again.json, { jsonrpc: '2.0', id: 7, result: hash }, 'answered with the hash');
  t.equal(known.callsOf('eth_sendRawTransaction'), 1);
  t.equal(low.callsOf('eth_sendRawTransaction'), 1);

  // When all reject, the first rejection to arrive is the answer.
  const poor = await scriptedNode(
    t,
    withHead(() => ({ error: { code: -32003, message: 'insufficient funds for gas * price + value' }, delayMs: 10 })),
  );
  const late = await scriptedNode(
    t,
    withHead(() => ({ error: { code: -32000, message: 'nonce too low' }, delayMs: 300 })),
  );
  const g3 = await gatewayFor(t, { chains: { devnet: evmChain([late.url, poor.url]) } });
  const rejected = await rpc(`${g3.base}/v1/rpc/public`, 'eth_sendRawTransaction', [raw], 8);
  t.same(rejected.json, { jsonrpc: '2.0', id: 8, error: { code: -32003, message: 'insufficient funds for gas * price + value' } });
  t.equal(late.callsOf('eth_sendRawTransaction') + poor.callsOf('eth_sendRawTransaction'), 2);

  // A node failing the send does not make the gateway send it again anywhere.
  const broken = await scriptedNode(
    t,
    withHead(() => ({ status: 502 })),
  );
  const g4 = await gatewayFor(t, { chains: { devnet: evmChain([broken.url, a.url]) } });
  const raw1 = await sign(1);
  const fine = await rpc(`${g4.base}/v1/rpc/public`, 'eth_sendRawTransaction', [raw1], 9);
  t.same(fine.json, { jsonrpc: '2.0', id: 9, result: Transaction.from(raw1).hash });
  // The first success answers: the failing node's 502 may come after it.
  await waitFor(async () => broken.callsOf('eth_sendRawTransaction') > 0, { what: 'the failing node hears the transaction', ms: 2000 });
  await sleep(300);
  t.equal(broken.callsOf('eth_sendRawTransaction'), 1, 'the failing node heard it once');
  await minedReceipt(a.url, Transaction.from(raw1).hash!);
  t.same(await direct(a.url, 'eth_getTransactionCount', [DEV_ADDRESS, 'latest']), '0x2', 'the live node once');
});

t.test('no upstream in rotation: 502 at once, not after the timeout', async (t) => {
  // Its probes fail at once, so it leaves the rotation; a call reaching it would hang for the whole timeout.
  const sick = await scriptedNode(t, (call) => (call.method === 'eth_blockNumber' ? { status: 503 } : 'hang'));
  const g = await gatewayFor(t, { chains: { devnet: evmChain([sick.url], 31337, { timeout_s: 20 }) } });
  await waitFor(async () => (await send('GET', `${g.base}/readyz`)).status === 503, {
    what: 'the sick node leaves the rotation',
    ms: 6000,
  });
  const started = Date.now();
  const r = await rpc(`${g.base}/v1/rpc/public`, 'eth_getBalance', [DEV_ADDRESS, 'latest'], 5);
  const took = Date.now() - started;
  t.equal(r.status, 502);
  t.same(r.json, { jsonrpc: '2.0', id: 5, error: UPSTREAM_ERROR });
  t.ok(took < 1000, `answered in ${took} ms of a 20 s timeout`);
  t.equal(sick.callsOf('eth_getBalance'), 0, 'the node never saw the call');
  // A worker thread hands its log records to the main thread's log: the line may come just after the answer.
  await waitFor(async () => g.logLines.some((l) => l.includes('upstream calls fail') && l.includes('no healthy upstream')), {
    what: 'the log says why',
    ms: 2000,
  });
});

t.test("/healthz and /readyz: per-chain detail; readyz follows the only node's death and return", async (t) => {
  const first = await startAnvil();
  let node = first;
  t.teardown(() => node.stop());
  const g = await gatewayFor(t, { chains: { devnet: evmChain([first.url]) } });
  await waitFor(async () => (await healthOf(g)).chains.devnet!.upstreams[0]!.head === 0, { what: 'the node is probed', ms: 3000 });
  const live = await send('GET', `${g.base}/healthz`);
  t.equal(live.status, 200);
  t.equal(live.headers['content-type'], 'application/json');
  t.equal(live.headers['cache-control'], 'no-store');
  t.match(live.json, {
    status: 'live',
    uptime_s: Number,
    chains: {
      devnet: {
        ready: true,
        best_head: 0,
        max_lag_blocks: 5,
        upstreams: [{ label: hostPort(first.url), in_rotation: true, reason: null, head: 0, lag: 0 }],
      },
    },
  });
  const ready = await send('GET', `${g.base}/readyz`);
  t.equal(ready.status, 200);
  t.equal(ready.headers['cache-control'], 'no-store');
  t.match(ready.json, { status: 'ready', not_ready: [] });
  for (const path of ['/healthz', '/readyz']) {
    const head = await send('HEAD', `${g.base}${path}`);
    t.equal(head.status, 200, `HEAD ${path}: the status a load balancer probes for`);
    t.equal(head.text, '', `HEAD ${path}: no body`);
    t.equal(head.headers['content-type'], 'application/json');
  }

  first.process.kill('SIGKILL');
  await new Promise((r) => first.process.once('exit', r));
  const down = await waitFor(async () => (await send('GET', `${g.base}/readyz`)).status === 503, { what: 'readyz says 503', ms: 5000 });
  t.pass(`readyz went 503 ${down} ms after the node died`);
  t.match((await send('GET', `${g.base}/readyz`)).json, { status: 'not ready', not_ready: ['devnet'] });
  t.equal((await send('HEAD', `${g.base}/readyz`)).status, 503, 'HEAD /readyz: 503 too');
  const stillLive = await send('GET', `${g.base}/healthz`);
  t.equal(stillLive.status, 200, 'healthz stays 200: restarting the gateway would fix no node');
  t.match(stillLive.json, { chains: { devnet: { ready: false, upstreams: [{ in_rotation: false, reason: 'failing' }] } } });

  node = await startAnvil({ port: first.port });
  const back = await waitFor(async () => (await send('GET', `${g.base}/readyz`)).status === 200, {
    what: 'readyz says 200 again',
    ms: 10_000,
  });
  t.pass(`readyz went 200 ${back} ms after the node returned`);
  const r = await rpc(`${g.base}/v1/rpc/public`, 'eth_getBalance', [DEV_ADDRESS, 'latest'], 1);
  t.same(r.json, { jsonrpc: '2.0', id: 1, result: DEV_BALANCE }, 'and calls reach it again');
});

t.test('eth_blockNumber comes from the polled heads while they are fresh, and from a node after a transaction', async (t) => {
  let head = 5;
  const node = await scriptedNode(t, (call) => {
    if (call.method === 'eth_blockNumber') return { result: `0x${head.toString(16)}` };
    if (call.method === 'eth_sendRawTransaction') return { result: '0x' + 'ab'.repeat(32) };
    return { error: { code: -32601, message: 'not scripted' } };
  });
  const g = await gatewayFor(t, { chains: { devnet: evmChain([node.url]) } });
  const url = `${g.base}/v1/rpc/public`;
  await waitFor(async () => (await healthOf(g)).chains.devnet!.best_head === 5, { what: 'the head is polled', ms: 3000 });
  const asked = node.callsOf('eth_blockNumber');
  for (let i = 0; i < 20; i++)
    t.same((await rpc(url, 'eth_blockNumber', [], i)).json, { jsonrpc: '2.0', id: i, result: '0x5' }, `call ${i}`);
  const more = node.callsOf('eth_blockNumber') - asked;
  t.ok(more <= 2, `20 calls answered with ${more} eth_blockNumber at the node (its polls only)`);

  // An automining node mines a transaction at once: the next eth_blockNumber must not be the head before it.
  head = 6;
  t.same((await rpc(url, 'eth_sendRawTransaction', ['0x02'], 'tx')).json, { jsonrpc: '2.0', id: 'tx', result: '0x' + 'ab'.repeat(32) });
  t.same(
    (await rpc(url, 'eth_blockNumber', [], 'after')).json,
    { jsonrpc: '2.0', id: 'after', result: '0x6' },
    'asked of the node after the write',
  );
});

t.test("a beacon chain's head slot is polled and reported", async (t) => {
  const anvil = await anvilFor(t);
  await direct(anvil.url, 'anvil_mine', ['0x3']);
  const beacon = await startBeaconNode({ executionUrl: anvil.url, pollMs: 50 });
  t.teardown(() => beacon.stop());
  const slot = Number(
    ((await send('GET', `${beacon.url}/eth/v1/beacon/headers/head`)).json as { data: { header: { message: { slot: string } } } }).data
      .header.message.slot,
  );
  const g = await gatewayFor(t, {
    server: { default_chain: 'devnet' },
    chains: { devnet: evmChain([anvil.url]), 'devnet-beacon': { kind: 'beacon', upstreams: [{ url: beacon.url }] } },
  });
  await waitFor(
    async () => {
      const chains = (await healthOf(g)).chains;
      return chains['devnet-beacon']!.best_head !== null && chains.devnet!.best_head !== null;
    },
    { what: 'both heads are polled', ms: 3000 },
  );
  const health = await healthOf(g);
  t.ok(slot > 0, `the node is at slot ${slot}`);
  t.match(health.chains['devnet-beacon'], {
    ready: true,
    best_head: slot,
    upstreams: [{ label: hostPort(beacon.url), in_rotation: true, head: slot }],
  });
  t.match(health.chains.devnet, { ready: true, best_head: 3 });
  t.equal((await send('GET', `${g.base}/readyz`)).status, 200, 'ready: every chain has a node in rotation');
});

t.test('subscriptions that lose their node move past a node out of rotation', async (t) => {
  const [a, b, c] = await Promise.all([anvilFor(t), anvilFor(t), anvilFor(t)]);
  await Promise.all([direct(a.url, 'anvil_mine', ['0xa']), direct(c.url, 'anvil_mine', ['0xa'])]);
  const [ra, rb] = await Promise.all([tcpRelay(t, { port: a.port }), tcpRelay(t, { port: b.port })]);
  const g = await gatewayFor(t, {
    chains: {
      devnet: {
        chain_id: 31337,
        max_lag_blocks: 5,
        upstreams: [
          { url: ra.url, ws: ra.wsUrl },
          { url: rb.url, ws: rb.wsUrl },
          { url: c.url, ws: c.wsUrl },
        ],
      },
    },
  });
  await waitFor(async () => (await healthOf(g)).chains.devnet!.upstreams[1]!.reason === 'lagging', { what: 'b is seen lagging', ms: 5000 });
  const s = await openSubscriber(t, wsUrl(g.base, '/v1/rpc/public'));
  const id = await s.subscribe('newHeads');
  const numbers = (): number[] => s.resultsOf(id).map((h) => Number(h.number));
  // Mined until the upstream subscription is live and a head arrives.
  for (let k = 0; k < 50 && numbers().length === 0; k++) {
    await direct(a.url, 'evm_mine');
    await sleep(100);
  }
  const last = Math.max(...numbers());
  ra.cut();
  // The next node in turn is b, out of rotation for lagging: the subscriptions go to c instead.
  await direct(c.url, 'anvil_mine', [`0x${(last + 1 - 10).toString(16)}`]);
  await waitFor(async () => numbers().includes(last + 1), { what: `block ${last + 1} from c`, ms: 10_000 });
  const seen = numbers();
  t.same(
    seen,
    Array.from({ length: seen.length }, (_, k) => seen[0]! + k),
    `no gap, no duplicate (${seen.join(', ')})`,
  );
  t.equal(rb.upgrades.length, 0, 'the lagging node was never asked to carry the subscriptions');
});
