/**
 * An endpoint's restrictions end to end, set through the management API of a gateway in front of a real
 * anvil: origins from pages in a real Chromium (one on the allowed origin, one on another), client
 * addresses through `trust_proxy` (IPv4 and IPv6 ranges), contract addresses in calls, log filters, a
 * `logs` subscription and raw transactions signed with ethers, signed tokens made with jose (expired, not
 * yet valid, another key, another algorithm, `none`), keys out of URLs, a rotation whose old key works
 * through its grace and whose WebSocket closes at its end, and a suspended owner told so. Every refused
 * call is shown never to reach the node.
 */
import t from 'tap';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, SignJWT, type JWK } from 'jose';
import { Wallet } from 'ethers';
import { createOwnerAdmin } from '../../src/tenancy/owners.js';
import { browserFor } from '../support/browser.js';
import { countingProxy } from '../support/counting-proxy.js';
import { deployEcho, DEV_ADDRESS } from '../support/dev-chain.js';
import { anvilFor, gatewayFor } from '../support/gateway.js';
import { post, send } from '../support/rpc.js';
import { openSocket, refusedUpgrade, wsUrl } from '../support/ws.js';
import { waitFor } from '../support/wait-for.js';

/** anvil's first development account's private key (its address is DEV_ADDRESS). */
const DEV_PRIVATE_KEY = '0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80';
const OTHER = '0x000000000000000000000000000000000000dead';

const node = await anvilFor(t);
const relay = await countingProxy(t, node.url);
const g = await gatewayFor(t, {
  server: { trust_proxy: true },
  // Calls through the counting relay; subscriptions on anvil's own WebSocket.
  chains: { devnet: { chain_id: 31337, upstreams: [{ url: relay.url, ws: node.wsUrl }] } },
  plans: { free: { rps: 100_000, max_endpoints: 50 } },
});
const admin = createOwnerAdmin(g.gateway.context.tenancy.store!);
const owner = admin.createOwner('fenced', 'free', 100_000_000);
const bearer = { authorization: `Bearer ${owner.managementKey}`, 'content-type': 'application/json' };
const echo = await deployEcho(node.url);

interface Made {
  id: string;
  key: string;
}

async function endpoint(settings: Record<string, unknown>): Promise<Made> {
  const r = await send('POST', `${g.base}/api/dashboard/endpoints`, JSON.stringify({ network: 'devnet', ...settings }), bearer);
  if (r.status !== 201) throw new Error(`create: ${r.status} ${r.text}`);
  const data = (r.json as { data: { id: string; api_key: string } }).data;
  return { id: data.id, key: data.api_key };
}

async function patch(id: string, settings: Record<string, unknown>) {
  return send('PATCH', `${g.base}/api/dashboard/endpoints?id=${id}`, JSON.stringify(settings), bearer);
}

/** A JSON-RPC call with headers; the answer's status and body. */
function call(path: string, method: string, params: unknown[] = [], headers: Record<string, string> = {}) {
  return post(`${g.base}${path}`, JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }), {
    'content-type': 'application/json',
    ...headers,
  });
}

/** Runs `act`, then says how many calls of `method` the node saw meanwhile (its health probes call others). */
async function nodeCalls<T>(method: string, act: () => Promise<T>): Promise<{ value: T; seen: number }> {
  const before = relay.count(method);
  const value = await act();
  return { value, seen: relay.count(method) - before };
}

/** A call no probe of the gateway makes and no cache answers. */
const PENDING_NONCE: [string, unknown[]] = ['eth_getTransactionCount', [DEV_ADDRESS, 'pending']];

t.test('origins: a page on the allowed origin is served, a page on another is refused', async (t) => {
  const page = (body: string) =>
    new Promise<{ url: string; close: () => void }>((resolve) => {
      const s = createServer((_req, res) => {
        res.setHeader('content-type', 'text/html');
        res.end(body);
      }).listen(0, '127.0.0.1', () => resolve({ url: `http://127.0.0.1:${(s.address() as AddressInfo).port}`, close: () => s.close() }));
    });
  const allowed = await page('<!doctype html><title>allowed</title>');
  const other = await page('<!doctype html><title>other</title>');
  t.teardown(() => {
    allowed.close();
    other.close();
  });
  const ep = await endpoint({ allowed_origins: [allowed.url], key_in_path: false });
  const browser = await browserFor(t);
  const context = await browser.newContext();
  t.teardown(() => context.close());
  // The page calls with the key in X-API-Key (a header: a CORS preflight first), then over a WebSocket with
  // the key as a subprotocol, as docs/api.md tells a dApp to.
  const script = `async () => {
    const r = await fetch(${JSON.stringify(`${g.base}/v1/rpc`)}, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': ${JSON.stringify(ep.key)} },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] }),
    }).then(async (r) => ({ status: r.status, body: await r.json() }), (e) => ({ status: 0, body: String(e) }));
    const ws = await new Promise((resolve) => {
      const s = new WebSocket(${JSON.stringify(wsUrl(g.base, '/v1/rpc'))}, ['chaingate', 'chaingate.key.' + ${JSON.stringify(ep.key)}]);
      s.onopen = () => { s.send(JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'eth_chainId', params: [] })); };
      s.onmessage = (m) => { resolve({ opened: true, protocol: s.protocol, answer: JSON.parse(m.data) }); s.close(); };
      s.onerror = () => resolve({ opened: false });
    });
    return { http: r, ws };
  }`;
  const good = await context.newPage();
  await good.goto(allowed.url);
  const served = (await good.evaluate(`(${script})()`)) as { http: { status: number; body: unknown }; ws: Record<string, unknown> };
  t.equal(served.http.status, 200, 'fetch from the allowed origin served');
  t.match(served.http.body, { result: '0x7a69' });
  t.match(served.ws, { opened: true, protocol: 'chaingate', answer: { result: '0x7a69' } }, 'and its WebSocket');
  const bad = await context.newPage();
  await bad.goto(other.url);
  const { value: refused, seen } = await nodeCalls(
    'eth_chainId',
    async () => (await bad.evaluate(`(${script})()`)) as { http: { status: number; body: unknown }; ws: Record<string, unknown> },
  );
  t.equal(refused.http.status, 403, 'fetch from another origin refused');
  t.match(refused.http.body, { error: { message: `Origin "${other.url}" is not allowed for this key` } });
  t.match(refused.ws, { opened: false }, 'and its WebSocket upgrade');
  t.equal(seen, 0, 'the node saw none of it');
  // A server using the same key sends no Origin: refused unless allow_no_origin.
  t.equal((await call('/v1/rpc', 'eth_chainId', [], { 'x-api-key': ep.key })).status, 403, 'no Origin: refused');
  t.equal((await patch(ep.id, { allow_no_origin: true })).status, 200);
  await waitFor(async () => (await call('/v1/rpc', 'eth_chainId', [], { 'x-api-key': ep.key })).status === 200, {
    what: 'allow_no_origin applied',
    ms: 1000,
  });
});

t.test('addresses through trust_proxy: IPv4 and IPv6 ranges', async (t) => {
  const ep = await endpoint({ allowed_ips: ['192.0.2.0/24', '2001:db8:aa::/48'] });
  const from = (ip: string) => call(`/v1/rpc/${ep.key}`, ...PENDING_NONCE, { 'x-forwarded-for': `198.51.100.7, ${ip}` });
  t.equal((await from('192.0.2.200')).status, 200, 'IPv4 inside');
  t.equal((await from('::ffff:192.0.2.9')).status, 200, 'IPv4-mapped IPv6 inside');
  t.equal((await from('2001:db8:aa:ffff::1')).status, 200, 'IPv6 inside');
  const { value: out4, seen } = await nodeCalls(PENDING_NONCE[0], () => from('192.0.3.1'));
  t.equal(out4.status, 403, 'IPv4 outside');
  t.match(out4.json, { error: { code: -32600, message: 'Client address 192.0.3.1 is not allowed for this key' } });
  t.equal((await from('2001:db8:ab::1')).status, 403, 'IPv6 outside');
  t.equal(seen, 0, 'the node saw none of the refused');
  const ws = await refusedUpgrade(wsUrl(g.base, `/v1/rpc/${ep.key}`), { headers: { 'x-forwarded-for': '10.1.1.1' } });
  t.equal(ws.status, 403, 'a WebSocket upgrade from outside refused');
});

t.test('contracts: calls, log filters, subscriptions and raw transactions', async (t) => {
  const ep = await endpoint({ allowed_contracts: [echo.toUpperCase().replace('0X', '0x')] });
  const path = `/v1/rpc/${ep.key}`;
  const callOf = (to: string) => [{ from: DEV_ADDRESS, to, data: '0x12' }, 'latest'];
  t.equal((await call(path, 'eth_call', callOf(echo))).status, 200, 'eth_call to the allowed contract');
  const refusedCall = await nodeCalls('eth_call', () => call(path, 'eth_call', callOf(OTHER)));
  t.equal(refusedCall.value.status, 403);
  t.match(refusedCall.value.json, { error: { message: `eth_call: contract ${OTHER} is not allowed for this key` } });
  t.equal(refusedCall.seen, 0, 'never reached the node');
  t.equal((await call(path, 'eth_getLogs', [{ address: [echo], fromBlock: '0x0' }])).status, 200, 'logs of the allowed contract');
  t.equal((await call(path, 'eth_getLogs', [{ address: [echo, OTHER], fromBlock: '0x0' }])).status, 403, 'one address outside: refused');
  t.equal((await call(path, 'eth_getLogs', [{ fromBlock: '0x0' }])).status, 403, 'no address: refused');
  t.equal((await call(path, 'eth_newFilter', [{ address: OTHER }])).status, 403, 'eth_newFilter outside');
  t.equal((await call(path, 'eth_blockNumber')).status, 200, 'a call naming no contract by nature is served');

  // A batch: the allowed items answered, the refused one in place, and only the served ones charged.
  const before = (await send('GET', `${g.base}/api/dashboard/account`, undefined, bearer)).json as { data: { ru_balance: number } };
  const batch = await post(
    `${g.base}${path}`,
    JSON.stringify([
      { jsonrpc: '2.0', id: 1, method: 'eth_getCode', params: [echo, 'latest'] },
      { jsonrpc: '2.0', id: 2, method: 'eth_getCode', params: [OTHER, 'latest'] },
    ]),
    { 'content-type': 'application/json' },
  );
  t.equal(batch.status, 200);
  t.match(batch.json, [
    { id: 1, result: /^0x[0-9a-f]+$/ },
    { id: 2, error: { code: -32600, message: /contract 0x0+dead is not allowed/ } },
  ]);
  await waitFor(
    async () => {
      const after = (await send('GET', `${g.base}/api/dashboard/account`, undefined, bearer)).json as { data: { ru_balance: number } };
      return before.data.ru_balance - after.data.ru_balance > 0;
    },
    { what: 'the served item charged', ms: 3000 },
  );

  const ws = await openSocket(t, wsUrl(g.base, path));
  const sub = await ws.call({ jsonrpc: '2.0', id: 1, method: 'eth_subscribe', params: ['logs', { address: echo }] });
  t.match(sub, { result: /^0x/ }, JSON.stringify(sub));
  t.match(await ws.call({ jsonrpc: '2.0', id: 2, method: 'eth_subscribe', params: ['logs', { address: [OTHER] }] }), {
    error: { code: -32600, message: /contract 0x0+dead is not allowed/ },
  });
  t.match(
    await ws.call({ jsonrpc: '2.0', id: 3, method: 'eth_subscribe', params: ['logs', {}] }),
    { error: { code: -32600 } },
    'every contract',
  );

  // Raw transactions signed with ethers: the recipient is decoded from the signed bytes.
  const wallet = new Wallet(DEV_PRIVATE_KEY);
  const nonce = Number.parseInt(
    ((await call(path, 'eth_getTransactionCount', [DEV_ADDRESS, 'pending'])).json as { result: string }).result,
    16,
  );
  const signed = (to: string | null, n: number) =>
    wallet.signTransaction({
      to,
      nonce: n,
      gasLimit: 100_000,
      maxFeePerGas: 10_000_000_000n,
      maxPriorityFeePerGas: 1n,
      chainId: 31337,
      data: '0x12',
    });
  const toOther = await nodeCalls('eth_sendRawTransaction', async () => call(path, 'eth_sendRawTransaction', [await signed(OTHER, nonce)]));
  t.equal(toOther.value.status, 403, 'a raw transaction to another contract');
  t.equal(toOther.seen, 0, 'never reached the node');
  t.equal((await call(path, 'eth_sendRawTransaction', [await signed(null, nonce)])).status, 403, 'a deployment (no recipient)');
  const sent = await call(path, 'eth_sendRawTransaction', [await signed(echo, nonce)]);
  t.equal(sent.status, 200, 'a raw transaction to the allowed contract');
  t.match(sent.json, { result: /^0x[0-9a-f]{64}$/ });
});

t.test('keys out of URLs, methods', async (t) => {
  const ep = await endpoint({ key_in_path: false, allowed_methods: ['eth_chainId', 'eth_get*'] });
  t.equal((await call(`/v1/rpc/${ep.key}`, 'eth_chainId')).status, 401, 'in the path: as no key');
  t.equal((await call('/v1/rpc', 'eth_chainId', [], { 'x-api-key': ep.key })).status, 200, 'X-API-Key');
  t.equal((await call('/devnet/v1/rpc', 'eth_chainId', [], { authorization: `Bearer ${ep.key}` })).status, 200, 'Bearer on a named path');
  const m = await nodeCalls('eth_gasPrice', () => call('/v1/rpc', 'eth_gasPrice', [], { 'x-api-key': ep.key }));
  t.equal(m.value.status, 403, 'a method outside the list');
  t.match(m.value.json, { error: { code: -32004, message: 'Method eth_gasPrice is not allowed for this key' } });
  t.equal(m.seen, 0);
  const ws = await openSocket(t, wsUrl(g.base, '/v1/rpc'), { headers: { 'x-api-key': ep.key } });
  t.match(await ws.call({ jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] }), { result: '0x7a69' }, 'a WebSocket with the header');
});

t.test('signed tokens made with jose', async (t) => {
  const es = await generateKeyPair('ES256');
  const other = await generateKeyPair('ES256');
  const jwk: JWK = await exportJWK(es.publicKey);
  const ep = await endpoint({ jwt_keys: [{ id: 'backend', alg: 'ES256', jwk }], jwt_max_lifetime_s: 600 });
  const now = Math.floor(Date.now() / 1000);
  const token = (key: Parameters<SignJWT['sign']>[0], claims: { exp?: number; nbf?: number; iat?: number }, alg = 'ES256') => {
    const jwt = new SignJWT({ sub: 'user-1' }).setProtectedHeader({ alg, kid: 'backend' });
    if (claims.iat !== undefined) jwt.setIssuedAt(claims.iat);
    if (claims.exp !== undefined) jwt.setExpirationTime(claims.exp);
    if (claims.nbf !== undefined) jwt.setNotBefore(claims.nbf);
    return jwt.sign(key);
  };
  const withToken = (jwt: string | null) =>
    call(`/v1/rpc/${ep.key}`, ...PENDING_NONCE, jwt === null ? {} : { authorization: `Bearer ${jwt}` });
  t.equal((await withToken(await token(es.privateKey, { iat: now, exp: now + 300 }))).status, 200, 'a valid token');
  const cases: Array<[string, string | null, RegExp]> = [
    ['none sent', null, /required/i],
    ['expired', await token(es.privateKey, { iat: now - 600, exp: now - 120 }), /expired/i],
    ['not yet valid', await token(es.privateKey, { iat: now, nbf: now + 300, exp: now + 500 }), /not yet valid/i],
    ['signed by another key', await token(other.privateKey, { iat: now, exp: now + 300 }), /signature/i],
    ['lifetime over the endpoint’s', await token(es.privateKey, { iat: now, exp: now + 3600 }), /lifetime/i],
    ['another algorithm (HS256)', await token(new TextEncoder().encode('x'.repeat(32)), { iat: now, exp: now + 300 }, 'HS256'), /alg/i],
    [
      'alg none',
      `${Buffer.from(JSON.stringify({ alg: 'none', kid: 'backend' })).toString('base64url')}.${Buffer.from(JSON.stringify({ exp: now + 60 })).toString('base64url')}.`,
      /alg/i,
    ],
  ];
  for (const [what, jwt, why] of cases) {
    const r = await nodeCalls(PENDING_NONCE[0], () => withToken(jwt));
    t.equal(r.value.status, 403, what);
    t.match(r.value.json, { error: { code: -32600, message: why } }, `${what}: says why`);
    t.equal(r.seen, 0, `${what}: never reached the node`);
  }
});

t.test('rotation: both keys through the grace, the old one refused and its WebSocket closed at its end', async (t) => {
  const ep = await endpoint({ name: 'rotating' });
  const ws = await openSocket(t, wsUrl(g.base, `/v1/rpc/${ep.key}`));
  const rotated = await send('POST', `${g.base}/api/dashboard/endpoints/rotate?id=${ep.id}`, JSON.stringify({ grace_s: 2 }), bearer);
  t.equal(rotated.status, 200);
  const answer = (rotated.json as { data: { api_key: string; https_url: string; wss_url: string; previous_key_expires_at: string } }).data;
  t.not(answer.api_key, ep.key, 'a new key');
  t.match(answer.https_url, answer.api_key);
  const end = Date.parse(answer.previous_key_expires_at);
  t.ok(Math.abs(end - (Date.now() + 2000)) < 1500, 'the old key ends in 2 s');
  t.equal((await call(`/v1/rpc/${answer.api_key}`, 'eth_chainId')).status, 200, 'the new key works');
  t.equal((await call(`/v1/rpc/${ep.key}`, 'eth_chainId')).status, 200, 'the old one too, in its grace');
  const listed = await send('GET', `${g.base}/api/dashboard/endpoints`, undefined, bearer);
  t.match(JSON.stringify(listed.json), /previous_key_expires_at/, 'the list shows the old key’s end');
  const closed = await ws.closed;
  t.ok(Date.now() >= end - 100, 'the old key’s WebSocket closed at its end, not before');
  t.match(closed.reason, /rotated|expired/i);
  await waitFor(async () => (await call(`/v1/rpc/${ep.key}`, 'eth_chainId')).status === 401, { what: 'the old key refused', ms: 1000 });
  const now = await send('POST', `${g.base}/api/dashboard/endpoints/rotate?id=${ep.id}`, JSON.stringify({ grace_s: 0 }), bearer);
  const next = (now.json as { data: { api_key: string } }).data.api_key;
  t.equal((await call(`/v1/rpc/${answer.api_key}`, 'eth_chainId')).status, 401, 'grace 0: the previous key refused at once');
  t.equal((await call(`/v1/rpc/${next}`, 'eth_chainId')).status, 200);
});

t.test('a suspended owner is told so', async (t) => {
  const sus = admin.createOwner('suspended', 'free', 1000);
  const made = await send('POST', `${g.base}/api/dashboard/endpoints`, JSON.stringify({ network: 'devnet' }), {
    authorization: `Bearer ${sus.managementKey}`,
    'content-type': 'application/json',
  });
  const key = (made.json as { data: { api_key: string } }).data.api_key;
  admin.setSuspended(sus.id, true);
  await waitFor(async () => (await call(`/v1/rpc/${key}`, 'eth_chainId')).status === 403, { what: 'the key refused 403', ms: 2000 });
  t.match((await call(`/v1/rpc/${key}`, 'eth_chainId')).json, { error: { message: /suspended/i } });
  const account = await send('GET', `${g.base}/api/dashboard/account`, undefined, { authorization: `Bearer ${sus.managementKey}` });
  t.equal(account.status, 403, 'its management key too');
  t.match(account.json, { error: { code: 'owner_suspended' } });
  t.equal((await call('/v1/rpc/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA', 'eth_chainId')).status, 401, 'a typo stays 401');
});
