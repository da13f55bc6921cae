/**
 * An endpoint's restrictions on the request path, against a real anvil behind a counting proxy: each kind of
 * refusal over HTTP (single and batch), WebSocket (upgrade and messages, subscriptions) and Beacon (REST
 * and event streams); keys in headers and subprotocols; key_in_path false; a suspended owner; IPv4 and IPv6
 * ranges through trust_proxy; a rotated key's socket closed at its end. A refused call costs no RU, never
 * reaches the node, and is counted in usage and in chaingate_refusals_total{reason="fenced"}.
 * The grants are set with test/support/key-grants.ts until the management API sets them, so the gateway
 * runs in one thread (workers: 1), whose key book the test wraps.
 */
import t, { type Test } from 'tap';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { Wallet } from 'ethers';
import { createOwnerAdmin } from '../../src/tenancy/owners.js';
import { countingProxy } from '../support/counting-proxy.js';
import { devnetBeacon } from '../support/devnet-beacon.js';
import { openEventStream } from '../support/event-stream.js';
import { scrape } from '../support/exposition.js';
import { anvilFor, evmChain, gatewayFor, type TestGateway } from '../support/gateway.js';
import { grantKey, type GrantChange } from '../support/key-grants.js';
import { post, rpc, send } from '../support/rpc.js';
import { waitFor } from '../support/wait-for.js';
import { openSocket, refusedUpgrade, wsUrl } from '../support/ws.js';

const ALLOWED = '0x5fbdb2315678afecb367f032d93f642f64180aa3';
const OTHER = '0x00000000000000000000000000000000000000aa';
/** anvil's first development account (its well-known key): a real signed transaction. */
const DEV_KEY = '0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80';

interface Endpoint {
  ownerId: number;
  key: string;
  endpointId: string;
}

function endpoint(g: TestGateway, network = 'devnet', change?: GrantChange): Endpoint {
  const admin = createOwnerAdmin(g.gateway.context.tenancy.store!);
  const owner = admin.createOwner(`o${Math.random()}`, 'growth', 1_000_000);
  const made = g.gateway.context.tenancy.directory!.createEndpoint(owner.id, network, 'fenced', 10);
  if (!('apiKey' in made)) throw new Error(made.error);
  if (change !== undefined) grantKey(g.gateway.context.tenancy.keys, made.apiKey, change);
  return { ownerId: owner.id, key: made.apiKey, endpointId: made.endpoint.id };
}

function balance(g: TestGateway, ownerId: number): number {
  g.gateway.context.tenancy.ledger.flush();
  return g.gateway.context.tenancy.ledger.available(ownerId);
}

/** The usage rows of an endpoint: method, status and requests. */
function usage(g: TestGateway, endpointId: string): Array<{ method: string; status: number; requests: number }> {
  const t = g.gateway.context.tenancy;
  t.ledger.flush();
  return t
    .store!.db.prepare(
      'SELECT method, status, sum(requests) AS requests FROM usage_minute WHERE endpoint_id = ? GROUP BY method, status ORDER BY method, status',
    )
    .all(endpointId) as never;
}

async function fencedGateway(t: Test) {
  const node = await anvilFor(t);
  const proxy = await countingProxy(t, node.url);
  const g = await gatewayFor(t, { chains: { devnet: evmChain([proxy.url]) }, server: { trust_proxy: true, workers: 1 } });
  const ruOf = (method: string): number => g.gateway.context.tenancy.ruCost(method, g.gateway.context.chains.get('devnet')!.policy.prices);
  return { node, proxy, g, ruOf };
}

const call = (method: string, params: unknown[] = [], id: number | string = 1) => ({ jsonrpc: '2.0', id, method, params });

t.test('HTTP: each refusal kind is 403 with its row, costs nothing, never reaches the node, and is counted', async (t) => {
  const { proxy, g, ruOf } = await fencedGateway(t);
  const ep = endpoint(g, 'devnet', {
    fences: {
      allowed_origins: ['https://app.example.com'],
      allowed_methods: ['eth_call', 'eth_getBalance', 'eth_getLogs', 'eth_newFilter'],
      allowed_contracts: [ALLOWED],
    },
  });
  const url = `${g.base}/v1/rpc/${ep.key}`;
  const app = { origin: 'https://app.example.com' };
  const before = balance(g, ep.ownerId);
  const metricsBefore = (await scrape(g.gateway.metricsPort!)).value('chaingate_refusals_total', { reason: 'fenced' });

  const evil = await rpc(url, 'eth_call', [{ to: ALLOWED }, 'latest'], 1, { origin: 'https://evil.io' });
  t.equal(evil.status, 403);
  t.same(evil.json, { jsonrpc: '2.0', id: 1, error: { code: -32600, message: 'Origin "https://evil.io" is not allowed for this key' } });
  const none = await rpc(url, 'eth_call', [{ to: ALLOWED }, 'latest'], 2);
  t.match(none, { status: 403, json: { id: 2, error: { code: -32600, message: /without Origin/ } } }, 'no Origin while the list is set');

  const method = await rpc(url, 'eth_getTransactionCount', [ALLOWED, 'latest'], 3, app);
  t.match(method, {
    status: 403,
    json: { id: 3, error: { code: -32004, message: 'Method eth_getTransactionCount is not allowed for this key' } },
  });
  const contract = await rpc(url, 'eth_call', [{ to: OTHER }, 'latest'], 4, app);
  t.match(contract, {
    status: 403,
    json: { id: 4, error: { code: -32600, message: `eth_call: contract ${OTHER} is not allowed for this key` } },
  });
  const logs = await rpc(url, 'eth_getLogs', [{ address: [ALLOWED, OTHER], fromBlock: '0x0', toBlock: '0x0' }], 5, app);
  t.match(
    logs,
    { status: 403, json: { error: { code: -32600, message: /eth_getLogs: contract 0x0+aa/ } } },
    'every address of a list must be allowed',
  );
  const filter = await rpc(url, 'eth_newFilter', [{ address: OTHER }], 6, app);
  t.match(filter, { status: 403, json: { error: { code: -32600 } } }, 'eth_newFilter is fenced too');
  t.equal(balance(g, ep.ownerId), before, 'no RU for a refused request or call');
  t.equal(proxy.count('eth_call'), 0, 'no refused call reached the node');
  t.equal(proxy.count('eth_getTransactionCount'), 0);
  t.equal(proxy.count('eth_getLogs'), 0);

  const served = await rpc(url, 'eth_call', [{ to: ALLOWED }, 'latest'], 7, app);
  t.match(served, { status: 200, json: { id: 7, result: '0x' } }, 'the allowed origin, method and contract are served');
  t.equal(proxy.count('eth_call'), 1);
  t.equal(before - balance(g, ep.ownerId), ruOf('eth_call'), 'the served call is charged');

  const after = await scrape(g.gateway.metricsPort!);
  t.equal(after.value('chaingate_refusals_total', { reason: 'fenced' }) - metricsBefore, 6, 'each refusal counted as fenced');
  t.match(
    usage(g, ep.endpointId),
    [
      { method: 'eth_call', status: 0, requests: 1 },
      { method: 'eth_call', status: 403, requests: 1 },
      { method: 'eth_getLogs', status: 403, requests: 1 },
      { method: 'eth_getTransactionCount', status: -32004, requests: 1 },
      { method: 'eth_newFilter', status: 403, requests: 1 },
    ],
    'calls refused by the key are in its usage with their status',
  );
});

t.test('HTTP batch: refused items get their error beside the others; RU and node calls only for the allowed', async (t) => {
  const { proxy, g, ruOf } = await fencedGateway(t);
  const ep = endpoint(g, 'devnet', { fences: { allowed_methods: ['eth_getBalance', 'eth_call'], allowed_contracts: [ALLOWED] } });
  const before = balance(g, ep.ownerId);
  const r = await post(
    `${g.base}/v1/rpc/${ep.key}`,
    JSON.stringify([
      call('eth_getBalance', [ALLOWED, 'latest'], 1),
      call('eth_getTransactionCount', [ALLOWED, 'latest'], 2),
      call('eth_call', [{ to: OTHER }, 'latest'], 3),
      call('eth_call', [{ to: ALLOWED }, 'latest'], 4),
    ]),
  );
  t.equal(r.status, 200);
  t.match(r.json, [
    { id: 1, result: /^0x/ },
    { id: 2, error: { code: -32004, message: /eth_getTransactionCount/ } },
    { id: 3, error: { code: -32600, message: /contract 0x0+aa/ } },
    { id: 4, result: '0x' },
  ]);
  t.equal(before - balance(g, ep.ownerId), ruOf('eth_getBalance') + ruOf('eth_call'), 'only the allowed items are charged');
  t.equal(proxy.count('eth_getTransactionCount'), 0);
  t.equal(proxy.count('eth_call', [{ to: OTHER }, 'latest']), 0);
  t.equal(proxy.count('eth_call', [{ to: ALLOWED }, 'latest']), 1);
});

t.test('a signed raw transaction is fenced by its decoded recipient', async (t) => {
  const { proxy, g } = await fencedGateway(t);
  const ep = endpoint(g, 'devnet', { fences: { allowed_contracts: [ALLOWED] } });
  const url = `${g.base}/v1/rpc/${ep.key}`;
  const wallet = new Wallet(DEV_KEY);
  const sign = (to: string, nonce: number) =>
    wallet.signTransaction({
      to,
      nonce,
      chainId: 31337,
      gasLimit: 21_000,
      maxFeePerGas: 10n ** 10n,
      maxPriorityFeePerGas: 1n,
      value: 1n,
      type: 2,
    });
  const refused = await rpc(url, 'eth_sendRawTransaction', [await sign(OTHER, 0)]);
  t.match(refused, {
    status: 403,
    json: { error: { code: -32600, message: `eth_sendRawTransaction: contract ${OTHER} is not allowed for this key` } },
  });
  t.equal(proxy.count('eth_sendRawTransaction'), 0, 'the node never saw it');
  const sent = await rpc(url, 'eth_sendRawTransaction', [await sign(ALLOWED, 0)]);
  t.match(sent, { status: 200, json: { result: /^0x[0-9a-f]{64}$/ } }, 'to an allowed address it is sent');
  t.equal(proxy.count('eth_sendRawTransaction'), 1);
});

t.test('keys in headers: X-API-Key and Bearer on /v1/rpc and /<slug>/v1/rpc; key_in_path false; two keys; suspended', async (t) => {
  const { g } = await fencedGateway(t);
  const plain = endpoint(g);
  const headerOnly = endpoint(g, 'devnet', { fences: { key_in_path: false } });
  for (const [path, headers] of [
    ['/v1/rpc', { 'x-api-key': plain.key }],
    ['/devnet/v1/rpc', { authorization: `Bearer ${plain.key}` }],
    ['/v1/rpc/', { 'x-api-key': headerOnly.key }],
    [`/v1/rpc/${plain.key}`, { 'x-api-key': plain.key }],
  ] as const) {
    t.match(
      await rpc(`${g.base}${path}`, 'eth_chainId', [], 1, headers),
      { status: 200, json: { result: '0x7a69' } },
      `${path} ${Object.keys(headers)[0]}`,
    );
  }
  const inPath = await rpc(`${g.base}/v1/rpc/${headerOnly.key}`, 'eth_chainId');
  t.match(inPath, { status: 401, json: { error: { code: -32001, message: /only in a header/ } } }, 'key_in_path false: the URL is no key');
  const repeated = await rpc(`${g.base}/v1/rpc/${headerOnly.key}`, 'eth_chainId', [], 1, { 'x-api-key': headerOnly.key });
  t.equal(repeated.status, 401, 'even repeated in a header');
  const two = await rpc(`${g.base}/v1/rpc/${plain.key}`, 'eth_chainId', [], 1, { 'x-api-key': headerOnly.key });
  t.match(two, { status: 401, json: { error: { code: -32001, message: /Two different API keys/ } } });
  t.match(await rpc(`${g.base}/v1/rpc`, 'eth_chainId'), { status: 401, json: { error: { code: -32001 } } }, 'no key at all: 401 as before');
  t.match(
    await rpc(`${g.base}/v1/rpc`, 'eth_chainId', [], 1, { authorization: 'Basic abc' }),
    { status: 401 },
    'a malformed Authorization',
  );
  const suspended = endpoint(g, 'devnet', { suspended: true });
  t.match(await rpc(`${g.base}/v1/rpc/${suspended.key}`, 'eth_chainId', [], 7), {
    status: 403,
    json: { id: 7, error: { code: -32001, message: 'Owner suspended' } },
  });
});

t.test('IPv4 and IPv6 ranges on the address trust_proxy reads', async (t) => {
  const { g } = await fencedGateway(t);
  const ep = endpoint(g, 'devnet', { fences: { allowed_ips: ['192.0.2.0/24', '2001:db8::/32'] } });
  const url = `${g.base}/v1/rpc/${ep.key}`;
  for (const [xff, status] of [
    ['192.0.2.7', 200],
    ['10.1.1.1, 192.0.2.200', 200],
    ['192.0.2.7, 198.51.100.1', 403],
    ['2001:db8:1::5', 200],
    ['::ffff:192.0.2.9', 200],
    ['2001:db9::1', 403],
  ] as const) {
    const r = await rpc(url, 'eth_chainId', [], 1, { 'x-forwarded-for': xff });
    t.equal(r.status, status, `X-Forwarded-For: ${xff}`);
    if (status === 403) t.match(r.json, { error: { code: -32600, message: /^Client address .* is not allowed for this key$/ } });
  }
  t.equal((await rpc(url, 'eth_chainId')).status, 403, 'the socket peer 127.0.0.1 is outside both');
});

t.test('signed tokens: refused without one, served with a valid one (checked while the request is held)', async (t) => {
  const { g } = await fencedGateway(t);
  const { publicKey, privateKey } = await generateKeyPair('ES256');
  const jwk = await exportJWK(publicKey);
  const ep = endpoint(g, 'devnet', { fences: { jwt_keys: [{ id: 'k1', alg: 'ES256', jwk }] } });
  const url = `${g.base}/v1/rpc/${ep.key}`;
  t.match(await rpc(url, 'eth_chainId'), { status: 403, json: { error: { code: -32600, message: /^Signed token refused/ } } });
  const token = await new SignJWT({})
    .setProtectedHeader({ alg: 'ES256', kid: 'k1' })
    .setIssuedAt()
    .setExpirationTime('10m')
    .sign(privateKey);
  const body = JSON.stringify([call('eth_chainId', [], 1), call('eth_chainId', [], 2)]);
  const first = await post(url, body, { authorization: `Bearer ${token}` });
  t.match(first, { status: 200, json: [{ id: 1, result: '0x7a69' }, { id: 2 }] }, 'the first use is verified, the body kept meanwhile');
  t.equal((await post(url, body, { authorization: `Bearer ${token}` })).status, 200, 'then from what was proved');
  // A token not met yet (ES256 signatures differ each time): the handshake waits for its check.
  const fresh = await new SignJWT({})
    .setProtectedHeader({ alg: 'ES256', kid: 'k1' })
    .setIssuedAt()
    .setExpirationTime('10m')
    .sign(privateKey);
  t.not(fresh, token);
  const WebSocket = (await import('ws')).default;
  const browserLike = new WebSocket(wsUrl(g.base, '/v1/rpc'), ['chaingate', `chaingate.key.${ep.key}`, `chaingate.jwt.${fresh}`]);
  t.teardown(() => browserLike.terminate());
  await new Promise<void>((resolve, reject) => {
    browserLike.once('open', () => resolve());
    browserLike.once('error', reject);
  });
  t.equal(browserLike.protocol, 'chaingate', 'key and token as subprotocols, answered with chaingate');
  browserLike.close();
  const upgraded = await openSocket(t, wsUrl(g.base, `/v1/rpc/${ep.key}`), { headers: { authorization: `Bearer ${token}` } });
  t.match(await upgraded.call(call('eth_chainId')), { result: '0x7a69' });
  const expired = await new SignJWT({})
    .setProtectedHeader({ alg: 'ES256', kid: 'k1' })
    .setIssuedAt(Math.floor(Date.now() / 1000) - 600)
    .setExpirationTime(Math.floor(Date.now() / 1000) - 300)
    .sign(privateKey);
  const late = await refusedUpgrade(wsUrl(g.base, `/v1/rpc/${ep.key}`), { headers: { authorization: `Bearer ${expired}` } });
  t.equal(late.status, 403, 'an expired token, checked while the handshake waits');
  t.match(JSON.parse(late.body), { error: { code: -32600, message: /^Signed token refused: .*expired/ } });
  const refusedSocket = await refusedUpgrade(wsUrl(g.base, `/v1/rpc/${ep.key}`));
  t.equal(refusedSocket.status, 403, 'an upgrade without the token');
});

t.test('WebSocket: keys in headers and subprotocols, refused upgrades, refused messages and log subscriptions', async (t) => {
  const { proxy, g } = await fencedGateway(t);
  const ep = endpoint(g, 'devnet', {
    fences: {
      allowed_origins: ['https://app.example.com'],
      allowed_methods: ['eth_chainId', 'eth_subscribe', 'eth_getBalance'],
      allowed_contracts: [ALLOWED],
    },
  });
  const origin = 'https://app.example.com';
  const viaHeader = await openSocket(t, wsUrl(g.base, '/v1/rpc'), { headers: { 'x-api-key': ep.key }, origin });
  t.match(await viaHeader.call(call('eth_chainId')), { result: '0x7a69' }, 'X-API-Key on the upgrade');
  const WebSocket = (await import('ws')).default;
  const browserLike = new WebSocket(wsUrl(g.base, '/v1/rpc'), ['chaingate', `chaingate.key.${ep.key}`], { origin });
  t.teardown(() => browserLike.terminate());
  await new Promise<void>((resolve, reject) => {
    browserLike.once('open', () => resolve());
    browserLike.once('error', reject);
  });
  t.equal(browserLike.protocol, 'chaingate', 'answered with the chaingate subprotocol, never the one carrying the key');
  browserLike.close();

  const evil = await refusedUpgrade(wsUrl(g.base, `/v1/rpc/${ep.key}`), { origin: 'https://evil.io' });
  t.equal(evil.status, 403);
  t.match(JSON.parse(evil.body), { error: { code: -32600, message: 'Origin "https://evil.io" is not allowed for this key' } });
  const noChaingate = await refusedUpgrade(wsUrl(g.base, '/v1/rpc'), {
    origin,
    headers: { 'sec-websocket-protocol': `chaingate.key.${ep.key}` },
  });
  t.equal(noChaingate.status, 401, "a key subprotocol without 'chaingate'");

  const s = viaHeader;
  t.match(
    await s.call(call('eth_getTransactionCount', [ALLOWED, 'latest'], 2)),
    { id: 2, error: { code: -32004 } },
    'a method outside the list',
  );
  t.match(
    await s.call(call('eth_getBalance', [OTHER, 'latest'], 3)),
    { id: 3, result: /^0x/ },
    'eth_getBalance is not fenced by contracts by default',
  );
  t.match(
    await s.call(call('eth_subscribe', ['logs', { address: OTHER }], 4)),
    { id: 4, error: { code: -32600, message: /eth_subscribe\("logs"\): contract 0x0+aa/ } },
    'a log subscription to another contract',
  );
  t.match(
    await s.call(call('eth_subscribe', ['logs', {}], 5)),
    { id: 5, error: { code: -32600, message: /names no contract/ } },
    'or to every contract',
  );
  t.match(
    await s.call([call('eth_chainId', [], 6), call('eth_getTransactionCount', [ALLOWED, 'latest'], 7)]),
    [
      { id: 6, result: '0x7a69' },
      { id: 7, error: { code: -32004 } },
    ],
    'a batch message',
  );
  t.equal(proxy.count('eth_getTransactionCount'), 0);
});

t.test('a WebSocket opened with a rotated key in its grace closes when the grace ends', async (t) => {
  const { g } = await fencedGateway(t);
  const ep = endpoint(g, 'devnet', { keyExpiresAtMs: Date.now() + 1500 });
  const s = await openSocket(t, wsUrl(g.base, `/v1/rpc/${ep.key}`));
  t.match(await s.call(call('eth_chainId')), { result: '0x7a69' }, 'served during the grace');
  const closed = await s.closed;
  t.equal(closed.code, 1008);
  t.match(closed.reason, /expired/);
  await waitFor(async () => (await rpc(`${g.base}/v1/rpc/${ep.key}`, 'eth_chainId')).status === 401, { what: 'the ended key is 401' });
  t.equal((await refusedUpgrade(wsUrl(g.base, `/v1/rpc/${ep.key}`))).status, 401, 'and no new socket');
});

t.test('Beacon REST and event streams: origin, address and key place checked before the node', async (t) => {
  const { g } = await devnetBeacon(t, { server: { default_chain: 'devnet', trust_proxy: true, workers: 1 } });
  const ep = endpoint(g, 'devnet-beacon', {
    fences: { allowed_origins: ['https://app.example.com'], allowed_ips: ['192.0.2.0/24'], key_in_path: false },
  });
  const path = '/devnet-beacon/v1/rpc/eth/v1/node/version';
  const ok = { 'x-api-key': ep.key, origin: 'https://app.example.com', 'x-forwarded-for': '192.0.2.1' };
  t.match(await send('GET', `${g.base}${path}`, undefined, ok), { status: 200, json: { data: { version: /./ } } }, 'served');
  const evil = await send('GET', `${g.base}${path}`, undefined, { ...ok, origin: 'https://evil.io' });
  t.match(evil, { status: 403, json: { code: 403, message: /evil\.io/ } }, 'in the Beacon shape');
  t.match(await send('GET', `${g.base}${path}`, undefined, { ...ok, 'x-forwarded-for': '198.51.100.1' }), { status: 403 });
  t.match(
    await send('GET', `${g.base}/devnet-beacon/v1/rpc/${ep.key}/eth/v1/node/version`, undefined, ok),
    { status: 401 },
    'the key in the path',
  );
  const events = '/devnet-beacon/v1/rpc/eth/v1/events?topics=head';
  t.match(await send('GET', `${g.base}${events}`, undefined, { ...ok, origin: 'https://evil.io' }), { status: 403 }, 'an event stream');
  const stream = await openEventStream(`${g.base}${events}`, ok);
  t.equal(stream.status, 200, 'the stream opens for the allowed origin');
  stream.close();
  const rotated = endpoint(g, 'devnet-beacon', { keyExpiresAtMs: Date.now() + 1500 });
  const ending = await openEventStream(`${g.base}/devnet-beacon/v1/rpc/${rotated.key}/eth/v1/events?topics=head`);
  t.equal(ending.status, 200, 'a rotated key in its grace opens a stream');
  await waitFor(() => ending.ended(), { what: 'the stream ends with the grace' });
  t.equal(ending.lastComment, ': closed: API key expired: it was rotated and its grace period ended');
});
