/**
 * An instance's API keys in a fleet, on a real PostgreSQL and its change feed: a key made through another
 * instance works at the first call even after it was guessed as unknown; deleted, or its owner suspended,
 * it is revoked within a second; a plan change is read again; the feed lost and back re-reads every key.
 */
import t, { type Test } from 'tap';
import { createFleetKeys, type FleetKeys } from '../../src/accounts/fleet-keys.js';
import { listenForChanges } from '../../src/accounts/pg-changes.js';
import { createPostgresAccounts } from '../../src/accounts/postgres-accounts.js';
import { openPgStore } from '../../src/store/pg-open.js';
import { startPostgres, type TestServer } from '../support/servers.js';

/** Polls `check` every 20 ms until it holds, failing the test after `ms`. */
async function until(t: Test, what: string, check: () => boolean, ms = 2000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  t.ok(check(), what);
}

/** Instance `a` writes through its account store; instance `b` keeps FleetKeys fed by its own listener. */
async function twoInstances(t: Test, server: TestServer) {
  const [pgA, pgB] = await Promise.all([openPgStore(server.url), openPgStore(server.url)]);
  const a = createPostgresAccounts(pgA);
  const bAccounts = createPostgresAccounts(pgB);
  const revoked: string[] = [];
  const keys: FleetKeys = createFleetKeys(bAccounts, { onRevoked: (id) => revoked.push(id) });
  const feed = await listenForChanges(pgB, (notice) => keys.apply(notice), { minBackoffMs: 300, checkIntervalMs: 1000 });
  t.teardown(async () => {
    await feed.close();
    await Promise.all([a.close(), bAccounts.close()]);
  });
  /** As a call on `b` resolves a key: the cache, else one lookup. */
  const resolve = async (key: string) => {
    const known = keys.cached(key);
    return known !== undefined ? known : keys.lookUp(key);
  };
  return { a, keys, revoked, resolve };
}

t.test('keys made, deleted and suspended elsewhere', async (t) => {
  const server = await startPostgres(t);
  const { a, keys, revoked, resolve } = await twoInstances(t, server);
  const owner = await a.createOwner('acme', 'free', 100);
  const made = await a.createEndpoint(owner.id, 'devnet', 'main', 10);
  if (!('apiKey' in made)) throw new Error('no endpoint');
  t.match(await resolve(made.apiKey), { endpointId: made.endpoint.id, ownerId: owner.id, plan: 'free' }, 'found at the first call');
  t.match(keys.cached(made.apiKey), { endpointId: made.endpoint.id }, 'then from the cache');

  // A key guessed before it existed is remembered as a miss, until the feed says an endpoint was made.
  const second = await a.createEndpoint(owner.id, 'devnet', 'two', 10);
  if (!('apiKey' in second)) throw new Error('no endpoint');
  const unknown = 'A'.repeat(32);
  // A lookup that overlapped the notice of the endpoint just made is not remembered: the next one is.
  for (let i = 0; i < 50 && keys.cached(unknown) === undefined; i++) {
    t.equal(await resolve(unknown), null);
    if (keys.cached(unknown) === undefined) await new Promise((r) => setTimeout(r, 20));
  }
  t.equal(keys.cached(unknown), null, 'a miss is remembered');
  await a.createEndpoint(owner.id, 'devnet', 'three', 10);
  await until(t, 'misses are forgotten when an endpoint is made', () => keys.cached(unknown) === undefined);

  await a.setPlan(owner.id, 'pro');
  await until(t, 'a plan change is read again', () => (keys.cached(made.apiKey) as { plan?: string } | undefined)?.plan === 'pro');
  t.same(revoked, [], 'nothing revoked by a plan change');

  t.ok(await a.deleteEndpoint(owner.id, made.endpoint.id));
  await until(t, 'a deleted key is revoked', () => revoked.includes(made.endpoint.id));
  t.equal(await resolve(made.apiKey), null, 'and refused');

  t.equal((await resolve(second.apiKey))?.endpointId, second.endpoint.id);
  await a.setSuspended(owner.id, true);
  await until(t, 'a suspended owner has its known endpoints revoked', () => revoked.includes(second.endpoint.id));
  t.equal(await resolve(second.apiKey), null);
  await a.setSuspended(owner.id, false);
  await until(t, 'resumed, the miss is forgotten', () => keys.cached(second.apiKey) === undefined);
  t.equal((await resolve(second.apiKey))?.endpointId, second.endpoint.id);
});

t.test('the feed lost and back: every key known is read again', async (t) => {
  const server = await startPostgres(t);
  const { a, keys, revoked, resolve } = await twoInstances(t, server);
  const owner = await a.createOwner('acme', 'free', 100);
  const made = await a.createEndpoint(owner.id, 'devnet', undefined, 10);
  if (!('apiKey' in made)) throw new Error('no endpoint');
  t.ok(await resolve(made.apiKey));
  // The feed's connection is cut, and a deletion is made that sends no notice (as if it had been lost):
  // the feed comes back after its backoff, and the resync finds it.
  const writer = await openPgStore(server.url);
  t.teardown(() => writer.close());
  await writer.pool.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'LISTEN%' OR query = 'SELECT 1'`);
  await writer.pool.query('UPDATE endpoints SET deleted_at = 1 WHERE id = $1', [made.endpoint.id]);
  await until(t, 'revoked after the resync', () => revoked.includes(made.endpoint.id), 10_000);
  await keys.settled();
  t.equal(keys.cached(made.apiKey), null, 'remembered as unknown now');
});
