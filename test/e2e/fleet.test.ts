/**
 * Two instances of a fleet (storage.url, cluster) on different ports, sharing one PostgreSQL and one Redis
 * in front of one anvil: keys made on one work on the other at once and stop there within a second of a
 * delete, an owner's balance for exactly K calls gives exactly K successes across both, a plan's rps holds
 * across both (in a fresh key's first second and in any second of steady traffic), and the instances survive Redis going away and coming back.
 */
import t, { type Test } from 'tap';
import WebSocket from 'ws';
import { anvilFor, evmChain, gatewayFor, type TestGateway } from '../support/gateway.js';
import { post, rpc, send } from '../support/rpc.js';
import { clearOfMinuteEnd, waitFor } from '../support/wait-for.js';
import { startPostgres, startRedis, type TestServer } from '../support/servers.js';

/** eth_chainId's price in these tests: a balance of K × PRICE pays for exactly K calls. */
const PRICE = 10;

async function fleetOf(t: Test, upstream: string, pg: TestServer, redis: TestServer, extra: Record<string, unknown> = {}) {
  const one = (instance: string): Promise<TestGateway> =>
    gatewayFor(t, {
      storage: { url: pg.url },
      cluster: { redis_url: redis.url, instance, reservation_ttl_s: 3, reservation_block_ru: 50 },
      ledger: { flush_interval_ms: 100 },
      plans: { fleet: { rps: 100_000, max_endpoints: 10 }, slow: { rps: 20, max_endpoints: 10 } },
      ru: { methods: { eth_chainId: PRICE } },
      chains: { devnet: evmChain([upstream]) },
      ...extra,
    });
  return Promise.all([one('gw-a'), one('gw-b')]);
}

const call = (g: TestGateway, key: string, method = 'eth_chainId') => rpc(`${g.base}/v1/rpc/${key}`, method);

t.test('a fleet of two instances', async (t) => {
  const [node, pg, redis] = await Promise.all([anvilFor(t), startPostgres(t), startRedis(t)]);
  const [a, b] = await fleetOf(t, node.url, pg, redis);
  const accounts = a.gateway.context.tenancy.accounts;

  await t.test(
    'a key made through one instance’s management API works on the other at once, and stops there within a second',
    async (t) => {
      const owner = await accounts.createOwner('keys', 'fleet', 1_000_000);
      const bearer = { authorization: `Bearer ${owner.managementKey}`, 'content-type': 'application/json' };
      const created = await send('POST', `${a.base}/api/dashboard/endpoints`, JSON.stringify({ network: 'devnet', name: 'k' }), bearer);
      t.equal(created.status, 201, 'created through a');
      const { id, api_key: key } = (created.json as { data: { id: string; api_key: string } }).data;
      // a's first sight of the key is a WebSocket upgrade: held until PostgreSQL answered, then upgraded.
      const wsA = new WebSocket(`${a.base.replace('http', 'ws')}/v1/rpc/${key}`);
      await new Promise((r, j) => wsA.once('open', r).once('error', j));
      const closedA = new Promise<number>((r) => wsA.once('close', (code) => r(code)));
      t.equal((await call(b, key)).status, 200, 'b serves it at once');
      const ws = new WebSocket(`${b.base.replace('http', 'ws')}/v1/rpc/${key}`);
      await new Promise((r, j) => ws.once('open', r).once('error', j));
      const closed = new Promise<number>((r) => ws.once('close', (code) => r(code)));
      t.equal((await send('DELETE', `${a.base}/api/dashboard/endpoints?id=${id}`, undefined, bearer)).status, 200, 'deleted through a');
      const deletedAt = Date.now();
      await waitFor(async () => (await call(b, key)).status === 401, { what: 'b refuses it within a second', ms: 1000 });
      t.equal(await closed, 1008, 'b closed the WebSocket the key opened');
      t.equal(await closedA, 1008, 'and a its own');
      t.ok(Date.now() - deletedAt < 1000, `within a second (${Date.now() - deletedAt} ms)`);
      const listed = await send('GET', `${b.base}/api/dashboard/endpoints`, undefined, bearer);
      t.same((listed.json as { data: unknown[] }).data, [], 'b’s management API lists what a’s changed');

      const suspended = await accounts.createEndpoint(owner.id, 'devnet', 's', 10);
      if (!('apiKey' in suspended)) throw new Error(suspended.error);
      t.equal((await call(b, suspended.apiKey)).status, 200);
      await accounts.setSuspended(owner.id, true);
      await waitFor(async () => (await call(b, suspended.apiKey)).status === 403, {
        what: 'an owner suspended elsewhere is refused on b',
        ms: 1000,
      });
    },
  );

  await t.test('the balance shown counts RU spent, not RU reserved', async (t) => {
    const owner = await accounts.createOwner('shown', 'fleet', 1000);
    const made = await accounts.createEndpoint(owner.id, 'devnet', 'shown', 10);
    if (!('apiKey' in made)) throw new Error(made.error);
    for (let i = 0; i < 3; i++) t.equal((await call(a, made.apiKey)).status, 200);
    const bearer = { authorization: `Bearer ${owner.managementKey}` };
    const balanceOn = async (g: TestGateway): Promise<number> =>
      ((await send('GET', `${g.base}/api/dashboard/account`, undefined, bearer)).json as { data: { ru_balance: number } }).data.ru_balance;
    t.equal(await balanceOn(a), 1000 - 3 * PRICE, 'at once on the instance that served them, though it reserved a block of 50');
    await waitFor(async () => (await balanceOn(b)) === 1000 - 3 * PRICE, { what: 'within a flush interval on the other', ms: 1000 });
  });

  await t.test('a balance for exactly K calls gives exactly K successes across both instances', async (t) => {
    const K = 37;
    const owner = await accounts.createOwner('bank', 'fleet', K * PRICE);
    const made = await accounts.createEndpoint(owner.id, 'devnet', 'bank', 10);
    if (!('apiKey' in made)) throw new Error(made.error);
    // Each instance gets more calls than the whole balance pays for: whatever one holds, it spends.
    const statuses = await Promise.all(
      Array.from({ length: 4 * K }, (_, i) => call(i % 2 === 0 ? a : b, made.apiKey).then((r) => r.status)),
    );
    t.equal(statuses.filter((s) => s === 200).length, K, `${K} successes`);
    t.equal(statuses.filter((s) => s === 402).length, 3 * K, 'the rest refused 402');
    await Promise.all([a.gateway.context.tenancy.ledger.flush(), b.gateway.context.tenancy.ledger.flush()]);
    const fleetA = a.gateway.context.tenancy.fleet!;
    await waitFor(async () => (await fleetA.ledgerStore.balance(owner.id)) === 0, {
      what: 'the shared balance is spent to zero, once',
      ms: 2000,
    });
    const stats = await send('GET', `${b.base}/api/dashboard/endpoints/stats?interval=day`, undefined, {
      authorization: `Bearer ${owner.managementKey}`,
    });
    t.match(stats.json, { data: { totals: { ru: K * PRICE } } }, 'the usage both wrote, in the stats of either');
  });

  await t.test("a plan's rps holds across both instances", async (t) => {
    const owner = await accounts.createOwner('rps', 'slow', 1_000_000);
    const made = await accounts.createEndpoint(owner.id, 'devnet', 'rps', 10);
    if (!('apiKey' in made)) throw new Error(made.error);
    // A fresh key's first second: 60 calls at once, half through each, against 20 per second.
    const statuses = await Promise.all(Array.from({ length: 60 }, (_, i) => call(i % 2 === 0 ? a : b, made.apiKey).then((r) => r.status)));
    const ok = statuses.filter((s) => s === 200).length;
    t.ok(ok >= 19 && ok <= 20, `${ok} of 60 passed: 20 per second across the fleet, within 5 %`);
    t.equal(statuses.filter((s) => s === 429).length, 60 - ok, 'the rest refused 429');

    // Once the burst has left the window, steady traffic through both for 3 s: four clients, two on each
    // instance, each calling again 5 ms after its answer. A call is admitted somewhere between when it
    // was sent and when it was answered, so the successes whose whole [sent, answered] lies within a
    // second were all admitted in it: at most 21 (20 within 5 %) in any second, whatever the jitter.
    await new Promise((r) => setTimeout(r, 1100));
    const served: Array<[number, number]> = [];
    const end = performance.now() + 3000;
    await Promise.all(
      [a, a, b, b].map(async (g) => {
        while (performance.now() < end) {
          const sent = performance.now();
          if ((await call(g, made.apiKey)).status === 200) served.push([sent, performance.now()]);
          await new Promise((r) => setTimeout(r, 5));
        }
      }),
    );
    let busiest = 0;
    for (const [from] of served) busiest = Math.max(busiest, served.filter(([s, e]) => s >= from && e < from + 1000).length);
    t.ok(busiest <= 21, `at most 21 calls admitted in any one second (${busiest})`);
    // Fewer only when a client is slow to take a slot as the window frees it (a loaded machine).
    t.ok(served.length >= 51, `and about 20 a second over the 3 s: 60 at most (${served.length})`);
    t.ok(served.length <= 63, 'never more than the limit allows over 3 s, within 5 %');
  });
});

t.test('a fleet limits as one machine does', async (t) => {
  const [node, pg, redis] = await Promise.all([anvilFor(t), startPostgres(t), startRedis(t)]);
  await rpc(node.url, 'anvil_mine', ['0x40']);
  const one = (instance: string): Promise<TestGateway> =>
    gatewayFor(t, {
      storage: { url: pg.url },
      cluster: { redis_url: redis.url, instance, reservation_ttl_s: 3, reservation_block_ru: 50 },
      ledger: { flush_interval_ms: 100 },
      plans: {
        fleet: { rps: 100_000, max_endpoints: 10 },
        rus: { rps: 100_000, ru_per_second: 100, max_endpoints: 10 },
        logs: { rps: 100_000, ru_per_second: 100_000, max_endpoints: 10 },
        slow: { rps: 20, max_endpoints: 10 },
      },
      ru: { methods: { eth_chainId: PRICE, eth_getLogs: 50 } },
      chains: { devnet: evmChain([node.url], 31337, { split_logs: true, max_logs_block_range: 10 }) },
    });
  const [a, b] = await Promise.all([one('gw-a'), one('gw-b')]);
  const accounts = a.gateway.context.tenancy.accounts;
  const keyOf = async (plan: string, ru: number): Promise<string> => {
    const owner = await accounts.createOwner(`o-${plan}-${Math.random()}`, plan, ru);
    const made = await accounts.createEndpoint(owner.id, 'devnet', 'e', 10);
    if (!('apiKey' in made)) throw new Error(made.error);
    return made.apiKey;
  };

  await t.test('a split eth_getLogs pays its windows under ru_per_second', async (t) => {
    const key = await keyOf('logs', 1_000_000);
    const r = await rpc(`${a.base}/v1/rpc/${key}`, 'eth_getLogs', [{ fromBlock: '0x0', toBlock: '0x27' }]);
    t.comment(`status ${r.status} retry-after ${String(r.headers['retry-after'])} ${r.text.slice(0, 200)}`);
    t.equal(r.status, 200, 'a split eth_getLogs (4 windows) is served');
  });

  await t.test('a batch over ru_per_second passes in part', async (t) => {
    const key = await keyOf('rus', 1_000_000);
    const batch = Array.from({ length: 20 }, (_, i) => ({ jsonrpc: '2.0', id: i, method: 'eth_chainId', params: [] }));
    const r = await post(`${a.base}/v1/rpc/${key}`, JSON.stringify(batch));
    const answers = r.json as Array<{ result?: string }>;
    const ok = answers.filter((x) => x.result !== undefined).length;
    t.comment(`status ${r.status} retry-after ${String(r.headers['retry-after'])} ok ${ok}`);
    t.equal(ok, 10, 'as on one machine: 10 of 20 fit 100 RU/s');
  });

  await t.test('past the per-IP unknown-key throttle, a valid key this instance never met still works', async (t) => {
    await clearOfMinuteEnd();
    const statuses: number[] = [];
    for (let i = 0; i < 40; i++) statuses.push((await rpc(`${a.base}/v1/rpc/nokey${i}xxxxxxxxxxxxxxxx`, 'eth_chainId')).status);
    t.same(statuses, [...Array(20).fill(401), ...Array(20).fill(429)], '20 unknown keys a minute, then 429');
    const key = await keyOf('fleet', 1_000_000);
    const [one, two] = await Promise.all([rpc(`${a.base}/v1/rpc/${key}`, 'eth_chainId'), rpc(`${a.base}/v1/rpc/${key}`, 'eth_chainId')]);
    t.same([one.status, two.status], [200, 200], "looked up in the address's line, one query at a time");
  });

  await t.test('a burst over rps reserves only what the calls admitted spend', async (t) => {
    const key = await keyOf('slow', 100 * PRICE);
    const statuses = await Promise.all(
      Array.from({ length: 100 }, () => rpc(`${a.base}/v1/rpc/${key}`, 'eth_chainId').then((r) => r.status)),
    );
    const okA = statuses.filter((s) => s === 200).length;
    await new Promise((r) => setTimeout(r, 1100));
    const onB = (await rpc(`${b.base}/v1/rpc/${key}`, 'eth_chainId')).status;
    t.comment(
      `a: ${okA} ok, ${statuses.filter((s) => s === 429).length} 429; then b answers ${onB} with ${100 * PRICE - okA * PRICE} RU left`,
    );
    t.equal(onB, 200, 'b serves from the balance left');
  });
});
