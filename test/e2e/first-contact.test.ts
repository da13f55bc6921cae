/**
 * What a new user meets first: every JSON-RPC refusal carries the caller's id (401, 415, the key-guessing
 * 429), 401 bodies that do not tell a deleted key from a random one, a missing key answered as an unknown
 * one on every transport, a valid key on another chain told its network, and the management API usable
 * from a browser page on another origin (preflight per path, ISO 8601 times in stats).
 */
import t from 'tap';
import { createOwnerAdmin } from '../../src/tenancy/owners.js';
import { anvilFor, evmChain, gatewayFor, type TestGateway } from '../support/gateway.js';
import { post, type RawAnswer, rpc, send } from '../support/rpc.js';
import { refusedUpgrade, wsUrl } from '../support/ws.js';

const node = await anvilFor(t);
// trust_proxy: each test speaks from an X-Forwarded-For address of its own, so the unknown-key guard
// (20 unknown keys a minute per IP) counts each test apart.
const g = await gatewayFor(t, {
  server: { default_chain: 'devnet', trust_proxy: true },
  chains: { devnet: evmChain([node.url]), 'devnet-beacon': { kind: 'beacon', upstreams: [{ url: 'http://127.0.0.1:1' }] } },
});

const BAD_KEY = 'Missing or invalid API key';
const errorText = (idText: string, code: number, message: string): string =>
  `{"jsonrpc":"2.0","id":${idText},"error":{"code":${code},"message":${JSON.stringify(message)}}}`;
const fromIp = (ip: string): Record<string, string> => ({ 'x-forwarded-for': ip });

function endpointFor(gw: TestGateway, network: string): { ownerId: number; managementKey: string; apiKey: string; endpointId: string } {
  const { tenancy } = gw.gateway.context;
  const owner = createOwnerAdmin(tenancy.store!).createOwner('first', 'free', 1_000_000);
  const made = tenancy.directory!.createEndpoint(owner.id, network, 'e', 10);
  if ('error' in made) throw new Error(made.error);
  return { ownerId: owner.id, managementKey: owner.managementKey, apiKey: made.apiKey, endpointId: made.endpoint.id };
}

t.test('a 401 carries the id of each request, exactly as written', async (t) => {
  const url = `${g.base}/v1/rpc/${'q'.repeat(32)}`;
  const h = fromIp('10.1.0.1');
  const single = await post(url, '{"jsonrpc":"2.0","id":7,"method":"eth_chainId","params":[]}', h);
  t.equal(single.status, 401);
  t.equal(single.text, errorText('7', -32001, BAD_KEY));
  for (const idText of ['"abc"', '1.50', '-0', '"a\\u0041\\"b"', '1e3']) {
    const r = await post(url, `{"id":${idText},"jsonrpc":"2.0","method":"eth_chainId"}`, h);
    t.equal(r.text, errorText(idText, -32001, BAD_KEY), `id ${idText} as written`);
  }
  const batch = await post(
    url,
    '[{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}, {"jsonrpc":"2.0","id":"x","method":"eth_chainId"},5,{"jsonrpc":"2.0","method":"eth_chainId"}]',
    h,
  );
  t.equal(batch.status, 401);
  t.equal(
    batch.text,
    `[${['1', '"x"', 'null', 'null'].map((id) => errorText(id, -32001, BAD_KEY)).join(',')}]`,
    'a batch: one error per item, with its id',
  );
  const notJson = await post(url, '{"jsonrpc":"2.0","id":9,', h);
  t.equal(notJson.text, errorText('null', -32001, BAD_KEY), 'a body that is not JSON: id null');
  const nullId = await post(url, '{"jsonrpc":"2.0","id":1,"id":2,"method":"eth_chainId"}', h);
  t.equal(nullId.text, errorText('null', -32001, BAD_KEY), 'a duplicate id is no id, as in every other answer');
});

t.test('401 bodies are byte-identical for a random, near-miss, malformed, deleted or missing key', async (t) => {
  const h = fromIp('10.1.0.2');
  const ep = endpointFor(g, 'devnet');
  const body = '{"jsonrpc":"2.0","id":"same","method":"eth_chainId","params":[]}';
  const works = await post(`${g.base}/v1/rpc/${ep.apiKey}`, body, h);
  t.equal(works.status, 200, 'the key works before it is deleted');
  const last = ep.apiKey.slice(-1);
  const nearMiss = `${ep.apiKey.slice(0, -1)}${last === 'a' ? 'b' : 'a'}`;
  t.ok(g.gateway.context.tenancy.directory!.deleteEndpoint(ep.ownerId, ep.endpointId));
  const keys: Record<string, string> = {
    random: 'Zr8fK2mQ9xLp4Tn7Vb1Wc6Yd3Hs5Jg0A',
    'near miss': nearMiss,
    malformed: 'not-a-key!',
    'too short': 'abc',
    deleted: ep.apiKey,
  };
  const expected = errorText('"same"', -32001, BAD_KEY);
  for (const [what, key] of Object.entries(keys)) {
    const r = await post(`${g.base}/v1/rpc/${encodeURIComponent(key)}`, body, h);
    t.equal(r.status, 401, `${what}: 401`);
    t.equal(r.text, expected, `${what}: the same bytes`);
  }
  for (const path of ['/v1/rpc', '/v1/rpc/', '/devnet/v1/rpc', '/devnet/v1/rpc/']) {
    const r = await post(`${g.base}${path}`, body, h);
    t.equal(r.status, 401, `no key at ${path}: 401, not 404`);
    t.equal(r.text, expected, `no key at ${path}: the same bytes`);
  }
});

t.test('415 and the key-guessing 429 carry the ids too', async (t) => {
  const pub = `${g.base}/v1/rpc/public`;
  const single = await send('POST', pub, '{"jsonrpc":"2.0","id":"t","method":"eth_chainId"}', { 'content-type': 'text/plain' });
  t.equal(single.status, 415);
  t.equal(single.text, errorText('"t"', -32600, 'Content-Type must be application/json'));
  const batch = await send(
    'POST',
    pub,
    '[{"jsonrpc":"2.0","id":1,"method":"eth_chainId"},{"jsonrpc":"2.0","id":2,"method":"eth_chainId"}]',
    {
      'content-type': 'text/plain',
    },
  );
  t.equal(
    batch.text,
    `[${errorText('1', -32600, 'Content-Type must be application/json')},${errorText('2', -32600, 'Content-Type must be application/json')}]`,
  );
  const h = fromIp('10.1.0.3');
  let last = await post(`${g.base}/v1/rpc/${'w'.repeat(32)}`, '{"jsonrpc":"2.0","id":0,"method":"eth_chainId"}', h);
  for (let i = 1; i <= 20 && last.status === 401; i++) {
    last = await post(`${g.base}/v1/rpc/${'w'.repeat(32)}`, `{"jsonrpc":"2.0","id":${i},"method":"eth_chainId"}`, h);
  }
  t.equal(last.status, 429, 'an IP presenting too many unknown keys is throttled');
  t.equal(last.text, errorText('20', -32005, 'Rate limit exceeded'));
});

t.test('a missing key is 401 on the WebSocket upgrade and the Beacon paths alike', async (t) => {
  const h = fromIp('10.1.0.4');
  for (const path of ['/v1/rpc', '/v1/rpc/', '/devnet/v1/rpc/']) {
    const r = await refusedUpgrade(wsUrl(g.base, path));
    t.equal(r.status, 401, `upgrade of ${path}: 401`);
    t.same(JSON.parse(r.body), { jsonrpc: '2.0', id: null, error: { code: -32001, message: BAD_KEY } });
  }
  for (const path of [
    '/devnet-beacon/v1/rpc//eth/v1/node/version',
    '/v1/rpc//eth/v1/node/version',
    `/v1/rpc/${'k'.repeat(32)}/eth/v1/node/version`,
  ]) {
    const r = await send('GET', `${g.base}${path}`, undefined, h);
    t.equal(r.status, 401, `${path}: 401`);
    t.same(r.json, { code: 401, message: BAD_KEY }, `${path}: in the Beacon shape`);
  }
});

t.test("a valid key on another chain's path is 401 naming the key's network", async (t) => {
  const ep = endpointFor(g, 'devnet');
  const beaconPath = await send('GET', `${g.base}/devnet-beacon/v1/rpc/${ep.apiKey}/eth/v1/node/version`);
  t.equal(beaconPath.status, 401);
  t.same(beaconPath.json, {
    code: 401,
    message: "This API key belongs to network 'devnet', not 'devnet-beacon': call it on its endpoint's URL",
  });
  const beaconKey = endpointFor(g, 'devnet-beacon');
  const rpcPath = await rpc(`${g.base}/devnet/v1/rpc/${beaconKey.apiKey}`, 'eth_chainId', [], 3);
  t.equal(rpcPath.status, 401);
  t.same(rpcPath.json, {
    jsonrpc: '2.0',
    id: 3,
    error: { code: -32001, message: "This API key belongs to network 'devnet-beacon', not 'devnet': call it on its endpoint's URL" },
  });
  const upgrade = await refusedUpgrade(wsUrl(g.base, `/devnet/v1/rpc/${beaconKey.apiKey}`));
  t.equal(upgrade.status, 401);
  t.match(JSON.parse(upgrade.body), { error: { message: /belongs to network 'devnet-beacon'/ } });
});

t.test('the CORS preflight allows the verbs each path serves, and the Authorization header', async (t) => {
  const origin = 'https://dashboard.example';
  const preflight = (path: string, headers = 'authorization') =>
    send('OPTIONS', `${g.base}${path}`, undefined, {
      origin,
      'access-control-request-method': 'DELETE',
      'access-control-request-headers': headers,
    });
  const cases: Array<[string, string]> = [
    ['/api/dashboard/endpoints', 'GET, POST, PATCH, DELETE, OPTIONS'],
    ['/api/dashboard/endpoints/', 'GET, POST, PATCH, DELETE, OPTIONS'],
    ['/api/dashboard/endpoints/stats', 'GET, OPTIONS'],
    ['/api/dashboard/account', 'GET, OPTIONS'],
    ['/api/dashboard/chains', 'GET, OPTIONS'],
    ['/v1/rpc/public', 'POST, OPTIONS'],
    ['/devnet-beacon/v1/rpc/public/eth/v1/node/version', 'GET, POST, OPTIONS'],
  ];
  for (const [path, methods] of cases) {
    const r = await preflight(path);
    t.equal(r.status, 204, `${path}: 204`);
    t.equal(r.headers['access-control-allow-methods'], methods, `${path}: ${methods}`);
    t.match(r.headers['access-control-allow-headers'], /(^|, )authorization(,|$)/i, `${path}: Authorization allowed`);
  }
  const bare = await preflight('/api/dashboard/endpoints', '');
  t.equal(bare.headers['access-control-allow-headers'], 'Content-Type, Authorization', 'both, when none is asked for');
  const more = await preflight('/api/dashboard/endpoints', 'content-type,x-trace');
  t.equal(more.headers['access-control-allow-headers'], 'content-type, x-trace, Authorization', 'what is asked for, and Authorization');
  const nowhere = await preflight('/api/dashboard/nothing');
  t.equal(nowhere.status, 404);
  const ep = endpointFor(g, 'devnet');
  const del = await send('DELETE', `${g.base}/api/dashboard/endpoints?id=${ep.endpointId}`, undefined, {
    origin,
    authorization: `Bearer ${ep.managementKey}`,
  });
  t.equal(del.status, 200, 'and the DELETE itself is served with the CORS header');
  t.equal(del.headers['access-control-allow-origin'], '*');
});

t.test('stats take ISO 8601 times as well as unix seconds', async (t) => {
  const ep = endpointFor(g, 'devnet');
  t.equal((await rpc(`${g.base}/v1/rpc/${ep.apiKey}`, 'eth_chainId')).status, 200);
  g.gateway.context.tenancy.ledger.flush();
  const stats = (query: string) =>
    send('GET', `${g.base}/api/dashboard/endpoints/stats?${query}`, undefined, { authorization: `Bearer ${ep.managementKey}` });
  const listed = await send('GET', `${g.base}/api/dashboard/endpoints`, undefined, { authorization: `Bearer ${ep.managementKey}` });
  const createdAt = (listed.json as { data: Array<{ created_at: string }> }).data[0]!.created_at;
  const fromS = Math.floor(Date.parse(createdAt) / 1000) - 3600;
  const toS = Math.floor(Date.now() / 1000) + 3600;
  // A worker ships its usage rows to the main thread's ledger, which writes them at its next flush: the
  // call is waited for, so both reads below see the same rows.
  const requestsIn = (a: RawAnswer): number => (a.json as { data: { totals: { requests: number } } }).data.totals.requests;
  let byUnix = await stats(`from=${fromS}&to=${toS}&interval=hour`);
  for (let i = 0; i < 100 && requestsIn(byUnix) < 1; i++) {
    await new Promise((r) => setTimeout(r, 50));
    g.gateway.context.tenancy.ledger.flush();
    byUnix = await stats(`from=${fromS}&to=${toS}&interval=hour`);
  }
  t.equal(byUnix.status, 200);
  t.equal(requestsIn(byUnix), 1, 'the call is counted');
  const iso = (s: number) => new Date(s * 1000).toISOString();
  const byIso = await stats(`from=${encodeURIComponent(iso(fromS))}&to=${encodeURIComponent(iso(toS))}&interval=hour`);
  t.equal(byIso.status, 200);
  t.same(byIso.json, byUnix.json, 'the same answer as with unix seconds');
  t.match(byIso.json, { data: { totals: { requests: 1 } } }, 'and it counts the call');
  const copied = await stats(`from=${encodeURIComponent(createdAt)}&to=${toS}`);
  t.equal(copied.status, 200, 'a created_at copied as it is');
  const bad = await stats('from=yesterday');
  t.equal(bad.status, 400);
  t.match(bad.json, { error: { code: 'bad_request', message: /'from' must be a unix time in seconds or an ISO 8601 time/ } });
});
