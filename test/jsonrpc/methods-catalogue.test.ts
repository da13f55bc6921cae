/**
 * The parameter rules of the methods added with the tracing, txpool and newer execution-API families,
 * as one table: what real clients send is forwarded (with its default filled in), what is malformed is
 * refused naming the parameter. The node-local refusals and the gateway's own answers follow.
 */
import t from 'tap';
import { formatTransactionRequest } from 'viem';
import { checkCall, methodRow, type CallContext } from '../../src/jsonrpc/methods.js';

const HTTP: CallContext = { chainId: 31337, transport: 'http' };
const A1 = `0x${'11'.repeat(20)}`;
const A2 = `0x${'2A'.repeat(20)}`;
const H1 = `0x${'ab'.repeat(32)}`;
const H2 = `0x${'00'.repeat(31)}01`;

const viemTx = formatTransactionRequest({ from: A1 as `0x${string}`, to: A2 as `0x${string}`, data: '0x70a08231', value: 1n, gas: 21000n });

interface Row {
  method: string;
  /** Params forwarded unchanged. */
  good: unknown[][];
  /** Params forwarded with a default filled in: [sent, forwarded]. */
  filled?: Array<[unknown[], unknown[]]>;
  /** Params refused, and the message (after `invalid params: `) that names the parameter. */
  bad: Array<[unknown[], string]>;
}

const TRACE_CONFIGS: unknown[] = [
  { tracer: 'callTracer', tracerConfig: { onlyTopCall: true, withLog: true } },
  { tracer: 'prestateTracer', tracerConfig: { diffMode: true }, timeout: '10s' },
  { enableMemory: true, disableStack: false, disableStorage: true, enableReturnData: true, limit: 100 },
  { tracer: '{data: [], fault: function() {}, result: function() { return this.data; }}' },
  { reexec: 128, tracer: null, somethingNew: { a: 1 } },
  {},
];

const BAD_TRACE_CONFIG: Array<[unknown, string]> = [
  ['callTracer', `'traceConfig' must be a trace config object`],
  [[{ tracer: 'callTracer' }], `'traceConfig' must be a trace config object`],
  [{ tracer: 5 }, `'traceConfig.tracer' must be a string`],
  [{ tracerConfig: 'onlyTopCall' }, `'traceConfig.tracerConfig' must be an object`],
  [{ timeout: 10 }, `'traceConfig.timeout' must be a string`],
  [{ enableMemory: 'true' }, `'traceConfig.enableMemory' must be a boolean`],
  [{ limit: -1 }, `'traceConfig.limit' must be a non-negative integer`],
  [{ limit: '0x10' }, `'traceConfig.limit' must be a non-negative integer`],
  [{ reexec: 1.5 }, `'traceConfig.reexec' must be a non-negative integer`],
];

const ROWS: Row[] = [
  {
    method: 'eth_getProof',
    good: [
      [A1, [H1, H2], 'latest'],
      [A1, [], '0x10'],
      [A1, ['0x0', '0x01'], { blockHash: H1 }],
    ],
    filled: [
      [
        [A1, [H1]],
        [A1, [H1], 'latest'],
      ],
    ],
    bad: [
      [[], `missing 'address'`],
      [[A1], `missing 'storageKeys'`],
      [['0x12', []], `'address' must be a 20-byte 0x-prefixed hex address`],
      [[A1, H1], `'storageKeys' must be an array of 0x-prefixed hex storage slots`],
      [[A1, [H1, `${H1}00`]], `'storageKeys[1]' must be 0x-prefixed hex of 1 to 64 digits`],
      [[A1, [], 'newest'], `'block' must be`],
      [[A1, [], 'latest', 1], 'eth_getProof takes at most 3 parameters, got 4'],
    ],
  },
  {
    method: 'eth_getStorageValues',
    good: [
      [{ [A1]: ['0x0', H1], [A2]: [] }, 'latest'],
      [{}, '0x1'],
    ],
    filled: [[[{ [A1]: [H2] }], [{ [A1]: [H2] }, 'latest']]],
    bad: [
      [[], `missing 'requests'`],
      [[[A1]], `'requests' must be an object from addresses to arrays of storage slots`],
      [[{ '0x12': [] }], `'requests' keys must be 20-byte 0x-prefixed hex addresses, not "0x12"`],
      [[{ [A1]: '0x0' }], `'requests.${A1}' must be an array of 0x-prefixed hex storage slots`],
      [[{ [A1]: ['0x0', 'zz'] }], `'requests.${A1}[1]' must be 0x-prefixed hex of 1 to 64 digits`],
    ],
  },
  {
    method: 'eth_createAccessList',
    good: [
      [viemTx, 'latest'],
      [{ from: A1, data: '0x6080' }, 'pending'],
      [{ to: A2 }, H1, { [A2]: { balance: '0x1' } }],
    ],
    filled: [[[{ to: A2 }], [{ to: A2 }, 'latest']]],
    bad: [
      [[], `missing 'transaction'`],
      [[{ to: '0x1' }], `'transaction.to' must be a 20-byte`],
      [[{ to: A2, gas: 21000 }], `'transaction.gas' must be a 0x-prefixed hex quantity`],
      [[{ to: A2 }, 'latest', 'override'], `'stateOverride' must be an object`],
    ],
  },
  {
    method: 'eth_fillTransaction',
    good: [[viemTx], [{ from: A1, to: A2, value: '0x1' }], [{}]],
    bad: [
      [[], `missing 'transaction'`],
      [[{ to: A2, nonce: '0x01' }], `'transaction.nonce' must be a 0x-prefixed hex quantity`],
      [[{ to: A2 }, 'latest'], 'eth_fillTransaction takes at most 1 parameter, got 2'],
    ],
  },
  {
    method: 'eth_simulateV1',
    good: [
      // What viem's simulateBlocks sends.
      [
        {
          blockStateCalls: [
            {
              blockOverrides: { number: '0x10', time: '0x1' },
              stateOverrides: { [A1]: { balance: '0xde0b6b3a7640000' } },
              calls: [viemTx, { from: A1, to: A2, data: '0x' }],
            },
            { calls: [{ from: A1, input: '0x6080' }] },
          ],
          returnFullTransactions: true,
          traceTransfers: true,
          validation: false,
        },
        'latest',
      ],
      [{ blockStateCalls: [] }, { blockNumber: '0x1' }],
      [{ blockStateCalls: [{}], extra: 1 }, H1],
    ],
    filled: [[[{ blockStateCalls: [{ calls: [] }] }], [{ blockStateCalls: [{ calls: [] }] }, 'latest']]],
    bad: [
      [[], `missing 'payload'`],
      [[[{ calls: [] }]], `'payload' must be an object with 'blockStateCalls'`],
      [[{}], `missing 'payload.blockStateCalls'`],
      [[{ blockStateCalls: {} }], `'payload.blockStateCalls' must be an array of`],
      [[{ blockStateCalls: ['x'] }], `'payload.blockStateCalls[0]' must be a {blockOverrides?, stateOverrides?, calls?} object`],
      [[{ blockStateCalls: [{ blockOverrides: 1 }] }], `'payload.blockStateCalls[0].blockOverrides' must be an object`],
      [[{ blockStateCalls: [{ stateOverrides: [] }] }], `'payload.blockStateCalls[0].stateOverrides' must be an object`],
      [[{ blockStateCalls: [{ calls: {} }] }], `'payload.blockStateCalls[0].calls' must be an array of transaction call objects`],
      [
        [{ blockStateCalls: [{}, { calls: [{ to: A2 }, { to: '0x1' }] }] }],
        `'payload.blockStateCalls[1].calls[1].to' must be a 20-byte 0x-prefixed hex address`,
      ],
      [[{ blockStateCalls: [], validation: 'yes' }], `'payload.validation' must be a boolean`],
      [[{ blockStateCalls: [], traceTransfers: 1 }], `'payload.traceTransfers' must be a boolean`],
      [[{ blockStateCalls: [] }, 'Latest'], `'block' must be`],
    ],
  },
  {
    method: 'eth_getBlockAccessList',
    good: [['0x1'], ['latest'], [H1], [{ blockHash: H1 }]],
    bad: [
      [[], `missing 'block'`],
      [['0x01'], `'block' must be`],
    ],
  },
  ...['eth_baseFee', 'eth_config', 'eth_capabilities', 'txpool_status', 'txpool_inspect', 'txpool_content'].map(
    (method): Row => ({ method, good: [[]], bad: [[['latest'], `${method} takes no parameters`]] }),
  ),
  {
    method: 'txpool_contentFrom',
    good: [[A1]],
    bad: [
      [[], `missing 'address'`],
      [['0x1'], `'address' must be a 20-byte`],
    ],
  },
  {
    method: 'debug_traceTransaction',
    good: [[H1], ...TRACE_CONFIGS.map((config) => [H1, config])],
    bad: [
      [[], `missing 'transactionHash'`],
      [['0x1234'], `'transactionHash' must be a 32-byte 0x-prefixed hex hash`],
      [[H1, {}, {}], 'debug_traceTransaction takes at most 2 parameters, got 3'],
      ...BAD_TRACE_CONFIG.map(([config, message]): [unknown[], string] => [[H1, config], message]),
    ],
  },
  {
    method: 'debug_traceBlockByNumber',
    good: [['0x1'], ['latest', { tracer: 'callTracer' }], ['finalized', {}]],
    bad: [
      [[], `missing 'block'`],
      [[H1.slice(0, 10) + 'zz'], `'block' must be`],
      [[{ blockNumber: '0x1' }], `'block' must be a hex block number or one of`],
      [['0x1', 'callTracer'], `'traceConfig' must be a trace config object`],
    ],
  },
  {
    method: 'debug_traceBlockByHash',
    good: [[H1], [H1, { tracer: 'callTracer', tracerConfig: { onlyTopCall: true } }]],
    bad: [
      [[], `missing 'blockHash'`],
      [['latest'], `'blockHash' must be a 32-byte`],
      [[H1, { disableStack: 1 }], `'traceConfig.disableStack' must be a boolean`],
    ],
  },
  {
    method: 'debug_traceCall',
    good: [
      [viemTx, 'latest', { tracer: 'callTracer' }],
      [{ to: A2 }, H1],
      [
        { from: A1, data: '0x6080' },
        { blockNumber: '0x1' },
        { stateOverrides: { [A1]: { balance: '0x1' } }, blockOverrides: {}, txIndex: '0x2' },
      ],
    ],
    filled: [
      [[{ to: A2 }], [{ to: A2 }, 'latest']],
      [
        [{ to: A2 }, null, { tracer: 'prestateTracer' }],
        [{ to: A2 }, 'latest', { tracer: 'prestateTracer' }],
      ],
    ],
    bad: [
      [[], `missing 'transaction'`],
      [[{}], `missing 'transaction.to'`],
      [[{ to: A2, value: 1 }], `'transaction.value' must be a 0x-prefixed hex quantity`],
      [[{ to: A2 }, 'newest'], `'block' must be`],
      [[{ to: A2 }, 'latest', { stateOverrides: 'x' }], `'traceConfig.stateOverrides' must be an object`],
      [[{ to: A2 }, 'latest', { txIndex: 2 }], `'traceConfig.txIndex' must be a 0x-prefixed hex quantity`],
      [[{ to: A2 }, 'latest', { tracer: ['callTracer'] }], `'traceConfig.tracer' must be a string`],
      [[{ to: A2 }, 'latest', {}, {}], 'debug_traceCall takes at most 3 parameters, got 4'],
    ],
  },
  {
    method: 'trace_transaction',
    good: [[H1]],
    bad: [
      [[], `missing 'transactionHash'`],
      [[H1, ['trace']], 'trace_transaction takes at most 1 parameter, got 2'],
    ],
  },
  {
    method: 'trace_call',
    good: [
      [viemTx, ['trace'], 'latest'],
      [{ to: A2 }, ['trace', 'vmTrace', 'stateDiff'], '0x10', { [A1]: { balance: '0x1' } }, { time: '0x1' }],
      [{ to: A2 }, [], H1],
    ],
    filled: [
      [
        [{ to: A2 }, ['stateDiff']],
        [{ to: A2 }, ['stateDiff'], 'latest'],
      ],
    ],
    bad: [
      [[{ to: A2 }], `missing 'traceTypes'`],
      [[{ to: A2 }, 'trace'], `'traceTypes' must be an array of trace types (trace, vmTrace, stateDiff)`],
      [[{ to: A2 }, ['trace', 'callTracer']], `'traceTypes[1]' must be one of trace, vmTrace, stateDiff`],
      [[{ to: A2 }, ['Trace']], `'traceTypes[0]' must be one of`],
      [[{ to: '0x1' }, ['trace']], `'transaction.to' must be a 20-byte`],
      [[{ to: A2 }, ['trace'], 'latest', 'x'], `'stateOverride' must be an object`],
    ],
  },
  {
    method: 'trace_block',
    good: [['0x1'], ['latest'], [H1], [{ blockHash: H1 }]],
    bad: [
      [[], `missing 'block'`],
      [['0x01'], `'block' must be`],
      [['0x1', ['trace']], 'trace_block takes at most 1 parameter, got 2'],
    ],
  },
  {
    method: 'trace_filter',
    good: [
      [{ fromBlock: '0x1', toBlock: '0x10', fromAddress: [A1], toAddress: [A1, A2], after: 0, count: 100, mode: 'union' }],
      [{ fromBlock: 'earliest', toBlock: 'latest', after: '0x10', count: '0x64', mode: 'intersection' }],
      [{}],
    ],
    bad: [
      [[], `missing 'filter'`],
      [['0x1'], `'filter' must be a trace filter object`],
      [[{ fromBlock: '0x01' }], `'filter.fromBlock' must be a hex block number`],
      [[{ toBlock: 16 }], `'filter.toBlock' must be a hex block number`],
      [[{ fromAddress: A1 }], `'filter.fromAddress' must be an array of 20-byte hex addresses`],
      [[{ toAddress: [A1, '0x1'] }], `'filter.toAddress[1]' must be a 20-byte 0x-prefixed hex address`],
      [[{ after: -1 }], `'filter.after' must be a hex quantity or a non-negative integer`],
      [[{ count: '100' }], `'filter.count' must be a hex quantity or a non-negative integer`],
      [[{ mode: 'all' }], `'filter.mode' must be union or intersection`],
    ],
  },
  {
    method: 'trace_replayTransaction',
    good: [
      [H1, ['trace']],
      [H1, ['trace', 'stateDiff', 'vmTrace']],
    ],
    bad: [
      [[H1], `missing 'traceTypes'`],
      [['0x1', ['trace']], `'transactionHash' must be a 32-byte`],
      [[H1, [5]], `'traceTypes[0]' must be one of trace, vmTrace, stateDiff`],
    ],
  },
  {
    method: 'trace_replayBlockTransactions',
    good: [
      ['0x1', ['trace']],
      ['latest', ['stateDiff']],
      [H1, ['vmTrace']],
    ],
    bad: [
      [['0x1'], `missing 'traceTypes'`],
      [[[], ['trace']], `'block' must be`],
      [['0x1', {}], `'traceTypes' must be an array`],
    ],
  },
];

t.test('the parameter rules of the added methods, good and bad', async (t) => {
  for (const row of ROWS) {
    for (const params of row.good) {
      const result = checkCall(row.method, params, HTTP);
      t.same(
        result,
        { kind: 'forward', params, row: methodRow(row.method) },
        `${row.method} ${JSON.stringify(params)} is forwarded as sent`,
      );
    }
    for (const [sent, forwarded] of row.filled ?? []) {
      t.same(
        checkCall(row.method, sent, HTTP),
        { kind: 'forward', params: forwarded, row: methodRow(row.method) },
        `${row.method} ${JSON.stringify(sent)} is filled in`,
      );
    }
    for (const [params, message] of row.bad) {
      const result = checkCall(row.method, params, HTTP);
      t.equal(result.kind === 'error' && result.error, 'invalid_params', `${row.method} ${JSON.stringify(params)} is refused`);
      t.ok(
        result.kind === 'error' && result.message.startsWith(`invalid params: ${message}`),
        `${row.method} ${JSON.stringify(params)}: ${result.kind === 'error' ? result.message : 'forwarded'}`,
      );
    }
  }
});

t.test('methods that need a node of their own are refused, saying why', async (t) => {
  const keys =
    /is not served: a shared gateway never holds keys: sign in the wallet or client, then send the signed transaction with eth_sendRawTransaction$/;
  const administration = /is not served: a shared gateway never exposes node administration/;
  const cases: Array<[string, RegExp]> = [
    ['eth_sign', keys],
    ['eth_signTransaction', keys],
    ['eth_signTypedData_v4', keys],
    ['eth_sendTransaction', keys],
    ['personal_sign', keys],
    ['personal_unlockAccount', keys],
    ['admin_peers', administration],
    ['admin_addPeer', administration],
    ['miner_start', /never exposes node administration \(miner_\* sets how a node builds blocks\)$/],
    ['engine_forkchoiceUpdatedV3', /the Engine API belongs to a node's own consensus client/],
    ['eth_coinbase', /the coinbase is one node's own setting and a shared gateway has none/],
  ];
  for (const [method, reason] of cases) {
    // Whatever the params: the refusal comes before them.
    const result = checkCall(method, [A1, '0x'], HTTP);
    t.match(result, { kind: 'error', error: 'node_local_method', message: reason }, method);
    t.ok(result.kind === 'error' && result.message.startsWith(`${method} is not served: `), `${method}: the message names it`);
  }
  const long = checkCall(`admin_${'x'.repeat(5000)}`, [], HTTP);
  t.ok(long.kind === 'error' && long.message.length < 200, 'a long name is clipped in the message');
});

t.test('answered by the gateway', async (t) => {
  t.same(checkCall('eth_accounts', [], HTTP), { kind: 'local', resultJson: '[]' });
  t.same(checkCall('eth_mining', [], HTTP), { kind: 'local', resultJson: 'false' });
  t.same(checkCall('eth_hashrate', [], HTTP), { kind: 'local', resultJson: '"0x0"' });
  for (const method of ['eth_accounts', 'eth_mining', 'eth_hashrate']) {
    t.match(checkCall(method, [A1], HTTP), {
      kind: 'error',
      error: 'invalid_params',
      message: `invalid params: ${method} takes no parameters`,
    });
  }
});
