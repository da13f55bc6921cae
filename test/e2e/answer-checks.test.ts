/**
 * The gateway's answer checks end to end (docs/consistency.md, "Answers checked"): two anvils on one chain, one
 * behind a relay that alters its answers (a block's hash, a log dropped or moved to another address, a
 * receipt's block hash). The client always gets the true answer, from the clean node; the altered node's
 * failures are counted per check; and with only the altered node the client gets upstream_answer_invalid.
 */
import t, { type Test } from 'tap';
import type { ChainRuntime } from '../../src/chain/runtime.js';
import { answerRelay, FORGED_HASH } from '../support/answer-relay.js';
import { scrape } from '../support/exposition.js';
import { gatewayFor, type TestGateway } from '../support/gateway.js';
import { rpc } from '../support/rpc.js';
import { type SameChain, sameChainAnvils } from '../support/same-chain.js';
import { waitFor } from '../support/wait-for.js';

const FAILURES = 'chaingate_upstream_check_failures_total';

async function direct(url: string, method: string, params: unknown[]): Promise<unknown> {
  return ((await rpc(url, method, params)).json as { result: unknown }).result;
}

function runtimeOf(g: TestGateway): ChainRuntime {
  return g.gateway.context.chains.get('devnet')!;
}

async function failures(g: TestGateway, upstream: string, check: string): Promise<number> {
  return (await scrape(g.gateway.metricsPort!)).value(FAILURES, { chain: 'devnet', upstream, check });
}

/**
 * The gateway knows blocks from its heads, listened to from the first checked call on: one is made, the
 * listener waited for, then the nodes mined up to `height` and the heads waited for.
 */
async function knowBlocksUpTo(g: TestGateway, chain: SameChain, height: number): Promise<void> {
  const runtime = runtimeOf(g);
  await rpc(`${g.base}/v1/rpc/public`, 'eth_getBlockByNumber', ['0x0', false]);
  await waitFor(() => runtime.feeds?.upstreamSubscriptions() === 1, { what: 'the gateway listens to the heads' });
  for (let i = 0; i < chain.nodes.length; i++) await chain.mineTo(i, height);
  await waitFor(() => runtime.checks?.known.at(height) !== undefined, { what: `block ${height} known` });
}

/**
 * Calls `method` until the altered node has failed `check` once, each answer the true one. Its share of calls is
 * drawn at random, and a node failing often is out of rotation until its next probe, so this may take a while.
 */
async function untilCounted(t: Test, g: TestGateway, check: string, method: string, params: unknown[], truth: unknown): Promise<void> {
  let calls = 0;
  let wrong = 0;
  await waitFor(
    async () => {
      calls++;
      const answer = await rpc(`${g.base}/v1/rpc/public`, method, params, calls);
      if (answer.status !== 200 || JSON.stringify((answer.json as { result?: unknown }).result) !== JSON.stringify(truth)) wrong++;
      return (await failures(g, 'altered', check)) > 0;
    },
    { what: `a ${check} failure of the altered node`, ms: 30_000 },
  );
  t.equal(wrong, 0, `${method}: each of ${calls} answers is the true one`);
  t.ok((await failures(g, 'altered', check)) > 0, `${check}: the altered node's failure is counted`);
  t.equal(await failures(g, 'clean', check), 0, `${check}: the clean node's is not`);
}

t.test('the client gets the true answer; the altered node is counted per check', async (t) => {
  const chain = await sameChainAnvils(t, 2, { logs: true });
  const relay = await answerRelay(t, chain.nodes[1]!.url);
  const g = await gatewayFor(t, {
    server: { workers: 1 },
    chains: {
      devnet: {
        chain_id: 31337,
        upstreams: [
          { name: 'clean', url: chain.nodes[0]!.url, ws: chain.nodes[0]!.wsUrl },
          { name: 'altered', url: relay.url },
        ],
      },
    },
  });
  await knowBlocksUpTo(g, chain, 4);
  const truth = chain.nodes[0]!.url;

  relay.settings.blockHash = true;
  await untilCounted(t, g, 'block', 'eth_getBlockByNumber', ['0x3', true], await direct(truth, 'eth_getBlockByNumber', ['0x3', true]));
  relay.settings.blockHash = false;

  const range = { fromBlock: '0x2', toBlock: '0x4' };
  const logs = await direct(truth, 'eth_getLogs', [range]);
  t.equal((logs as unknown[]).length, 3, 'blocks 2 to 4 hold a log each');
  // A dropped log makes the answer suspect: the clean node's answer holds it, which proves the altered node left it out.
  relay.settings.logs = 'drop';
  await untilCounted(t, g, 'logs_bloom', 'eth_getLogs', [range], logs);
  const dropped = await failures(g, 'altered', 'logs_bloom');
  // A log moved to an address the block's bloom excludes fails at once.
  relay.settings.logs = 'move';
  await waitFor(
    async () => {
      const answer = await rpc(`${g.base}/v1/rpc/public`, 'eth_getLogs', [range]);
      t.same((answer.json as { result?: unknown }).result, logs, 'the true logs');
      return (await failures(g, 'altered', 'logs_bloom')) > dropped;
    },
    { what: 'a moved log counted', ms: 30_000 },
  );
  // The filters' own eth_getLogs is checked the same way.
  const filterId = ((await rpc(`${g.base}/v1/rpc/public`, 'eth_newFilter', [range])).json as { result: string }).result;
  const moved = await failures(g, 'altered', 'logs_bloom');
  await waitFor(
    async () => {
      const answer = await rpc(`${g.base}/v1/rpc/public`, 'eth_getFilterLogs', [filterId]);
      t.same((answer.json as { result?: unknown }).result, logs, "the filter's true logs");
      return (await failures(g, 'altered', 'logs_bloom')) > moved;
    },
    { what: "a moved log counted in a filter's logs", ms: 30_000 },
  );
  relay.settings.logs = null;

  const block3 = (await direct(truth, 'eth_getBlockByNumber', ['0x3', false])) as { transactions: string[] };
  const txHash = block3.transactions[0]!;
  relay.settings.receiptBlockHash = true;
  await untilCounted(
    t,
    g,
    'receipt_block',
    'eth_getTransactionReceipt',
    [txHash],
    await direct(truth, 'eth_getTransactionReceipt', [txHash]),
  );

  t.match(g.logLines.join('\n'), /warn upstream answers fail the gateway's checks chain=devnet upstream=altered check=block/, 'logged');
  t.notMatch(g.logLines.join('\n'), new RegExp(FORGED_HASH), 'the answers are not logged');
});

t.test('with only the altered node, the client gets upstream_answer_invalid', async (t) => {
  const chain = await sameChainAnvils(t, 1, { logs: true });
  const relay = await answerRelay(t, chain.nodes[0]!.url);
  // The heads come over the node's own WebSocket; its HTTP (which the heads' backfills use) is the relay's.
  const g = await gatewayFor(t, {
    server: { workers: 1 },
    chains: { devnet: { chain_id: 31337, upstreams: [{ name: 'altered', url: relay.url, ws: chain.nodes[0]!.wsUrl }] } },
  });
  await knowBlocksUpTo(g, chain, 4);
  const url = `${g.base}/v1/rpc/public`;
  const invalid = { code: -32603, message: "Upstream node's answer failed the gateway's checks" };

  relay.settings.blockHash = true;
  const block = await rpc(url, 'eth_getBlockByNumber', ['0x3', true]);
  t.equal(block.status, 502);
  t.same((block.json as { error: unknown }).error, invalid, 'a block whose hash is not the known one');

  relay.settings.receiptBlockHash = true;
  const txHash = ((await direct(chain.nodes[0]!.url, 'eth_getBlockByNumber', ['0x3', false])) as { transactions: string[] })
    .transactions[0]!;
  const receipt = await rpc(url, 'eth_getTransactionReceipt', [txHash]);
  t.same((receipt.json as { error: unknown }).error, invalid, "a receipt naming another block's hash");

  relay.settings.logs = 'move';
  const batch = await rpc(url, 'eth_getLogs', [{ fromBlock: '0x2', toBlock: '0x4' }]);
  t.same((batch.json as { error: unknown }).error, invalid, 'a log its block’s bloom excludes');

  for (const check of ['block', 'receipt_block', 'logs_bloom']) t.equal(await failures(g, 'altered', check), 1, `${check} counted once`);

  const filterId = ((await rpc(url, 'eth_newFilter', [{ fromBlock: '0x2', toBlock: '0x4' }])).json as { result: string }).result;
  const filterLogs = await rpc(url, 'eth_getFilterLogs', [filterId]);
  t.same((filterLogs.json as { error: unknown }).error, invalid, "a filter's logs too");

  // A dropped log alone is only suspect: with no other node to ask, a bloom's false positive is served.
  relay.settings.logs = 'drop';
  await waitFor(async () => (await rpc(url, 'eth_blockNumber', [])).status === 200, { what: 'the node back in rotation', ms: 10_000 });
  const suspect = await rpc(url, 'eth_getLogs', [{ fromBlock: '0x2', toBlock: '0x4' }]);
  t.equal(((suspect.json as { result: unknown[] }).result ?? []).length, 2, 'the answer without the log is served');
});

t.test('with checks off, an altered answer goes through unchecked', async (t) => {
  const chain = await sameChainAnvils(t, 1, { logs: true });
  const relay = await answerRelay(t, chain.nodes[0]!.url, { blockHash: true });
  const g = await gatewayFor(t, {
    server: { workers: 1 },
    chains: {
      devnet: {
        chain_id: 31337,
        consistency: { checks: false },
        upstreams: [{ name: 'altered', url: relay.url, ws: chain.nodes[0]!.wsUrl }],
      },
    },
  });
  t.equal(runtimeOf(g).checks, null, 'the chain has no checks');
  await chain.mineTo(0, 3);
  const block = await rpc(`${g.base}/v1/rpc/public`, 'eth_getBlockByNumber', ['0x3', true]);
  t.equal((block.json as { result: { hash: string } }).result.hash, FORGED_HASH);
  t.equal(runtimeOf(g).feeds?.upstreamSubscriptions() ?? 0, 0, 'and listens to no heads for them');
});
