/**
 * Logs subscriptions checked for completeness (docs/websocket.md#logs-checked-against-each-block), end to end
 * through a gateway with two worker threads in front of a real anvil whose WebSocket is reached through a relay
 * that drops some of its log notifications, as a silently lagging upstream subscription does: the blocks whose
 * bloom said the filter should have had logs are fetched with eth_getLogs, so ws and viem clients get every log
 * once and in order; each such block is counted in chaingate_log_backfills_total and logged with the node.
 */
import t from 'tap';
import { createPublicClient, type Log, webSocket } from 'viem';
import { ECHO_TOPIC, RUNTIME_BYTECODE } from '../support/contract.js';
import { minedReceipt } from '../support/dev-chain.js';
import { scrape } from '../support/exposition.js';
import { anvilFor, gatewayFor } from '../support/gateway.js';
import { nodeCall, openSubscriber, waitUntil } from '../support/subscriber.js';
import { waitFor } from '../support/wait-for.js';
import { wsUrl } from '../support/ws.js';
import { wsDropRelay } from '../support/ws-drop-relay.js';

const DEV_ADDRESS = '0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266';
const ECHO_ADDRESS = '0x00000000000000000000000000000000000ec40e';
const ECHO_FILTER = { address: ECHO_ADDRESS, topics: [ECHO_TOPIC] };
const logKey = (l: { blockHash?: unknown; logIndex?: unknown }): string => `${String(l.blockHash)}:${Number(l.logIndex)}`;

t.test('log notifications the node dropped are fetched from the bloom, in order, counted, the node logged', async (t) => {
  const node = await anvilFor(t, { chainId: 31337 });
  await nodeCall(node.url, 'anvil_setCode', [ECHO_ADDRESS, RUNTIME_BYTECODE]);
  // anvil mines each transaction in a block of its own, from block 1 on: the logs of blocks 2, 3, 6 and 8 (the
  // last: checked when the next head comes, as no later log does) are dropped.
  const DROPPED = new Set([2, 3, 6, 8]);
  const relay = await wsDropRelay(
    t,
    node.url.replace('http', 'ws'),
    (r) => typeof r.logIndex === 'string' && DROPPED.has(Number(r.blockNumber)),
  );
  const g = await gatewayFor(t, {
    server: { workers: 2 },
    chains: { devnet: { chain_id: 31337, upstreams: [{ name: 'anvil-a', url: node.url, ws: relay.wsUrl }] } },
  });
  const url = wsUrl(g.base, '/v1/rpc/public');
  const clients = await Promise.all([openSubscriber(t, url), openSubscriber(t, url), openSubscriber(t, url)]);
  const ids = await Promise.all(clients.map((c) => c.subscribe('logs', ECHO_FILTER)));
  const viemLogs: Log[] = [];
  const viem = createPublicClient({ transport: webSocket(url) });
  const unwatch = viem.watchEvent({ address: ECHO_ADDRESS, onLogs: (logs) => viemLogs.push(...logs) });
  t.teardown(async () => {
    unwatch();
    await (await viem.transport.getRpcClient()).close();
  });
  await new Promise((r) => setTimeout(r, 300)); // viem's eth_subscribe answered
  const port = g.gateway.metricsPort!;
  const before = (await scrape(port)).value('chaingate_log_backfills_total', { chain: 'devnet' }) || 0;

  // Eight blocks with one log each; the node's notifications of four of them never reach the gateway, on either
  // upstream subscription (the ws clients' filter, and viem's: the address alone).
  t.equal(await nodeCall(node.url, 'eth_blockNumber'), '0x0', 'no block mined yet');
  for (let i = 1; i <= 8; i++) {
    const hash = await nodeCall<string>(node.url, 'eth_sendTransaction', [
      { from: DEV_ADDRESS, to: ECHO_ADDRESS, data: `0x${i.toString(16).padStart(8, '0')}`, gas: '0x30000' },
    ]);
    // A block each, as the drops go by block number: anvil may answer a send before its automine has run, and
    // the next send could then share its block.
    await minedReceipt(node.url, hash);
  }
  await nodeCall(node.url, 'evm_mine'); // the last block is checked when the next head comes
  // anvil may answer eth_sendTransaction before its block is sealed: wait for the eighth receipt first.
  await waitFor(async () => (await nodeCall<unknown[]>(node.url, 'eth_getLogs', [{ ...ECHO_FILTER, fromBlock: '0x0' }])).length === 8, {
    what: 'eight logs mined',
  });
  const expected = (await nodeCall<Array<Record<string, unknown>>>(node.url, 'eth_getLogs', [{ ...ECHO_FILTER, fromBlock: '0x0' }])).map(
    logKey,
  );
  t.equal(expected.length, 8, 'eight logs on the chain');
  await waitUntil(
    () => relay.dropped.length === 8,
    10_000,
    'the relay dropped four notifications of each upstream subscription',
    () => JSON.stringify(relay.dropped).slice(0, 1500),
  );
  for (const [i, c] of clients.entries()) {
    await waitUntil(
      () => c.resultsOf(ids[i]!).length >= 8,
      20_000,
      `ws client ${i}: every log`,
      () => String(c.resultsOf(ids[i]!).length),
    );
  }
  await waitUntil(
    () => viemLogs.length >= 8,
    20_000,
    'viem: every log',
    () => String(viemLogs.length),
  );
  await new Promise((r) => setTimeout(r, 200));
  for (const [i, c] of clients.entries()) t.same(c.resultsOf(ids[i]!).map(logKey), expected, `ws client ${i}: every log once, in order`);
  t.same(viemLogs.map(logKey), expected, 'viem: every log once, in order');
  const after = (await scrape(port)).value('chaingate_log_backfills_total', { chain: 'devnet' });
  t.equal(after - before, 8, 'one backfill counted per block and upstream subscription whose logs the node did not send');
  const lines = g.logLines.filter((l) => l.includes('bloom promised'));
  t.equal(lines.length, 8, 'each logged');
  t.match(lines[0], /anvil-a/, 'naming the node');
});

t.test('no backfill when nothing is dropped: the bloom matched and the logs came', async (t) => {
  const node = await anvilFor(t, { chainId: 31337 });
  await nodeCall(node.url, 'anvil_setCode', [ECHO_ADDRESS, RUNTIME_BYTECODE]);
  const g = await gatewayFor(t, {
    server: { workers: 2 },
    chains: { devnet: { chain_id: 31337, upstreams: [{ url: node.url, ws: node.url.replace('http', 'ws') }] } },
  });
  const s = await openSubscriber(t, wsUrl(g.base, '/v1/rpc/public'));
  const id = await s.subscribe('logs', ECHO_FILTER);
  for (let i = 1; i <= 4; i++)
    await nodeCall(node.url, 'eth_sendTransaction', [
      { from: DEV_ADDRESS, to: ECHO_ADDRESS, data: `0x${i.toString(16).padStart(8, '0')}`, gas: '0x30000' },
    ]);
  await nodeCall(node.url, 'evm_mine');
  await waitUntil(() => s.resultsOf(id).length >= 4, 20_000, 'every log');
  await new Promise((r) => setTimeout(r, 300));
  t.equal(s.resultsOf(id).length, 4, 'each once');
  t.equal((await scrape(g.gateway.metricsPort!)).value('chaingate_log_backfills_total', { chain: 'devnet' }) || 0, 0, 'nothing counted');
});
