/**
 * broadcastTransaction over real HTTP upstream clients: real anvils for acceptance, "already known" and
 * rejection, and held fake nodes (answered when the test says, in the order it says) for the faults and
 * the order in which answers arrive. Each node gets the transaction exactly once; the first acceptance
 * answers; with none, the first rejection; with no JSON-RPC answer at all, the first failure.
 */
import t, { type Test } from 'tap';
import type { Socket } from 'node:net';
import { keccak256 } from 'ethers';
import { broadcastTransaction } from '../../src/pipeline/broadcast.js';
import type { ForwardFailure } from '../../src/pipeline/forward.js';
import type { RoutedChain } from '../../src/pipeline/route-call.js';
import { createHttpUpstream } from '../../src/upstreams/http-client.js';
import { createChainHealth } from '../../src/upstreams/selection.js';
import { countingProxy } from '../support/counting-proxy.js';
import { DEV_ADDRESS, result } from '../support/dev-chain.js';
import { echoId, fakeUpstream } from '../support/fake-upstream.js';
import { anvilFor } from '../support/gateway.js';
import { waitFor } from '../support/wait-for.js';
import { resetSocket } from '../support/reset-socket.js';

type Heard = { kind: 'whole'; body: string } | { kind: 'failed'; reason: string; failure?: ForwardFailure; failedUpstream?: string };

interface Chain extends RoutedChain {
  writes: number;
}

function chainOver(t: Test, urls: string[]): Chain {
  const upstreams = urls.map((url) => createHttpUpstream({ url }));
  t.teardown(() => {
    for (const u of upstreams) u.close();
  });
  const chain: Chain = {
    upstreams,
    health: createChainHealth(
      upstreams.map((u) => u.label),
      { maxLagBlocks: 5 },
    ),
    timeoutMs: 5000,
    writes: 0,
    freshHead: () => null,
    noteWrite() {
      chain.writes++;
    },
  };
  return chain;
}

/** Broadcasts `raw` and resolves with the one outcome the client is told; a second one fails the test. */
function broadcast(chain: RoutedChain, raw: string, idText = '7'): { heard: Promise<Heard>; told(): boolean; abort(): void } {
  let told = false;
  let resolve!: (h: Heard) => void;
  const heard = new Promise<Heard>((r) => (resolve = r));
  const tell = (h: Heard): void => {
    if (told) throw new Error('told twice');
    told = true;
    resolve(h);
  };
  const sink = {
    failedUpstream: undefined as string | undefined,
    whole: (body: Buffer) => tell({ kind: 'whole', body: body.toString() }),
    begin() {},
    chunk: () => true,
    end() {},
    fail: (_started: boolean, reason: string, failure?: ForwardFailure) =>
      tell({
        kind: 'failed',
        reason,
        ...(failure ? { failure } : {}),
        ...(sink.failedUpstream !== undefined ? { failedUpstream: sink.failedUpstream } : {}),
      }),
  };
  const call = broadcastTransaction(chain, JSON.stringify([raw]), idText, sink);
  return { heard, told: () => told, abort: () => call.abort() };
}

const tick = (ms = 0): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** A transfer from the dev account signed by `url`'s anvil: the same bytes are valid on every fresh anvil. */
function signed(url: string, fields: Record<string, string> = {}): Promise<string> {
  return result<string>(url, 'eth_signTransaction', [
    { from: DEV_ADDRESS, to: DEV_ADDRESS, value: '0x1', gas: '0x5208', nonce: '0x0', ...fields },
  ]);
}

/** A node that holds every request until the test answers it. */
type Reply = (socket: Socket, request: string) => void;

async function heldNode(t: Test): Promise<{ url: string; requests: string[]; answer(reply: Reply): Promise<void> }> {
  const held: Array<[Socket, string]> = [];
  const node = await fakeUpstream(t, (socket, request) => {
    held.push([socket, request]);
  });
  return {
    url: node.url,
    requests: node.requests,
    async answer(reply) {
      for (let i = 0; held.length === 0; i++) {
        if (i === 1000) throw new Error('no request reached the node within 5 s');
        await tick(5);
      }
      const [socket, request] = held.shift()!;
      reply(socket, request);
    },
  };
}

const httpAnswer =
  (status: number, body: string) =>
  (socket: Socket, request: string): void => {
    const answer = echoId(request, body);
    socket.write(`HTTP/1.1 ${status} X\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(answer)}\r\n\r\n${answer}`);
  };
const rpcError = (message: string): string => JSON.stringify({ jsonrpc: '2.0', id: 1, error: { code: -32000, message } });
const sentTo = (requests: string[]): number => requests.filter((r) => r.includes('eth_sendRawTransaction')).length;

t.test('real nodes: every node in rotation gets it once, acceptance answers, then "already known" is the hash', async (t) => {
  const [a, b] = await Promise.all([anvilFor(t, { args: ['--no-mining'] }), anvilFor(t, { args: ['--no-mining'] })]);
  const [pa, pb] = await Promise.all([countingProxy(t, a.url), countingProxy(t, b.url)]);
  const out = await heldNode(t);
  const chain = chainOver(t, [pa.url, pb.url, out.url]);
  for (let k = 0; k < 3; k++) chain.health.upstreams[2]!.record('failed', 1);
  const raw = await signed(a.url);
  const hash = keccak256(raw);
  t.same(await broadcast(chain, raw, '"x"').heard, { kind: 'whole', body: `{"jsonrpc":"2.0","id":"x","result":"${hash}"}` });
  t.equal(chain.writes, 1, 'the write is noted');
  t.same(
    [pa.count('eth_sendRawTransaction'), pb.count('eth_sendRawTransaction'), sentTo(out.requests)],
    [1, 1, 0],
    'once to each node in rotation, none to the one out',
  );

  const again = await broadcast(chain, raw, '8').heard;
  t.same(again, { kind: 'whole', body: `{"jsonrpc":"2.0","id":8,"result":"${hash}"}` }, 'both pools hold it: answered as its hash');
  t.same([pa.count('eth_sendRawTransaction'), pb.count('eth_sendRawTransaction')], [2, 2]);
  // The answer went out with the first acceptance; the other node's send ends on its own.
  await waitFor(() => chain.health.upstreams.every((u) => u.inflight === 0), { what: 'both sends ended', ms: 1000 });
  t.same(
    chain.health.upstreams.map((u) => [u.inflight, u.status().calls, u.status().errorRate]),
    [
      [0, 2, 0],
      [0, 2, 0],
      [0, 3, 1],
    ],
    'each send counted once as answered; the node out of rotation only has the failures it was put out with',
  );
});

t.test('real nodes: one that rejects while another accepts changes nothing; all rejecting, a rejection answers', async (t) => {
  const [mined, pool] = await Promise.all([anvilFor(t), anvilFor(t, { args: ['--no-mining'] })]);
  const raw = await signed(mined.url);
  await result(mined.url, 'eth_sendRawTransaction', [raw]);
  // The mining node now says "nonce too low", and answers at once; the other accepts 200 ms later.
  const slow = await countingProxy(t, pool.url);
  slow.delay(() => 200);
  const chain = chainOver(t, [mined.url, slow.url]);
  t.same(await broadcast(chain, raw).heard, { kind: 'whole', body: `{"jsonrpc":"2.0","id":7,"result":"${keccak256(raw)}"}` });

  const tooLittleGas = await signed(mined.url, { gas: '0x1', nonce: '0x1' });
  const both = chainOver(t, [mined.url, pool.url]);
  const rejected = await broadcast(both, tooLittleGas).heard;
  t.match(
    rejected,
    { kind: 'whole', body: /^\{"jsonrpc":"2.0","id":7,"error":\{"code":-?\d+,"message":"[^"]*gas[^"]*"/i },
    "the node's own refusal, with the client's id",
  );
  t.equal(both.writes, 0, 'a rejection is no write');
});

t.test('answers in the order the test gives them: the first rejection; a rejection over failures; the first failure', async (t) => {
  const raw = await signed((await anvilFor(t)).url);
  const cases: Array<{ why: string; replies: Array<[number, Reply]>; heard: (urls: string[]) => Heard }> = [
    {
      why: 'every node rejects: the first rejection to arrive',
      replies: [
        [1, httpAnswer(200, rpcError('replacement transaction underpriced'))],
        [0, httpAnswer(200, rpcError('insufficient funds'))],
      ],
      heard: () => ({
        kind: 'whole',
        body: '{"jsonrpc":"2.0","id":7,"error":{"code":-32000,"message":"replacement transaction underpriced"}}',
      }),
    },
    {
      why: 'a rejection beats a later failure and an earlier one',
      replies: [
        [0, httpAnswer(502, '')],
        [1, httpAnswer(200, rpcError('insufficient funds'))],
      ],
      heard: () => ({ kind: 'whole', body: '{"jsonrpc":"2.0","id":7,"error":{"code":-32000,"message":"insufficient funds"}}' }),
    },
    {
      why: 'no JSON-RPC answer: the first failure, with its node',
      replies: [
        [1, httpAnswer(500, 'oops')],
        [0, (s) => resetSocket(s)],
      ],
      heard: (urls) => ({
        kind: 'failed',
        reason: 'upstream answered HTTP 500',
        failure: { kind: 'status', status: 500, retryAfterMs: null },
        failedUpstream: urls[1]!,
      }),
    },
    {
      why: 'an answer too large to be one is a failure',
      replies: [
        [0, httpAnswer(200, JSON.stringify({ jsonrpc: '2.0', id: 1, result: `0x${'ab'.repeat(40_000)}` }))],
        [1, httpAnswer(503, '')],
      ],
      heard: (urls) => ({
        kind: 'failed',
        reason: 'upstream answer to eth_sendRawTransaction is too large',
        failure: { kind: 'invalid' },
        failedUpstream: urls[0]!,
      }),
    },
  ];
  for (const c of cases) {
    const nodes = [await heldNode(t), await heldNode(t)];
    const chain = chainOver(
      t,
      nodes.map((n) => n.url),
    );
    const b = broadcast(chain, raw);
    const [[firstNode, firstReply], [secondNode, secondReply]] = c.replies as [[number, Reply], [number, Reply]];
    await nodes[firstNode]!.answer(firstReply);
    await tick(50);
    t.equal(b.told(), false, `${c.why}: nothing is told while a node may still accept`);
    await nodes[secondNode]!.answer(secondReply);
    t.same(await b.heard, c.heard(nodes.map((n) => n.url)), c.why);
    await tick(50);
    t.same(
      nodes.map((n) => sentTo(n.requests)),
      [1, 1],
      `${c.why}: never sent again`,
    );
    t.same(
      chain.health.upstreams.map((u) => u.inflight),
      [0, 0],
    );
    t.equal(chain.writes, 0);
  }
});

t.test("each send counts in its node's health: an answer as ok, a failure as failed", async (t) => {
  const raw = await signed((await anvilFor(t)).url);
  const nodes = [await heldNode(t), await heldNode(t)];
  const chain = chainOver(
    t,
    nodes.map((n) => n.url),
  );
  const b = broadcast(chain, raw);
  t.same(
    chain.health.upstreams.map((u) => u.inflight),
    [1, 1],
    'in flight while it runs',
  );
  await nodes[0]!.answer(httpAnswer(200, rpcError('nonce too low')));
  await nodes[1]!.answer((s) => resetSocket(s));
  await b.heard;
  t.same(
    chain.health.upstreams.map((u) => [u.status().calls, u.status().errorRate]),
    [
      [1, 0],
      [1, 1],
    ],
  );
});

t.test('a client that leaves stops hearing, not the sends', async (t) => {
  const node = await anvilFor(t, { args: ['--no-mining'] });
  const held = await heldNode(t);
  const chain = chainOver(t, [node.url, held.url]);
  const raw = await signed(node.url);
  const b = broadcast(chain, raw);
  b.abort();
  await held.answer(httpAnswer(200, rpcError('nonce too low')));
  await waitFor(async () => (await result(node.url, 'eth_getTransactionByHash', [keccak256(raw)])) !== null, {
    what: "the transaction in the node's pool",
    ms: 1000,
  });
  t.not(await result(node.url, 'eth_getTransactionByHash', [keccak256(raw)]), null, "the transaction reached the node's pool");
  await tick(50);
  t.equal(b.told(), false, 'the client heard nothing');
  t.equal(chain.writes, 1, 'the acceptance is still noted');
});

t.test('no node in rotation: fails at once, nothing sent', async (t) => {
  const held = await heldNode(t);
  const chain = chainOver(t, [held.url]);
  for (let k = 0; k < 3; k++) chain.health.upstreams[0]!.record('failed', 1);
  const b = broadcast(chain, '0x02');
  t.equal(b.told(), false, 'not told before the call is returned');
  t.same(await b.heard, { kind: 'failed', reason: 'no healthy upstream', failedUpstream: 'none-in-rotation' });
  await tick(50);
  t.equal(held.requests.length, 0);
});
