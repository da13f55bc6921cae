/**
 * Every row of the JSON-RPC error table over HTTP, with the exact status and the exact bytes a
 * client receives: Content-Type (415), body and batch limits (413), parse errors (-32700), request
 * shape (-32600), the allowlist (-32601, with anvil queried at its own URL to show a refused call
 * never reached it) and parameter rules (-32602); and batches: request order, ids echoed byte for
 * byte, and the batch's HTTP status.
 */
import t, { type Test } from 'tap';
import { request as httpRequest } from 'node:http';
import { anvilFor, evmChain, gatewayFor } from '../support/gateway.js';
import { post, rpc, send, type RawAnswer } from '../support/rpc.js';

const DEV_ADDRESS = '0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266';
const DEAD = '0x000000000000000000000000000000000000dEaD';
const ZERO_HASH = `0x${'00'.repeat(32)}`;
const MAX_BODY = 1024;
const MAX_BATCH = 5;

/** A JSON-RPC error body exactly as the gateway writes it; `idText` is the id's source text. */
function errorText(idText: string, code: number, message: string): string {
  return `{"jsonrpc":"2.0","id":${idText},"error":{"code":${code},"message":${JSON.stringify(message)}}}`;
}

const request = (id: unknown, method: string, params: unknown[] = []): string => JSON.stringify({ jsonrpc: '2.0', id, method, params });

function assertAnswer(t: Test, got: RawAnswer, status: number, text: string, what: string): void {
  t.equal(got.status, status, `${what}: HTTP ${status}`);
  t.equal(got.text, text, `${what}: body`);
}

// One anvil shared by the tests that only read from it (its block number stays 0x0, which the batch
// test relies on); the allowlist test, which must see a node untouched, starts its own.
const node = await anvilFor(t, { chainId: 31337 });
const open = await gatewayFor(t, {
  server: { default_chain: 'devnet' },
  chains: { devnet: evmChain([node.url]), dead: evmChain(['http://127.0.0.1:1'], 1) },
});
const limited = await gatewayFor(t, {
  server: { max_body_bytes: MAX_BODY, max_batch: MAX_BATCH },
  chains: { devnet: evmChain([node.url]) },
});
const url = `${open.base}/v1/rpc/public`;
const deadUrl = `${open.base}/dead/v1/rpc/public`;
const limitedUrl = `${limited.base}/v1/rpc/public`;

t.test('415 for a Content-Type other than application/json; parameters and case are accepted', async (t) => {
  const body = request(1, 'eth_chainId');
  const refused = errorText('1', -32600, 'Content-Type must be application/json');
  for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'application/json-seq', 'application/jsonrpc']) {
    const r = await send('POST', url, body, { 'content-type': type });
    assertAnswer(t, r, 415, refused, type);
    t.equal(r.headers['content-type'], 'application/json', `${type}: the refusal itself is JSON`);
  }
  assertAnswer(t, await send('POST', url, body), 415, refused, 'no Content-Type');
  const ok = '{"jsonrpc":"2.0","id":1,"result":"0x7a69"}';
  for (const type of ['application/json; charset=utf-8', 'Application/JSON', 'application/json;charset=UTF-8']) {
    assertAnswer(t, await send('POST', url, body, { 'content-type': type }), 200, ok, type);
  }
});

/** A valid eth_chainId request padded with an ignored member to exactly `size` bytes. */
function paddedRequest(size: number): string {
  const head = '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[],"pad":"';
  return `${head}${'x'.repeat(size - head.length - 2)}"}`;
}

t.test('413 for a declared Content-Length over server.max_body_bytes; the limit itself is accepted', async (t) => {
  t.equal(Buffer.byteLength(paddedRequest(MAX_BODY)), MAX_BODY);
  assertAnswer(t, await post(limitedUrl, paddedRequest(MAX_BODY)), 200, '{"jsonrpc":"2.0","id":1,"result":"0x7a69"}', 'exactly the limit');
  for (const size of [MAX_BODY + 1, 5000]) {
    assertAnswer(
      t,
      await post(limitedUrl, paddedRequest(size)),
      413,
      errorText('null', -32600, `Request body of ${size} bytes is larger than the limit of ${MAX_BODY} bytes (server.max_body_bytes)`),
      `${size} bytes declared`,
    );
  }
});

/**
 * Sends `chunks` with Transfer-Encoding: chunked, one every 20 ms, and stops writing as soon as the
 * answer begins (the gateway answers a body over the limit before it has all been sent).
 */
function postChunked(target: string, chunks: string[]): Promise<RawAnswer & { chunksWritten: number }> {
  return new Promise((resolve, reject) => {
    let written = 0;
    let answered = false;
    const req = httpRequest(
      target,
      {
        method: 'POST',
        agent: false,
        headers: { 'content-type': 'application/json', 'transfer-encoding': 'chunked' },
      },
      (res) => {
        answered = true;
        const parts: Buffer[] = [];
        res.on('data', (c: Buffer) => parts.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const text = Buffer.concat(parts).toString();
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json: undefined, chunksWritten: written });
          req.destroy();
        });
      },
    );
    // Writes after the gateway has closed may fail; the answer already received is what counts.
    req.on('error', (err) => {
      if (!answered) reject(err);
    });
    const next = (): void => {
      if (answered) return;
      if (written === chunks.length) {
        req.end();
        return;
      }
      req.write(chunks[written++]);
      setTimeout(next, 20);
    };
    next();
  });
}

t.test('413 for a chunked body that passes server.max_body_bytes; a small chunked body is served', async (t) => {
  const small = await postChunked(limitedUrl, ['{"jsonrpc":"2.0",', '"id":"chunked",', '"method":"eth_chainId","params":[]}']);
  assertAnswer(t, small, 200, '{"jsonrpc":"2.0","id":"chunked","result":"0x7a69"}', 'a 3-chunk body under the limit');

  const big = paddedRequest(4000);
  const pieces = Array.from({ length: 10 }, (_, i) => big.slice(i * 400, (i + 1) * 400));
  const r = await postChunked(limitedUrl, pieces);
  assertAnswer(
    t,
    r,
    413,
    errorText('null', -32600, `Request body is larger than the limit of ${MAX_BODY} bytes (server.max_body_bytes)`),
    'a chunked body past the limit',
  );
  t.ok(r.chunksWritten < pieces.length, `refused before the whole body was sent (${r.chunksWritten} of ${pieces.length} chunks)`);
});

t.test('413 for a batch over server.max_batch; a batch at the limit is served', async (t) => {
  const items = (n: number): string => `[${Array.from({ length: n }, (_, i) => request(i, 'eth_chainId')).join(',')}]`;
  const atLimit = await post(limitedUrl, items(MAX_BATCH));
  assertAnswer(
    t,
    atLimit,
    200,
    `[${Array.from({ length: MAX_BATCH }, (_, i) => `{"jsonrpc":"2.0","id":${i},"result":"0x7a69"}`).join(',')}]`,
    `${MAX_BATCH} items`,
  );
  const tooMany = `Batch of ${MAX_BATCH + 1} items is larger than the limit of ${MAX_BATCH} (server.max_batch)`;
  assertAnswer(
    t,
    await post(limitedUrl, items(MAX_BATCH + 1)),
    413,
    `[${Array.from({ length: MAX_BATCH + 1 }, (_, i) => errorText(String(i), -32600, tooMany)).join(',')}]`,
    `${MAX_BATCH + 1} items: one error per item, each with its id`,
  );
});

t.test('-32700 with id null for a body that is not JSON or not UTF-8', async (t) => {
  const notJson = errorText('null', -32700, 'parse error: body is not valid JSON');
  for (const body of ['{"jsonrpc":"2.0","id":1,"method":', '', '{"jsonrpc":"2.0","id":1,}', "{'jsonrpc':'2.0'}", '[{"id":1}']) {
    assertAnswer(t, await post(url, body), 200, notJson, JSON.stringify(body));
  }
  const notUtf8 = errorText('null', -32700, 'parse error: body is not valid UTF-8');
  const inString = (bytes: number[]): Buffer =>
    Buffer.concat([
      Buffer.from('{"jsonrpc":"2.0","id":1,"method":"web3_clientVersion","params":[],"x":"'),
      Buffer.from(bytes),
      Buffer.from('"}'),
    ]);
  for (const [what, bytes] of [
    ['a lone 0xff', [0xff]],
    ['a truncated sequence', [0xc3, 0x28]],
    ['an overlong "/"', [0xc0, 0xaf]],
    ['a UTF-16 surrogate', [0xed, 0xa0, 0x80]],
  ] as const) {
    assertAnswer(t, await post(url, inString([...bytes])), 200, notUtf8, what);
  }
  // The same body with valid multi-byte UTF-8 (β) is forwarded: it is anvil's own answer.
  const version = (await rpc(node.url, 'web3_clientVersion')).json as { result: string };
  assertAnswer(t, await post(url, inString([0xce, 0xb2])), 200, `{"jsonrpc":"2.0","id":1,"result":"${version.result}"}`, 'valid UTF-8');
});

t.test('-32600 for each request shape rule; the id is echoed only when it is itself valid', async (t) => {
  const cases: Array<[string, string, string]> = [
    ['{"jsonrpc":"1.0","id":1,"method":"eth_chainId","params":[]}', '1', `'jsonrpc' must be "2.0"`],
    ['{"id":"a","method":"eth_chainId","params":[]}', '"a"', `'jsonrpc' must be "2.0"`],
    ['{"jsonrpc":2.0,"id":1,"method":"eth_chainId","params":[]}', '1', `'jsonrpc' must be "2.0"`],
    ['{"jsonrpc":"2.0","id":1,"method":5,"params":[]}', '1', `'method' must be a string`],
    ['{"jsonrpc":"2.0","id":"m","params":[]}', '"m"', `'method' must be a string`],
    ['{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":{}}', '1', `'params' must be an array`],
    ['{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":"[]"}', '1', `'params' must be an array`],
    ['{"jsonrpc":"2.0","method":"eth_chainId","params":[]}', 'null', `missing 'id' (notifications are not served)`],
    ['{"jsonrpc":"2.0","id":null,"method":"eth_chainId","params":[]}', 'null', `'id' must be a number or a string`],
    ['{"jsonrpc":"2.0","id":{"a":1},"method":"eth_chainId","params":[]}', 'null', `'id' must be a number or a string`],
    ['{"jsonrpc":"2.0","id":[1],"method":"eth_chainId","params":[]}', 'null', `'id' must be a number or a string`],
    ['{"jsonrpc":"2.0","id":true,"method":"eth_chainId","params":[]}', 'null', `'id' must be a number or a string`],
    // An invalid id wins over another bad field: there is no valid id to echo.
    ['{"jsonrpc":"1.0","id":{},"method":"eth_chainId","params":[]}', 'null', `'jsonrpc' must be "2.0"`],
  ];
  for (const [body, idText, problem] of cases) {
    assertAnswer(t, await post(url, body), 200, errorText(idText, -32600, `invalid request: ${problem}`), body);
  }
  const notRequest = errorText('null', -32600, 'invalid request: body must be a request object or a batch array');
  for (const body of ['42', '"eth_chainId"', 'null', 'true']) assertAnswer(t, await post(url, body), 200, notRequest, body);
});

t.test('duplicate members are refused, not resolved the way JSON.parse would', async (t) => {
  assertAnswer(
    t,
    await post(url, '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","method":"eth_blockNumber","params":[]}'),
    200,
    errorText('1', -32600, `invalid request: duplicate member 'method'`),
    'two methods',
  );
  assertAnswer(
    t,
    await post(url, '{"jsonrpc":"2.0","id":1,"id":2,"method":"eth_chainId","params":[]}'),
    200,
    errorText('null', -32600, `invalid request: duplicate member 'id'`),
    'two ids: neither is echoed',
  );
  assertAnswer(
    t,
    await post(url, '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[],"params":[]}'),
    200,
    errorText('1', -32600, `invalid request: duplicate member 'params'`),
    'two params',
  );
  assertAnswer(
    t,
    await post(url, `{"jsonrpc":"2.0","id":1,"method":"eth_call","params":[{"to":"${DEAD}","to":"${DEV_ADDRESS}"},"latest"]}`),
    200,
    errorText('1', -32602, `invalid params: duplicate member 'to'`),
    'two "to" inside a call object',
  );
});

t.test('params nested deeper than 32 levels: -32602; 32 levels pass to the method rules and to the node', async (t) => {
  const arrays = (depth: number): string =>
    `{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":${'['.repeat(depth)}${']'.repeat(depth)}}`;
  assertAnswer(t, await post(url, arrays(33)), 200, errorText('1', -32602, 'invalid params: nested deeper than 32 levels'), '33 arrays');
  assertAnswer(
    t,
    await post(url, arrays(32)),
    200,
    errorText('1', -32602, 'invalid params: eth_blockNumber takes no parameters'),
    '32 arrays',
  );

  // The params array is level 1 and the state override object level 2, so `objects` more levels in all.
  const call = (objects: number): string => {
    let override = '{"a":1}';
    for (let i = 1; i < objects; i++) override = `{"a":${override}}`;
    return `{"jsonrpc":"2.0","id":1,"method":"eth_call","params":[{"to":"${DEAD}"},"latest",${override}]}`;
  };
  assertAnswer(
    t,
    await post(url, call(32)),
    200,
    errorText('1', -32602, 'invalid params: nested deeper than 32 levels'),
    '33 levels in eth_call',
  );
  const deepest = await post(url, call(31));
  const fromNode = await post(node.url, call(31));
  t.match(fromNode.json, { error: { code: -32602 } }, 'anvil refuses that state override itself');
  assertAnswer(t, deepest, 200, fromNode.text, "32 levels in eth_call: forwarded, anvil's own answer");
});

t.test('an empty batch is one -32600 error object, not an array', async (t) => {
  const empty = errorText('null', -32600, 'invalid request: empty batch');
  assertAnswer(t, await post(url, '[]'), 200, empty, '[]');
  assertAnswer(t, await post(url, ' [ \n ] '), 200, empty, '[ ] with whitespace');
});

t.test('a batch is answered in request order with every id exactly as sent, big integers included', async (t) => {
  const balance = ((await rpc(node.url, 'eth_getBalance', [DEV_ADDRESS, 'latest'])).json as { result: string }).result;
  t.equal(BigInt(balance), 10n ** 22n, "anvil's dev account holds 10000 ETH");
  const items = [
    ['123456789012345678901234567890', '"method":"eth_blockNumber","params":[]', '"result":"0x0"'],
    ['"req-β"', '"method":"eth_chainId","params":[]', '"result":"0x7a69"'],
    [
      '-987654321098765432109876543210',
      '"method":"anvil_mine","params":[]',
      '"error":{"code":-32601,"message":"Method not found: anvil_mine is not served by this gateway"}',
    ],
    [
      '"x\\"y\\\\z"',
      '"method":"eth_getBalance","params":["0xbad","latest"]',
      `"error":{"code":-32602,"message":"invalid params: 'address' must be a 20-byte 0x-prefixed hex address"}`,
    ],
    ['1.50', '"method":"net_listening","params":[]', '"result":true'],
    ['100000000000000000000000000001', '"method":"eth_chainId","params":[]', null],
    ['1e400', `"method":"eth_getBalance","params":["${DEV_ADDRESS}","latest"]`, `"result":"${balance}"`],
    [
      '"0x01"',
      '"method":"web3_sha3","params":["0x68656c6c6f20776f726c64"]',
      '"result":"0x47173285a8d7341e5e972fc677286384f802f8ef42a5ec5f03bbfa254cb01fad"',
    ],
  ] as const;
  const body =
    `[${items.map(([id, rest], i) => (i === 5 ? `{"jsonrpc":"1.0","id":${id},${rest}}` : `{"jsonrpc":"2.0","id":${id},${rest}}`)).join(',')},` +
    ' 42 , {"jsonrpc":"2.0","method":"eth_chainId","params":[]}]';
  const expected =
    `[${items
      .map(([id, , answer], i) =>
        i === 5 ? errorText(id, -32600, `invalid request: 'jsonrpc' must be "2.0"`) : `{"jsonrpc":"2.0","id":${id},${answer}}`,
      )
      .join(',')},` +
    `${errorText('null', -32600, 'invalid request: batch element must be a request object')},` +
    `${errorText('null', -32600, `invalid request: missing 'id' (notifications are not served)`)}]`;
  const r = await post(url, body);
  assertAnswer(t, r, 200, expected, 'the whole batch, byte for byte');
  t.equal((r.json as unknown[]).length, 10, 'one answer per item');
});

t.test('batch HTTP status: 502 when every item met a dead upstream, 200 when any item had another fate', async (t) => {
  const upstreamError = (idText: string): string => errorText(idText, -32603, 'Upstream node error');
  assertAnswer(t, await post(deadUrl, request(9, 'eth_blockNumber')), 502, upstreamError('9'), 'a single call');
  assertAnswer(
    t,
    await post(deadUrl, `[${request(1, 'eth_blockNumber')},${request('two', 'eth_getBalance', [DEV_ADDRESS, 'latest'])}]`),
    502,
    `[${upstreamError('1')},${upstreamError('"two"')}]`,
    'every item 502',
  );
  assertAnswer(
    t,
    await post(deadUrl, `[${request(1, 'eth_blockNumber')},${request(2, 'eth_chainId')}]`),
    200,
    `[${upstreamError('1')},{"jsonrpc":"2.0","id":2,"result":"0x1"}]`,
    'one 502 and one answered by the gateway',
  );
  assertAnswer(
    t,
    await post(deadUrl, `[${request(1, 'eth_blockNumber')},${request(2, 'anvil_mine')}]`),
    200,
    `[${upstreamError('1')},${errorText('2', -32601, 'Method not found: anvil_mine is not served by this gateway')}]`,
    'one 502 and one refused method',
  );
});

t.test('unknown and node-local methods get -32601 and never reach the node', async (t) => {
  const own = await anvilFor(t, { chainId: 31337 });
  const g = await gatewayFor(t, { chains: { devnet: evmChain([own.url]) } });
  const gw = `${g.base}/v1/rpc/public`;
  const onNode = async (method: string, params: unknown[]): Promise<unknown> => {
    const answer = (await rpc(own.url, method, params)).json as { result?: unknown; error?: unknown };
    if (answer.error !== undefined) throw new Error(`anvil refused ${method}: ${JSON.stringify(answer.error)}`);
    return answer.result;
  };
  const state = async () => ({
    block: await onNode('eth_blockNumber', []),
    balance: await onNode('eth_getBalance', [DEV_ADDRESS, 'latest']),
    deadBalance: await onNode('eth_getBalance', [DEAD, 'latest']),
    nonce: await onNode('eth_getTransactionCount', [DEV_ADDRESS, 'latest']),
  });
  const before = await state();
  t.same(before, { block: '0x0', balance: '0x21e19e0c9bab2400000', deadBalance: '0x0', nonce: '0x0' }, 'a fresh node');

  // Unknown methods, then node-local ones (what else is said of those is test/e2e/node-methods.test.ts's).
  const notFound = (method: string): string => `Method not found: ${method} is not served by this gateway`;
  const keys = (method: string): string =>
    `${method} is not served: a shared gateway never holds keys: sign in the wallet or client, then send the signed transaction with eth_sendRawTransaction`;
  const administration = 'is not served: a shared gateway never exposes node administration';
  const refused: Array<[string, unknown[], string]> = [
    ['debug_setHead', ['0x0'], notFound('debug_setHead')],
    ['anvil_setBalance', [DEAD, '0x1000'], notFound('anvil_setBalance')],
    ['hardhat_mine', ['0x5'], notFound('hardhat_mine')],
    ['evm_mine', [], notFound('evm_mine')],
    ['ETH_BLOCKNUMBER', [], notFound('ETH_BLOCKNUMBER')],
    ['Eth_blockNumber', [], notFound('Eth_blockNumber')],
    ['admin_peers', [], `admin_peers ${administration}`],
    ['miner_start', [], `miner_start ${administration} (miner_* sets how a node builds blocks)`],
    ['personal_sign', ['0xdeadbeef', DEV_ADDRESS], keys('personal_sign')],
    ['eth_sign', [DEV_ADDRESS, '0xdeadbeef'], keys('eth_sign')],
    ['eth_sendTransaction', [{ from: DEV_ADDRESS, to: DEAD, value: '0x1' }], keys('eth_sendTransaction')],
  ];
  for (const [method, params, message] of refused) {
    assertAnswer(t, await rpc(gw, method, params, 3), 200, errorText('3', -32601, message), method);
  }
  const batch = await post(gw, `[${refused.map(([m, p], i) => request(i, m, p)).join(',')}]`);
  assertAnswer(
    t,
    batch,
    200,
    `[${refused.map(([, , message], i) => errorText(String(i), -32601, message)).join(',')}]`,
    'all of them in one batch',
  );
  t.same(await state(), before, 'anvil, asked directly: no block mined, no balance set, no transaction sent');

  // The same checks do see a change when anvil is asked directly, so the comparison above can fail.
  t.match(await onNode('eth_sign', [DEV_ADDRESS, '0xdeadbeef']), /^0x[0-9a-f]{130}$/, 'anvil itself would sign');
  await onNode('evm_mine', []);
  await onNode('anvil_setBalance', [DEAD, '0x1000']);
  t.same(await state(), { ...before, block: '0x1', deadBalance: '0x1000' }, 'direct evm_mine and anvil_setBalance do show');
});

t.test('-32602 messages name the parameter', async (t) => {
  const cases: Array<[string, unknown[], string]> = [
    ['eth_getBalance', ['0xbad', 'latest'], `'address' must be a 20-byte 0x-prefixed hex address`],
    ['eth_feeHistory', ['0x1'], `missing 'newestBlock'`],
    [
      'eth_feeHistory',
      ['0x1', 'latest', [75, 25]],
      `'rewardPercentiles' must be an array of numbers from 0 to 100 in non-decreasing order`,
    ],
    ['eth_feeHistory', ['ten', 'latest'], `'blockCount' must be a hex quantity or a non-negative integer`],
    ['eth_getBlockByHash', ['0x1234', false], `'blockHash' must be a 32-byte 0x-prefixed hex hash`],
    ['eth_getBlockByHash', [ZERO_HASH, 'yes'], `'fullTransactions' must be a boolean`],
    ['eth_getTransactionReceipt', [], `missing 'transactionHash'`],
    ['eth_getLogs', [{ topics: ['0x12'] }], `'filter.topics[0]' must be null, a 32-byte hex topic or an array of topics and nulls`],
    [
      'eth_getLogs',
      [{ fromBlock: 'yesterday' }],
      `'filter.fromBlock' must be a hex block number or one of latest, earliest, pending, safe, finalized`,
    ],
    ['eth_call', [{ to: DEAD, data: '0x123' }], `'transaction.data' must be 0x-prefixed hex bytes (an even number of hex digits)`],
    ['eth_call', [{ value: '0x1' }], `missing 'transaction.to' (needed unless 'data' or 'input' deploys code)`],
    ['eth_estimateGas', [{ from: 'me' }], `'transaction.from' must be a 20-byte 0x-prefixed hex address`],
    ['eth_getFilterChanges', ['filter-1'], `'filterId' must be 0x-prefixed hex of 1 to 64 digits`],
    ['eth_sendRawTransaction', ['0xzz'], `'signedTransaction' must be 0x-prefixed hex bytes (an even number of hex digits)`],
    ['web3_sha3', ['hello'], `'data' must be 0x-prefixed hex bytes (an even number of hex digits)`],
    ['eth_blockNumber', ['latest'], 'eth_blockNumber takes no parameters'],
    ['eth_getCode', [DEV_ADDRESS, 'latest', {}], 'eth_getCode takes at most 2 parameters, got 3'],
  ];
  for (const [method, params, problem] of cases) {
    assertAnswer(
      t,
      await rpc(url, method, params, 'p'),
      200,
      errorText('"p"', -32602, `invalid params: ${problem}`),
      `${method}(${JSON.stringify(params)})`,
    );
  }
});
