/**
 * An instance's part of a fleet, opened twice on one PostgreSQL and one Redis: what one writes the other
 * sees, both heartbeat, the rate limit is shared, and a close gives back what was reserved.
 */
import t from 'tap';
import { openFleet } from '../../src/pipeline/fleet.js';
import { createLogger } from '../../src/log.js';
import { startPostgres, startRedis } from '../support/servers.js';
import { waitFor } from '../support/wait-for.js';

t.test('two instances share keys, balances, limits and heartbeats', async (t) => {
  const [pg, redis] = await Promise.all([startPostgres(t), startRedis(t)]);
  const log = createLogger('error');
  const revoked: string[] = [];
  const open = (instance: string) =>
    openFleet({
      url: pg.url,
      cluster: { redis_url: redis.url, instance, reservation_ttl_s: 5, reservation_block_ru: 100, redis_failure: 'open' },
      log,
      retention: { keepMinutesH: 24, keepHoursD: 30 },
      ledger: { flushIntervalMs: 50 },
      onRevoked: (id) => revoked.push(`${instance} ${id}`),
    });
  const [a, b] = await Promise.all([open('gw-a'), open('gw-b')]);
  let closed = false;
  t.teardown(async () => {
    if (!closed) await Promise.all([a.close(), b.close()]);
  });
  const owner = await a.accounts.createOwner('acme', 'free', 1000);
  const made = await a.accounts.createEndpoint(owner.id, 'devnet', 'main', 10);
  if (!('apiKey' in made)) throw new Error('no endpoint');
  t.match(await b.keys.lookUp(made.apiKey), { endpointId: made.endpoint.id, ownerId: owner.id }, 'a key made on a works on b');

  await b.ledger.prepare(owner.id, 10);
  const r = b.ledger.reserve(owner.id, 10);
  t.ok(r, 'b reserved from the shared balance');
  b.ledger.settle(r!, 10, { endpointId: made.endpoint.id, method: 'eth_call', status: 0 });
  t.ok(await b.ledger.flushNow());
  const stats = await a.accounts.stats(owner.id, { from: 0, to: 2 ** 31, interval: 'day' });
  t.equal(stats.totals.ru, 10, 'b’s usage is in the stats a reads');

  const [ta, tb] = await Promise.all([a.limiter.take('ep:x', 1), b.limiter.take('ep:x', 1)]);
  t.same([ta.ok, tb.ok].sort(), [false, true], 'one call per second across both');
  // Each counts the live instances at its roll call, once a second.
  await waitFor(() => a.limiter.instances() === 2, { what: 'a roll call counting both', ms: 3000 });
  t.equal(a.limiter.instances(), 2, 'a counts both at its roll call');
  // The roll call is Redis's; the heartbeats are PostgreSQL's, each written with its instance's flush.
  await waitFor(async () => (await a.ledgerStore.instances()).length === 2, { what: 'both heartbeats written', ms: 3000 });
  t.same((await a.ledgerStore.instances()).map((i) => i.id).sort(), ['gw-a', 'gw-b'], 'both heartbeat');

  t.ok(await a.accounts.deleteEndpoint(owner.id, made.endpoint.id));
  await waitFor(() => revoked.includes(`gw-b ${made.endpoint.id}`), { what: 'the revocation on b', ms: 2000 });
  t.ok(revoked.includes(`gw-b ${made.endpoint.id}`), 'deleted on a, revoked on b');

  closed = true;
  t.same(await Promise.all([a.close(), b.close()]), [true, true], 'closed with every batch written');
  const check = await openFleet({
    url: pg.url,
    cluster: { redis_url: redis.url, instance: 'gw-check', reservation_ttl_s: 5, reservation_block_ru: 100, redis_failure: 'open' },
    log,
    retention: { keepMinutesH: 24, keepHoursD: 30 },
    ledger: { flushIntervalMs: 50 },
    onRevoked: () => {},
  });
  t.teardown(() => check.close());
  t.equal(await check.ledgerStore.balance(owner.id), 990, 'the balance counts what was spent, not what was reserved');
});
