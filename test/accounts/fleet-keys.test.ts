/**
 * An instance's API keys in a fleet, on a real PostgreSQL and its change feed: a key made through another
 * instance works at the first call even after it was guessed as unknown; deleted, or its owner suspended,
 * it is revoked within a second; a plan change is read again; the feed lost and back re-reads every key.
 */
import t, { type Test } from 'tap';
import pg from 'pg';
import { createFleetKeys, type FleetKeys, type FleetKeysOptions } from '../../src/accounts/fleet-keys.js';
import { CHANGES_CHANNEL, type ChangeListenerOptions, listenForChanges } from '../../src/accounts/pg-changes.js';
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
async function twoInstances(t: Test, server: TestServer, options: FleetKeysOptions = {}, feedOptions: ChangeListenerOptions = {}) {
  const [pgA, pgB] = await Promise.all([openPgStore(server.url), openPgStore(server.url)]);
  const a = createPostgresAccounts(pgA);
  const bAccounts = createPostgresAccounts(pgB);
  const revoked: string[] = [];
  const keys: FleetKeys = createFleetKeys(bAccounts, { onRevoked: (id) => revoked.push(id), ...options });
  const feed = await listenForChanges(pgB, (notice) => keys.apply(notice), { minBackoffMs: 300, checkIntervalMs: 1000, ...feedOptions });
  t.teardown(async () => {
    await feed.close();
    keys.close();
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
  t.equal((await resolve(second.apiKey))?.suspended, true, 'known, and told so (403), not refused as unknown');
  await a.setSuspended(owner.id, false);
  await until(t, 'resumed, read again', () => keys.cached(second.apiKey)?.suspended === false);
  t.equal((await resolve(second.apiKey))?.endpointId, second.endpoint.id);
});

t.test('restrictions changed and keys rotated elsewhere reach the instance; a forged notice revokes nothing', async (t) => {
  const server = await startPostgres(t);
  let ms = Date.now();
  const { a, keys, revoked, resolve } = await twoInstances(t, server, { now: () => ms });
  const owner = await a.createOwner('acme', 'free', 100);
  const made = await a.createEndpoint(owner.id, 'devnet', undefined, 10);
  if (made.kind !== 'created') throw new Error('no endpoint');
  t.equal((await resolve(made.apiKey))?.fences, null);

  const patched = await a.patchEndpointFences(owner.id, made.endpoint.id, (current) => ({
    ok: true,
    settings: { ...current, allowed_ips: ['10.0.0.0/8'] },
  }));
  t.equal(patched?.ok, true);
  await until(t, 'the new restrictions are read again', () => keys.cached(made.apiKey)?.fences?.settings.allowed_ips?.[0] === '10.0.0.0/8');
  await until(t, 'its sockets are closed (their clients reconnect under the new settings)', () => revoked.includes(made.endpoint.id));

  revoked.length = 0;
  const rotated = (await a.rotateEndpointKey(owner.id, made.endpoint.id, 3600))!;
  t.ok(await resolve(rotated.apiKey), 'the new key works at once');
  await until(t, 'the old key is read again, in its grace', () => keys.cached(made.apiKey)?.keyExpiresAtMs != null);
  await until(t, 'and its sockets closed', () => revoked.includes(made.endpoint.id));
  const end = keys.cached(made.apiKey)!.keyExpiresAtMs!;
  ms = end - 1;
  t.ok(keys.cached(made.apiKey), 'served until its end');
  ms = end;
  t.equal(keys.cached(made.apiKey), undefined, 'at its end: asked of the store again (which refuses it: account-store.test.ts)');

  // Any role that may connect can send a notice: the keys it names are read again, found the same, kept.
  revoked.length = 0;
  const forger = await openPgStore(server.url);
  t.teardown(() => forger.close());
  await keys.settled();
  await forger.pool.query('SELECT pg_notify($1, $2)', [
    CHANGES_CHANNEL,
    JSON.stringify({ kind: 'endpoint_changed', endpointId: made.endpoint.id, ownerId: owner.id }),
  ]);
  // Notices arrive in commit order: once the plan change after it is read, the forged one was applied.
  await a.setPlan(owner.id, 'pro');
  let plan: string | undefined;
  for (let i = 0; i < 100 && plan !== 'pro'; i++) {
    plan = (await resolve(rotated.apiKey))?.plan;
    if (plan !== 'pro') await new Promise((r) => setTimeout(r, 20));
  }
  t.equal(plan, 'pro', 'the notices after it are read');
  await keys.settled();
  t.same(revoked, [], 'the grant is the same: nothing revoked');
  t.equal((await resolve(rotated.apiKey))?.suspended, false, 'and the key still works');
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

/** A session of another role than the gateway's, that may connect and so `pg_notify` any channel. */
async function intruder(t: Test, server: TestServer): Promise<pg.Client> {
  const admin = new pg.Client({ connectionString: server.url.replace('chaingate@', 'postgres@') });
  await admin.connect();
  await admin.query('CREATE ROLE intruder LOGIN');
  await admin.end();
  const c = new pg.Client({ connectionString: server.url.replace('chaingate@', 'intruder@') });
  c.on('error', () => {});
  await c.connect();
  t.teardown(() => c.end().catch(() => {}));
  t.equal((await c.query<{ user: string }>('SELECT current_user AS user')).rows[0]!.user, 'intruder');
  return c;
}

t.test('notices another role forges are hints: a live key stays, junk is dropped, a flood costs one resync', async (t) => {
  const server = await startPostgres(t);
  const resyncs: number[] = [];
  const ignored: string[] = [];
  const { a, keys, revoked, resolve } = await twoInstances(
    t,
    server,
    { onResync: () => resyncs.push(Date.now()), resyncMinMs: 3000 },
    { onIgnored: (reason) => ignored.push(reason) },
  );
  const owner = await a.createOwner('acme', 'free', 100);
  const made = await a.createEndpoint(owner.id, 'devnet', 'main', 10);
  if (!('apiKey' in made)) throw new Error('no endpoint');
  const endpointId = made.endpoint.id;
  t.match(await resolve(made.apiKey), { endpointId });
  const evil = await intruder(t, server);
  const notify = (payload: string) => evil.query('SELECT pg_notify($1, $2)', [CHANGES_CHANNEL, payload]);

  await notify(JSON.stringify({ kind: 'endpoint_deleted', endpointId, ownerId: owner.id }));
  await until(t, 'the forged deletion made b read the key again', () => keys.cached(made.apiKey) !== undefined, 2000);
  await keys.settled();
  t.same(revoked, [], 'the endpoint is not revoked: the store still has it');
  t.match(await resolve(made.apiKey), { endpointId }, 'the key still works');

  for (const payload of ['garbage', '{"kind":"owner_renamed","ownerId":1}', '{"kind":"endpoint_deleted","ownerId":1}'])
    await notify(payload);
  await until(t, 'junk dropped, each with its reason', () => ignored.length === 3);
  t.same(ignored, ['not_json', 'unknown_kind', 'bad_shape']);

  // A burst of 1,000 in one statement (distinct payloads: PostgreSQL folds identical ones), of every kind.
  const startedAt = Date.now();
  await evil.query(
    `SELECT pg_notify($1, CASE i % 4
        WHEN 0 THEN json_build_object('kind', 'owner_changed', 'ownerId', $2::int, 'n', i)::text
        WHEN 1 THEN json_build_object('kind', 'endpoint_deleted', 'endpointId', $3::text, 'ownerId', $2::int, 'n', i)::text
        WHEN 2 THEN json_build_object('kind', 'endpoint_created', 'endpointId', 'x' || i, 'ownerId', $2::int)::text
        ELSE 'junk ' || i END)
      FROM generate_series(1, 1000) AS i`,
    [CHANGES_CHANNEL, owner.id, endpointId],
  );
  await until(t, 'the junk of the burst counted', () => ignored.length === 3 + 250);
  await new Promise((r) => setTimeout(r, 2000 - (Date.now() - startedAt)));
  t.ok(resyncs.filter((at) => at < startedAt + 3000).length <= 1, `${resyncs.length} resync in the window`);
  await keys.settled();
  t.same(revoked, [], 'still nothing revoked');
  t.match(await resolve(made.apiKey), { endpointId }, 'and the key still works');
  // A real deletion is still heard, and believed once the store confirms it: the burst spent the window's
  // budget (each deletion of an endpoint not held is read by id), so it waits for the resync at the end of
  // the window, 3 s after the burst's.
  t.equal(await a.deleteEndpoint(owner.id, endpointId), true);
  await until(t, 'a real deletion revokes by the end of the window', () => revoked.includes(endpointId), 3000);
});

t.test('an endpoint whose key was pushed out of the cache: a real deletion revokes it, a forged one does not', async (t) => {
  const server = await startPostgres(t);
  // One key remembered at most: looking up another pushes the first out, as 50,000 others would, while a
  // socket opened with it stays open on this instance.
  const { a, keys, revoked, resolve } = await twoInstances(t, server, { maxCached: 1 });
  const owner = await a.createOwner('acme', 'free', 100);
  const other = await a.createOwner('other', 'free', 100);
  const [evicted, live, spare] = await Promise.all(['one', 'two', 'three'].map((name) => a.createEndpoint(owner.id, 'devnet', name, 10)));
  if (!evicted || !('apiKey' in evicted) || !live || !('apiKey' in live) || !spare || !('apiKey' in spare)) throw new Error('no endpoint');
  t.match(await resolve(evicted.apiKey), { endpointId: evicted.endpoint.id });
  t.match(await resolve(spare.apiKey), { endpointId: spare.endpoint.id });
  t.equal(keys.cached(evicted.apiKey), undefined, 'the first key is no longer held');

  t.ok(await a.deleteEndpoint(owner.id, evicted.endpoint.id));
  await until(t, 'its real deletion revokes it within a second', () => revoked.includes(evicted.endpoint.id), 1000);
  t.equal(await resolve(evicted.apiKey), null, 'and its key is refused');

  // Forged deletions of a live endpoint not held, naming its owner and another one: read by id, kept.
  t.match(await resolve(live.apiKey), { endpointId: live.endpoint.id });
  t.match(await resolve(spare.apiKey), { endpointId: spare.endpoint.id });
  t.equal(keys.cached(live.apiKey), undefined);
  const evil = await intruder(t, server);
  for (const ownerId of [owner.id, other.id, 999])
    await evil.query('SELECT pg_notify($1, $2)', [
      CHANGES_CHANNEL,
      JSON.stringify({ kind: 'endpoint_deleted', endpointId: live.endpoint.id, ownerId }),
    ]);
  // The feed keeps commit order: once a real deletion sent after them is revoked, the forged ones were read.
  t.ok(await a.deleteEndpoint(owner.id, spare.endpoint.id));
  await until(t, 'a real deletion sent after them is revoked', () => revoked.includes(spare.endpoint.id), 1000);
  await keys.settled();
  t.same(revoked, [evicted.endpoint.id, spare.endpoint.id], 'the live endpoint is not revoked, whatever owner the notice named');
  t.match(await resolve(live.apiKey), { endpointId: live.endpoint.id }, 'and its key still works');
});

t.test('a flood of notices re-reads keys within a budget, then costs one resync per window', async (t) => {
  // 300 keys of owner 1 in a store that counts its reads (by key, and by endpoint id); a window of 300 ms.
  let reads = 0;
  let idReads = 0;
  const store = {
    endpointByKey: async (key: string) => {
      reads++;
      return { endpointId: `ep-${key}`, ownerId: 1, network: 'devnet', plan: 'free', suspended: false, fences: null, keyExpiresAtMs: null };
    },
    endpointById: async (endpointId: string) => {
      idReads++;
      return { endpointId, ownerId: 1, network: 'devnet', plan: 'free', suspended: false, fences: null, keyExpiresAtMs: null };
    },
  };
  const resyncs: number[] = [];
  const revoked: string[] = [];
  const keys = createFleetKeys(store, { onResync: () => resyncs.push(Date.now()), onRevoked: (id) => revoked.push(id), resyncMinMs: 300 });
  t.teardown(() => keys.close());
  const all = Array.from({ length: 300 }, (_, i) => `key-${i}`);
  await Promise.all(all.map((k) => keys.lookUp(k)));
  reads = 0;
  const startedAt = Date.now();
  // 1,000 notices naming one key each: 100 re-read their key, the rest wait for one resync; those whose
  // key was forgotten by then name an endpoint not held, read by id at the next resync, each once.
  for (let i = 0; i < 1000; i++) keys.apply({ kind: 'endpoint_deleted', endpointId: `ep-key-${i % 300}`, ownerId: 1 });
  for (let i = 0; i < 1000; i++) keys.apply({ kind: 'resync' });
  await keys.settled();
  t.equal(resyncs.length, 1, 'one resync at once, however many notices asked');
  t.ok(reads <= 100 + 300, `${reads} reads: the budget and one resync, not one per notice`);
  t.equal(idReads, 0, 'no endpoint read by id: the budget was spent');
  await until(t, 'the resyncs asked for since come as one at the end of the window', () => resyncs.length === 2, 2000);
  t.ok(resyncs[1]! - startedAt >= 290, 'not before the window ended');
  await keys.settled();
  await new Promise((r) => setTimeout(r, 400));
  t.equal(resyncs.length, 2, 'and no more');
  t.equal(idReads, 300, 'the endpoints not held read by id at that resync, each once');
  t.same(revoked, [], 'every key still found: nothing revoked');
  t.equal(all.filter((k) => keys.cached(k) !== undefined).length, 300, 'every key known again');
});

t.test('endpoints not held, named past the budget, wait for the resync: at most 10,000 of them', async (t) => {
  const idReads: string[] = [];
  const store = {
    endpointByKey: async () => null,
    endpointById: async (endpointId: string) => {
      idReads.push(endpointId);
      return null;
    },
  };
  let clock = 0;
  const resyncs: number[] = [];
  const revoked: string[] = [];
  const keys = createFleetKeys(store, {
    onResync: () => resyncs.push(clock),
    onRevoked: (id) => revoked.push(id),
    resyncMinMs: 300,
    now: () => clock,
  });
  t.teardown(() => keys.close());
  // An empty resync first, so the next one waits for the end of its window.
  keys.apply({ kind: 'resync' });
  // 10,200 distinct ids: 100 read at once, 10,000 kept, 100 dropped (a flood of forged ids grows no memory).
  for (let i = 0; i < 10_200; i++) keys.apply({ kind: 'endpoint_deleted', endpointId: `ep_${i}`, ownerId: 1 });
  await keys.settled();
  t.equal(idReads.length, 100, 'the budget, at once');
  t.same(revoked, idReads, 'each one gone from the store is revoked');
  clock = 300;
  await until(t, 'the resync at the end of the window', () => resyncs.length === 2, 2000);
  await keys.settled();
  t.equal(idReads.length, 100 + 10_000, 'then the ones kept, each once');
  t.equal(new Set(idReads).size, idReads.length);
  t.same(idReads.slice(100, 102), ['ep_100', 'ep_101'], 'oldest kept');
  t.equal(revoked.length, 10_100);
});
