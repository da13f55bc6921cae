/**
 * The served head end to end (docs/consistency.md): three anvils on one chain at 10, 12 and 15 behind an
 * in-process gateway. eth_blockNumber answers 12 (what a majority of three has reached), /healthz, /status and
 * the metrics show it, and mining moves it. newHeads over the gateway's WebSocket (its upstream subscription on
 * the node ahead) and a block filter never show a block above what eth_blockNumber answered: heads the node ahead
 * sends are held until two nodes have them, then sent in order, each once.
 */
import t from 'tap';
import { gatewayFor } from '../support/gateway.js';
import { rpc, send } from '../support/rpc.js';
import { sameChainAnvils } from '../support/same-chain.js';
import { nodeCall, openSubscriber } from '../support/subscriber.js';
import { waitFor } from '../support/wait-for.js';
import { wsUrl } from '../support/ws.js';

const hex = (n: number): string => `0x${n.toString(16)}`;

t.test('eth_blockNumber, newHeads and block filters follow the head two of three nodes have reached', async (t) => {
  const chain = await sameChainAnvils(t, 3);
  await chain.mineTo(0, 10);
  await chain.mineTo(1, 12);
  await chain.mineTo(2, 15);
  const [n0, n1, n2] = chain.nodes;
  // Only the node ahead has a WebSocket: the newHeads feed hears its heads before the others have them. One
  // thread: each worker works the served head out from the same reports, but not at the same instant.
  const g = await gatewayFor(t, {
    server: { workers: 1 },
    chains: {
      devnet: {
        chain_id: 31337,
        upstreams: [
          { name: 'n0', url: n0!.url },
          { name: 'n1', url: n1!.url },
          { name: 'n2', url: n2!.url, ws: n2!.wsUrl },
        ],
      },
    },
  });
  const url = `${g.base}/v1/rpc/public`;
  const blockNumber = async (): Promise<number> => {
    const body = (await rpc(url, 'eth_blockNumber', [])).json as { result?: string };
    if (typeof body.result !== 'string') throw new Error(`eth_blockNumber: ${JSON.stringify(body)}`);
    return Number(body.result);
  };
  /** Every eth_blockNumber answered, in order: none may be below one before it. */
  const answered: number[] = [];
  const served = async (): Promise<number> => {
    const n = await blockNumber();
    answered.push(n);
    return n;
  };
  const health = async () =>
    (await send('GET', `${g.base}/healthz`)).json as {
      chains: { devnet: { best_head: number; served_head: number; upstreams: Array<{ head: number | null }> } };
    };

  await waitFor(async () => (await health()).chains.devnet.upstreams.every((u, i) => u.head === [10, 12, 15][i]), {
    what: 'every node probed',
    ms: 10_000,
  });
  t.equal(await served(), 12, 'the second highest of three: a majority has it');
  t.match((await health()).chains.devnet, { best_head: 15, served_head: 12 }, '/healthz shows both');
  const metricsText = (await send('GET', `http://127.0.0.1:${g.gateway.metricsPort}/metrics`)).text;
  t.match(metricsText, /^chaingate_chain_served_head\{chain="devnet"\} 12$/m, 'the metric');
  t.match((await send('GET', `http://127.0.0.1:${g.gateway.metricsPort}/status`)).json, { chains: { devnet: { served_head: 12 } } });

  const sub = await openSubscriber(t, wsUrl(g.base, '/v1/rpc/public'));
  const heads = await sub.subscribe('newHeads');
  const filter = (await nodeCall<string>(url, 'eth_newBlockFilter')) as string;
  /** Each head delivered, with the eth_blockNumber answered just after it arrived. */
  const seen: Array<{ head: number; after: number }> = [];
  let checked = 0;
  const checkHeads = async (): Promise<void> => {
    const results = sub.resultsOf(heads);
    while (checked < results.length) {
      const head = Number(results[checked]!.number);
      checked++;
      seen.push({ head, after: await served() });
    }
  };
  const filterHashes: string[] = [];
  const pollFilter = async (): Promise<void> => {
    const before = await served();
    const changes = await nodeCall<string[]>(url, 'eth_getFilterChanges', [filter]);
    const after = await served();
    for (const hash of changes) {
      const block = await nodeCall<{ number: string }>(n2!.url, 'eth_getBlockByHash', [hash, false]);
      t.ok(Number(block.number) <= after, `block filter: block ${Number(block.number)} not above the head served (${before}..${after})`);
      filterHashes.push(hash);
    }
  };

  // The node ahead goes on: its heads 16 and 17 reach the gateway, which holds them (one node has them).
  await chain.mineTo(2, 17);
  await waitFor(async () => (await health()).chains.devnet.upstreams[2]!.head === 17, { what: 'n2 at 17 heard', ms: 10_000 });
  t.equal(await served(), 12, 'one node at 17 moves nothing');
  await pollFilter();
  await checkHeads();
  t.same(sub.resultsOf(heads), [], 'no head shown above 12');
  t.same(filterHashes, [], 'no block in the filter above 12');

  // n1 reaches 16: two nodes have 16 (n0 at 10 is more than five blocks behind 17, out of rotation).
  await chain.mineTo(1, 16);
  await waitFor(async () => (await blockNumber()) === 16, { what: 'eth_blockNumber 16', ms: 10_000 });
  await waitFor(() => sub.resultsOf(heads).length >= 1, { what: 'head 16 sent', ms: 10_000 });
  await checkHeads();
  await pollFilter();
  t.same(
    sub.resultsOf(heads).map((h) => Number(h.number)),
    [16],
    'head 16 sent, 17 still held',
  );

  // n0 catches up to 17 and every node moves on, the node ahead first each time.
  await chain.mineTo(0, 17);
  await waitFor(async () => (await blockNumber()) === 17, { what: 'eth_blockNumber 17', ms: 10_000 });
  for (const [node, height] of [
    [2, 20],
    [1, 19],
    [0, 20],
  ] as const) {
    await chain.mineTo(node, height);
    await checkHeads();
    await pollFilter();
  }
  await waitFor(async () => (await blockNumber()) === 20, { what: 'eth_blockNumber 20', ms: 10_000 });
  await waitFor(() => sub.resultsOf(heads).length >= 5, { what: 'heads up to 20', ms: 10_000 });
  await checkHeads();
  await pollFilter();

  const numbers = sub.resultsOf(heads).map((h) => Number(h.number));
  t.same(numbers, [16, 17, 18, 19, 20], 'every head once, in order, no gap');
  t.same(
    sub.resultsOf(heads).map((h) => h.hash),
    await Promise.all(numbers.map(async (n) => (await nodeCall<{ hash: string }>(n0!.url, 'eth_getBlockByNumber', [hex(n), false])).hash)),
    'the blocks of the chain (the same on every node)',
  );
  for (const { head, after } of seen) t.ok(head <= after, `head ${head} shown: eth_blockNumber just after it answered ${after}`);
  t.ok(filterHashes.length > 0, 'the block filter showed blocks');
  t.same(
    answered,
    [...answered].sort((a, b) => a - b),
    `eth_blockNumber never went back: ${answered.join(' ')}`,
  );
});

t.test('with worker threads, each works the served head out from the main thread’s probes', async (t) => {
  const chain = await sameChainAnvils(t, 3, { transfers: false });
  await chain.mineTo(0, 10);
  await chain.mineTo(1, 12);
  await chain.mineTo(2, 15);
  const g = await gatewayFor(t, {
    server: { workers: 2 },
    chains: { devnet: { chain_id: 31337, upstreams: chain.nodes.map((n, i) => ({ name: `n${i}`, url: n.url })) } },
  });
  const url = `${g.base}/v1/rpc/public`;
  await waitFor(async () => ((await rpc(url, 'eth_blockNumber', [])).json as { result?: string }).result === hex(12), {
    what: 'eth_blockNumber 12',
    ms: 10_000,
  });
  // Each call on a connection of its own, spread over both workers: every one answers the head two nodes have.
  const answers = await Promise.all(
    Array.from({ length: 20 }, async () => ((await rpc(url, 'eth_blockNumber', [])).json as { result?: string }).result),
  );
  t.same(new Set(answers), new Set([hex(12)]), 'every worker answers 12');
  await chain.mineTo(0, 13);
  await chain.mineTo(1, 13);
  await waitFor(
    async () => {
      const more = await Promise.all(
        Array.from({ length: 10 }, async () => ((await rpc(url, 'eth_blockNumber', [])).json as { result?: string }).result),
      );
      return more.every((r) => r === hex(13));
    },
    { what: 'every worker at 13', ms: 10_000 },
  );
});

t.test('every node goes back (anvil_reset): the served head follows them down, says so, and climbs again', async (t) => {
  const chain = await sameChainAnvils(t, 3, { transfers: false });
  await chain.mineTo(0, 10);
  await chain.mineTo(1, 12);
  await chain.mineTo(2, 15);
  const g = await gatewayFor(t, {
    server: { workers: 1 },
    chains: { devnet: { chain_id: 31337, upstreams: chain.nodes.map((n, i) => ({ name: `n${i}`, url: n.url })) } },
  });
  const url = `${g.base}/v1/rpc/public`;
  const blockNumber = async (): Promise<string | undefined> => ((await rpc(url, 'eth_blockNumber', [])).json as { result?: string }).result;
  await waitFor(async () => (await blockNumber()) === hex(12), { what: 'eth_blockNumber 12', ms: 10_000 });
  // One node going back is not enough: the head stays while another node in rotation has it.
  await chain.reset();
  await chain.mineTo(0, 3);
  await chain.mineTo(1, 3);
  await chain.mineTo(2, 4);
  await waitFor(async () => (await blockNumber()) === hex(3), { what: 'eth_blockNumber 3, the head two nodes have now', ms: 10_000 });
  t.ok(
    g.logLines.some((l) => /served head went back from \d+ to \d+: every node in rotation is below it/.test(l)),
    'the head going back is logged',
  );
  await chain.mineTo(0, 5);
  await chain.mineTo(1, 5);
  await waitFor(async () => (await blockNumber()) === hex(5), { what: 'eth_blockNumber 5', ms: 10_000 });
});
