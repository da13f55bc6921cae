/**
 * A restriction, a rotation and a suspension take effect within a second everywhere the key is served:
 * on both worker threads of one gateway (`server.workers: 2`), and on both instances of a fleet on
 * PostgreSQL and Redis, the change made through the other one.
 */
import t, { type Test } from 'tap';
import { anvilFor, evmChain, gatewayFor, type TestGateway } from '../support/gateway.js';
import { rpc, send } from '../support/rpc.js';
import { startPostgres, startRedis } from '../support/servers.js';
import { waitFor } from '../support/wait-for.js';

/** Calls on fresh connections, so that with two workers both are asked; the statuses seen. */
async function statuses(g: TestGateway, key: string, n = 16): Promise<number[]> {
  return Promise.all(Array.from({ length: n }, async () => (await rpc(`${g.base}/v1/rpc/${key}`, 'eth_chainId')).status));
}

/** Waits until every one of a round of calls answers `status`; the time it took, in ms. */
async function allAnswer(g: TestGateway, key: string, status: number, what: string): Promise<number> {
  const started = Date.now();
  await waitFor(async () => (await statuses(g, key)).every((s) => s === status), { what, ms: 1000 });
  return Date.now() - started;
}

/** The three changes, made through `via` with the owner's management key, seen on `on` within a second. */
async function changesSeen(t: Test, via: TestGateway, on: TestGateway, managementKey: string, suspend: () => Promise<unknown>) {
  const bearer = { authorization: `Bearer ${managementKey}`, 'content-type': 'application/json' };
  const created = await send('POST', `${via.base}/api/dashboard/endpoints`, JSON.stringify({ network: 'devnet' }), bearer);
  t.equal(created.status, 201);
  const { id, api_key: key } = (created.json as { data: { id: string; api_key: string } }).data;
  t.same(new Set(await statuses(on, key)), new Set([200]), 'served everywhere first');

  // The client is 127.0.0.1 (no trust_proxy): a range without it refuses every call.
  const fenced = await send(
    'PATCH',
    `${via.base}/api/dashboard/endpoints?id=${id}`,
    JSON.stringify({ allowed_ips: ['192.0.2.0/24'] }),
    bearer,
  );
  t.equal(fenced.status, 200);
  t.ok((await allAnswer(on, key, 403, 'the new range applied everywhere')) < 1000, 'a restriction within a second');
  t.equal((await send('PATCH', `${via.base}/api/dashboard/endpoints?id=${id}`, JSON.stringify({ allowed_ips: null }), bearer)).status, 200);
  await allAnswer(on, key, 200, 'the range cleared everywhere');

  const rotated = await send('POST', `${via.base}/api/dashboard/endpoints/rotate?id=${id}`, JSON.stringify({ grace_s: 0 }), bearer);
  t.equal(rotated.status, 200);
  const next = (rotated.json as { data: { api_key: string } }).data.api_key;
  t.ok((await allAnswer(on, key, 401, 'the old key refused everywhere')) < 1000, 'a rotation within a second');
  t.same(new Set(await statuses(on, next)), new Set([200]), 'the new key served everywhere');

  await suspend();
  t.ok((await allAnswer(on, next, 403, 'the suspension seen everywhere')) < 1000, 'a suspension within a second');
}

t.test('both worker threads of one gateway', async (t) => {
  const node = await anvilFor(t);
  const g = await gatewayFor(t, { server: { workers: 2 }, chains: { devnet: evmChain([node.url]) } });
  const accounts = g.gateway.context.tenancy.accounts;
  const owner = await accounts.createOwner('workers', 'free', 1_000_000);
  await changesSeen(t, g, g, owner.managementKey, () => accounts.setSuspended(owner.id, true));
});

t.test('both instances of a fleet', async (t) => {
  const [node, pg, redis] = await Promise.all([anvilFor(t), startPostgres(t), startRedis(t)]);
  const one = (instance: string) =>
    gatewayFor(t, {
      storage: { url: pg.url },
      cluster: { redis_url: redis.url, instance },
      chains: { devnet: evmChain([node.url]) },
    });
  const [a, b] = await Promise.all([one('gw-a'), one('gw-b')]);
  const accounts = a.gateway.context.tenancy.accounts;
  const owner = await accounts.createOwner('fleet', 'free', 1_000_000);
  await changesSeen(t, a, b, owner.managementKey, () => accounts.setSuspended(owner.id, true));
});
