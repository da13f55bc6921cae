import t, { type Test } from 'tap';
import { JsonRpcProvider } from 'ethers';
import { formatTransactionRequest } from 'viem';
import {
  ALLOWED_METHODS,
  checkCall,
  DEFAULT_RU,
  DEFAULT_RU_OTHER,
  isAllowedMethod,
  methodRow,
  type CallCheck,
  type CallContext,
} from '../../src/jsonrpc/methods.js';
import { SPEC_METHODS } from '../support/spec-methods.js';

const HTTP: CallContext = { chainId: 31337, transport: 'http' };
const WS: CallContext = { chainId: 31337, transport: 'ws' };
const A1: `0x${string}` = `0x${'11'.repeat(20)}`;
const A2: `0x${string}` = `0x${'2A'.repeat(20)}`;
const H1: `0x${string}` = `0x${'ab'.repeat(32)}`;
const H2: `0x${string}` = `0x${'00'.repeat(31)}01`;

const ethers = new JsonRpcProvider('http://127.0.0.1:1', 1, { staticNetwork: true });
t.teardown(() => ethers.destroy());

function forwarded(t: Tap, method: string, params: unknown[], ctx = HTTP): unknown[] {
  const result = checkCall(method, params, ctx);
  t.equal(
    result.kind,
    'forward',
    `${method} ${JSON.stringify(params)} is forwarded${result.kind === 'error' ? `, not: ${result.message}` : ''}`,
  );
  return result.kind === 'forward' ? result.params : [];
}

function refused(t: Tap, method: string, params: unknown[], message: string | RegExp, ctx = HTTP): void {
  const result = checkCall(method, params, ctx);
  t.match(result, { kind: 'error', error: 'invalid_params', message }, `${method} ${JSON.stringify(params)} is refused`);
}

type Tap = Test;

t.test('allowlist and RU table', async (t) => {
  const spec = SPEC_METHODS;
  const more = [
    'eth_uninstallFilter',
    'eth_unsubscribe',
    'eth_newBlockFilter',
    'eth_getBlockByNumber',
    'eth_getBalance',
    'eth_gasPrice',
    'eth_getTransactionByHash',
    'eth_getStorageAt',
    'eth_syncing',
    'net_version',
    'web3_clientVersion',
    'eth_getBlockReceipts',
    'eth_getBlockTransactionCountByNumber',
    'eth_getBlockTransactionCountByHash',
    'eth_getTransactionByBlockHashAndIndex',
    'eth_getTransactionByBlockNumberAndIndex',
    'eth_getUncleCountByBlockHash',
    'eth_getUncleCountByBlockNumber',
    'eth_blobBaseFee',
  ];
  for (const m of [...spec, ...more]) t.ok(isAllowedMethod(m), m);
  t.same(
    { ...DEFAULT_RU },
    {
      eth_blockNumber: 10,
      eth_chainId: 5,
      eth_getLogs: 50,
      eth_call: 20,
      eth_estimateGas: 20,
      eth_getTransactionCount: 15,
      eth_getCode: 15,
      eth_feeHistory: 15,
      eth_getBlockByHash: 20,
      eth_sendRawTransaction: 200,
      chaingate_getTransactionStatus: 0,
      eth_getTransactionReceipt: 15,
      web3_sha3: 15,
      eth_newFilter: 15,
      eth_newPendingTransactionFilter: 15,
      eth_getFilterChanges: 20,
      eth_getFilterLogs: 50,
      eth_maxPriorityFeePerGas: 10,
      net_listening: 5,
      eth_subscribe: 10,
      eth_getProof: 20,
      eth_getStorageValues: 20,
      eth_createAccessList: 20,
      eth_fillTransaction: 20,
      eth_simulateV1: 100,
      eth_getBlockAccessList: 20,
      eth_baseFee: 10,
      eth_accounts: 5,
      eth_mining: 5,
      eth_hashrate: 5,
      debug_traceTransaction: 200,
      debug_traceCall: 200,
      debug_traceBlockByNumber: 1000,
      debug_traceBlockByHash: 1000,
      trace_transaction: 100,
      trace_call: 100,
      trace_block: 500,
      trace_filter: 500,
      trace_replayTransaction: 200,
      trace_replayBlockTransactions: 1000,
      txpool_inspect: 50,
      txpool_content: 100,
      txpool_contentFrom: 20,
    },
  );
  t.equal(DEFAULT_RU_OTHER, 15);
  t.equal(DEFAULT_RU.toString, undefined, 'no prototype members');
  t.ok(Object.isFrozen(DEFAULT_RU));
  // Methods that do not exist here; node-local ones (eth_sign, admin_*, ...) have their own refusal.
  const refusedMethods = [
    'debug_setHead',
    'debug_getRawBlock',
    'txpool_clear',
    'net_peerCount',
    'anvil_setBalance',
    'hardhat_impersonateAccount',
    'evm_mine',
    'ETH_SIGN',
    'Admin_peers',
    'ETH_BLOCKNUMBER',
    'eth_blocknumber',
    'constructor',
    '__proto__',
    'toString',
    '',
  ];
  for (const m of refusedMethods) {
    t.notOk(isAllowedMethod(m), m);
    const result = checkCall(m, [], WS);
    t.match(result, { kind: 'error', error: 'method_not_found', message: /^Method not found: / }, m);
    if (result.kind === 'error') t.ok(result.message.includes(m), 'the message names the method');
  }
  const long = checkCall('x'.repeat(5000), [], HTTP);
  t.ok(long.kind === 'error' && long.message.length < 200, 'a long method name is clipped in the message');
});

t.test("the rows' traits: which methods are not safe to repeat, not shared, filter calls, the connection's", async (t) => {
  const rows = ALLOWED_METHODS.map((m) => methodRow(m)!);
  const named = (has: (row: (typeof rows)[number]) => boolean): string[] =>
    rows
      .filter(has)
      .map((r) => r.name)
      .sort();
  const filterChanges = [
    'eth_newFilter',
    'eth_newBlockFilter',
    'eth_newPendingTransactionFilter',
    'eth_getFilterChanges',
    'eth_uninstallFilter',
  ];
  t.same(
    named((r) => !r.repeatable),
    ['eth_sendRawTransaction', ...filterChanges].sort(),
  );
  t.same(
    named((r) => !r.shareable),
    ['eth_sendRawTransaction', 'eth_getFilterLogs', 'eth_subscribe', 'eth_unsubscribe', ...filterChanges].sort(),
  );
  t.same(
    named((r) => r.filter),
    ['chaingate_getTransactionStatus', 'eth_getFilterLogs', ...filterChanges].sort(),
  );
  t.same(
    named((r) => r.wsLocal),
    ['eth_subscribe', 'eth_unsubscribe'],
  );
  t.same(
    named((r) => r.wsLocal),
    named((r) => r.wsOnly),
    'the methods only a connection takes are the ones it answers',
  );
  t.same(
    rows.filter((r) => r.stateBlockAt !== null).map((r) => [r.name, r.stateBlockAt]),
    [
      ['eth_call', 1],
      ['eth_estimateGas', 1],
      ['eth_getTransactionCount', 1],
      ['eth_getCode', 1],
      ['eth_getBalance', 1],
      ['eth_getStorageAt', 2],
      ['eth_getProof', 2],
      ['eth_createAccessList', 1],
      ['eth_simulateV1', 1],
      ['debug_traceCall', 1],
      ['trace_call', 2],
    ],
    'state reads and where their block is',
  );
  t.equal(methodRow('eth_getlogs'), undefined, 'no row outside the catalogue (names are case-sensitive)');
});

t.test('answered locally', async (t) => {
  t.same(checkCall('eth_chainId', [], HTTP), { kind: 'local', resultJson: '"0x7a69"' });
  t.same(checkCall('eth_chainId', [], { chainId: 1, transport: 'ws' }), { kind: 'local', resultJson: '"0x1"' });
  refused(t, 'eth_chainId', [1], 'invalid params: eth_chainId takes no parameters');
  t.same(checkCall('web3_sha3', ['0x68656c6c6f20776f726c64'], HTTP), {
    kind: 'local',
    resultJson: '"0x47173285a8d7341e5e972fc677286384f802f8ef42a5ec5f03bbfa254cb01fad"',
  });
  t.same(
    checkCall('web3_sha3', ['0x'], HTTP),
    { kind: 'local', resultJson: '"0xc5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470"' },
    'empty input',
  );
  refused(t, 'web3_sha3', ['0x123'], `invalid params: 'data' must be 0x-prefixed hex bytes`);
  refused(t, 'web3_sha3', ['hello'], `'data' must be`);
  refused(t, 'web3_sha3', [], `invalid params: missing 'data'`);
});

t.test('no-parameter methods', async (t) => {
  for (const m of [
    'eth_blockNumber',
    'eth_maxPriorityFeePerGas',
    'net_listening',
    'eth_gasPrice',
    'eth_syncing',
    'net_version',
    'web3_clientVersion',
    'eth_blobBaseFee',
    'eth_newBlockFilter',
  ]) {
    const params: unknown[] = [];
    t.equal(forwarded(t, m, params), params, 'the same array when nothing changes');
    refused(t, m, ['latest'], `invalid params: ${m} takes no parameters`);
  }
  forwarded(t, 'eth_newPendingTransactionFilter', []);
  forwarded(t, 'eth_newPendingTransactionFilter', [true]);
  refused(t, 'eth_newPendingTransactionFilter', ['yes'], `'fullTransactions' must be a boolean`);
});

t.test('account state reads', async (t) => {
  for (const m of ['eth_getBalance', 'eth_getCode', 'eth_getTransactionCount']) {
    t.same(forwarded(t, m, [A1]), [A1, 'latest'], `${m}: omitted block becomes latest`);
    t.same(forwarded(t, m, [A2, null]), [A2, 'latest'], `${m}: null block becomes latest`);
    for (const block of [
      'latest',
      'earliest',
      'pending',
      'safe',
      'finalized',
      '0x0',
      '0x1b4',
      '0xABC',
      H1,
      { blockHash: H1 },
      { blockHash: H1, requireCanonical: true },
      { blockNumber: '0x10' },
      { blockNumber: 'latest' },
    ]) {
      const params = [A1, block];
      t.equal(forwarded(t, m, params), params, `${m} block ${JSON.stringify(block)}`);
    }
    refused(t, m, [], `invalid params: missing 'address'`);
    refused(t, m, [`0x${'1'.repeat(39)}`], `invalid params: 'address' must be a 20-byte 0x-prefixed hex address`);
    refused(t, m, ['1'.repeat(40)], `'address' must be a 20-byte`);
    refused(t, m, [`0x${'g'.repeat(40)}`], `'address' must be a 20-byte`);
    for (const block of [
      '0x01',
      '0x',
      'Latest',
      12,
      '0x' + '1'.repeat(65),
      {},
      { blockHash: H1, blockNumber: '0x1' },
      { blockHash: '0x12' },
      { blockHash: H1, requireCanonical: 'yes' },
      { blockNumber: '0x01' },
    ]) {
      refused(t, m, [A1, block], /'block(\.\w+)?' must/);
    }
    refused(t, m, [A1, 'latest', 1], `invalid params: ${m} takes at most 2 parameters, got 3`);
  }
  const ethersStorage = ethers.getRpcRequest({ method: 'getStorage', address: A1, position: 1n, blockTag: 'latest' });
  forwarded(t, 'eth_getStorageAt', ethersStorage!.args);
  t.same(forwarded(t, 'eth_getStorageAt', [A1, H2]), [A1, H2, 'latest'], 'a zero-padded 32-byte slot');
  refused(t, 'eth_getStorageAt', [A1], `missing 'slot'`);
  refused(t, 'eth_getStorageAt', [A1, '0x'], `'slot' must be 0x-prefixed hex of 1 to 64 digits`);
  refused(t, 'eth_getStorageAt', [A1, 5], `'slot' must be`);
});

t.test('eth_call and eth_estimateGas', async (t) => {
  const viemTx = formatTransactionRequest({
    from: A1,
    to: A2,
    data: '0x70a08231',
    value: 10n,
    gas: 21000n,
    maxFeePerGas: 3n,
    maxPriorityFeePerGas: 1n,
    nonce: 5,
    accessList: [{ address: A1, storageKeys: [H1, H2] }],
    type: 'eip1559',
  });
  const ethersTx = ethers.getRpcTransaction({
    from: A1,
    to: A2,
    data: '0x1234',
    value: 10n,
    gasLimit: 21000n,
    maxFeePerGas: 3n,
    type: 3,
    chainId: 1n,
    maxFeePerBlobGas: 7n,
    blobVersionedHashes: [H2],
  });
  const legacy = { to: A2, gasPrice: '0x3b9aca00', input: '0x', from: A1, to_extra: { anything: [1] } };
  for (const tx of [viemTx, ethersTx, legacy, { to: A2 }, { to: null, data: '0x6080' }, { input: '0x6080' }]) {
    t.same(forwarded(t, 'eth_call', [tx]), [tx, 'latest'], 'eth_call: omitted block becomes latest');
    t.same(forwarded(t, 'eth_estimateGas', [tx]), [tx, 'latest']);
  }
  const override = { [A2]: { balance: '0x1', code: '0x00', stateDiff: { [H1]: H2 } } };
  const params = [{ to: A2, data: '0x' }, { blockHash: H1 }, override];
  t.equal(forwarded(t, 'eth_call', params), params, 'state override and EIP-1898 block');
  t.same(forwarded(t, 'eth_call', [{ to: A2 }, null, override]), [{ to: A2 }, 'latest', override]);
  forwarded(t, 'eth_call', [{ to: A2 }, 'latest', override, { time: '0x1' }]);
  forwarded(t, 'eth_estimateGas', [{}], WS);
  forwarded(t, 'eth_estimateGas', [{ from: A1, value: '0x0' }, 'pending', {}]);

  refused(t, 'eth_call', [], `invalid params: missing 'transaction'`);
  refused(t, 'eth_call', [{}], `invalid params: missing 'transaction.to'`);
  refused(t, 'eth_call', [{ to: null, from: A1 }], `missing 'transaction.to'`);
  refused(t, 'eth_call', ['0x1234'], `'transaction' must be a transaction call object`);
  refused(t, 'eth_call', [[A2]], `'transaction' must be`);
  refused(t, 'eth_call', [{ to: '0x12' }], `invalid params: 'transaction.to' must be a 20-byte 0x-prefixed hex address`);
  refused(t, 'eth_call', [{ to: A2, from: 7 }], `'transaction.from' must be a 20-byte`);
  for (const field of [
    'gas',
    'gasPrice',
    'maxFeePerGas',
    'maxPriorityFeePerGas',
    'maxFeePerBlobGas',
    'value',
    'nonce',
    'type',
    'chainId',
  ]) {
    refused(t, 'eth_estimateGas', [{ to: A2, [field]: '0x01' }], `'transaction.${field}' must be a 0x-prefixed hex quantity`);
    refused(t, 'eth_call', [{ to: A2, [field]: 100 }], `'transaction.${field}' must be`);
  }
  refused(t, 'eth_call', [{ to: A2, data: '0x123' }], `'transaction.data' must be 0x-prefixed hex bytes`);
  refused(t, 'eth_call', [{ to: A2, input: 'abcd' }], `'transaction.input' must be`);
  refused(t, 'eth_call', [{ to: A2, accessList: {} }], `'transaction.accessList' must be an array`);
  refused(t, 'eth_call', [{ to: A2, accessList: [{ address: '0x1', storageKeys: [] }] }], `'transaction.accessList[0].address' must be`);
  refused(
    t,
    'eth_call',
    [
      {
        to: A2,
        accessList: [
          { address: A1, storageKeys: [H1] },
          { address: A1, storageKeys: ['0x1'] },
        ],
      },
    ],
    `'transaction.accessList[1].storageKeys[0]' must be a 32-byte`,
  );
  refused(t, 'eth_call', [{ to: A2, blobVersionedHashes: [H1, 'x'] }], `'transaction.blobVersionedHashes[1]' must be a 32-byte`);
  refused(t, 'eth_call', [{ to: A2 }, 'newest'], `'block' must be`);
  refused(t, 'eth_call', [{ to: A2 }, 'latest', 'override'], `'stateOverride' must be an object`);
  refused(t, 'eth_call', [{ to: A2 }, 'latest', {}, {}, {}], 'eth_call takes at most 4 parameters, got 5');
  refused(t, 'eth_estimateGas', [{}, 'latest', {}, {}], 'eth_estimateGas takes at most 3 parameters, got 4');
});

t.test('log filters', async (t) => {
  const ethersFilter = ethers.getRpcRequest({
    method: 'getLogs',
    filter: { address: [A1, A2], topics: [null, [H1, null] as string[], H2], fromBlock: '0x1', toBlock: 'latest' },
  });
  const filters: unknown[] = [
    ethersFilter!.args[0],
    {},
    { address: A1 },
    { address: [] },
    { blockHash: H1, address: A2, topics: [H1] },
    { fromBlock: 'earliest', toBlock: 'finalized' },
    { topics: [] },
    { topics: [[]] },
    { topics: [null, null, null, [null, H2]] },
    { fromBlock: null, toBlock: null, blockHash: H1 },
    { topics: [H1], extra: true },
  ];
  for (const m of ['eth_getLogs', 'eth_newFilter']) {
    for (const filter of filters) {
      const params = [filter];
      t.equal(forwarded(t, m, params), params, `${m} ${JSON.stringify(filter)}`);
    }
    t.same(forwarded(t, m, [{ address: A1, topics: H1 }]), [{ address: A1, topics: [H1] }], 'sample form: topics as one string');
    refused(t, m, [{ topics: 'abc' }], `invalid params: 'filter.topics[0]' must be null, a 32-byte hex topic`);
    refused(t, m, [], `missing 'filter'`);
    refused(t, m, ['latest'], `'filter' must be a filter object`);
    refused(t, m, [{ fromBlock: '0x01' }], `'filter.fromBlock' must be a hex block number`);
    refused(t, m, [{ toBlock: { blockHash: H1 } }], `'filter.toBlock' must be`);
    refused(
      t,
      m,
      [{ blockHash: H1, fromBlock: '0x1' }],
      `'filter.blockHash' cannot be combined with 'filter.fromBlock' or 'filter.toBlock'`,
    );
    refused(t, m, [{ blockHash: '0x1' }], `'filter.blockHash' must be a 32-byte`);
    refused(t, m, [{ address: '0x1' }], `'filter.address' must be a 20-byte hex address or an array of them`);
    refused(t, m, [{ address: [A1, 5] }], `'filter.address'`);
    refused(t, m, [{ topics: { 0: H1 } }], `'filter.topics' must be an array`);
    refused(t, m, [{ topics: [H1, [H1, [H2]]] }], `'filter.topics[1]'`);
    refused(t, m, [{ topics: [H1, '0x12'] }], `'filter.topics[1]'`);
    refused(t, m, [{}, {}], `${m} takes at most 1 parameter, got 2`);
  }
});

t.test('eth_feeHistory', async (t) => {
  for (const params of [
    ['0x4', 'latest', [25, 75]],
    [4, 'pending'],
    ['0x0', '0x10', []],
    [1024, 'latest', [0, 0, 50.5, 100]],
  ]) {
    t.equal(forwarded(t, 'eth_feeHistory', params), params, JSON.stringify(params));
  }
  t.same(forwarded(t, 'eth_feeHistory', ['0x4', 'latest', '[25, 75]']), ['0x4', 'latest', [25, 75]], 'sample form: a bracketed string');
  t.same(forwarded(t, 'eth_feeHistory', [4, 'latest', '[]']), [4, 'latest', []]);
  for (const bad of ['25, 75', '[25, 75', '[a]', '["25"]', '{"a":1}', '30']) {
    refused(t, 'eth_feeHistory', ['0x4', 'latest', bad], `invalid params: 'rewardPercentiles' must be an array of numbers from 0 to 100`);
  }
  refused(t, 'eth_feeHistory', ['0x4', 'latest', [75, 25]], `'rewardPercentiles' must be`);
  refused(t, 'eth_feeHistory', ['0x4', 'latest', [-1]], `'rewardPercentiles' must be`);
  refused(t, 'eth_feeHistory', ['0x4', 'latest', [101]], `'rewardPercentiles' must be`);
  refused(t, 'eth_feeHistory', ['0x4'], `invalid params: missing 'newestBlock'`);
  refused(t, 'eth_feeHistory', [], `missing 'blockCount'`);
  for (const count of ['4', '0x04', -1, 1.5, '0x']) {
    refused(t, 'eth_feeHistory', [count, 'latest'], `invalid params: 'blockCount' must be a hex quantity or a non-negative integer`);
  }
  refused(t, 'eth_feeHistory', ['0x4', { blockHash: H1 }], `'newestBlock' must be a hex block number`);
  refused(t, 'eth_feeHistory', ['0x4', 'latest', [], 1], 'takes at most 3 parameters');
});

t.test('blocks, transactions and receipts', async (t) => {
  t.same(forwarded(t, 'eth_getBlockByHash', [H1]), [H1, false], 'omitted fullTransactions becomes false');
  t.same(forwarded(t, 'eth_getBlockByNumber', ['latest']), ['latest', false]);
  forwarded(t, 'eth_getBlockByHash', [H1, true]);
  forwarded(t, 'eth_getBlockByNumber', ['0x1b4', false]);
  refused(t, 'eth_getBlockByHash', [H1, 'true'], `invalid params: 'fullTransactions' must be a boolean`);
  refused(t, 'eth_getBlockByHash', ['0x1234'], `invalid params: 'blockHash' must be a 32-byte 0x-prefixed hex hash`);
  refused(t, 'eth_getBlockByHash', [], `missing 'blockHash'`);
  refused(t, 'eth_getBlockByNumber', [H1.slice(0, 10) + 'zz'], `'block' must be`);
  refused(t, 'eth_getBlockByNumber', [], `missing 'block'`);
  for (const m of ['eth_getTransactionReceipt', 'eth_getTransactionByHash']) {
    forwarded(t, m, [H2]);
    refused(t, m, [H1 + '00'], `invalid params: 'transactionHash' must be a 32-byte`);
    refused(t, m, [], `missing 'transactionHash'`);
  }
  forwarded(t, 'eth_sendRawTransaction', ['0x02f86b0180843b9aca00']);
  refused(t, 'eth_sendRawTransaction', ['0x02f'], `invalid params: 'signedTransaction' must be 0x-prefixed hex bytes`);
  refused(t, 'eth_sendRawTransaction', [], `missing 'signedTransaction'`);
  for (const block of ['latest', '0x10', H1, { blockHash: H1 }]) forwarded(t, 'eth_getBlockReceipts', [block]);
  refused(t, 'eth_getBlockReceipts', ['0x010'], `'block' must be`);
  forwarded(t, 'eth_getBlockTransactionCountByNumber', ['safe']);
  forwarded(t, 'eth_getUncleCountByBlockNumber', ['0x0']);
  forwarded(t, 'eth_getBlockTransactionCountByHash', [H1]);
  forwarded(t, 'eth_getUncleCountByBlockHash', [H1]);
  refused(t, 'eth_getUncleCountByBlockHash', ['latest'], `'blockHash' must be`);
  forwarded(t, 'eth_getTransactionByBlockHashAndIndex', [H1, '0x0']);
  forwarded(t, 'eth_getTransactionByBlockNumberAndIndex', ['latest', '0xa']);
  refused(t, 'eth_getTransactionByBlockNumberAndIndex', ['latest', '0x0a'], `'index' must be a 0x-prefixed hex quantity`);
  refused(t, 'eth_getTransactionByBlockHashAndIndex', [H1], `missing 'index'`);
});

t.test('filters by id', async (t) => {
  for (const m of ['eth_getFilterChanges', 'eth_getFilterLogs', 'eth_uninstallFilter']) {
    for (const id of ['0x1', '0x0000000000000000000000000000000a', `0x${'f'.repeat(64)}`]) forwarded(t, m, [id]);
    for (const id of ['0x', '1', `0x${'f'.repeat(65)}`, 1, '0xzz']) {
      refused(t, m, [id], `invalid params: 'filterId' must be 0x-prefixed hex of 1 to 64 digits`);
    }
    refused(t, m, [], `missing 'filterId'`);
  }
});

t.test('subscriptions', async (t) => {
  for (const m of ['eth_subscribe', 'eth_unsubscribe']) {
    t.same(checkCall(m, ['newHeads'], HTTP), {
      kind: 'error',
      error: 'method_not_found',
      message: `${m} needs a WebSocket connection: open the same URL with wss:// (or ws://)`,
    });
  }
  forwarded(t, 'eth_subscribe', ['newHeads'], WS);
  forwarded(t, 'eth_subscribe', ['logs'], WS);
  forwarded(t, 'eth_subscribe', ['logs', { address: [A1], topics: [H1, null] }], WS);
  t.same(
    forwarded(t, 'eth_subscribe', ['logs', { address: A1, topics: H1 }], WS),
    ['logs', { address: A1, topics: [H1] }],
    'sample form: topics as one string',
  );
  forwarded(t, 'eth_subscribe', ['newHeads', { fromBlock: '0x10' }], WS);
  forwarded(t, 'eth_subscribe', ['newPendingTransactions'], WS);
  forwarded(t, 'eth_subscribe', ['newPendingTransactions', true], WS);
  forwarded(t, 'eth_subscribe', ['newFinalizedHeads'], WS);
  forwarded(t, 'eth_subscribe', ['newSafeHeads'], WS);
  forwarded(t, 'eth_subscribe', ['transactionStatus', `0x${'ab'.repeat(32)}`], WS);
  refused(t, 'eth_subscribe', ['transactionStatus'], /missing 'transactionHash'/, WS);
  refused(t, 'eth_subscribe', ['transactionStatus', '0x12'], /'transactionHash' must be/, WS);
  const bad: Array<[unknown[], string]> = [
    [[], `invalid params: missing 'subscription'`],
    [['syncingX'], `invalid params: 'subscription' must be one of newHeads, logs, newPendingTransactions`],
    [[1], `'subscription' must be one of`],
    [['newheads'], `'subscription' must be one of`],
    [['newHeads', {}, {}], `takes at most 2 parameters, got 3`],
    [['newHeads', { from: '0x1' }], `'resume' must be an object {"fromBlock": block number}`],
    [['newHeads', { fromBlock: 7 }], `'resume' must be an object {"fromBlock": block number}`],
    [['logs', { address: '0x1' }], `'filter.address' must be`],
    [['logs', 'x'], `'filter' must be a filter object`],
    [['logs', {}, {}], `takes at most 2 parameters, got 3`],
    [['newPendingTransactions', 'yes'], `'fullTransactions' must be a boolean`],
  ];
  for (const [params, message] of bad) refused(t, 'eth_subscribe', params, message, WS);
  forwarded(t, 'eth_unsubscribe', ['0x9cef478923ff08bf67fde6c64013158d'], WS);
  refused(t, 'eth_unsubscribe', ['abc'], `invalid params: 'subscriptionId' must be 0x-prefixed hex`, WS);
  refused(t, 'eth_unsubscribe', [], `missing 'subscriptionId'`, WS);
});

t.test('forwarded params are new arrays only when something changed', async (t) => {
  const params = [{ to: A2 }, 'latest'];
  const result: CallCheck = checkCall('eth_call', params, HTTP);
  t.equal(result.kind === 'forward' && result.params, params);
  const short = [{ to: A2 }];
  const filled = checkCall('eth_call', short, HTTP);
  t.not(filled.kind === 'forward' && filled.params, short);
  t.same(short, [{ to: A2 }], "the caller's array is not modified");
  const topics = [{ topics: H1 }];
  checkCall('eth_getLogs', topics, HTTP);
  t.same(topics, [{ topics: H1 }], "the caller's filter is not modified");
});
