/**
 * The methods of the catalogue beyond the spec's first nineteen, through a real gateway in front of
 * anvil (with steps tracing, so debug traces hold struct logs): each answers exactly what anvil
 * answers when asked directly, a node's error included (anvil lacks trace_call and a few others);
 * malformed params are refused naming the parameter; eth_accounts, eth_mining and eth_hashrate are
 * answered by the gateway; and the methods that need a node's keys or administration are refused
 * with their reason. A counting relay in front of anvil shows which calls ever reached the node.
 */
import t from 'tap';
import { countingProxy } from '../support/counting-proxy.js';
import { CALL_RESULT, DEPLOY_BYTECODE } from '../support/contract.js';
import { minedReceipt } from '../support/dev-chain.js';
import { anvilFor, evmChain, gatewayFor } from '../support/gateway.js';
import { rpc } from '../support/rpc.js';

const DEV = '0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266';
const OTHER = '0x70997970c51812dc3a179c1d4a0ec8e0a7e6e5fc';

const node = await anvilFor(t, { chainId: 31337, stepsTracing: true });
const relay = await countingProxy(t, node.url);
// The whole catalogue on the keyless path, the heavy methods included (public.methods.deny: [] opens them).
const g = await gatewayFor(t, {
  chains: { devnet: evmChain([relay.url]) },
  public: { rps_per_ip: 10_000_000, max_batch: 1000, methods: { deny: [] } },
});
const url = `${g.base}/v1/rpc/public`;

async function direct<T>(method: string, params: unknown[]): Promise<T> {
  const answer = (await rpc(node.url, method, params)).json as { result?: T; error?: unknown };
  if (answer.error !== undefined) throw new Error(`anvil refused ${method}: ${JSON.stringify(answer.error)}`);
  return answer.result as T;
}

// A contract that runs code (so traces have steps), one call to it, and a transaction left queued
// in the pool behind a nonce gap (anvil mines the rest at once). Made on anvil directly.
const deployed = await direct<string>('eth_sendTransaction', [{ from: DEV, data: DEPLOY_BYTECODE }]);
const echo = (await minedReceipt(node.url, deployed)).contractAddress!;
const call = { from: DEV, to: echo, data: '0x1234' };
const tx = await direct<string>('eth_sendTransaction', [call]);
const mined = await minedReceipt(node.url, tx);
await direct('eth_sendTransaction', [{ from: DEV, to: OTHER, value: '0x1', nonce: '0x9' }]);

t.test('each method answers through the gateway exactly what anvil answers', async (t) => {
  const calls: Array<[string, unknown[]]> = [
    ['eth_getProof', [echo, ['0x0'], 'latest']],
    ['eth_createAccessList', [call, 'latest']],
    ['eth_simulateV1', [{ blockStateCalls: [{ calls: [call] }], traceTransfers: true }, 'latest']],
    ['eth_fillTransaction', [{ from: DEV, to: OTHER }]],
    ['eth_config', []],
    ['debug_traceTransaction', [tx]],
    ['debug_traceTransaction', [tx, { tracer: 'callTracer' }]],
    ['debug_traceCall', [call, 'latest', { enableMemory: true }]],
    ['debug_traceBlockByNumber', [mined.blockNumber]],
    ['debug_traceBlockByHash', [mined.blockHash, { tracer: 'callTracer' }]],
    ['trace_transaction', [tx]],
    ['trace_block', [mined.blockNumber]],
    ['trace_filter', [{ fromBlock: '0x0', toBlock: mined.blockNumber }]],
    ['trace_replayBlockTransactions', [mined.blockNumber, ['trace']]],
    ['txpool_status', []],
    ['txpool_inspect', []],
    ['txpool_content', []],
    // Served by other nodes, not by anvil: its own error passes through untouched.
    ['trace_call', [call, ['trace'], 'latest']],
    ['trace_replayTransaction', [tx, ['trace']]],
    ['txpool_contentFrom', [DEV]],
    ['eth_baseFee', []],
    ['eth_getBlockAccessList', [mined.blockNumber]],
  ];
  for (const [method, params] of calls) {
    const before = relay.count(method);
    const [through, fromNode] = await Promise.all([rpc(url, method, params, 7), rpc(node.url, method, params, 7)]);
    t.equal(through.status, 200, `${method}: HTTP 200`);
    t.equal(through.text, fromNode.text, `${method} ${JSON.stringify(params)}: anvil's bytes`);
    t.equal(relay.count(method), before + 1, `${method}: forwarded once`);
  }
  // The comparisons above can fail: the answers hold what the transactions left.
  const trace = (await rpc(url, 'debug_traceTransaction', [tx])).json as { result: { structLogs: Array<{ op: string }> } };
  t.ok(
    trace.result.structLogs.some((step) => step.op === 'LOG1'),
    'the struct logs show the contract running',
  );
  const simulated = (await rpc(url, 'eth_simulateV1', [{ blockStateCalls: [{ calls: [call] }] }, 'latest'])).json as {
    result: Array<{ calls: Array<{ returnData: string }> }>;
  };
  t.equal(simulated.result[0]!.calls[0]!.returnData, CALL_RESULT, 'the simulated call returns what the contract returns');
  const pool = (await rpc(url, 'txpool_status', [])).json as { result: unknown };
  t.same(pool.result, { pending: '0x0', queued: '0x1' }, 'the queued transaction is in the pool');
});

t.test('malformed params are refused naming the parameter, and never reach the node', async (t) => {
  const cases: Array<[string, unknown[], string]> = [
    ['debug_traceTransaction', ['0x12'], `'transactionHash' must be a 32-byte 0x-prefixed hex hash`],
    ['debug_traceTransaction', [tx, { tracer: 1 }], `'traceConfig.tracer' must be a string`],
    ['debug_traceCall', [{ to: '0x1' }], `'transaction.to' must be a 20-byte 0x-prefixed hex address`],
    ['debug_traceBlockByNumber', ['0x01'], `'block' must be a hex block number or one of latest, earliest, pending, safe, finalized`],
    ['trace_call', [call, 'trace'], `'traceTypes' must be an array of trace types (trace, vmTrace, stateDiff)`],
    ['trace_filter', [{ fromAddress: DEV }], `'filter.fromAddress' must be an array of 20-byte hex addresses`],
    ['eth_getProof', [DEV, ['zz']], `'storageKeys[0]' must be 0x-prefixed hex of 1 to 64 digits`],
    ['eth_simulateV1', [{ blockStateCalls: [{ calls: [{ to: 5 }] }] }], `'payload.blockStateCalls[0].calls[0].to' must be a 20-byte`],
    ['txpool_content', [true], 'txpool_content takes no parameters'],
  ];
  const seen = relay.calls.length;
  for (const [method, params, message] of cases) {
    const r = await rpc(url, method, params, 1);
    t.equal(r.status, 200);
    t.match(r.json, { id: 1, error: { code: -32602, message: `invalid params: ${message}` } }, `${method} ${JSON.stringify(params)}`);
  }
  t.same(
    relay.calls.slice(seen).filter((c) => cases.some(([method]) => method === c.method)),
    [],
    'none of them reached the node',
  );
});

t.test('eth_accounts, eth_mining and eth_hashrate are answered by the gateway', async (t) => {
  t.ok((await direct<string[]>('eth_accounts', [])).length > 0, 'anvil itself lists its unlocked accounts');
  for (const [method, result] of [
    ['eth_accounts', []],
    ['eth_mining', false],
    ['eth_hashrate', '0x0'],
  ] as const) {
    const r = await rpc(url, method, [], 'x');
    t.equal(r.text, `{"jsonrpc":"2.0","id":"x","result":${JSON.stringify(result)}}`, method);
    t.equal(relay.count(method), 0, `${method} never reached the node`);
  }
});

t.test('methods that need a node of their own are refused with their reason, never forwarded', async (t) => {
  const keys =
    'a shared gateway never holds keys: sign in the wallet or client, then send the signed transaction with eth_sendRawTransaction';
  const administration = 'a shared gateway never exposes node administration';
  const cases: Array<[string, unknown[], string]> = [
    ['eth_sign', [DEV, '0xdeadbeef'], keys],
    ['eth_signTransaction', [{ from: DEV, to: OTHER }], keys],
    ['eth_signTypedData_v4', [DEV, '{}'], keys],
    ['eth_sendTransaction', [{ from: DEV, to: OTHER, value: '0x1' }], keys],
    ['personal_sign', ['0xdeadbeef', DEV], keys],
    ['admin_nodeInfo', [], administration],
    ['miner_stop', [], `${administration} (miner_* sets how a node builds blocks)`],
    [
      'engine_getPayloadV3',
      ['0x01'],
      "the Engine API belongs to a node's own consensus client, behind its JWT secret, and is never served to callers",
    ],
    [
      'eth_coinbase',
      [],
      "the coinbase is one node's own setting and a shared gateway has none (a block's fee recipient is its 'miner' field)",
    ],
  ];
  const nonce = await direct<string>('eth_getTransactionCount', [DEV, 'latest']);
  for (const [method, params, reason] of cases) {
    const r = await rpc(url, method, params, 2);
    t.equal(r.status, 200, `${method}: HTTP 200`);
    t.equal(
      r.text,
      `{"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":${JSON.stringify(`${method} is not served: ${reason}`)}}}`,
      method,
    );
    t.equal(relay.count(method), 0, `${method} never reached the node`);
  }
  t.equal(await direct<string>('eth_getTransactionCount', [DEV, 'latest']), nonce, 'no transaction was sent');
});
