import t from 'tap';
import { cacheKeyFor as cacheKeyOfRow, canonicalCallJson, mayCache as mayCacheRow } from '../../src/jsonrpc/cacheability.js';
import { checkCall, methodRow, type MethodRow } from '../../src/jsonrpc/methods.js';

const HEAD = 1000;
const DEPTH = 64;
const FINAL = HEAD - DEPTH;
const hex = (n: number): string => `0x${n.toString(16)}`;
const BLOCK_HASH = `0x${'Ab'.repeat(32)}`;
const TX_HASH = `0x${'cd'.repeat(32)}`;
const ADDRESS = `0x${'2A'.repeat(20)}`;

/** The catalogue's row of a method named here: cacheability reads the row's traits, as the pipeline hands it on. */
function rowOf(method: string): MethodRow {
  const row = methodRow(method);
  if (row === undefined) throw new Error(`${method} is not in the catalogue`);
  return row;
}
const cacheKeyFor = (method: string, params: unknown[]): string | null => cacheKeyOfRow(rowOf(method), params);
const mayCache = (method: string, params: unknown[], result: unknown, head: number | null, depth: number): boolean =>
  mayCacheRow(rowOf(method), params, result, head === null ? null : head - depth);

/** The params as the pipeline hands them on: checked and normalized by the allowlist. */
function normalized(method: string, params: unknown[]): unknown[] {
  const checked = checkCall(method, params, { chainId: 1, transport: 'http' });
  if (checked.kind !== 'forward') throw new Error(`${method} ${JSON.stringify(params)} is not forwarded: ${JSON.stringify(checked)}`);
  return checked.params;
}

interface Case {
  name: string;
  method: string;
  /** The call for a block numbered n. */
  params: (n: number) => unknown[];
  /** The answer for a block numbered n. */
  result: (n: number) => unknown;
}

const CASES: Case[] = [
  {
    name: 'block by number',
    method: 'eth_getBlockByNumber',
    params: (n) => [hex(n)],
    result: (n) => ({ number: hex(n), hash: BLOCK_HASH }),
  },
  {
    name: 'block by hash',
    method: 'eth_getBlockByHash',
    params: () => [BLOCK_HASH, true],
    result: (n) => ({ number: hex(n), transactions: [] }),
  },
  { name: 'receipts by number', method: 'eth_getBlockReceipts', params: (n) => [hex(n)], result: () => [] },
  {
    name: 'receipts by hash',
    method: 'eth_getBlockReceipts',
    params: () => [BLOCK_HASH],
    result: (n) => [{ blockNumber: hex(n) }, { blockNumber: hex(n) }],
  },
  { name: 'receipts by EIP-1898 number', method: 'eth_getBlockReceipts', params: (n) => [{ blockNumber: hex(n) }], result: () => [] },
  {
    name: 'receipts by EIP-1898 hash',
    method: 'eth_getBlockReceipts',
    params: () => [{ blockHash: BLOCK_HASH }],
    result: (n) => [{ blockNumber: hex(n) }],
  },
  {
    name: 'transaction by hash',
    method: 'eth_getTransactionByHash',
    params: () => [TX_HASH],
    result: (n) => ({ blockNumber: hex(n), hash: TX_HASH }),
  },
  {
    name: 'receipt',
    method: 'eth_getTransactionReceipt',
    params: () => [TX_HASH],
    result: (n) => ({ blockNumber: hex(n), status: '0x1' }),
  },
  {
    name: 'tx by block hash and index',
    method: 'eth_getTransactionByBlockHashAndIndex',
    params: () => [BLOCK_HASH, '0x0'],
    result: (n) => ({ blockNumber: hex(n) }),
  },
  {
    name: 'tx by block number and index',
    method: 'eth_getTransactionByBlockNumberAndIndex',
    params: (n) => [hex(n), '0x0'],
    result: () => ({ blockNumber: null }),
  },
  { name: 'tx count by number', method: 'eth_getBlockTransactionCountByNumber', params: (n) => [hex(n)], result: () => '0x3' },
  { name: 'logs by range', method: 'eth_getLogs', params: (n) => [{ fromBlock: hex(n - 10), toBlock: hex(n) }], result: () => [] },
  {
    name: 'logs by block hash',
    method: 'eth_getLogs',
    params: () => [{ blockHash: BLOCK_HASH }],
    result: (n) => [{ blockNumber: hex(n), removed: false }],
  },
  { name: 'block access list by number', method: 'eth_getBlockAccessList', params: (n) => [hex(n)], result: () => [] },
  {
    name: 'debug trace of a block by number',
    method: 'debug_traceBlockByNumber',
    params: (n) => [hex(n), { tracer: 'callTracer' }],
    result: () => [{ txHash: TX_HASH, result: {} }],
  },
  { name: 'trace_block by number', method: 'trace_block', params: (n) => [hex(n)], result: () => [] },
  {
    name: 'trace_replayBlockTransactions by number',
    method: 'trace_replayBlockTransactions',
    params: (n) => [hex(n), ['trace']],
    result: () => [{ output: '0x', transactionHash: TX_HASH }],
  },
  { name: 'trace_filter by range', method: 'trace_filter', params: (n) => [{ fromBlock: hex(n - 10), toBlock: hex(n) }], result: () => [] },
];

t.test('the finality boundary: head - depth exactly and below are cached, one above is not', async (t) => {
  for (const c of CASES) {
    const at = (n: number): boolean => mayCache(c.method, normalized(c.method, c.params(n)), c.result(n), HEAD, DEPTH);
    t.ok(cacheKeyFor(c.method, normalized(c.method, c.params(FINAL))), `${c.name}: has a key`);
    t.equal(at(FINAL - 1), true, `${c.name}: one below head - depth`);
    t.equal(at(FINAL), true, `${c.name}: exactly head - depth`);
    t.equal(at(FINAL + 1), false, `${c.name}: one above head - depth`);
    t.equal(at(HEAD), false, `${c.name}: the head`);
    t.equal(mayCache(c.method, normalized(c.method, c.params(FINAL)), c.result(FINAL), null, DEPTH), false, `${c.name}: unknown head`);
    t.equal(mayCache(c.method, normalized(c.method, c.params(FINAL)), null, HEAD, DEPTH), false, `${c.name}: null result`);
    t.equal(
      mayCache(c.method, normalized(c.method, c.params(FINAL)), undefined, HEAD, DEPTH),
      false,
      `${c.name}: no result (an error answer)`,
    );
  }
  t.equal(mayCache('eth_getBlockByNumber', [hex(HEAD), false], { number: hex(HEAD) }, HEAD, 0), true, 'depth 0 makes the head final');
  t.equal(
    mayCache('eth_getBlockByNumber', ['0x0', false], { number: '0x0' }, 10, DEPTH),
    false,
    'a chain shorter than the depth has nothing final',
  );
});

t.test('net_version is cached per chain whatever the head', async (t) => {
  t.equal(cacheKeyFor('net_version', []), '["net_version"]');
  t.equal(mayCache('net_version', [], '1', null, DEPTH), true);
  t.equal(mayCache('net_version', [], '1', 0, DEPTH), true);
  t.equal(mayCache('net_version', [], null, HEAD, DEPTH), false);
});

t.test('block tags are never cached', async (t) => {
  const deep = { number: hex(1), blockNumber: hex(1) };
  for (const tag of ['latest', 'pending', 'safe', 'finalized', 'earliest']) {
    const calls: Array<[string, unknown[]]> = [
      ['eth_getBlockByNumber', [tag]],
      ['eth_getBlockReceipts', [tag]],
      ['eth_getBlockReceipts', [{ blockNumber: tag }]],
      ['eth_getTransactionByBlockNumberAndIndex', [tag, '0x0']],
      ['eth_getBlockTransactionCountByNumber', [tag]],
      ['eth_getLogs', [{ fromBlock: '0x1', toBlock: tag }]],
      ['eth_getLogs', [{ fromBlock: tag, toBlock: '0x1' }]],
      ['debug_traceBlockByNumber', [tag]],
      ['trace_block', [tag]],
      ['trace_replayBlockTransactions', [tag, ['trace']]],
      ['trace_filter', [{ fromBlock: '0x1', toBlock: tag }]],
      ['eth_getBlockAccessList', [tag]],
    ];
    for (const [method, params] of calls) {
      const p = normalized(method, params);
      t.equal(cacheKeyFor(method, p), null, `${method} ${JSON.stringify(params)}: no key`);
      t.equal(mayCache(method, p, [deep], HEAD, DEPTH), false, `${method} ${JSON.stringify(params)}: not cached`);
    }
  }
  // Omitted ends mean latest.
  for (const filter of [{}, { fromBlock: '0x1' }, { toBlock: '0x1' }, { fromBlock: '0x1', toBlock: null }]) {
    t.equal(cacheKeyFor('eth_getLogs', normalized('eth_getLogs', [filter])), null, `eth_getLogs ${JSON.stringify(filter)}`);
  }
});

t.test('state reads, simulations, writes, filters and moving values are never cached', async (t) => {
  const calls: Array<[string, unknown[]]> = [
    ['eth_call', [{ to: ADDRESS, data: '0x' }, '0x1']],
    ['eth_call', [{ to: ADDRESS }, { blockHash: BLOCK_HASH }]],
    ['eth_estimateGas', [{ to: ADDRESS }, '0x1']],
    ['eth_getBalance', [ADDRESS, '0x1']],
    ['eth_getTransactionCount', [ADDRESS, BLOCK_HASH]],
    ['eth_getCode', [ADDRESS, '0x1']],
    ['eth_getStorageAt', [ADDRESS, '0x0', '0x1']],
    ['eth_sendRawTransaction', ['0x00']],
    ['eth_newFilter', [{ fromBlock: '0x1', toBlock: '0x2' }]],
    ['eth_newBlockFilter', []],
    ['eth_getFilterChanges', ['0x1']],
    ['eth_getFilterLogs', ['0x1']],
    ['eth_uninstallFilter', ['0x1']],
    ['eth_blockNumber', []],
    ['eth_gasPrice', []],
    ['eth_feeHistory', ['0x4', '0x1']],
    ['eth_syncing', []],
    ['web3_clientVersion', []],
    // Its answer is a bare count: neither params nor answer tell the block, so finality is unknowable.
    ['eth_getBlockTransactionCountByHash', [BLOCK_HASH]],
    ['eth_getProof', [ADDRESS, [], '0x1']],
    ['eth_getStorageValues', [{ [ADDRESS]: ['0x0'] }, '0x1']],
    ['eth_createAccessList', [{ to: ADDRESS }, '0x1']],
    ['eth_simulateV1', [{ blockStateCalls: [] }, '0x1']],
    ['eth_fillTransaction', [{ to: ADDRESS }]],
    ['eth_config', []],
    ['eth_baseFee', []],
    ['debug_traceCall', [{ to: ADDRESS }, '0x1']],
    ['trace_call', [{ to: ADDRESS }, ['trace'], '0x1']],
    // The traces of one transaction do not tell their block.
    ['debug_traceTransaction', [TX_HASH]],
    ['trace_transaction', [TX_HASH]],
    ['trace_replayTransaction', [TX_HASH, ['trace']]],
    ['txpool_content', []],
    ['txpool_status', []],
  ];
  for (const [method, params] of calls) {
    const p = normalized(method, params);
    t.equal(cacheKeyFor(method, p), null, `${method}: no key`);
    t.equal(mayCache(method, p, { blockNumber: '0x1', number: '0x1' }, HEAD, DEPTH), false, `${method}: not cached`);
  }
});

t.test('answers that do not show a settled block are not cached', async (t) => {
  const byHash = normalized('eth_getLogs', [{ blockHash: BLOCK_HASH }]);
  t.equal(mayCache('eth_getLogs', byHash, [], HEAD, DEPTH), false, 'logs by hash: an empty answer');
  t.equal(mayCache('eth_getLogs', byHash, [{ blockNumber: hex(1), removed: true }], HEAD, DEPTH), false, 'a removed log');
  t.equal(
    mayCache('eth_getLogs', byHash, [{ blockNumber: hex(1) }, { blockNumber: hex(FINAL + 1) }], HEAD, DEPTH),
    false,
    'the highest log decides',
  );
  t.equal(mayCache('eth_getLogs', byHash, [{}], HEAD, DEPTH), false, 'a log without a block number');
  t.equal(mayCache('eth_getLogs', byHash, { blockNumber: hex(1) }, HEAD, DEPTH), false, 'not an array');
  t.equal(mayCache('eth_getBlockReceipts', [BLOCK_HASH], [], HEAD, DEPTH), false, 'receipts of a block by hash, none');
  t.equal(
    mayCache('eth_getTransactionByHash', [TX_HASH], { blockNumber: null, hash: TX_HASH }, HEAD, DEPTH),
    false,
    'a pending transaction',
  );
  t.equal(mayCache('eth_getTransactionReceipt', [TX_HASH], { status: '0x1' }, HEAD, DEPTH), false, 'a receipt without a block');
  t.equal(
    mayCache('eth_getBlockByHash', [BLOCK_HASH, false], { blockNumber: hex(1) }, HEAD, DEPTH),
    false,
    'a block is read by its own number field',
  );
  t.equal(mayCache('eth_getTransactionByHash', [TX_HASH], '0x1', HEAD, DEPTH), false, 'an answer that is not an object');
  t.equal(mayCache('eth_getBlockByNumber', [hex(1), false], false, HEAD, DEPTH), true, 'a numbered block needs nothing from the answer');
  const traceEntry = { blockHash: BLOCK_HASH, blockNumber: 1, transactionHash: TX_HASH, type: 'call' };
  t.equal(mayCache('trace_block', [BLOCK_HASH], [traceEntry], HEAD, DEPTH), false, 'trace_block by hash: a plain-number blockNumber');
  t.equal(mayCache('trace_block', [{ blockHash: BLOCK_HASH }], [traceEntry], HEAD, DEPTH), false, 'trace_block by EIP-1898 hash');
  t.equal(mayCache('trace_filter', [{ fromBlock: '0x1', toBlock: '0x2', blockHash: BLOCK_HASH }], [traceEntry], HEAD, DEPTH), false);
});

t.test('keys are canonical: the same call gets the same key, different calls different keys', async (t) => {
  const upper = cacheKeyFor('eth_getBlockByHash', normalized('eth_getBlockByHash', [BLOCK_HASH.toUpperCase().replace('0X', '0x')]));
  const lower = cacheKeyFor('eth_getBlockByHash', normalized('eth_getBlockByHash', [BLOCK_HASH.toLowerCase(), false]));
  t.equal(upper, lower, 'hash case and a filled-in default do not matter');
  t.equal(lower, `["eth_getBlockByHash","${BLOCK_HASH.toLowerCase()}",false]`);
  t.not(cacheKeyFor('eth_getBlockByHash', [BLOCK_HASH, true]), lower, 'full transactions is another call');
  t.equal(cacheKeyFor('eth_getBlockByNumber', ['0xA', false]), cacheKeyFor('eth_getBlockByNumber', ['0xa', false]));
  t.not(cacheKeyFor('eth_getBlockByNumber', ['0xa', false]), cacheKeyFor('eth_getBlockByNumber', ['0xb', false]));
  t.not(cacheKeyFor('eth_getTransactionByHash', [TX_HASH]), cacheKeyFor('eth_getTransactionReceipt', [TX_HASH]), 'method is in the key');

  const a = cacheKeyFor('eth_getLogs', [{ toBlock: '0x2', fromBlock: '0x1', address: ADDRESS, topics: [null, [TX_HASH]] }]);
  const b = cacheKeyFor('eth_getLogs', [
    { fromBlock: '0x1', address: ADDRESS.toLowerCase(), topics: [null, [TX_HASH]], toBlock: '0x2', blockHash: null },
  ]);
  t.equal(a, b, 'member order, address case and null members do not matter');
  t.not(
    cacheKeyFor('eth_getLogs', [{ fromBlock: '0x1', toBlock: '0x2', topics: [TX_HASH] }]),
    cacheKeyFor('eth_getLogs', [{ fromBlock: '0x1', toBlock: '0x2', topics: [null, TX_HASH] }]),
    'null inside topics is meaningful',
  );
  t.same(
    JSON.parse(a!),
    ['eth_getLogs', { address: ADDRESS.toLowerCase(), fromBlock: '0x1', toBlock: '0x2', topics: [null, [TX_HASH]] }],
    'the key is JSON',
  );
});

t.test('canonicalCallJson', async (t) => {
  t.equal(
    canonicalCallJson('eth_call', [{ to: ADDRESS, data: '0xABCD' }, 'latest', null]),
    `["eth_call",{"data":"0xabcd","to":"${ADDRESS.toLowerCase()}"},"latest"]`,
    'trailing nulls dropped, tags left as they are',
  );
  t.equal(
    canonicalCallJson('eth_call', [{ to: ADDRESS }, 'latest']),
    canonicalCallJson('eth_call', [{ to: ADDRESS, gas: null }, 'latest', null]),
  );
  t.equal(canonicalCallJson('x', [null, 1]), '["x",null,1]', 'a null before a value stays');
  t.equal(
    canonicalCallJson('x', [JSON.parse('{"b":"Text","__proto__":1}')]),
    '["x",{"__proto__":1,"b":"Text"}]',
    'a member named __proto__ is plain data',
  );
});

t.test("canonicalCallJson from the params' text gives the key the values give", async (t) => {
  const texts = [
    '[]',
    '[ ]',
    '["0xab","latest"]',
    '["0xAB","latest"]',
    '["0Xab","Latest"]',
    '["0xab", "latest"]',
    '["0xab","latest",null]',
    '[null,"0xab"]',
    '[1,"0xab"]',
    '[1.0]',
    '[true]',
    '[["0xab",["0xcd"]],[]]',
    '[{"b":"0xAB","a":null}]',
    '["a\\"b","\\u0041"]',
    '["","0x",""]',
    '["0xabcdefABCDEF"]',
    '["not 0xAB"]',
    '["0xab\\u0041"]',
    '["0xAbc","x"]',
    '["line\\n"]',
    '["é","\u2028"]',
    '[[],[[]]]',
  ];
  for (const text of texts) {
    const params = JSON.parse(text) as unknown[];
    // The message escapes non-ASCII: a raw U+2028 would break the TAP line.
    const shown = text.replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
    t.equal(canonicalCallJson('m', params, text), canonicalCallJson('m', params), shown);
  }
  t.equal(canonicalCallJson('m', ['0xab', 'latest'], '["0xab","latest"]'), '["m","0xab","latest"]');
});
