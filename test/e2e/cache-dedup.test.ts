/**
 * The response cache, in-flight sharing and the eth_getLogs range limit end to end, with a counting
 * proxy between the gateway and a real anvil, so every assertion about "reached the upstream" is
 * about calls the node was really sent. anvil mines only when told (no block time), so the head
 * stays where the test puts it.
 */
import t, { type Test } from 'tap';
import { request as httpRequest } from 'node:http';
import { createOwnerAdmin } from '../../src/tenancy/owners.js';
import { countingProxy, type CountingProxy } from '../support/counting-proxy.js';
import { anvilFor, evmChain, gatewayFor, type TestGateway } from '../support/gateway.js';
import { DEV_ADDRESS, minedReceipt, result as direct } from '../support/dev-chain.js';
import { post, rpc } from '../support/rpc.js';
import { waitFor } from '../support/wait-for.js';

const OTHER_ADDRESS = '0x70997970C51812dc3A010C7d01b50e0d17dc79C8';
const FINALITY_DEPTH = 10;
const HEAD = 31; // one transfer, then 30 empty blocks
const FINAL = HEAD - FINALITY_DEPTH; // the highest final block
// 50 × 0.28 is 14.000000000000002 in floating point: a hit of eth_getLogs must still cost 14.
const HIT_FACTOR = 0.28;
const hex = (n: number): string => `0x${n.toString(16)}`;

function endpoint(g: TestGateway): { ownerId: number; url: string } {
  const owner = createOwnerAdmin(g.gateway.context.tenancy.store!).createOwner(`o${Math.random()}`, 'growth', 1_000_000);
  const made = g.gateway.context.tenancy.directory!.createEndpoint(owner.id, 'devnet', 'cache', 10);
  if (!('apiKey' in made)) throw new Error(made.error);
  return { ownerId: owner.id, url: `${g.base}/v1/rpc/${made.apiKey}` };
}

async function waitForHead(t: Test, g: TestGateway, head: number): Promise<void> {
  const chain = g.gateway.context.chains.get('devnet')!;
  await waitFor(() => chain.head.now() === head, { what: `the gateway to know the head ${head}`, ms: 10_000 });
  t.equal(chain.head.now(), head, `the gateway knows the head ${head}`);
}

/** Waits for the gateway to know the finalized block FINALITY_DEPTH below `head` (read every few seconds, chain/finality.ts). */
async function waitForFinal(g: TestGateway, head: number): Promise<void> {
  const chain = g.gateway.context.chains.get('devnet')!;
  const final = head - FINALITY_DEPTH;
  await waitFor(() => chain.finality.finalized()?.number === final, { what: `the finalized block ${final}`, ms: 10_000 });
}

interface Setup {
  g: TestGateway;
  proxy: CountingProxy;
  nodeUrl: string;
  url: string;
  ownerId: number;
  txHash: string;
}

/** anvil with a transfer in block 1 and HEAD blocks in all, the proxy, and the gateway in front of the proxy. */
async function setup(t: Test, extra: Record<string, unknown> = {}): Promise<Setup> {
  // The cache's "final" is the chain's finalized block (docs/consistency.md): anvil's own is two epochs behind its
  // head, here the FINALITY_DEPTH blocks the tests below count with.
  const node = await anvilFor(t, { chainId: 31337, args: ['--slots-in-an-epoch', String(FINALITY_DEPTH / 2)] });
  const txHash = await direct<string>(node.url, 'eth_sendTransaction', [{ from: DEV_ADDRESS, to: OTHER_ADDRESS, value: '0x1' }]);
  // anvil may answer the send before its block is in: the empty blocks come after it.
  await minedReceipt(node.url, txHash);
  await direct(node.url, 'anvil_mine', [hex(HEAD - 1)]);
  t.equal(Number(await direct<string>(node.url, 'eth_blockNumber')), HEAD);
  const proxy = await countingProxy(t, node.url);
  // One worker: the cache and the calls in flight are each worker's own (docs/workers.md), and these tests are
  // about what one of them shares; test/e2e/workers.test.ts shows the same per worker with two.
  const g = await gatewayFor(t, {
    server: { workers: 1 },
    chains: { devnet: evmChain([proxy.url], 31337, { finality_depth: FINALITY_DEPTH, max_logs_block_range: 100 }) },
    cache: { hit_ru_factor: HIT_FACTOR },
    ...extra,
  });
  const { ownerId, url } = endpoint(g);
  await waitForHead(t, g, HEAD);
  await waitForFinal(g, HEAD);
  return { g, proxy, nodeUrl: node.url, url, ownerId, txHash };
}

t.test('final answers are cached; latest, pending, recent blocks and null answers always reach the upstream', async (t) => {
  const { g, proxy, nodeUrl, url, ownerId, txHash } = await setup(t);
  const ledger = g.gateway.context.tenancy.ledger;
  const block3 = await direct<{ hash: string }>(nodeUrl, 'eth_getBlockByNumber', ['0x3', false]);
  const recent = await direct<{ hash: string }>(nodeUrl, 'eth_getBlockByNumber', [hex(HEAD - 1), false]);

  /** Calls twice with ids 1 and "two"; returns how many of the two calls reached the upstream and the RU each cost. */
  async function twice(method: string, params: unknown[]): Promise<{ upstream: number; ru: number[] }> {
    const before = proxy.count(method, params);
    const ru: number[] = [];
    const answers = [];
    for (const id of [1, 'two']) {
      const balance = ledger.available(ownerId);
      const r = await rpc(url, method, params, id);
      ru.push(balance - ledger.available(ownerId));
      t.equal(r.status, 200);
      answers.push(r);
    }
    const [first, second] = answers.map((a) => a.json as { id: unknown; result?: unknown });
    t.equal(first!.id, 1);
    t.equal(second!.id, 'two', `${method}: each answer carries its own id`);
    t.ok('result' in first!, `${method} answered a result`);
    t.same(second!.result, first!.result, `${method}: the second answer holds the same result`);
    t.equal(answers[1]!.text, answers[0]!.text.replace('"id":1,', '"id":"two",'), `${method}: byte for byte but the id`);
    return { upstream: proxy.count(method, params) - before, ru };
  }

  const final = [
    ['eth_getBlockByNumber', [hex(FINAL), false], 15, 5],
    ['eth_getBlockByNumber', ['0x3', true], 15, 5],
    ['eth_getBlockByHash', [block3.hash, false], 20, 6],
    ['eth_getTransactionReceipt', [txHash], 15, 5],
    ['eth_getTransactionByHash', [txHash], 15, 5],
    ['eth_getLogs', [{ fromBlock: '0x0', toBlock: '0x5' }], 50, 14],
    ['net_version', [], 15, 5],
  ] as const;
  for (const [method, params, ru, hitRu] of final) {
    const r = await twice(method, [...params]);
    t.equal(r.upstream, 1, `${method}(${JSON.stringify(params)}): the second call did not reach the upstream`);
    t.same(r.ru, [ru, hitRu], `${method}: ${ru} RU, then ceil(${ru} × ${HIT_FACTOR}) = ${hitRu} for the hit`);
  }

  const changing = [
    ['eth_getBlockByNumber', [hex(FINAL + 1), false]],
    ['eth_getBlockByNumber', [hex(HEAD), false]],
    ['eth_getBlockByNumber', ['latest', false]],
    ['eth_getBlockByNumber', ['pending', false]],
    ['eth_getBlockByNumber', ['finalized', false]],
    ['eth_getBlockByHash', [recent.hash, false]],
    ['eth_getLogs', [{ fromBlock: '0x0', toBlock: 'latest' }]],
    ['eth_getLogs', [{ fromBlock: hex(FINAL), toBlock: hex(FINAL + 1) }]],
    ['eth_getBalance', [DEV_ADDRESS, '0x3']],
    // null answers: a block not mined yet, a transaction never sent
    ['eth_getBlockByNumber', [hex(HEAD + 1000), false]],
    ['eth_getTransactionByHash', [`0x${'ab'.repeat(32)}`]],
    ['eth_getTransactionReceipt', [`0x${'ab'.repeat(32)}`]],
  ] as const;
  for (const [method, params] of changing) {
    const r = await twice(method, [...params]);
    t.equal(r.upstream, 2, `${method}(${JSON.stringify(params)}): both calls reached the upstream`);
    t.equal(r.ru[0], r.ru[1], `${method}: both at the full price`);
  }

  // One more block makes FINAL + 1 final: the next call fills the cache, the one after is a hit.
  await direct(nodeUrl, 'anvil_mine', ['0x1']);
  await waitForHead(t, g, HEAD + 1);
  await waitForFinal(g, HEAD + 1);
  const now = await twice('eth_getBlockByNumber', [hex(FINAL + 1), false]);
  t.equal(now.upstream, 1, 'a block that became final is cached from then on');
  t.equal(g.gateway.context.chains.get('devnet')!.config.finality_depth, FINALITY_DEPTH);
});

t.test('identical concurrent reads share one upstream call; each client gets its own id and pays its own RU', async (t) => {
  const { g, proxy, url, ownerId } = await setup(t);
  const ledger = g.gateway.context.tenancy.ledger;
  const params = ['latest', false];
  proxy.delay((c) => (c.method === 'eth_getBlockByNumber' ? 400 : 0));
  // Counted with their params: the gateway reads the nodes' `finalized` and `safe` blocks by itself meanwhile.
  const before = proxy.count('eth_getBlockByNumber', params);
  const balance = ledger.available(ownerId);
  const ids = Array.from({ length: 50 }, (_, i) => (i % 2 === 0 ? String(i) : JSON.stringify(`c-${i}`)));
  const answers = await Promise.all(
    ids.map((id) => post(url, `{"jsonrpc":"2.0","id":${id},"method":"eth_getBlockByNumber","params":["latest",false]}`)),
  );
  t.equal(proxy.count('eth_getBlockByNumber', params) - before, 1, '50 identical calls: one upstream call');
  const results = new Set<string>();
  answers.forEach((a, i) => {
    t.equal(a.status, 200);
    const body = a.json as { id: unknown; result: { number: string } };
    t.equal(JSON.stringify(body.id), ids[i], `client ${i} got its own id back`);
    t.equal(body.result.number, hex(HEAD));
    results.add(JSON.stringify(body.result));
  });
  t.equal(results.size, 1, 'the same result for all');
  t.equal(balance - ledger.available(ownerId), 50 * 15, 'each paid the 15 RU of its call');

  const batchBefore = proxy.count('eth_getBlockByNumber', params);
  const batch = await post(
    url,
    JSON.stringify([1, 2, 3, 'four', null].map((id) => ({ jsonrpc: '2.0', id, method: 'eth_getBlockByNumber', params }))),
  );
  t.equal(proxy.count('eth_getBlockByNumber', params) - batchBefore, 1, 'identical batch items share one call too');
  t.same(
    (batch.json as Array<{ id: unknown }>).map((a) => a.id),
    [1, 2, 3, 'four', null],
  );

  const apart = proxy.count('eth_getBlockByNumber', params);
  await rpc(url, 'eth_getBlockByNumber', params);
  await rpc(url, 'eth_getBlockByNumber', params);
  t.equal(proxy.count('eth_getBlockByNumber', params) - apart, 2, 'calls one after the other are not shared: nothing old is served');

  // A transaction is never shared: two identical sends both reach the node.
  const raw = await direct<string>(proxy.url, 'eth_signTransaction', [
    { from: DEV_ADDRESS, to: OTHER_ADDRESS, value: '0x2', gas: '0x5208', nonce: '0x1' },
  ]);
  const sends = proxy.count('eth_sendRawTransaction');
  await Promise.all([rpc(url, 'eth_sendRawTransaction', [raw], 1), rpc(url, 'eth_sendRawTransaction', [raw], 2)]);
  t.ok(proxy.count('eth_sendRawTransaction') - sends >= 2, 'each eth_sendRawTransaction was sent on its own');
});

t.test("the leader's client going away does not take the shared call from the followers", async (t) => {
  const { proxy, url } = await setup(t);
  proxy.delay((c) => (c.method === 'eth_getBlockByNumber' ? 500 : 0));
  const latest = ['latest', false];
  // Counted with their params: the gateway reads the nodes' `finalized` and `safe` blocks by itself meanwhile.
  const before = proxy.count('eth_getBlockByNumber', latest);
  const leader = httpRequest(url, { method: 'POST', headers: { 'content-type': 'application/json' }, agent: false });
  leader.on('error', () => {});
  leader.end('{"jsonrpc":"2.0","id":"leader","method":"eth_getBlockByNumber","params":["latest",false]}');
  await waitFor(() => proxy.count('eth_getBlockByNumber', latest) >= before + 1, { what: "the leader's call at the node" });
  const followers = [1, 2, 3].map((id) => rpc(url, 'eth_getBlockByNumber', ['latest', false], id));
  await new Promise((r) => setTimeout(r, 50));
  leader.destroy();
  const answers = await Promise.all(followers);
  for (const [i, a] of answers.entries())
    t.match(a.json, { id: i + 1, result: { number: hex(HEAD) } }, `follower ${i + 1} got the shared answer`);
  t.equal(proxy.count('eth_getBlockByNumber', latest) - before, 1, 'one upstream call for all of them');
});

t.test('eth_getLogs and eth_newFilter over max_logs_block_range: -32602 naming the limit, never forwarded, free', async (t) => {
  const { g, proxy, url, ownerId } = await setup(t, {
    server: { default_chain: 'devnet' },
  });
  const ledger = g.gateway.context.tenancy.ledger;
  const refused = (id: number, span: number): string =>
    `{"jsonrpc":"2.0","id":${id},"error":{"code":-32602,"message":"eth_getLogs block range of ${span} blocks is larger than the limit of 100 (chains.devnet.max_logs_block_range)"}}`;
  const logsBefore = proxy.count('eth_getLogs');
  const balance = ledger.available(ownerId);
  for (const [method, filter, span] of [
    ['eth_getLogs', { fromBlock: '0x0', toBlock: '0x64' }, 101],
    ['eth_getLogs', { fromBlock: '0x1', toBlock: '0xf4240' }, 1_000_000],
    ['eth_newFilter', { fromBlock: '0x0', toBlock: '0x64' }, 101],
    ['eth_getLogs', { fromBlock: '0x0', toBlock: '0x64', address: DEV_ADDRESS }, 101],
  ] as const) {
    const r = await rpc(url, method, [filter], 3);
    t.equal(r.status, 200);
    t.equal(r.text, refused(3, span), `${method} ${JSON.stringify(filter)}`);
  }
  t.equal(proxy.count('eth_getLogs'), logsBefore, 'none reached the upstream');
  // trace_filter is bounded the same way; its omitted fromBlock is the genesis block, not the head.
  const traces = proxy.count('trace_filter');
  for (const [filter, span] of [
    [{ fromBlock: '0x0', toBlock: '0x64' }, 101],
    [{ toBlock: '0x64' }, 101],
  ] as const) {
    t.equal(
      (await rpc(url, 'trace_filter', [filter], 3)).text,
      refused(3, span).replace('eth_getLogs', 'trace_filter'),
      `trace_filter ${JSON.stringify(filter)}`,
    );
  }
  t.equal(proxy.count('trace_filter'), traces, 'no trace_filter reached the upstream');
  t.equal(ledger.available(ownerId), balance, 'and none cost anything');
  const widest = await rpc(url, 'eth_getLogs', [{ fromBlock: '0x0', toBlock: '0x63' }]);
  t.match(widest.json, { result: [] }, 'exactly the limit is served');
  t.equal(proxy.count('eth_getLogs'), logsBefore + 1);
  t.match(
    (await rpc(url, 'eth_getLogs', [{ blockHash: `0x${'11'.repeat(32)}` }])).json,
    { error: { code: -32000 } },
    'a blockHash query is one block: forwarded (anvil knows no such block)',
  );
});

t.test('a range ending at the head counts the head: latest and an omitted toBlock', async (t) => {
  const node = await anvilFor(t, { chainId: 31337 });
  await direct(node.url, 'anvil_mine', [hex(HEAD)]);
  const g = await gatewayFor(t, { chains: { devnet: evmChain([node.url], 31337, { max_logs_block_range: 10 }) } });
  await waitForHead(t, g, HEAD);
  const url = `${g.base}/v1/rpc/public`;
  const message = (span: number): string =>
    `eth_getLogs block range of ${span} blocks is larger than the limit of 10 (chains.devnet.max_logs_block_range)`;
  t.match((await rpc(url, 'eth_getLogs', [{ fromBlock: '0x0' }])).json, { error: { code: -32602, message: message(HEAD + 1) } });
  t.match((await rpc(url, 'eth_getLogs', [{ fromBlock: hex(HEAD - 20), toBlock: 'latest' }])).json, {
    error: { code: -32602, message: message(21) },
  });
  t.match((await rpc(url, 'eth_newFilter', [{ fromBlock: 'earliest', toBlock: 'finalized' }])).json, {
    error: { code: -32602, message: message(HEAD + 1) },
  });
  t.match((await rpc(url, 'eth_getLogs', [{ fromBlock: hex(HEAD - 9) }])).json, { result: [] }, 'ten blocks up to the head are served');
  t.match((await rpc(url, 'eth_getLogs', [{}])).json, { result: [] }, 'no bounds: the head alone');
});
