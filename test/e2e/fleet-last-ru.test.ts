/**
 * The last RU of a balance in a fleet of 2 and 3 instances (one PostgreSQL, one Redis, one anvil) with
 * blocks of 1,000 RU: an owner with K calls' worth, hammered by 32 connections on each instance, each
 * calling until refused, gets exactly K answers 200, and the balance ends in [0, one call's cost).
 */
import t, { type Test } from 'tap';
import { anvilFor, evmChain, gatewayFor, type TestGateway } from '../support/gateway.js';
import { oneConnection } from '../support/rpc.js';
import { startPostgres, startRedis } from '../support/servers.js';
import { waitFor } from '../support/wait-for.js';

/** eth_chainId's price here, as eth_getBalance's in the issue that found it. */
const PRICE = 15;
const CONNECTIONS = 32;

/** Calls through its own connection until refused; resolves with the calls answered 200 and the refusal's status. */
async function untilRefused(g: TestGateway, key: string): Promise<{ ok: number; last: number }> {
  const conn = oneConnection();
  try {
    for (let ok = 0; ; ok++) {
      const r = await conn.rpc(`${g.base}/v1/rpc/${key}`, 'eth_chainId');
      if (r.status !== 200) return { ok, last: r.status };
    }
  } finally {
    conn.close();
  }
}

t.test('the last RU of a balance across a fleet', async (t) => {
  const [node, pg, redis] = await Promise.all([anvilFor(t), startPostgres(t), startRedis(t)]);
  const one = (instance: string): Promise<TestGateway> =>
    gatewayFor(t, {
      storage: { url: pg.url },
      cluster: { redis_url: redis.url, instance, reservation_ttl_s: 5, reservation_block_ru: 1000 },
      ledger: { flush_interval_ms: 100 },
      plans: { fleet: { rps: 100_000, max_endpoints: 10 } },
      ru: { methods: { eth_chainId: PRICE } },
      chains: { devnet: evmChain([node.url]) },
    });
  const fleet = await Promise.all([one('gw-a'), one('gw-b'), one('gw-c')]);
  const accounts = fleet[0]!.gateway.context.tenancy.accounts;
  const store = fleet[0]!.gateway.context.tenancy.fleet!.ledgerStore;

  const hammer = async (t: Test, instances: TestGateway[], calls: number, extra: number): Promise<void> => {
    const owner = await accounts.createOwner(`last-${instances.length}-${calls}-${extra}`, 'fleet', calls * PRICE + extra);
    const made = await accounts.createEndpoint(owner.id, 'devnet', 'last', 10);
    if (!('apiKey' in made)) throw new Error(made.error);
    const runs = await Promise.all(instances.flatMap((g) => Array.from({ length: CONNECTIONS }, () => untilRefused(g, made.apiKey))));
    const ok = runs.reduce((n, r) => n + r.ok, 0);
    t.equal(ok, calls, `${calls} calls' worth + ${extra} RU on ${instances.length} instances: ${ok} answered 200`);
    t.same([...new Set(runs.map((r) => r.last))], [402], 'every connection ended on a 402');
    await Promise.all(instances.map((g) => g.gateway.context.tenancy.ledger.flush()));
    await waitFor(async () => (await store.balance(owner.id)) === extra, { what: `the balance to settle at ${extra}`, ms: 3000 });
    const left = await store.balance(owner.id);
    t.equal(left, extra, `the balance ends at ${left}, in [0, ${PRICE})`);
  };

  for (const size of [2, 3]) {
    await t.test(`${size} instances`, async (t) => {
      const instances = fleet.slice(0, size);
      await hammer(t, instances, 100, 0);
      await hammer(t, instances, 99, 7);
      await hammer(t, instances, 1, 0);
    });
  }
});
