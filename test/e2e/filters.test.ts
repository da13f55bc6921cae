/**
 * The gateway's own filters end to end against real anvils: a filter made through the gateway keeps
 * working when the node it was made on dies (polled on the other node, with exactly the changes that
 * node shows above what the first one showed); filters belong to the key (or IP) that made them;
 * 'too many filters' past filters.max_per_key; the same over a WebSocket, fed by the upstream's
 * newHeads subscription instead of a block poll.
 */
import t, { type Test } from 'tap';
import { createOwnerAdmin } from '../../src/tenancy/owners.js';
import { ECHO_TOPIC } from '../support/contract.js';
import { result as call, deployEcho, echo } from '../support/dev-chain.js';
import { countingProxy } from '../support/counting-proxy.js';
import { anvilFor, evmChain, gatewayFor, type TestGateway } from '../support/gateway.js';
import { post, rpc } from '../support/rpc.js';
import { openSocket, wsUrl } from '../support/ws.js';

const WAIT_MS = 15_000;

type Log = { data: string; blockNumber: string; blockHash: string; transactionHash: string; logIndex: string };

function endpoint(g: TestGateway, ru = 1_000_000): { ownerId: number; url: string } {
  const owner = createOwnerAdmin(g.gateway.context.tenancy.store!).createOwner(`o${Math.random()}`, 'growth', ru);
  const made = g.gateway.context.tenancy.directory!.createEndpoint(owner.id, 'devnet', 'filters', 10);
  if (!('apiKey' in made)) throw new Error(made.error);
  return { ownerId: owner.id, url: `${g.base}/v1/rpc/${made.apiKey}` };
}

/** Polls `poll` until `enough` says the gathered changes are complete; fails the test after WAIT_MS. */
async function gather<T>(t: Test, what: string, poll: () => Promise<T[]>, enough: (all: T[]) => boolean): Promise<T[]> {
  const all: T[] = [];
  const until = Date.now() + WAIT_MS;
  while (!enough(all)) {
    if (Date.now() > until) {
      t.fail(`${what}: not complete within ${WAIT_MS} ms`, { gathered: all });
      break;
    }
    all.push(...(await poll()));
    if (!enough(all)) await new Promise((r) => setTimeout(r, 100));
  }
  return all;
}

t.test("a filter made through the gateway outlives its node: polled on the other with that node's changes", async (t) => {
  const a = await anvilFor(t, { chainId: 31337 });
  const b = await anvilFor(t, { chainId: 31337 });
  const address = await deployEcho(a.url);
  t.equal(await deployEcho(b.url), address, 'the contract has the same address on both nodes');
  // min_nodes 1: the served head is the best head, so the filters read up to the node ahead (docs/consistency.md).
  const g = await gatewayFor(t, { chains: { devnet: evmChain([a.url, b.url], 31337, { consistency: { min_nodes: 1 } }) } });
  const url = `${g.base}/v1/rpc/public`;

  const logFilter = await call<string>(url, 'eth_newFilter', [{ address, topics: [ECHO_TOPIC] }]);
  const blockFilter = await call<string>(url, 'eth_newBlockFilter');
  t.match(logFilter, /^0x[0-9a-f]{1,32}$/, "a filter id of the gateway's own");
  t.not(logFilter, blockFilter);
  t.same(await call(url, 'eth_getFilterChanges', [logFilter]), [], 'no log yet');

  // A log on node A, which B (one block behind) does not have: the poll reads it from A.
  await echo(a.url, address, '0xa1');
  const fromA = await gather<Log>(
    t,
    'the log on A',
    () => call(url, 'eth_getFilterChanges', [logFilter]),
    (all) => all.length >= 1,
  );
  t.same(
    fromA.map((l) => l.data),
    ['0xa1'],
  );
  const aHead = Number(await call<string>(a.url, 'eth_blockNumber'));
  t.equal(aHead, 2);

  await a.stop();
  // B is mined above what A showed, then gets three logs in blocks of their own.
  await call(b.url, 'anvil_mine', ['0x1']);
  for (const data of ['0xb1', '0xb2', '0xb3']) await echo(b.url, address, data);
  const bLogs = await call<Log[]>(b.url, 'eth_getLogs', [
    { address, topics: [ECHO_TOPIC], fromBlock: `0x${(aHead + 1).toString(16)}`, toBlock: 'latest' },
  ]);
  t.same(
    bLogs.map((l) => l.data),
    ['0xb1', '0xb2', '0xb3'],
    "B holds the three logs above A's head",
  );

  const fromB = await gather<Log>(
    t,
    'the logs on B',
    () => call(url, 'eth_getFilterChanges', [logFilter]),
    (all) => all.length >= 3,
  );
  t.same(fromB, bLogs, "after A died the filter reports exactly B's logs above what it had covered, whole and in order");
  t.same(await call(url, 'eth_getFilterChanges', [logFilter]), [], 'and nothing twice');
  t.same(await call(url, 'eth_getFilterLogs', [logFilter]), bLogs.slice(-1), 'eth_getFilterLogs (no fromBlock: the latest block) from B');

  const bHashes = await Promise.all(
    [3, 4, 5].map(async (n) => (await call<{ hash: string }>(b.url, 'eth_getBlockByNumber', [`0x${n.toString(16)}`, false])).hash),
  );
  const blocks = await gather<string>(
    t,
    "B's blocks",
    () => call(url, 'eth_getFilterChanges', [blockFilter]),
    (all) => bHashes.every((h) => all.includes(h)),
  );
  t.ok(
    bHashes.every((h) => blocks.includes(h)),
    "the block filter reports B's blocks above A's head",
  );
  t.equal(new Set(blocks).size, blocks.length, 'each hash once');

  t.equal(await call(url, 'eth_uninstallFilter', [logFilter]), true);
  t.equal(await call(url, 'eth_uninstallFilter', [logFilter]), false, 'a removed filter is gone');
});

t.test('a node behind the range a poll reads is skipped: its eth_getLogs would leave the new blocks out', async (t) => {
  const ahead = await anvilFor(t, { chainId: 31337 });
  const behind = await anvilFor(t, { chainId: 31337 });
  const address = await deployEcho(ahead.url);
  t.equal(await deployEcho(behind.url), address);
  // The node with the new blocks answers slowly, so the gateway's choice falls mostly on the one behind.
  const slow = await countingProxy(t, ahead.url);
  slow.delay(() => 100);
  // min_nodes 1: the served head is the best head, so the filters read up to the node ahead (docs/consistency.md).
  const g = await gatewayFor(t, { chains: { devnet: evmChain([slow.url, behind.url], 31337, { consistency: { min_nodes: 1 } }) } });
  const url = `${g.base}/v1/rpc/public`;
  const filter = await call<string>(url, 'eth_newFilter', [{ address, topics: [ECHO_TOPIC] }]);
  for (const data of ['0x01', '0x02', '0x03']) await echo(ahead.url, address, data);
  const logs = await gather<Log>(
    t,
    'the three logs',
    () => call(url, 'eth_getFilterChanges', [filter]),
    (all) => all.length >= 3,
  );
  t.same(
    logs,
    await call(ahead.url, 'eth_getLogs', [{ address, fromBlock: '0x2', toBlock: 'latest' }]),
    'every log of the node that has them, once',
  );
  t.ok(slow.count('eth_getLogs') >= 1, 'read from the node that has the blocks');
});

t.test('without a WebSocket node, a reset deeper than any reorg is followed at once: block and log filters go on', async (t) => {
  const node = await anvilFor(t, { chainId: 31337 });
  const address = await deployEcho(node.url);
  const g = await gatewayFor(t, { chains: { devnet: evmChain([node.url]) } });
  const url = `${g.base}/v1/rpc/public`;
  const blocks = await call<string>(url, 'eth_newBlockFilter');
  const logs = await call<string>(url, 'eth_newFilter', [{ address, topics: [ECHO_TOPIC] }]);
  const hashAt = async (tag: string): Promise<string> =>
    (await call<{ hash: string }>(node.url, 'eth_getBlockByNumber', [tag, false])).hash;

  const snapshot = await call<string>(node.url, 'evm_snapshot');
  // 200 blocks: deeper than any reorg the filters look for (128), so the revert below is a new chain.
  await call(node.url, 'anvil_mine', ['0xc8']);
  const oldHead = await hashAt('latest');
  await gather<string>(
    t,
    'the old chain up to its head',
    () => call(url, 'eth_getFilterChanges', [blocks]),
    (all) => all.includes(oldHead),
  );
  t.same(await call(url, 'eth_getFilterChanges', [logs]), [], 'no log on the old chain');

  await call(node.url, 'evm_revert', [snapshot]);
  await echo(node.url, address, '0x0b');
  const first = await hashAt('latest');
  const seen = await gather<string>(
    t,
    "the new chain's first block",
    () => call(url, 'eth_getFilterChanges', [blocks]),
    (all) => all.includes(first),
  );
  t.same(seen, [first], "the block filter reports the new chain's block, long before the new chain passes the old head");
  const got = await gather<Log>(
    t,
    "the new chain's log",
    () => call(url, 'eth_getFilterChanges', [logs]),
    (all) => all.length >= 1,
  );
  t.same(
    got.map((l) => l.data),
    ['0x0b'],
    'and the log filter its log',
  );
  await echo(node.url, address, '0x0c');
  const second = await hashAt('latest');
  t.same(
    await gather<string>(
      t,
      'the next block',
      () => call(url, 'eth_getFilterChanges', [blocks]),
      (all) => all.includes(second),
    ),
    [second],
    'then each new block once, as before the reset',
  );
});

t.test('a filter belongs to the key that made it: another key, the public path and an unknown id get the same answer', async (t) => {
  const node = await anvilFor(t, { chainId: 31337 });
  const g = await gatewayFor(t, { chains: { devnet: evmChain([node.url]) } });
  const one = endpoint(g);
  const two = endpoint(g);
  const pub = `${g.base}/v1/rpc/public`;
  const logFilter = await call<string>(one.url, 'eth_newFilter', [{}]);
  const blockFilter = await call<string>(one.url, 'eth_newBlockFilter');
  const notFound = (id: number): string => `{"jsonrpc":"2.0","id":${id},"error":{"code":-32000,"message":"filter not found"}}`;
  const unknown = '0x1234567890abcdef';

  for (const [who, url] of [
    ['another key', two.url],
    ['the public path', pub],
  ] as const) {
    for (const id of [logFilter, blockFilter, unknown]) {
      for (const method of ['eth_getFilterChanges', 'eth_getFilterLogs']) {
        if (method === 'eth_getFilterLogs' && id === blockFilter) continue;
        const r = await rpc(url, method, [id], 7);
        t.equal(r.status, 200);
        t.equal(r.text, notFound(7), `${who}: ${method} of ${id === unknown ? 'an unknown id' : "key one's filter"}`);
      }
      t.equal(
        (await rpc(url, 'eth_uninstallFilter', [id], 8)).text,
        '{"jsonrpc":"2.0","id":8,"result":false}',
        `${who}: uninstall → false`,
      );
    }
  }
  const before = g.gateway.context.tenancy.ledger.available(one.ownerId);
  t.same(await call(one.url, 'eth_getFilterChanges', [logFilter]), [], 'the key that made it still polls it');
  t.equal(before - g.gateway.context.tenancy.ledger.available(one.ownerId), 20, "a poll costs eth_getFilterChanges' 20 RU");
  // A batch mixes filter calls with forwarded ones; the id given in upper case is the same filter.
  const batch = await post(
    one.url,
    JSON.stringify([
      { jsonrpc: '2.0', id: 1, method: 'eth_getFilterChanges', params: [blockFilter.toUpperCase().replace('0X', '0x')] },
      { jsonrpc: '2.0', id: 2, method: 'eth_chainId' },
      { jsonrpc: '2.0', id: 3, method: 'eth_uninstallFilter', params: [logFilter] },
      { jsonrpc: '2.0', id: 4, method: 'eth_getFilterChanges', params: [logFilter] },
    ]),
  );
  t.same(
    batch.json,
    [
      { jsonrpc: '2.0', id: 1, result: [] },
      { jsonrpc: '2.0', id: 2, result: '0x7a69' },
      { jsonrpc: '2.0', id: 3, result: true },
      { jsonrpc: '2.0', id: 4, error: { code: -32000, message: 'filter not found' } },
    ],
    'in request order, over the one key',
  );
});

t.test(
  'past filters.max_per_key a scope gets "too many filters" (-32000, not a rate limit, not charged); other scopes are not affected',
  async (t) => {
    const node = await anvilFor(t, { chainId: 31337 });
    const g = await gatewayFor(t, { chains: { devnet: evmChain([node.url]) }, filters: { max_per_key: 2 } });
    const one = endpoint(g);
    const two = endpoint(g);
    const first = await call<string>(one.url, 'eth_newBlockFilter');
    await call(one.url, 'eth_newFilter', [{}]);
    const before = g.gateway.context.tenancy.ledger.available(one.ownerId);
    for (const [method, params] of [
      ['eth_newBlockFilter', []],
      ['eth_newFilter', [{}]],
      ['eth_newPendingTransactionFilter', []],
    ] as const) {
      const r = await rpc(one.url, method, [...params], 5);
      t.equal(r.status, 200);
      t.equal(r.text, '{"jsonrpc":"2.0","id":5,"error":{"code":-32000,"message":"too many filters"}}', method);
    }
    t.equal(g.gateway.context.tenancy.ledger.available(one.ownerId), before, 'refusals cost nothing');
    t.match(await call(two.url, 'eth_newBlockFilter'), /^0x/, 'another key has its own room');
    t.match(await call(`${g.base}/v1/rpc/public`, 'eth_newBlockFilter'), /^0x/, 'and so has the public path');
    t.equal(await call(one.url, 'eth_uninstallFilter', [first]), true);
    t.match(await call(one.url, 'eth_newPendingTransactionFilter'), /^0x/, 'a removed filter frees its place');
  },
);

t.test("over a WebSocket, fed by the upstream's newHeads subscription: block and log filters see each new block once", async (t) => {
  const node = await anvilFor(t, { chainId: 31337 });
  const g = await gatewayFor(t, { chains: { devnet: { chain_id: 31337, upstreams: [{ url: node.url, ws: node.wsUrl }] } } });
  const address = await deployEcho(node.url);
  const s = await openSocket(t, wsUrl(g.base, '/v1/rpc/public'));
  let id = 0;
  const ask = async <T>(method: string, params: unknown[] = []): Promise<T> => {
    const answer = (await s.call({ jsonrpc: '2.0', id: ++id, method, params })) as { id: number; result?: T; error?: unknown };
    t.equal(answer.id, id);
    if (!('result' in answer)) throw new Error(`${method} refused: ${JSON.stringify(answer)}`);
    return answer.result as T;
  };
  const blockFilter = await ask<string>('eth_newBlockFilter');
  const logFilter = await ask<string>('eth_newFilter', [{ address }]);
  const pendingFilter = await ask<string>('eth_newPendingTransactionFilter');
  const feeds = g.gateway.context.chains.get('devnet')!.feeds!;
  const until = Date.now() + WAIT_MS;
  while (feeds.upstreamSubscriptions() < 2 && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
  t.ok(feeds.upstreamSubscriptions() >= 2, 'the filters opened the upstream newHeads and pending subscriptions');

  const sent = [await echo(node.url, address, '0x01'), await echo(node.url, address, '0x02')];
  const head = Number(await call<string>(node.url, 'eth_blockNumber'));
  const hashes = await Promise.all(
    [head - 1, head].map(
      async (n) => (await call<{ hash: string }>(node.url, 'eth_getBlockByNumber', [`0x${n.toString(16)}`, false])).hash,
    ),
  );
  const blocks = await gather<string>(
    t,
    'the two blocks',
    () => ask('eth_getFilterChanges', [blockFilter]),
    (all) => all.length >= 2,
  );
  t.same(blocks, hashes, 'exactly the two new blocks, in order');
  const logs = await gather<Log>(
    t,
    'the two logs',
    () => ask('eth_getFilterChanges', [logFilter]),
    (all) => all.length >= 2,
  );
  t.same(
    logs,
    await call(node.url, 'eth_getLogs', [{ address, fromBlock: `0x${(head - 1).toString(16)}`, toBlock: 'latest' }]),
    "anvil's two logs",
  );
  const pending = await gather<string>(
    t,
    'the two transactions',
    () => ask('eth_getFilterChanges', [pendingFilter]),
    (all) => all.length >= 2,
  );
  t.same(pending, sent, 'the pending filter saw both transactions');

  const batch = await s.call([
    { jsonrpc: '2.0', id: 'x', method: 'eth_uninstallFilter', params: [blockFilter] },
    { jsonrpc: '2.0', id: 'y', method: 'eth_getFilterChanges', params: [blockFilter] },
  ]);
  t.same(
    batch,
    [
      { jsonrpc: '2.0', id: 'x', result: true },
      { jsonrpc: '2.0', id: 'y', error: { code: -32000, message: 'filter not found' } },
    ],
    'a batch over the socket',
  );
});
