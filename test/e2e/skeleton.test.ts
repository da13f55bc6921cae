/**
 * The daemon's skeleton end to end: routing by Host and by path over two real anvils, forwarding,
 * 502 on broken upstreams, CORS, 404/405/401, and a signed transaction through the public path.
 */
import t from 'tap';
import { Wallet } from 'ethers';
import { anvilFor, evmChain, gatewayFor } from '../support/gateway.js';
import { fakeUpstream } from '../support/fake-upstream.js';
import { minedReceipt } from '../support/dev-chain.js';
import { post, rpc, send } from '../support/rpc.js';
import { waitFor } from '../support/wait-for.js';

// anvil's first well-known development account.
const DEV_KEY = '0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80';
const DEV_ADDRESS = '0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266';

t.test('two chains, chosen by Host label and by path prefix', async (t) => {
  const [a, b] = await Promise.all([anvilFor(t, { chainId: 31337 }), anvilFor(t, { chainId: 1337 })]);
  const g = await gatewayFor(t, {
    server: { default_chain: 'alpha' },
    chains: { alpha: evmChain([a.url], 31337), beta: evmChain([b.url], 1337) },
  });
  // eth_chainId is answered from config; net_version comes from the node itself, so it proves the routing.
  const byDefault = await rpc(`${g.base}/v1/rpc/public`, 'net_version');
  t.same(byDefault.json, { jsonrpc: '2.0', id: 1, result: '31337' });
  const byHost = await rpc(`${g.base}/v1/rpc/public`, 'net_version', [], 2, { host: 'beta.rpc.example.com' });
  t.same(byHost.json, { jsonrpc: '2.0', id: 2, result: '1337' });
  const byHostWithPort = await rpc(`${g.base}/v1/rpc/public`, 'net_version', [], 3, { host: 'beta.localhost:8080' });
  t.same(byHostWithPort.json, { jsonrpc: '2.0', id: 3, result: '1337' });
  const byPath = await rpc(`${g.base}/beta/v1/rpc/public`, 'net_version', [], 'x');
  t.same(byPath.json, { jsonrpc: '2.0', id: 'x', result: '1337' });
  const chainId = await rpc(`${g.base}/beta/v1/rpc/public`, 'eth_chainId');
  t.same(chainId.json, { jsonrpc: '2.0', id: 1, result: '0x539' });
  const conflict = await rpc(`${g.base}/alpha/v1/rpc/public`, 'net_version', [], 1, { host: 'beta.rpc.example.com' });
  t.equal(conflict.status, 404, 'Host and path naming different chains is refused');
  const unknownHost = await rpc(`${g.base}/v1/rpc/public`, 'net_version', [], 1, { host: 'gamma.rpc.example.com' });
  t.same(unknownHost.json, { jsonrpc: '2.0', id: 1, result: '31337' }, 'an unknown Host label falls back to the default chain');
});

t.test('eth_blockNumber, eth_getBalance and a signed raw transaction through /v1/rpc/public', async (t) => {
  const node = await anvilFor(t, { chainId: 31337 });
  const g = await gatewayFor(t, { chains: { devnet: evmChain([node.url]) } });
  const url = `${g.base}/v1/rpc/public`;
  const bn = await rpc(url, 'eth_blockNumber');
  t.equal(bn.status, 200);
  t.ok(
    g.logLines.some((l) => l.startsWith('info upstream ok chain=devnet')),
    'the start-up probe logs a live upstream',
  );
  t.equal(bn.headers['content-type'], 'application/json');
  t.match(bn.json, { jsonrpc: '2.0', id: 1, result: /^0x[0-9a-f]+$/ });
  const bal = await rpc(url, 'eth_getBalance', [DEV_ADDRESS, 'latest']);
  t.equal(BigInt((bal.json as { result: string }).result), 10000n * 10n ** 18n);

  const wallet = new Wallet(DEV_KEY);
  const raw = await wallet.signTransaction({
    to: '0x000000000000000000000000000000000000dEaD',
    value: 12345n,
    nonce: 0,
    gasLimit: 21000n,
    maxFeePerGas: 10n ** 10n,
    maxPriorityFeePerGas: 10n ** 9n,
    chainId: 31337n,
    type: 2,
  });
  const sent = await rpc(url, 'eth_sendRawTransaction', [raw], 7);
  t.equal(sent.status, 200);
  const hash = (sent.json as { result: string }).result;
  t.match(hash, /^0x[0-9a-f]{64}$/);
  // Read the effect on the node itself, not through the gateway.
  t.match(await minedReceipt(node.url, hash), { status: '0x1', to: '0x000000000000000000000000000000000000dead' });
  const after = await rpc(node.url, 'eth_getBalance', ['0x000000000000000000000000000000000000dEaD', 'latest']);
  t.equal(BigInt((after.json as { result: string }).result), 12345n);
  const bn2 = await rpc(url, 'eth_blockNumber');
  t.ok(BigInt((bn2.json as { result: string }).result) > BigInt((bn.json as { result: string }).result), 'the block number advanced');
});

const UPSTREAM_ERROR = { jsonrpc: '2.0', id: 42, error: { code: -32603, message: 'Upstream node error' } };

t.test('502 with the request id for a dead, hanging, garbage-speaking or failing upstream', async (t) => {
  const faults = await Promise.all([
    fakeUpstream(t, 'hang'),
    fakeUpstream(t, 'reset'),
    fakeUpstream(t, 'garbage'),
    fakeUpstream(t, 'not-json'),
    fakeUpstream(t, 'http-500'),
  ]);
  const dead = await fakeUpstream(t, 'hang');
  const deadUrl = dead.url;
  const chains: Record<string, unknown> = { dead: evmChain(['http://127.0.0.1:1'], 1) };
  faults.forEach((f, i) => {
    chains[`f${i}`] = evmChain([f.url], 100 + i, { timeout_s: 1 });
  });
  const g = await gatewayFor(t, { server: { default_chain: 'dead' }, chains });
  for (const [slug, what] of [
    ['dead', 'refused'],
    ['f0', 'hang'],
    ['f1', 'reset'],
    ['f2', 'garbage'],
    ['f3', 'not JSON'],
    ['f4', 'HTTP 500'],
  ]) {
    const r = await rpc(`${g.base}/${slug}/v1/rpc/public`, 'eth_blockNumber', [], 42);
    t.equal(r.status, 502, `${what}: 502`);
    t.same(r.json, UPSTREAM_ERROR, `${what}: the error-table body with the request id`);
  }
  t.ok(deadUrl);
  t.ok(
    g.logLines.some((l) => l.startsWith('warn upstream unreachable') && l.includes('chain=dead')),
    'the start-up probe logs the dead upstream',
  );
  t.ok(
    g.logLines.some((l) => l.startsWith('warn upstream calls fail') && l.includes('upstream=127.0.0.1:1')),
    'the failure is logged with the upstream label',
  );
  // An outage is a condition, not a line per refused call: 300 more failures within a summary period add nothing.
  const before = g.logLines.filter((l) => l.includes('upstream calls fail') && l.includes('chain=dead')).length;
  const more = await Promise.all(
    Array.from({ length: 300 }, (_, i) =>
      rpc(`${g.base}/dead/v1/rpc/public`, 'eth_getBalance', [`0x${String(i).padStart(40, '0')}`, 'latest'], i),
    ),
  );
  t.same([...new Set(more.map((r) => r.status))], [502]);
  const after = g.logLines.filter((l) => l.includes('upstream calls fail') && l.includes('chain=dead')).length;
  t.equal(before, 1, 'one line when the failures start');
  t.ok(after <= 2, `${after} lines for 301 failed calls (at most one summary in the period)`);
});

t.test('an upstream that dies mid-answer cuts the client answer', async (t) => {
  const f = await fakeUpstream(t, 'truncated');
  const g = await gatewayFor(t, { chains: { devnet: evmChain([f.url], 1, { timeout_s: 2 }) } });
  const outcome = await post(
    `${g.base}/v1/rpc/public`,
    JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_blockNumber', params: [] }),
  ).then(
    (r) => `complete ${r.status} ${r.text.length}`,
    (err: Error) => `error ${err.message}`,
  );
  t.match(outcome, /^error /, 'the client sees an error, never a complete-looking body');
});

t.test('CORS, 404, 405, 401 and a beacon chain refusing JSON-RPC', async (t) => {
  const node = await anvilFor(t);
  const g = await gatewayFor(t, {
    server: { default_chain: 'devnet' },
    chains: { devnet: evmChain([node.url]), 'devnet-beacon': { kind: 'beacon', upstreams: [{ url: 'http://127.0.0.1:1' }] } },
  });
  const pre = await send('OPTIONS', `${g.base}/v1/rpc/public`, undefined, {
    origin: 'https://dapp.example',
    'access-control-request-method': 'POST',
    'access-control-request-headers': 'content-type',
  });
  t.equal(pre.status, 204);
  t.equal(pre.headers['access-control-allow-origin'], '*');
  t.match(pre.headers['access-control-allow-methods'], /POST/);
  t.match(pre.headers['access-control-allow-headers'], /content-type/i);
  const withOrigin = await rpc(`${g.base}/v1/rpc/public`, 'eth_chainId', [], 1, { origin: 'https://dapp.example' });
  t.equal(withOrigin.headers['access-control-allow-origin'], '*', 'every answer carries the CORS header');
  const get = await send('GET', `${g.base}/v1/rpc/public`);
  t.equal(get.status, 405);
  t.equal(get.headers.allow, 'POST, OPTIONS');
  const nowhere = await send('POST', `${g.base}/v2/whatever`, '{}', { 'content-type': 'application/json' });
  t.equal(nowhere.status, 404);
  t.match(nowhere.json, { error: { code: 'not_found' } });
  const keyed = await rpc(`${g.base}/v1/rpc/abcdefabcdefabcdefabcdefabcdefab`, 'eth_chainId');
  t.equal(keyed.status, 401);
  t.same(keyed.json, { jsonrpc: '2.0', id: 1, error: { code: -32001, message: 'Missing or invalid API key' } });
  const beacon = await rpc(`${g.base}/devnet-beacon/v1/rpc/public`, 'eth_chainId');
  t.equal(beacon.status, 404);
  t.match(beacon.text, /beacon chain/);
});

t.test('only listed origins get CORS headers when the list is not *', async (t) => {
  const node = await anvilFor(t);
  const g = await gatewayFor(t, { server: { cors_origins: ['https://good.example'] }, chains: { devnet: evmChain([node.url]) } });
  const good = await rpc(`${g.base}/v1/rpc/public`, 'eth_chainId', [], 1, { origin: 'https://good.example' });
  t.equal(good.headers['access-control-allow-origin'], 'https://good.example');
  t.equal(good.headers.vary, 'Origin');
  const bad = await rpc(`${g.base}/v1/rpc/public`, 'eth_chainId', [], 1, { origin: 'https://evil.example' });
  t.equal(bad.headers['access-control-allow-origin'], undefined);
});

t.test('graceful stop lets a request in flight finish', async (t) => {
  const slow = await fakeUpstream(t, (socket) => {
    setTimeout(() => {
      const body = '{"jsonrpc":"2.0","id":1,"result":"0x10"}';
      socket.write(`HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`);
    }, 400);
  });
  const g = await gatewayFor(t, { chains: { devnet: evmChain([slow.url], 1) } });
  const inFlight = rpc(`${g.base}/v1/rpc/public`, 'eth_gasPrice', [], 9);
  // The client's call, not a probe of the node (the prober asks eth_blockNumber).
  await waitFor(() => slow.requests.some((r) => r.includes('eth_gasPrice')), { what: "the client's call at the node" });
  const cut = await g.gateway.stop();
  const answer = await inFlight;
  t.equal(cut, 0, 'nothing was cut');
  t.same(answer.json, { jsonrpc: '2.0', id: 9, result: '0x10' });
  const refused = await rpc(`${g.base}/v1/rpc/public`, 'eth_blockNumber').then(
    () => 'answered',
    (e: NodeJS.ErrnoException) => e.code,
  );
  t.equal(refused, 'ECONNREFUSED', 'no new connections after stop');
});
