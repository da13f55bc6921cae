/**
 * JSON-RPC over WebSocket against a real anvil: the same pipeline as HTTP on the same paths, the key
 * checked at the upgrade, frame rules (binary 1003, oversize 1009), limits with their errors, the
 * hammering close (1008), a revoked key closing its sockets, and a graceful stop closing with 1001.
 */
import t from 'tap';
import { createOwnerAdmin } from '../../src/tenancy/owners.js';
import { anvilFor, evmChain, gatewayFor, type TestGateway } from '../support/gateway.js';
import { post, rpc, send } from '../support/rpc.js';
import { openSocket, refusedUpgrade, wsUrl } from '../support/ws.js';

export function endpoint(
  g: TestGateway,
  plan = 'growth',
  ru = 1_000_000,
): { ownerId: number; key: string; endpointId: string; managementKey: string } {
  const admin = createOwnerAdmin(g.gateway.context.tenancy.store!);
  const owner = admin.createOwner(`o${Math.random()}`, plan, ru);
  const made = g.gateway.context.tenancy.directory!.createEndpoint(owner.id, 'devnet', 'ws', 10);
  if (!('apiKey' in made)) throw new Error(made.error);
  return { ownerId: owner.id, key: made.apiKey, endpointId: made.endpoint.id, managementKey: owner.managementKey };
}

t.test('methods, batches and errors over WebSocket match HTTP; a bad key gets 401 and no socket', async (t) => {
  const node = await anvilFor(t);
  const g = await gatewayFor(t, { chains: { devnet: evmChain([node.url]) } });
  const s = await openSocket(t, wsUrl(g.base, '/v1/rpc/public'));
  const http = await rpc(`${g.base}/v1/rpc/public`, 'eth_blockNumber', [], 1);
  const viaWs = await s.call({ jsonrpc: '2.0', id: 1, method: 'eth_blockNumber', params: [] });
  t.same(viaWs, http.json, 'the same answer as over HTTP');
  t.same(await s.call({ jsonrpc: '2.0', id: 'a"b', method: 'eth_chainId' }), { jsonrpc: '2.0', id: 'a"b', result: '0x7a69' });
  for (const body of ['{"jsonrpc":"2.0","id":1,"method":"eth_sign","params":[]}', '{"jsonrpc":"2.0","id":', '[]', '{"id":1}']) {
    const overHttp = await post(`${g.base}/v1/rpc/public`, body);
    t.same(await s.call(body), overHttp.json, `the same refusal as over HTTP: ${body}`);
  }
  const batch = await s.call([
    { jsonrpc: '2.0', id: 1, method: 'eth_chainId' },
    { jsonrpc: '2.0', id: 2, method: 'eth_getBalance', params: ['0x0000000000000000000000000000000000000000', 'latest'] },
    { jsonrpc: '2.0', id: 3, method: 'nope' },
  ]);
  t.match(batch, [
    { id: 1, result: '0x7a69' },
    { id: 2, result: /^0x/ },
    { id: 3, error: { code: -32601 } },
  ]);
  const viaHttp = await rpc(`${g.base}/v1/rpc/public`, 'eth_subscribe', ['newHeads']);
  t.match(viaHttp.json, { error: { code: -32601, message: /WebSocket/ } }, 'eth_subscribe over HTTP says it needs a WebSocket');

  const bad = await refusedUpgrade(wsUrl(g.base, '/v1/rpc/not-a-key'));
  t.equal(bad.status, 401);
  t.same(JSON.parse(bad.body), { jsonrpc: '2.0', id: null, error: { code: -32001, message: 'Missing or invalid API key' } });
  const ep = endpoint(g);
  const keyed = await openSocket(t, wsUrl(g.base, `/v1/rpc/${ep.key}`));
  t.match(await keyed.call({ jsonrpc: '2.0', id: 9, method: 'eth_blockNumber' }), { id: 9, result: /^0x/ });
  g.gateway.context.tenancy.ledger.flush();
  t.ok(g.gateway.context.tenancy.ledger.available(ep.ownerId) < 1_000_000, 'a keyed WebSocket call is metered');
});

t.test('binary frames close 1003, frames over the limit close 1009; below the limit is served', async (t) => {
  const node = await anvilFor(t);
  const g = await gatewayFor(t, { chains: { devnet: evmChain([node.url]) }, websocket: { max_message_bytes: 1024 } });
  const binary = await openSocket(t, wsUrl(g.base, '/v1/rpc/public'));
  binary.ws.send(Buffer.from('{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}'), { binary: true });
  t.match(await binary.closed, { code: 1003, reason: /Binary/ });
  const big = await openSocket(t, wsUrl(g.base, '/v1/rpc/public'));
  const pad = 'x'.repeat(1100);
  big.ws.send(`{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[],"pad":"${pad}"}`);
  t.match(await big.closed, { code: 1009, reason: /websocket\.max_message_bytes/ });
  const fine = await openSocket(t, wsUrl(g.base, '/v1/rpc/public'));
  t.match(await fine.call({ jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] }), { result: '0x7a69' });
});

t.test(
  'limits: rate limit on messages (-32005), hammering closes 1008, connections per IP and per key, subscriptions per connection',
  async (t) => {
    const node = await anvilFor(t);
    const g = await gatewayFor(t, {
      chains: { devnet: evmChain([node.url]) },
      public: { rps_per_ip: 5, max_batch: 10 },
      websocket: { max_connections_per_ip: 3, max_connections_per_key: 2 },
    });
    const s = await openSocket(t, wsUrl(g.base, '/v1/rpc/public'));
    const answers = [];
    for (let i = 0; i < 8; i++) answers.push(await s.call({ jsonrpc: '2.0', id: i, method: 'eth_chainId' }));
    const refused = answers.filter((a) => (a as { error?: { code: number } }).error?.code === -32005);
    t.ok(refused.length >= 3, `over the limit → -32005 on the socket (${refused.length} refused)`);
    t.same(refused[0], { jsonrpc: '2.0', id: (refused[0] as { id: number }).id, error: { code: -32005, message: 'Rate limit exceeded' } });
    // 100 refused messages within 10 s close the socket.
    for (let i = 0; i < 120; i++) s.ws.send(JSON.stringify({ jsonrpc: '2.0', id: i, method: 'eth_chainId' }));
    t.match(await s.closed, { code: 1008, reason: 'Too many refused requests' });

    await new Promise((r) => setTimeout(r, 1100));
    const open = [];
    for (let i = 0; i < 3; i++) open.push(await openSocket(t, wsUrl(g.base, '/v1/rpc/public')));
    const fourth = await refusedUpgrade(wsUrl(g.base, '/v1/rpc/public'));
    t.equal(fourth.status, 429);
    t.match(JSON.parse(fourth.body), { error: { code: -32005, message: /limit is 3 \(websocket\.max_connections_per_ip\)/ } });
    open[0]!.ws.close();
    await open[0]!.closed;
    await new Promise((r) => setTimeout(r, 1100));
    const again = await openSocket(t, wsUrl(g.base, '/v1/rpc/public'));
    t.ok(again, 'a closed connection frees its place');

    const ep = endpoint(g);
    await openSocket(t, wsUrl(g.base, `/v1/rpc/${ep.key}`));
    await openSocket(t, wsUrl(g.base, `/v1/rpc/${ep.key}`));
    const third = await refusedUpgrade(wsUrl(g.base, `/v1/rpc/${ep.key}`));
    t.equal(third.status, 429);
    t.match(JSON.parse(third.body), { error: { message: /limit is 2 \(websocket\.max_connections_per_key\)/ } });
  },
);

t.test('a deleted key closes its sockets; a graceful stop closes every socket with 1001', async (t) => {
  const node = await anvilFor(t);
  const g = await gatewayFor(t, { chains: { devnet: evmChain([node.url]) } });
  const ep = endpoint(g);
  const keyed = await openSocket(t, wsUrl(g.base, `/v1/rpc/${ep.key}`));
  const pub = await openSocket(t, wsUrl(g.base, '/v1/rpc/public'));
  const deleted = await send('DELETE', `${g.base}/api/dashboard/endpoints?id=${ep.endpointId}`, undefined, {
    authorization: `Bearer ${ep.managementKey}`,
  });
  t.equal(deleted.status, 200);
  t.match(await keyed.closed, { code: 1008, reason: 'API key revoked' });
  t.match(await pub.call({ jsonrpc: '2.0', id: 1, method: 'eth_chainId' }), { result: '0x7a69' }, 'other sockets stay');
  await g.gateway.stop();
  t.match(await pub.closed, { code: 1001, reason: 'Server shutting down' });
});
