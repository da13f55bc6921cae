/**
 * Real dApp clients through `/v1/rpc/public`, unchanged: viem (one call per request, and its
 * `batch: true` mode) and ethers v6 (which batches by default) drive the interface's 19 methods
 * against a real anvil. Results are checked against known values (the hand-assembled contract's
 * code, log and return value; the web3_sha3 vector) or against anvil's own answer to the same
 * call at its own URL, so a gateway that altered a result would be caught.
 */
import t, { type Test } from 'tap';
import { ContractFactory, FetchRequest, JsonRpcProvider, NonceManager, Wallet } from 'ethers';
import { createPublicClient, createWalletClient, type Hex, http, keccak256 } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { anvil } from 'viem/chains';
import { anvilFor, evmChain, gatewayFor } from '../support/gateway.js';
import { CALL_RESULT, DEPLOY_BYTECODE, ECHO_TOPIC, RUNTIME_BYTECODE } from '../support/contract.js';
import { post, rpc } from '../support/rpc.js';
import { SPEC_METHODS } from '../support/spec-methods.js';

// anvil's first well-known development account.
const DEV_KEY = '0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80';
const DEV_ADDRESS = '0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266';
const HELLO_WORLD = '0x68656c6c6f20776f726c64';
const HELLO_WORLD_KECCAK = '0x47173285a8d7341e5e972fc677286384f802f8ef42a5ec5f03bbfa254cb01fad';
const SUBSCRIBE_OVER_HTTP = 'eth_subscribe needs a WebSocket connection: open the same URL with wss:// (or ws://)';

type Json = Record<string, unknown>;

/** A call made to anvil at its own URL, bypassing the gateway: the reference answer. */
async function direct(nodeUrl: string, method: string, params: unknown[]): Promise<Json> {
  return (await rpc(nodeUrl, method, params)).json as Json;
}

async function directResult<T = unknown>(nodeUrl: string, method: string, params: unknown[]): Promise<T> {
  const answer = await direct(nodeUrl, method, params);
  if (!('result' in answer)) throw new Error(`anvil refused ${method}: ${JSON.stringify(answer)}`);
  return answer.result as T;
}

/** The JSON-RPC methods named in every request body a client sent (a batch names several). */
function methodsIn(bodies: unknown[]): string[] {
  return bodies.flatMap((b) => (Array.isArray(b) ? b : [b]).map((x) => (x as { method: string }).method));
}

async function setup(t: Test) {
  const node = await anvilFor(t, { chainId: 31337 });
  const g = await gatewayFor(t, { chains: { devnet: evmChain([node.url]) } });
  return { node, url: `${g.base}/v1/rpc/public` };
}

t.test('viem: deploy, call, transact, read receipts, logs and filters through the gateway', async (t) => {
  const { node, url } = await setup(t);
  const bodies: unknown[] = [];
  const transport = http(url, {
    onFetchRequest: (_request, init) => {
      bodies.push(JSON.parse(String(init.body)));
    },
  });
  const account = privateKeyToAccount(DEV_KEY);
  const client = createPublicClient({ chain: anvil, transport, pollingInterval: 50 });
  const wallet = createWalletClient({ account, chain: anvil, transport });

  t.equal(await client.getChainId(), 31337, 'eth_chainId');
  t.equal(await client.getBlockNumber(), BigInt(await directResult<string>(node.url, 'eth_blockNumber', [])), "eth_blockNumber is anvil's");
  t.equal(await client.request({ method: 'net_listening' }), true, 'net_listening');
  t.equal(await client.request({ method: 'web3_sha3', params: [HELLO_WORLD] }), HELLO_WORLD_KECCAK, 'web3_sha3 of "hello world"');
  t.equal(
    await client.estimateMaxPriorityFeePerGas(),
    BigInt(await directResult<string>(node.url, 'eth_maxPriorityFeePerGas', [])),
    "eth_maxPriorityFeePerGas is anvil's",
  );

  // Deployment: viem fills nonce, gas and fees through the gateway, signs locally, sends it raw.
  const deployHash = await wallet.deployContract({ abi: [], bytecode: DEPLOY_BYTECODE });
  const deployed = await client.waitForTransactionReceipt({ hash: deployHash });
  t.equal(deployed.status, 'success', 'the deployment succeeded');
  const address = deployed.contractAddress!;
  t.match(address, /^0x[0-9a-fA-F]{40}$/);
  const onNode = await directResult<Json>(node.url, 'eth_getTransactionReceipt', [deployHash]);
  t.equal(onNode.contractAddress, address.toLowerCase(), 'anvil itself holds the deployment');

  t.equal(await client.getCode({ address }), RUNTIME_BYTECODE, 'eth_getCode returns the runtime the constructor returned');
  t.same(await client.call({ to: address, data: '0x1234' }), { data: CALL_RESULT }, 'eth_call returns the constant');
  t.equal(
    await client.estimateGas({ account: DEV_ADDRESS, to: address, data: '0xdeadbeef' }),
    BigInt(await directResult<string>(node.url, 'eth_estimateGas', [{ from: DEV_ADDRESS, to: address, data: '0xdeadbeef' }, 'latest'])),
    "eth_estimateGas is anvil's estimate",
  );

  // Filters made before the transaction, polled after the block that holds it.
  const logFilter = await client.createEventFilter({ address, fromBlock: 0n });
  t.match(logFilter.id, /^0x[0-9a-f]+$/, 'eth_newFilter gave a filter id');
  const pendingFilter = await client.createPendingTransactionFilter();
  t.match(pendingFilter.id, /^0x[0-9a-f]+$/, 'eth_newPendingTransactionFilter gave a filter id');
  t.same(await client.getFilterChanges({ filter: logFilter }), [], 'no log yet');

  const callHash = await wallet.sendTransaction({ to: address, data: '0xdeadbeef' });
  const receipt = await client.waitForTransactionReceipt({ hash: callHash });
  t.equal(receipt.status, 'success');
  t.equal(receipt.logs.length, 1, 'the call emitted one log');
  t.match(receipt.logs[0], { address: address.toLowerCase(), topics: [ECHO_TOPIC], data: '0xdeadbeef', transactionHash: callHash });
  t.ok(receipt.blockNumber > deployed.blockNumber, 'the call is in a new block');

  const changes = await client.getFilterChanges({ filter: logFilter });
  t.equal(changes.length, 1, 'eth_getFilterChanges reports the new log');
  t.match(changes[0], { topics: [ECHO_TOPIC], data: '0xdeadbeef', transactionHash: callHash, blockHash: receipt.blockHash });
  t.same(await client.getFilterChanges({ filter: logFilter }), [], 'changes are only those since the last poll');
  t.same(await client.getFilterChanges({ filter: pendingFilter }), [callHash], 'the pending filter saw exactly the call');

  const filterLogs = await client.getFilterLogs({ filter: logFilter });
  const getLogs = await client.getLogs({ address, fromBlock: 0n });
  const nodeLogs = await directResult<Json[]>(node.url, 'eth_getLogs', [{ address, fromBlock: '0x0' }]);
  t.equal(nodeLogs.length, 1, 'anvil holds one log of the contract');
  for (const [what, logs] of [
    ['eth_getFilterLogs', filterLogs],
    ['eth_getLogs', getLogs],
  ] as const) {
    t.equal(logs.length, 1, `${what}: one log`);
    t.match(
      logs[0],
      {
        transactionHash: nodeLogs[0]!.transactionHash,
        blockHash: nodeLogs[0]!.blockHash,
        data: nodeLogs[0]!.data,
        topics: nodeLogs[0]!.topics,
      },
      `${what}: anvil's log`,
    );
  }

  const block = await client.getBlock({ blockHash: receipt.blockHash });
  t.equal(block.hash, receipt.blockHash, 'eth_getBlockByHash');
  t.equal(block.number, receipt.blockNumber);
  t.same(block.transactions, [callHash], 'transaction hashes by default');
  const full = await client.getBlock({ blockHash: receipt.blockHash, includeTransactions: true });
  t.match(full.transactions, [{ hash: callHash, to: address.toLowerCase(), input: '0xdeadbeef' }], 'full transactions on request');

  t.equal(await client.getTransactionCount({ address: DEV_ADDRESS }), 2, 'eth_getTransactionCount: deploy and call');
  t.equal(BigInt(await directResult<string>(node.url, 'eth_getTransactionCount', [DEV_ADDRESS, 'latest'])), 2n, 'anvil agrees');

  const history = await client.getFeeHistory({ blockCount: 3, rewardPercentiles: [25, 75] });
  const nodeHistory = await directResult<{ oldestBlock: string; baseFeePerGas: string[]; reward: string[][]; gasUsedRatio: number[] }>(
    node.url,
    'eth_feeHistory',
    ['0x3', 'latest', [25, 75]],
  );
  t.same(
    {
      oldestBlock: history.oldestBlock,
      baseFeePerGas: history.baseFeePerGas,
      gasUsedRatio: history.gasUsedRatio,
      reward: history.reward,
    },
    {
      oldestBlock: BigInt(nodeHistory.oldestBlock),
      baseFeePerGas: nodeHistory.baseFeePerGas.map(BigInt),
      gasUsedRatio: nodeHistory.gasUsedRatio,
      reward: nodeHistory.reward.map((r) => r.map(BigInt)),
    },
    "eth_feeHistory is anvil's history",
  );
  t.equal(history.reward?.length, 3, 'one reward row per block');

  t.equal(await client.uninstallFilter({ filter: logFilter }), true, 'eth_uninstallFilter removes it');
  t.equal(await client.uninstallFilter({ filter: logFilter }), false, 'and it is gone from the gateway');
  const gone = await client.getFilterChanges({ filter: logFilter }).then(
    () => 'answered',
    (e: { details?: string }) => e.details,
  );
  t.equal(gone, 'filter not found', 'the gateway answers a removed filter as nodes do');

  const subscribe = await client.request({ method: 'eth_subscribe', params: ['newHeads'] } as never).then(
    () => undefined,
    (e: { code?: number; details?: string }) => ({ code: e.code, details: e.details }),
  );
  t.same(subscribe, { code: -32601, details: SUBSCRIBE_OVER_HTTP }, 'eth_subscribe over HTTP: the client is told to use a WebSocket');

  const used = methodsIn(bodies);
  t.same(
    SPEC_METHODS.filter((m) => !used.includes(m)),
    [],
    'viem called every one of the 19 methods through the gateway',
  );
  t.equal(used.filter((m) => m === 'eth_sendRawTransaction').length, 2, 'both transactions went as eth_sendRawTransaction');
  t.notOk(used.includes('eth_sendTransaction'), 'never eth_sendTransaction');
  t.notOk(bodies.some(Array.isArray), 'this client sent no batches');
});

t.test('viem with batch: true: concurrent calls go as one JSON-RPC batch and come back matched', async (t) => {
  const { node, url } = await setup(t);
  const bodies: unknown[] = [];
  const answers: string[] = [];
  const client = createPublicClient({
    chain: anvil,
    transport: http(url, {
      batch: true,
      onFetchRequest: (_request, init) => {
        bodies.push(JSON.parse(String(init.body)));
      },
      onFetchResponse: async (response) => {
        answers.push(await response.clone().text());
      },
    }),
  });
  const results = await Promise.allSettled([
    client.getBlockNumber(),
    client.getChainId(),
    client.getBalance({ address: DEV_ADDRESS }),
    client.getTransactionCount({ address: DEV_ADDRESS }),
    client.request({ method: 'web3_sha3', params: [HELLO_WORLD] }),
    client.request({ method: 'net_listening' }),
    client.request({ method: 'admin_peers' } as never),
    client.getCode({ address: DEV_ADDRESS }),
  ]);
  t.equal(bodies.length, 1, 'one HTTP request');
  t.ok(Array.isArray(bodies[0]) && (bodies[0] as unknown[]).length === 8, 'holding a batch of the 8 calls');
  t.ok(answers[0]!.startsWith('['), 'answered with a JSON array');
  const values = results.map((r) => (r.status === 'fulfilled' ? r.value : { code: (r.reason as { code?: number }).code }));
  t.same(
    values,
    [
      BigInt(await directResult<string>(node.url, 'eth_blockNumber', [])),
      31337,
      BigInt(await directResult<string>(node.url, 'eth_getBalance', [DEV_ADDRESS, 'latest'])),
      0,
      HELLO_WORLD_KECCAK,
      true,
      { code: -32601 },
      undefined,
    ],
    'each call got its own answer; the refused one fails alone',
  );
});

t.test('ethers v6 JsonRpcProvider (batching by default) and a Wallet through the gateway', async (t) => {
  const { node, url } = await setup(t);
  const bodies: unknown[] = [];
  const request = new FetchRequest(url);
  request.preflightFunc = async (req) => {
    bodies.push(JSON.parse(Buffer.from(req.body!).toString()));
    return req;
  };
  const provider = new JsonRpcProvider(request, undefined, { pollingInterval: 50 });
  t.teardown(() => provider.destroy());
  // ethers reuses an identical call's answer for 250 ms, so on an automining devnet a transaction sent
  // right after another would be given the same 'pending' nonce; a dApp sending back to back keeps
  // its own count, as NonceManager does.
  const wallet = new NonceManager(new Wallet(DEV_KEY, provider));

  // Issued together, so ethers sends them as one batch.
  const [network, blockNumber, listening, sha3, tip, count] = await Promise.all([
    provider.getNetwork(),
    provider.getBlockNumber(),
    provider.send('net_listening', []),
    provider.send('web3_sha3', [HELLO_WORLD]),
    provider.send('eth_maxPriorityFeePerGas', []),
    provider.getTransactionCount(DEV_ADDRESS),
  ]);
  t.equal(network.chainId, 31337n, 'eth_chainId');
  t.equal(blockNumber, Number(await directResult<string>(node.url, 'eth_blockNumber', [])), 'eth_blockNumber');
  t.equal(listening, true, 'net_listening');
  t.equal(sha3, HELLO_WORLD_KECCAK, 'web3_sha3');
  t.equal(tip, await directResult<string>(node.url, 'eth_maxPriorityFeePerGas', []), 'eth_maxPriorityFeePerGas');
  t.equal(count, 0, 'eth_getTransactionCount');
  const batches = bodies.filter(Array.isArray) as unknown[][];
  t.ok(
    batches.some((b) => b.length >= 4),
    'ethers sent the concurrent calls as a batch',
  );

  const factory = new ContractFactory([], DEPLOY_BYTECODE, wallet);
  const contract = await factory.deploy();
  await contract.waitForDeployment();
  const address = await contract.getAddress();
  t.equal(await provider.getCode(address), RUNTIME_BYTECODE, 'eth_getCode');
  t.equal(await directResult<string>(node.url, 'eth_getCode', [address, 'latest']), RUNTIME_BYTECODE, 'anvil holds the same code');
  t.equal(await provider.call({ to: address, data: '0x' }), CALL_RESULT, 'eth_call');
  t.equal(
    await provider.estimateGas({ from: DEV_ADDRESS, to: address, data: '0xcafe' }),
    BigInt(await directResult<string>(node.url, 'eth_estimateGas', [{ from: DEV_ADDRESS, to: address, data: '0xcafe' }, 'latest'])),
    'eth_estimateGas',
  );

  const filterId = (await provider.send('eth_newFilter', [{ address, topics: [ECHO_TOPIC] }])) as string;
  const tx = await wallet.sendTransaction({ to: address, data: '0xcafe' });
  const receipt = (await tx.wait())!;
  t.equal(receipt.status, 1, 'the call succeeded');
  t.equal(receipt.logs.length, 1);
  t.match(receipt.logs[0], { address, topics: [ECHO_TOPIC], data: '0xcafe' }, 'eth_getTransactionReceipt with the log');

  const [logs, changes, filterLogs, block] = await Promise.all([
    provider.getLogs({ address, topics: [ECHO_TOPIC], fromBlock: 0 }),
    provider.send('eth_getFilterChanges', [filterId]) as Promise<Json[]>,
    provider.send('eth_getFilterLogs', [filterId]) as Promise<Json[]>,
    provider.getBlock(receipt.blockHash),
  ]);
  t.equal(logs.length, 1, 'eth_getLogs');
  t.match(logs[0], { transactionHash: tx.hash, blockHash: receipt.blockHash, data: '0xcafe', topics: [ECHO_TOPIC] });
  t.equal(changes.length, 1, 'eth_getFilterChanges after the new block');
  t.match(changes[0], { transactionHash: tx.hash, data: '0xcafe' });
  t.same(filterLogs, changes, 'eth_getFilterLogs: the same one log');
  t.equal(block?.hash, receipt.blockHash, 'eth_getBlockByHash');
  t.same(block?.transactions, [tx.hash]);

  const history = await provider.send('eth_feeHistory', ['0x2', 'latest', [25, 75]]);
  t.same(history, await directResult(node.url, 'eth_feeHistory', ['0x2', 'latest', [25, 75]]), 'eth_feeHistory');
  const pendingFilter = (await provider.send('eth_newPendingTransactionFilter', [])) as string;
  t.match(pendingFilter, /^0x[0-9a-f]+$/, 'eth_newPendingTransactionFilter');
  t.equal(await provider.send('eth_uninstallFilter', [filterId]), true, 'eth_uninstallFilter');
  t.equal(await provider.send('eth_uninstallFilter', [filterId]), false, 'and a second uninstall finds nothing');

  const subscribe = await provider.send('eth_subscribe', ['newHeads']).then(
    () => undefined,
    (e: { error?: unknown }) => e.error,
  );
  t.same(subscribe, { code: -32601, message: SUBSCRIBE_OVER_HTTP }, 'eth_subscribe over HTTP');

  const used = methodsIn(bodies);
  t.equal(used.filter((m) => m === 'eth_sendRawTransaction').length, 2, 'deploy and call went as eth_sendRawTransaction');
  t.notOk(used.includes('eth_sendTransaction'));
});

t.test("the spec's sample forms anvil refuses work through the gateway", async (t) => {
  const { node, url } = await setup(t);
  // One log on the chain, made by viem through the gateway.
  const account = privateKeyToAccount(DEV_KEY);
  const client = createPublicClient({ chain: anvil, transport: http(url), pollingInterval: 50 });
  const wallet = createWalletClient({ account, chain: anvil, transport: http(url) });
  const deployed = await client.waitForTransactionReceipt({ hash: await wallet.deployContract({ abi: [], bytecode: DEPLOY_BYTECODE }) });
  const address = deployed.contractAddress!;
  const callHash: Hex = await wallet.sendTransaction({ to: address, data: '0x01' });
  const receipt = await client.waitForTransactionReceipt({ hash: callHash });

  // topics as one string
  const stringTopics = { fromBlock: '0x0', topics: ECHO_TOPIC };
  const refused = await rpc(node.url, 'eth_getLogs', [stringTopics]);
  t.same(
    refused.json,
    {
      jsonrpc: '2.0',
      id: 1,
      error: { code: -32602, message: `invalid type: string "${ECHO_TOPIC}", expected a sequence` },
    },
    'anvil itself refuses topics as a string',
  );
  const viaGateway = await rpc(url, 'eth_getLogs', [stringTopics]);
  const reference = await rpc(node.url, 'eth_getLogs', [{ fromBlock: '0x0', topics: [ECHO_TOPIC] }]);
  t.equal(viaGateway.status, 200);
  t.equal(viaGateway.text, reference.text, 'the gateway answers it as topics [topic]');
  t.match(viaGateway.json, { result: [{ transactionHash: callHash, topics: [ECHO_TOPIC], data: '0x01' }] });

  // rewardPercentiles as a string holding a list
  const anvilPercentiles = await rpc(node.url, 'eth_feeHistory', ['0x2', 'latest', '[25, 75]']);
  t.same(
    anvilPercentiles.json,
    {
      jsonrpc: '2.0',
      id: 1,
      error: { code: -32602, message: 'invalid type: string "[25, 75]", expected a sequence' },
    },
    'anvil itself refuses rewardPercentiles as a string',
  );
  const fee = await rpc(url, 'eth_feeHistory', ['0x2', 'latest', '[25, 75]']);
  t.equal(fee.text, (await rpc(node.url, 'eth_feeHistory', ['0x2', 'latest', [25, 75]])).text, 'the gateway answers it as [25, 75]');
  t.match(fee.json, {
    result: {
      reward: [
        [/^0x/, /^0x/],
        [/^0x/, /^0x/],
      ],
    },
  });

  // eth_getBlockByHash with the hash alone
  const hashOnly = await rpc(node.url, 'eth_getBlockByHash', [receipt.blockHash]);
  t.same(
    hashOnly.json,
    {
      jsonrpc: '2.0',
      id: 1,
      error: { code: -32602, message: 'invalid length 1, expected tuple variant EthRequest::EthGetBlockByHash with 2 elements' },
    },
    'anvil itself refuses [hash] alone',
  );
  const block = await rpc(url, 'eth_getBlockByHash', [receipt.blockHash]);
  t.equal(block.text, (await rpc(node.url, 'eth_getBlockByHash', [receipt.blockHash, false])).text, 'the gateway fills false');
  t.match(block.json, { result: { hash: receipt.blockHash, transactions: [callHash] } }, 'hashes, not full transactions');

  // eth_getTransactionCount with the address alone
  const addressOnly = await rpc(node.url, 'eth_getTransactionCount', [DEV_ADDRESS]);
  t.same(
    addressOnly.json,
    {
      jsonrpc: '2.0',
      id: 1,
      error: { code: -32602, message: 'invalid length 1, expected tuple variant EthRequest::EthGetTransactionCount with 2 elements' },
    },
    'anvil itself refuses [address] alone',
  );
  const nonce = await rpc(url, 'eth_getTransactionCount', [DEV_ADDRESS]);
  t.equal(nonce.text, (await rpc(node.url, 'eth_getTransactionCount', [DEV_ADDRESS, 'latest'])).text, 'the gateway fills latest');
  t.same(nonce.json, { jsonrpc: '2.0', id: 1, result: '0x2' }, 'deploy and call');

  // eth_subscribe over plain HTTP, byte for byte
  const sub = await post(url, '{"jsonrpc":"2.0","id":7,"method":"eth_subscribe","params":["newHeads"]}');
  t.equal(sub.status, 200);
  t.equal(sub.text, `{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"${SUBSCRIBE_OVER_HTTP}"}}`);

  // web3_sha3 against viem's own keccak, besides the fixed vector
  const data = '0x00ff10';
  t.equal((await rpc(url, 'web3_sha3', [data])).text, `{"jsonrpc":"2.0","id":1,"result":"${keccak256(data)}"}`);
});
