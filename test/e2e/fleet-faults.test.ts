/**
 * A fleet's instances when what they share fails: PostgreSQL going away (calls go on against the RU held,
 * then 503 -32099; nothing charged twice or lost when it returns), Redis going away (local limits and the
 * gauge at 0, or 503 with redis_failure: closed; shared limits again within 5 s of its return), and an
 * instance killed with SIGKILL (its unspent reservation returns after the TTL; credits = balance + usage).
 */
import t, { type Test } from 'tap';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import WebSocket from 'ws';
import { anvilFor, evmChain, gatewayFor, type TestGateway } from '../support/gateway.js';
import { hammer, startDaemon } from '../support/daemon.js';
import { rpc, send } from '../support/rpc.js';
import { waitFor } from '../support/wait-for.js';
import { startPostgres, startRedis, type TestServer } from '../support/servers.js';

const PRICE = 10;

function instance(
  t: Test,
  upstream: string,
  db: TestServer,
  redis: TestServer,
  cluster: Record<string, unknown> = {},
): Promise<TestGateway> {
  return gatewayFor(t, {
    storage: { url: db.url },
    cluster: { redis_url: redis.url, instance: 'gw-1', reservation_ttl_s: 3, reservation_block_ru: 50, ...cluster },
    ledger: { flush_interval_ms: 100 },
    plans: { fleet: { rps: 100_000, max_endpoints: 10 }, slow: { rps: 20, max_endpoints: 10 } },
    ru: { methods: { eth_chainId: PRICE } },
    chains: { devnet: evmChain([upstream]) },
  });
}

const call = (g: TestGateway, key: string) => rpc(`${g.base}/v1/rpc/${key}`, 'eth_chainId');

async function metric(g: TestGateway, name: string): Promise<number | undefined> {
  const text = (await send('GET', `http://127.0.0.1:${g.gateway.metricsPort}/metrics`)).text;
  const m = new RegExp(`^${name} (\\S+)$`, 'm').exec(text);
  return m ? Number(m[1]) : undefined;
}

t.test('PostgreSQL away: the RU held are spent, then 503 -32099; nothing lost or charged twice on its return', async (t) => {
  const [node, db, redis] = await Promise.all([anvilFor(t), startPostgres(t), startRedis(t)]);
  const g = await instance(t, node.url, db, redis);
  const { accounts, fleet } = g.gateway.context.tenancy;
  const owner = await accounts.createOwner('pg', 'fleet', 10_000);
  const made = await accounts.createEndpoint(owner.id, 'devnet', 'pg', 10);
  const unmet = await accounts.createEndpoint(owner.id, 'devnet', 'unmet', 10);
  if (!('apiKey' in made) || !('apiKey' in unmet)) throw new Error('no endpoint');
  let served = 0;
  t.equal((await call(g, made.apiKey)).status, 200, 'the first call reserved a block of 50 RU');
  served++;
  await db.stop();
  const during: number[] = [];
  for (let i = 0; i < 8; i++) during.push((await call(g, made.apiKey)).status);
  served += during.filter((s) => s === 200).length;
  t.same(during.slice(0, 4), [200, 200, 200, 200], 'the four calls the block still pays are served');
  t.ok(
    during.slice(4).every((s) => s === 503),
    `then 503 (${during.join(' ')})`,
  );
  const refused = await call(g, made.apiKey);
  t.match(refused.json, { error: { code: -32099 } }, 'as -32099');
  const account = await send('GET', `${g.base}/api/dashboard/account`, undefined, { authorization: `Bearer ${owner.managementKey}` });
  t.equal(account.status, 503, 'the management API answers 503');
  const unknown = await call(g, unmet.apiKey);
  t.equal(unknown.status, 503, 'a key this instance never met cannot be read: 503, not 401');
  t.match(unknown.json, { id: null, error: { code: -32099 } });
  const upgrade = await new Promise<{ status: number; body: string }>((resolve, reject) => {
    const ws = new WebSocket(`${g.base.replace('http', 'ws')}/v1/rpc/${unmet.apiKey}`);
    ws.on('error', () => {});
    ws.once('open', () => reject(new Error('upgraded with a key the instance could not read')));
    ws.once('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (chunk: Buffer) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
  });
  t.equal(upgrade.status, 503, 'so is a WebSocket upgrade with it, before it upgrades');
  t.match(JSON.parse(upgrade.body), { error: { code: -32099 } });

  // The usage of the calls served meanwhile waits for a flush, which fails while PostgreSQL is away: waited
  // for here, since on a fast machine everything above may take less than one flush interval.
  await waitFor(async () => ((await metric(g, 'chaingate_ledger_flush_failures_total')) ?? 0) >= 1, {
    what: 'a failed write counted',
    ms: 5_000,
  });
  t.pass('the failed writes are counted');
  await db.start();
  await waitFor(async () => (await call(g, made.apiKey)).status === 200, { what: 'served again once PostgreSQL is back', ms: 10_000 });
  served++;
  t.ok(await fleet!.ledger.flushNow(), 'the usage held meanwhile is written');
  t.ok(((await metric(g, 'chaingate_ledger_flush_duration_seconds_count')) ?? 0) >= 1, 'and the writes that passed are timed');
  const stats = await accounts.stats(owner.id, { from: 0, to: 2 ** 31, interval: 'day' });
  t.equal(stats.totals.ru, served * PRICE, `every served call charged once (${served})`);
  t.equal(await fleet!.ledgerStore.balance(owner.id), 10_000 - served * PRICE, 'the balance agrees');
});

t.test('Redis away: local limits and the gauge at 0, or 503 when closed; shared again within 5 s', async (t) => {
  const [node, db, redis] = await Promise.all([anvilFor(t), startPostgres(t), startRedis(t)]);
  const open = await instance(t, node.url, db, redis);
  const closed = await instance(t, node.url, db, redis, { instance: 'gw-2', redis_failure: 'closed' });
  const { accounts } = open.gateway.context.tenancy;
  const owner = await accounts.createOwner('redis', 'slow', 1_000_000);
  const made = await accounts.createEndpoint(owner.id, 'devnet', 'r', 10);
  if (!('apiKey' in made)) throw new Error(made.error);
  t.equal(await metric(open, 'chaingate_cluster_redis_up'), 1, 'the gauge says Redis decides');
  const limiter = open.gateway.context.tenancy.fleet!.limiter;
  await waitFor(() => limiter.instances() === 2, { what: 'both instances answered the roll call', ms: 3000 });
  await redis.stop(true);
  await waitFor(async () => (await metric(open, 'chaingate_cluster_redis_up')) === 0, { what: 'the gauge falls to 0', ms: 3000 });
  // Two instances heartbeat: each limits to its share, 20 / 2 a second.
  const burst = await Promise.all(Array.from({ length: 30 }, () => call(open, made.apiKey).then((r) => r.status)));
  const ok = burst.filter((s) => s === 200).length;
  t.ok(ok >= 9 && ok <= 10, `${ok} of 30 served on local limits: the plan's 20 shared by 2 live instances`);
  const refusedClosed = await call(closed, made.apiKey);
  t.equal(refusedClosed.status, 503, 'redis_failure: closed refuses');
  t.match(refusedClosed.json, { error: { code: -32099 } });
  t.ok(
    open.logLines.some((l) => /Redis unreachable/.test(l)),
    'the fallback is logged',
  );
  // An instance started while Redis is away never read its roll call: it counts the live instances by
  // their heartbeats in PostgreSQL instead, as the others now do.
  const late = await instance(t, node.url, db, redis, { instance: 'gw-3' });
  const lateLimiter = late.gateway.context.tenancy.fleet!.limiter;
  await waitFor(() => lateLimiter.instances() === 3, { what: `the late instance counts 3 (${lateLimiter.instances()})`, ms: 5000 });
  await waitFor(() => limiter.instances() === 3, { what: 'and so does the first', ms: 5000 });
  const fresh = await accounts.createEndpoint(owner.id, 'devnet', 'r3', 10);
  if (!('apiKey' in fresh)) throw new Error(fresh.error);
  const onLate = await Promise.all(Array.from({ length: 30 }, () => call(late, fresh.apiKey).then((r) => r.status)));
  const okLate = onLate.filter((s) => s === 200).length;
  t.ok(okLate >= 6 && okLate <= 7, `${okLate} of 30 served on the late instance: the plan's 20 shared by 3`);

  await redis.start();
  const back = Date.now();
  await waitFor(async () => (await metric(open, 'chaingate_cluster_redis_up')) === 1, { what: 'shared limits again', ms: 5000 });
  t.ok(Date.now() - back <= 5000, `within 5 s (${Date.now() - back} ms)`);
  await waitFor(async () => (await call(closed, made.apiKey)).status === 200, { what: 'the closed instance serves again', ms: 5000 });
});

t.test('kill -9 of one instance under load: its reservation returns after the TTL; credits = balance + usage', async (t) => {
  const [node, db, redis] = await Promise.all([anvilFor(t), startPostgres(t), startRedis(t)]);
  const dir = mkdtempSync(join(tmpdir(), 'chaingate-fleet-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const config = (name: string): string => {
    const path = join(dir, `${name}.yaml`);
    writeFileSync(
      path,
      `server: { host: 127.0.0.1, port: 0 }\nstorage: { url: "${db.url}" }\n` +
        `cluster: { redis_url: "${redis.url}", instance: ${name}, reservation_ttl_s: 2, reservation_block_ru: 200 }\n` +
        `ledger: { flush_interval_ms: 200 }\nru: { methods: { eth_chainId: ${PRICE} } }\n` +
        `plans: { fleet: { rps: 100000, max_endpoints: 10 } }\n` +
        `chains:\n  devnet:\n    chain_id: 31337\n    upstreams: [{ url: "${node.url}" }]\n`,
    );
    return path;
  };
  const [a, b] = await Promise.all([startDaemon(t, config('gw-a')), startDaemon(t, config('gw-b'))]);
  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  t.teardown(() => client.end());
  const credits = 30_000;
  const owner = (
    await client.query("INSERT INTO owners (name, plan, ru_balance, created_at) VALUES ('bank', 'fleet', $1, 0) RETURNING id", [credits])
  ).rows[0].id as number;
  await client.query('INSERT INTO credits (owner_id, ru, at) VALUES ($1, $2, 0)', [owner, credits]);
  // An endpoint made the way the management API makes it: through an instance's account store.
  const { createPostgresAccounts } = await import('../../src/accounts/postgres-accounts.js');
  const { openPgStore } = await import('../../src/store/pg-open.js');
  const accounts = createPostgresAccounts(await openPgStore(db.url));
  t.teardown(() => accounts.close());
  const made = await accounts.createEndpoint(owner, 'devnet', 'bank', 10);
  if (!('apiKey' in made)) throw new Error(made.error);

  let stopA = false;
  let stopB = false;
  const servedBy = { a: 0, b: 0 };
  const loopsA = Array.from({ length: 4 }, () => hammer(`http://127.0.0.1:${a.port}/v1/rpc/${made.apiKey}`, () => stopA));
  const loopsB = Array.from({ length: 4 }, () => hammer(`http://127.0.0.1:${b.port}/v1/rpc/${made.apiKey}`, () => stopB));
  const q = async (sql: string): Promise<number> => Number((await client.query(sql, [owner])).rows[0].n);
  // A is killed with most of the balance still unspent, however fast this machine serves: a fixed time
  // under load could spend it all before the kill, leaving nothing for A's reservation to hold back.
  const balance = (): Promise<number> => q('SELECT ru_balance AS n FROM owners WHERE id = $1');
  await waitFor(async () => (await balance()) <= (credits * 3) / 4, { what: 'a quarter of the balance spent', ms: 10_000 });
  a.child.kill('SIGKILL');
  stopA = true;
  servedBy.a = (await Promise.all(loopsA)).reduce((x, y) => x + y, 0);
  // What A held when it died, and when that returns: the TTL counts from A's last write, up to a flush
  // interval before the kill, so the store's clock says when, not the time of the kill.
  const held = (
    await client.query(
      "SELECT ru, extract(epoch FROM expires_at) * 1000 AS until FROM reservations WHERE owner_id = $1 AND instance = 'gw-a'",
      [owner],
    )
  ).rows[0] as { ru: string; until: string } | undefined;
  t.ok(held && Number(held.ru) >= PRICE, `A died holding a reservation (${held?.ru} RU)`);
  // B spends the rest of the balance, including what A held unspent once its reservation expires.
  await waitFor(async () => (await balance()) < PRICE, { what: 'the balance spent to the last call', ms: 20_000 });
  const spentAt = Number((await client.query('SELECT extract(epoch FROM clock_timestamp()) * 1000 AS n')).rows[0].n);
  stopB = true;
  servedBy.b = (await Promise.all(loopsB)).reduce((x, y) => x + y, 0);
  t.ok(
    spentAt >= Number(held?.until),
    `B needed A's reservation, which returned at its expiry (${Math.round(spentAt - Number(held?.until))} ms after)`,
  );
  // B's last batch, written within a flush interval of its last call.
  await new Promise((r) => setTimeout(r, 500));
  const usage = await q('SELECT COALESCE(SUM(ru), 0) AS n FROM usage_minute WHERE owner_id = $1');
  const left = await balance();
  t.equal(left + usage, credits, `credits ${credits} = balance ${left} + usage ${usage}`);
  const served = servedBy.a + servedBy.b;
  t.ok(served * PRICE >= usage, `every charged call was served (${served} served, ${usage / PRICE} charged)`);
  // A's calls after its last written batch were served and are not charged: at most one flush interval's.
  t.ok(served * PRICE - usage <= servedBy.a * PRICE, `uncharged calls are A's last moments only (${served - usage / PRICE})`);
  t.equal(
    await q("SELECT COUNT(*) AS n FROM reservations WHERE owner_id = $1 AND instance = 'gw-a' AND expires_at > now()"),
    0,
    "A's reservation expired",
  );
  t.comment(`served: A ${servedBy.a}, B ${servedBy.b}; charged ${usage / PRICE}`);
});
