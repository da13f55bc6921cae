/**
 * One table of cases, run against both account stores: the embedded SQLite file and a real PostgreSQL
 * server. Whatever a case asserts, both engines must answer exactly alike.
 */
import t, { type Test } from 'tap';
import type { AccountStore, CreateEndpointResult } from '../../src/accounts/account-store.js';
import { createPostgresAccounts } from '../../src/accounts/postgres-accounts.js';
import { createSqliteAccounts } from '../../src/accounts/sqlite-accounts.js';
import { applyFencePatch, type FenceProblem, type FenceSettings, NO_FENCES } from '../../src/fences/settings.js';
import { openPgStore } from '../../src/store/pg-open.js';
import { hashKey } from '../../src/tenancy/keys.js';
import { MAX_RU } from '../../src/tenancy/owners.js';
import { startPostgres } from '../support/servers.js';
import { type Teardown, tempStore } from '../store/temp-store.js';

/** One case's store, empty, with a clock the case sets and plain SQL on the same database. */
interface Harness {
  accounts: AccountStore;
  /** Sets the store's clock, in unix seconds. */
  at(seconds: number): void;
  /** Plain SQL with `?` placeholders, run as is by either engine. */
  query<R>(sql: string, params?: unknown[]): Promise<R[]>;
  /** A second, independent store on the same database (another process or instance), closed by the case. */
  another(): Promise<AccountStore>;
}

interface Engine {
  kind: AccountStore['kind'];
  /** Starts what the engine needs for this file; returns how to get a fresh store for one case. */
  start(t: Test): Promise<(t: Teardown) => Promise<Harness>>;
}

const T0 = 1_700_006_400;

function clock(): { now: () => number; at: (s: number) => void } {
  let ms = T0 * 1000;
  return { now: () => ms, at: (s) => void (ms = s * 1000) };
}

const sqlite: Engine = {
  kind: 'sqlite',
  async start() {
    return async (t) => {
      const store = tempStore(t);
      const { now, at } = clock();
      return {
        accounts: createSqliteAccounts(store, { now }),
        at,
        query: async <R>(sql: string, params: unknown[] = []) => {
          const statement = store.db.prepare(sql);
          if (statement.reader) return statement.all(...params) as R[];
          statement.run(...params);
          return [];
        },
        another: async () => createSqliteAccounts(tempStore(t, store.path)),
      };
    };
  },
};

const postgres: Engine = {
  kind: 'postgres',
  async start(t) {
    const server = await startPostgres(t);
    const pg = await openPgStore(server.url);
    t.teardown(() => pg.close());
    return async (t) => {
      await pg.pool.query(
        `TRUNCATE owners, management_keys, endpoints, credits, usage_minute, usage_hour, usage_day RESTART IDENTITY CASCADE;
        ALTER SEQUENCE endpoint_deletions RESTART`,
      );
      const { now, at } = clock();
      return {
        accounts: createPostgresAccounts(pg, { now }),
        at,
        query: async <R>(sql: string, params: unknown[] = []) => {
          let n = 0;
          return (
            await pg.pool.query(
              sql.replaceAll('?', () => `$${++n}`),
              params,
            )
          ).rows as R[];
        },
        another: async () => {
          const other = await openPgStore(server.url);
          t.teardown(() => (other.pool.ending ? undefined : other.close()));
          return createPostgresAccounts(other);
        },
      };
    };
  },
};

function made(r: CreateEndpointResult): { id: string; apiKey: string } {
  if ('error' in r) throw new Error(`createEndpoint refused: ${r.error}`);
  return { id: r.endpoint.id, apiKey: r.apiKey };
}

type Case = (t: Test, h: Harness) => Promise<void>;

/** What a key of a live owner's endpoint grants when nothing else is set. */
function plain(endpointId: string, ownerId: number, network: string, plan: string) {
  return { endpointId, ownerId, network, plan, suspended: false, fences: null, keyExpiresAtMs: null };
}

/** Settings as a request's body would make them (normalised); throws on a problem. */
function fences(body: Record<string, unknown>, from: FenceSettings = NO_FENCES): FenceSettings {
  const r = applyFencePatch(from, body);
  if (!r.ok) throw new Error(JSON.stringify(r.problems));
  return r.settings;
}

/** The patch of a PATCH request: applyFencePatch with its body. */
const patchWith = (body: Record<string, unknown>) => (current: FenceSettings) => applyFencePatch(current, body);

const CASES: Record<string, Case> = {
  async 'owners: created with their first credit and management key, listed, topped up'(t, { accounts: a, query, at }) {
    const acme = await a.createOwner('acme', 'growth', 100);
    t.same(acme.id, 1);
    t.match(acme.managementKey, /^[0-9A-Za-z]{48}$/);
    at(T0 + 60);
    const idle = await a.createOwner('idle', 'free', 0);
    t.same(await query('SELECT owner_id, ru, at FROM credits ORDER BY id'), [{ owner_id: 1, ru: 100, at: T0 }], 'no credit of 0 RU');
    t.same(await a.listOwners(), [
      { id: 1, name: 'acme', plan: 'growth', ruBalance: 100, suspended: false, createdAt: T0, endpoints: 0 },
      { id: idle.id, name: 'idle', plan: 'free', ruBalance: 0, suspended: false, createdAt: T0 + 60, endpoints: 0 },
    ]);
    t.same(await a.topUp(1, 50), { kind: 'credited', balance: 150 });
    t.same(await a.topUp(99, 1), { kind: 'refused', error: 'no_owner' });
    t.same(await a.topUp(2 ** 40, 1), { kind: 'refused', error: 'no_owner' }, 'an id past any column type is unknown too');
    await t.rejects(a.topUp(1, 0), RangeError);
    await t.rejects(a.createOwner('whale', 'free', MAX_RU + 1), RangeError);
    const whale = await a.createOwner('whale', 'free', MAX_RU - 5);
    t.same(await a.topUp(whale.id, 6), { kind: 'refused', error: 'over_max', balance: MAX_RU - 5 });
    t.same(await a.topUp(whale.id, 5), { kind: 'credited', balance: MAX_RU }, 'exactly the maximum, exact');
    t.same(
      await query('SELECT owner_id, ru FROM credits ORDER BY id'),
      [
        { owner_id: 1, ru: 100 },
        { owner_id: 1, ru: 50 },
        { owner_id: whale.id, ru: MAX_RU - 5 },
        { owner_id: whale.id, ru: 5 },
      ],
      'refused top-ups left no credit',
    );
    t.same(await a.owner(whale.id), { id: whale.id, name: 'whale', plan: 'free', ruBalance: MAX_RU, suspended: false });
  },

  async 'owners: plan, suspension, deletion with their endpoints and keys'(t, { accounts: a, query, at }) {
    const { id, managementKey } = await a.createOwner('acme', 'free', 10);
    const other = await a.createOwner('other', 'free', 10);
    const e1 = made(await a.createEndpoint(id, 'mainnet', undefined, 10));
    const e2 = made(await a.createEndpoint(id, 'sepolia', undefined, 10));
    const kept = made(await a.createEndpoint(other.id, 'mainnet', undefined, 10));
    t.equal(await a.setPlan(id, 'growth'), true);
    t.equal((await a.endpointByKey(e1.apiKey))?.plan, 'growth', 'the key grants the new plan');
    t.equal(await a.setPlan(99, 'growth'), false);

    t.equal(await a.setSuspended(id, true), true);
    t.equal((await a.owner(id))?.suspended, true, 'a suspended owner is still readable');
    // Known keys of a suspended owner: a grant that says so (403), not the null of an unknown key (401).
    t.same(await a.endpointByKey(e1.apiKey), { ...plain(e1.id, id, 'mainnet', 'growth'), suspended: true });
    t.same(await a.endpointById(e1.id), { ...plain(e1.id, id, 'mainnet', 'growth'), suspended: true }, 'by id alike');
    t.same(await a.ownerByManagementKey(managementKey), {
      id,
      name: 'acme',
      plan: 'growth',
      ruBalance: 10,
      suspended: true,
      role: 'admin',
    });
    t.same(await a.createEndpoint(id, 'mainnet', undefined, 10), { kind: 'refused', error: 'no_owner' });
    t.equal(await a.setSuspended(id, false), true);
    t.same(await a.endpointByKey(e1.apiKey), plain(e1.id, id, 'mainnet', 'growth'), 'resumed');
    t.same(await a.ownerByManagementKey(managementKey), {
      id,
      name: 'acme',
      plan: 'growth',
      ruBalance: 10,
      suspended: false,
      role: 'admin',
    });
    t.same(await a.endpointById(e1.id), await a.endpointByKey(e1.apiKey), 'resumed: found by id as by key');
    t.equal(await a.setSuspended(99, true), false);

    at(T0 + 5);
    t.same(await a.deleteOwner(id), { endpoints: 2 });
    t.same(await a.deleteOwner(id), null, 'twice: unknown');
    t.equal(await a.owner(id), null);
    t.same(
      (await a.listOwners()).map((o) => o.id),
      [other.id],
    );
    t.equal(await a.endpointByKey(e1.apiKey), null);
    t.equal(await a.endpointByKey(e2.apiKey), null);
    t.equal(await a.endpointById(e2.id), null, "a deleted owner's endpoint is not found by id");
    t.equal(await a.ownerByManagementKey(managementKey), null);
    t.ok(await a.endpointByKey(kept.apiKey), "another owner's endpoint still works");
    t.same(await a.listManagementKeys(id), null);
    t.same(await a.createManagementKey(id), null);
    t.same(await a.createEndpoint(id, 'mainnet', undefined, 10), { kind: 'refused', error: 'no_owner' });
    t.equal(await a.setPlan(id, 'free'), false);
    t.same(await a.topUp(id, 1), { kind: 'refused', error: 'no_owner' });
    t.same(await query('SELECT revoked_at FROM management_keys WHERE owner_id = ?', [id]), [{ revoked_at: T0 + 5 }], 'its key revoked');
    const gone = await query<{ id: string; deleted_at: number; deleted_seq: number }>(
      'SELECT id, deleted_at, deleted_seq FROM endpoints WHERE owner_id = ? ORDER BY deleted_seq',
      [id],
    );
    t.same(gone.map((e) => e.id).sort(), [e1.id, e2.id].sort());
    t.same(
      gone.map((e) => [e.deleted_at, e.deleted_seq]),
      [
        [T0 + 5, 1],
        [T0 + 5, 2],
      ],
      'each deletion numbered',
    );
  },

  async 'management keys: created, listed by prefix, revoked one at a time'(t, { accounts: a, query, at }) {
    const { id, managementKey: first } = await a.createOwner('acme', 'free', 10);
    const other = await a.createOwner('other', 'free', 10);
    at(T0 + 1);
    const second = (await a.createManagementKey(id))!;
    t.match(second, /^[0-9A-Za-z]{48}$/);
    t.same(await a.ownerByManagementKey(second), { id, name: 'acme', plan: 'free', ruBalance: 10, suspended: false, role: 'admin' });
    t.same(await a.listManagementKeys(id), [
      { keyPrefix: first.slice(0, 8), createdAt: T0, revokedAt: null, role: 'admin' },
      { keyPrefix: second.slice(0, 8), createdAt: T0 + 1, revokedAt: null, role: 'admin' },
    ]);
    t.same(await a.listManagementKeys(99), null);
    t.same(
      await query('SELECT key_hash FROM management_keys WHERE owner_id = ? ORDER BY created_at', [id]),
      [{ key_hash: hashKey(first) }, { key_hash: hashKey(second) }],
      'only the hashes are stored',
    );

    t.equal(await a.revokeManagementKey(id, 'zzzzzzzz'), 'no_key');
    t.equal(await a.revokeManagementKey(99, first.slice(0, 8)), 'no_owner');
    t.equal(await a.revokeManagementKey(other.id, first.slice(0, 8)), 'no_key', "another owner's key is not found");
    // A second live key with the same first characters (1 in 62^8 by chance; made here).
    await query('INSERT INTO management_keys (key_hash, owner_id, key_prefix, created_at) VALUES (?, ?, ?, ?)', [
      hashKey('twin'),
      id,
      first.slice(0, 8),
      T0 + 2,
    ]);
    t.equal(await a.revokeManagementKey(id, first.slice(0, 8)), 'ambiguous');
    t.ok(await a.ownerByManagementKey(first), 'nothing revoked');
    await query('UPDATE management_keys SET revoked_at = 1 WHERE key_hash = ?', [hashKey('twin')]);
    at(T0 + 3);
    t.equal(await a.revokeManagementKey(id, first.slice(0, 8)), 'revoked');
    t.equal(await a.revokeManagementKey(id, first.slice(0, 8)), 'no_key', 'revoked keys are not matched again');
    t.equal(await a.ownerByManagementKey(first), null);
    t.equal((await a.ownerByManagementKey(second))?.id, id, 'the other key still works');
    t.same(
      (await a.listManagementKeys(id))!.map((k) => k.revokedAt),
      [T0 + 3, null, 1],
    );
    t.equal(await a.ownerByManagementKey('x'.repeat(48)), null);
    t.equal(await a.ownerByManagementKey(second.slice(0, 32)), null, 'an API-key-shaped string is not a management key');
  },

  async 'endpoints: created up to the limit, found by key, listed and paged'(t, { accounts: a, query, at }) {
    const { id } = await a.createOwner('acme', 'growth', 10);
    const bob = await a.createOwner('bob', 'free', 10);
    const r = await a.createEndpoint(id, 'mainnet', 'prod', 3);
    if ('error' in r) throw new Error('refused');
    t.match(r.endpoint, { name: 'prod', network: 'mainnet', keyPrefix: r.apiKey.slice(0, 8), createdAt: T0 });
    t.match(r.endpoint.id, /^ep_[a-z2-7]{16}$/);
    t.match(r.apiKey, /^[0-9A-Za-z]{32}$/);
    t.same(r.endpoint, {
      id: r.endpoint.id,
      name: 'prod',
      network: 'mainnet',
      keyPrefix: r.apiKey.slice(0, 8),
      createdAt: T0,
      fences: NO_FENCES,
      previousKeyPrefix: null,
      previousKeyExpiresAt: null,
    });
    t.same(await a.endpointByKey(r.apiKey), plain(r.endpoint.id, id, 'mainnet', 'growth'));
    t.same(await a.endpointById(r.endpoint.id), plain(r.endpoint.id, id, 'mainnet', 'growth'), 'found by id');
    t.same(await query('SELECT fences FROM endpoints WHERE id = ?', [r.endpoint.id]), [{ fences: null }], 'none stored as NULL');
    for (const endpointId of ['ep_doesnotexist0000', '', r.endpoint.id.toUpperCase(), `${r.endpoint.id} `, "' OR 1=1 --"])
      t.equal(await a.endpointById(endpointId), null, JSON.stringify(endpointId));
    t.same(await query('SELECT key_hash FROM endpoints WHERE id = ?', [r.endpoint.id]), [{ key_hash: hashKey(r.apiKey) }]);
    for (const key of ['x'.repeat(32), 'public', r.apiKey.slice(0, 31) + '-', `${r.apiKey}x`]) {
      t.equal(await a.endpointByKey(key), null, JSON.stringify(key));
    }
    t.same(await a.createEndpoint(99, 'mainnet', undefined, 3), { kind: 'refused', error: 'no_owner' });
    t.same(await a.createEndpoint(2 ** 40, 'mainnet', undefined, 3), { kind: 'refused', error: 'no_owner' });

    // Writers racing for the last places: the count and the insert are one transaction.
    const racing = await Promise.all(Array.from({ length: 6 }, () => a.createEndpoint(id, 'sepolia', undefined, 3)));
    t.equal(racing.filter((x) => 'apiKey' in x).length, 2, 'two places were left');
    t.equal(racing.filter((x) => 'error' in x && x.error === 'limit').length, 4);
    t.same(await a.createEndpoint(id, 'mainnet', undefined, 0), { kind: 'refused', error: 'limit' });

    // More of bob's, some in the same second, so the order falls back on the id.
    const bobs: string[] = [];
    for (const s of [T0 + 10, T0 + 10, T0 + 10, T0 + 11, T0 + 12]) {
      at(s);
      bobs.push(made(await a.createEndpoint(bob.id, 'mainnet', `b${bobs.length}`, 10)).id);
    }
    const all = await a.listEndpoints(bob.id);
    t.same(
      all.map((e) => e.id),
      [...bobs.slice(0, 3).sort(), ...bobs.slice(3)],
      'oldest first, then by id',
    );
    const paged: string[] = [];
    for (let page = await a.listEndpointsPage(bob.id, 2); page.length > 0; ) {
      paged.push(...page.map((e) => e.id));
      const last = page[page.length - 1]!;
      page = await a.listEndpointsPage(bob.id, 2, { createdAt: last.createdAt, id: last.id });
    }
    t.same(
      paged,
      all.map((e) => e.id),
      'the pages walk the same list',
    );
    t.same(await a.listEndpointsPage(bob.id, 2, { createdAt: T0 + 11, id: 'ep_' }), all.slice(3), 'after a cursor');
    t.same(await a.listEndpoints(99), []);

    const everyone = await a.listAllEndpoints();
    t.same(
      everyone.map((e) => e.ownerId),
      [id, id, id, bob.id, bob.id, bob.id, bob.id, bob.id],
    );
    t.same(
      everyone.slice(3),
      all.map((e) => ({ ...e, ownerId: bob.id })),
    );
    t.same(await a.listAllEndpoints(bob.id), everyone.slice(3));
    t.same(await a.listAllEndpoints(99), []);
    t.same(
      (await a.listOwners()).map((o) => o.endpoints),
      [3, 5],
    );
  },

  async 'endpoints: deleted by their owner only, the key refused at once'(t, { accounts: a, query }) {
    const alice = (await a.createOwner('alice', 'free', 10)).id;
    const bob = (await a.createOwner('bob', 'free', 10)).id;
    const x = made(await a.createEndpoint(alice, 'mainnet', undefined, 2));
    const y = made(await a.createEndpoint(alice, 'mainnet', undefined, 2));
    t.same(await a.createEndpoint(alice, 'mainnet', undefined, 2), { kind: 'refused', error: 'limit' });
    t.equal(await a.deleteEndpoint(bob, x.id), false, "bob cannot delete alice's endpoint");
    t.equal(await a.deleteEndpoint(alice, 'ep_doesnotexist0000'), false, 'the same answer as for an unknown id');
    t.equal(await a.deleteEndpoint(2 ** 40, x.id), false);
    t.ok(await a.endpointByKey(x.apiKey), 'still works');
    t.equal(await a.deleteEndpoint(alice, x.id), true);
    t.equal(await a.deleteEndpoint(alice, x.id), false, 'twice: false');
    t.equal(await a.endpointByKey(x.apiKey), null);
    t.equal(await a.endpointById(x.id), null, 'deleted: not found by id either');
    t.ok(await a.endpointByKey(y.apiKey), 'the other endpoint still works');
    t.equal((await a.endpointById(y.id))?.endpointId, y.id);
    t.same(
      (await a.listEndpoints(alice)).map((e) => e.id),
      [y.id],
    );
    made(await a.createEndpoint(alice, 'mainnet', undefined, 2));
    t.equal(await a.deleteEndpoint(alice, y.id), true);
    t.same(
      await query('SELECT id, deleted_seq FROM endpoints WHERE deleted_seq IS NOT NULL ORDER BY deleted_seq'),
      [
        { id: x.id, deleted_seq: 1 },
        { id: y.id, deleted_seq: 2 },
      ],
      'deletions numbered in order',
    );
  },

  async 'fences: given at creation, patched in place, listed; another owner cannot'(t, { accounts: a, query }) {
    const { id } = await a.createOwner('acme', 'free', 10);
    const bob = (await a.createOwner('bob', 'free', 10)).id;
    const given = fences({
      allowed_origins: ['https://App.example.com:443', '*.example.org'],
      allowed_contracts: ['0x00000000000000000000000000000000000000AA'],
      key_in_path: false,
    });
    const r = await a.createEndpoint(id, 'mainnet', 'fenced', 10, given);
    if (r.kind !== 'created') throw new Error('refused');
    t.same(r.endpoint.fences, given);
    t.same(r.endpoint.fences.allowed_origins, ['https://app.example.com', '*.example.org'], 'normalised');
    const grant = await a.endpointByKey(r.apiKey);
    t.same(grant?.fences?.settings, given, 'compiled into the grant');
    t.equal(grant?.fences?.options.balance, false, 'eth_getBalance not fenced by default');
    t.ok(grant?.fences?.origins?.('https://app.example.com'), 'the matchers work');
    t.same((await a.endpointById(r.endpoint.id))?.fences?.settings, given, 'by id alike');
    t.same(JSON.parse((await query<{ fences: string }>('SELECT fences FROM endpoints WHERE id = ?', [r.endpoint.id]))[0]!.fences), given);
    t.same((await a.listEndpoints(id))[0]?.fences, given, 'listed');
    t.same((await a.listEndpointsPage(id, 1))[0]?.fences, given, 'paged');
    t.same((await a.listAllEndpoints(id))[0]?.fences, given, "in the operator's list");

    const patched = await a.patchEndpointFences(id, r.endpoint.id, patchWith({ allowed_ips: ['10.0.0.0/8'], allowed_origins: null }));
    const expected = { ...given, allowed_ips: ['10.0.0.0/8'], allowed_origins: null };
    t.same(patched, { ok: true, endpoint: { ...r.endpoint, fences: expected } }, 'a field left out stays, null clears one');
    t.same((await a.endpointByKey(r.apiKey))?.fences?.settings, expected, 'the key grants the new settings');

    const refused = await a.patchEndpointFences(id, r.endpoint.id, patchWith({ allowed_ips: ['10.0.0.1/8'], allowed_methods: [] }));
    t.equal(refused?.ok, false);
    t.same(
      (refused as { problems: FenceProblem[] }).problems.map((p) => p.field),
      ['allowed_methods'],
      'the problems, as the patch found them',
    );
    t.same((await a.listEndpoints(id))[0]?.fences, expected, 'nothing written');

    t.equal(await a.patchEndpointFences(bob, r.endpoint.id, patchWith({ key_in_path: true })), null, "another owner's endpoint: null");
    t.equal(await a.patchEndpointFences(id, 'ep_doesnotexist0000', patchWith({})), null);
    t.equal(await a.patchEndpointFences(2 ** 40, r.endpoint.id, patchWith({})), null);
    t.same((await a.listEndpoints(id))[0]?.fences, expected, "bob's patch wrote nothing");

    // Back to nothing: stored as NULL again, the grant without restrictions.
    const cleared = await a.patchEndpointFences(
      id,
      r.endpoint.id,
      patchWith({ allowed_ips: null, allowed_contracts: null, key_in_path: null }),
    );
    t.same(cleared, { ok: true, endpoint: { ...r.endpoint, fences: NO_FENCES } });
    t.same(await query('SELECT fences FROM endpoints WHERE id = ?', [r.endpoint.id]), [{ fences: null }]);
    t.equal((await a.endpointByKey(r.apiKey))?.fences, null);

    // Two patches at once, each of another field: both kept (read and written in one transaction).
    const [one, two] = await Promise.all([
      a.patchEndpointFences(id, r.endpoint.id, patchWith({ allowed_ips: ['192.0.2.0/24'] })),
      a.patchEndpointFences(id, r.endpoint.id, patchWith({ allowed_methods: ['eth_call'] })),
    ]);
    t.ok(one?.ok && two?.ok);
    t.match((await a.listEndpoints(id))[0]?.fences, { allowed_ips: ['192.0.2.0/24'], allowed_methods: ['eth_call'] }, 'no patch lost');

    t.equal(await a.deleteEndpoint(id, r.endpoint.id), true);
    t.equal(await a.patchEndpointFences(id, r.endpoint.id, patchWith({})), null, 'deleted: null');
  },

  async 'rotation: both keys work in the grace, the old one not after; grace 0; twice'(t, { accounts: a, query, at }) {
    const { id } = await a.createOwner('acme', 'free', 10);
    const bob = (await a.createOwner('bob', 'free', 10)).id;
    const ep = made(await a.createEndpoint(id, 'mainnet', undefined, 10));
    at(T0 + 100);
    const r = await a.rotateEndpointKey(id, ep.id, 60);
    if (r === null) throw new Error('not rotated');
    t.match(r.apiKey, /^[0-9A-Za-z]{32}$/);
    t.not(r.apiKey, ep.apiKey);
    t.equal(r.previousKeyExpiresAt, T0 + 160);
    t.same(r.endpoint, {
      id: ep.id,
      name: null,
      network: 'mainnet',
      keyPrefix: r.apiKey.slice(0, 8),
      createdAt: T0,
      fences: NO_FENCES,
      previousKeyPrefix: ep.apiKey.slice(0, 8),
      previousKeyExpiresAt: T0 + 160,
    });
    t.same(await a.listEndpoints(id), [r.endpoint], 'listed with the old key and its end');
    t.same(await a.listAllEndpoints(id), [{ ownerId: id, ...r.endpoint }]);
    t.same(await a.endpointByKey(r.apiKey), plain(ep.id, id, 'mainnet', 'free'), 'the new key works');
    t.same(
      await a.endpointByKey(ep.apiKey),
      { ...plain(ep.id, id, 'mainnet', 'free'), keyExpiresAtMs: (T0 + 160) * 1000 },
      'the old one too, until its end',
    );
    t.same(await a.endpointById(ep.id), plain(ep.id, id, 'mainnet', 'free'), 'by id: the current key');
    t.same(
      await query('SELECT key_hash, previous_key_hash FROM endpoints WHERE id = ?', [ep.id]),
      [{ key_hash: hashKey(r.apiKey), previous_key_hash: hashKey(ep.apiKey) }],
      'only hashes stored',
    );
    at(T0 + 159);
    t.ok(await a.endpointByKey(ep.apiKey), 'a second before its end');
    at(T0 + 160);
    t.equal(await a.endpointByKey(ep.apiKey), null, 'at its end: refused as an unknown key');
    t.ok(await a.endpointByKey(r.apiKey));
    t.same((await a.listEndpoints(id))[0], { ...r.endpoint, previousKeyPrefix: null, previousKeyExpiresAt: null }, 'no longer listed');

    // Twice within a grace: the key in its grace ends at once, the one replaced gets the new grace.
    at(T0 + 200);
    const second = (await a.rotateEndpointKey(id, ep.id, 3600))!;
    at(T0 + 201);
    const third = (await a.rotateEndpointKey(id, ep.id, 30))!;
    t.equal(await a.endpointByKey(r.apiKey), null, 'the first rotation’s key ended with the second grace');
    t.same(await a.endpointByKey(second.apiKey), { ...plain(ep.id, id, 'mainnet', 'free'), keyExpiresAtMs: (T0 + 231) * 1000 });
    t.ok(await a.endpointByKey(third.apiKey));
    t.equal(third.endpoint.previousKeyPrefix, second.apiKey.slice(0, 8));

    // Grace 0: the old key is refused at once, and nothing is kept of it.
    const now = (await a.rotateEndpointKey(id, ep.id, 0))!;
    t.equal(now.previousKeyExpiresAt, null);
    t.same([now.endpoint.previousKeyPrefix, now.endpoint.previousKeyExpiresAt], [null, null]);
    t.equal(await a.endpointByKey(third.apiKey), null);
    t.equal(await a.endpointByKey(second.apiKey), null, 'nor the one in its grace before');
    t.ok(await a.endpointByKey(now.apiKey));
    t.same(await query('SELECT previous_key_hash, previous_key_prefix, previous_key_expires_at FROM endpoints WHERE id = ?', [ep.id]), [
      { previous_key_hash: null, previous_key_prefix: null, previous_key_expires_at: null },
    ]);

    t.equal(await a.rotateEndpointKey(bob, ep.id, 60), null, "another owner's endpoint: null");
    t.equal(await a.rotateEndpointKey(id, 'ep_doesnotexist0000', 60), null);
    t.ok(await a.endpointByKey(now.apiKey), "bob's attempt changed nothing");
    await t.rejects(a.rotateEndpointKey(id, ep.id, -1), RangeError);
    await t.rejects(a.rotateEndpointKey(id, ep.id, 1.5), RangeError);
    t.ok(await a.endpointByKey(now.apiKey), 'a refused grace changed nothing');

    // A suspended owner's previous key is a suspended grant too, until its end.
    const last = (await a.rotateEndpointKey(id, ep.id, 60))!;
    await a.setSuspended(id, true);
    t.same(await a.endpointByKey(now.apiKey), {
      ...plain(ep.id, id, 'mainnet', 'free'),
      suspended: true,
      keyExpiresAtMs: (T0 + 261) * 1000,
    });
    t.equal((await a.endpointByKey(last.apiKey))?.suspended, true);
    t.equal(await a.deleteEndpoint(id, ep.id), true);
    t.equal(await a.endpointByKey(now.apiKey), null, 'deleted: neither key works');
    t.equal(await a.endpointByKey(last.apiKey), null);
    t.equal(await a.rotateEndpointKey(id, ep.id, 60), null, 'deleted: null');
  },

  async 'stats: the three usage tables read together, latency histograms merged'(t, { accounts: a, query }) {
    const owner = (await a.createOwner('acme', 'free', 10)).id;
    const bob = (await a.createOwner('bob', 'free', 10)).id;
    const day = 86_400;
    // The last two: a latency bucket and its count (lat_6 is 7-10 ms, lat_12 70-100 ms, lat_13 100-150 ms).
    const rows: Array<[string, string, number, string, number, number, number, number, number, number]> = [
      ['usage_minute', 'ep_a', owner, 'eth_call', T0 + 60, 0, 3, 30, 6, 3],
      ['usage_minute', 'ep_a', owner, 'eth_call', T0 + 120, 429, 2, 0, 0, 2],
      ['usage_minute', 'ep_b', owner, 'eth_getLogs', T0 + 60, 0, 1, 75, 13, 1],
      ['usage_hour', 'ep_a', owner, 'eth_call', T0 - 3600, 0, 10, 100, 12, 10],
      ['usage_day', 'ep_b', owner, 'eth_blockNumber', T0 - 2 * day, -32000, 4, 4, 1, 4],
      ['usage_minute', 'ep_c', bob, 'eth_call', T0 + 60, 0, 100, 1000, 0, 100],
    ];
    for (const [table, endpoint, ownerId, method, at, status, requests, ru, bucket, timed] of rows) {
      await query(
        `INSERT INTO ${table} (endpoint_id, owner_id, method, t, status, requests, ru, lat_${bucket}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
        [endpoint, ownerId, method, at, status, requests, ru, timed],
      );
    }
    const untimed = { p50: null, p95: null, p99: null };
    // Worked by hand: the rank's place inside its bucket, linearly (failures are not timed in the figures).
    const figures = (requests: number, ru: number, errors: number, success_rate: number | null, latency_ms: object) => ({
      requests,
      ru,
      errors,
      success_rate,
      latency_ms,
    });
    const getLogs = { p50: 125, p95: 147.5, p99: 149.5 };
    t.same(await a.stats(owner, { from: T0 - 3 * day, to: T0 + day, interval: 'hour' }), {
      totals: figures(20, 209, 6, 0.7, { p50: 82, p95: 115, p99: 143 }),
      methods: [
        { method: 'eth_call', ...figures(15, 130, 2, 0.8667, { p50: 80.5, p95: 98.05, p99: 99.61 }) },
        { method: 'eth_getLogs', ...figures(1, 75, 0, 1, getLogs) },
        { method: 'eth_blockNumber', ...figures(4, 4, 4, 0, untimed) },
      ],
      series: [
        { t: T0 - 2 * day, ...figures(4, 4, 4, 0, untimed) },
        { t: T0 - 3600, ...figures(10, 100, 0, 1, { p50: 85, p95: 98.5, p99: 99.7 }) },
        { t: T0, ...figures(6, 105, 2, 0.6667, { p50: 9, p95: 140, p99: 148 }) },
      ],
      statuses: [
        { status: -32000, requests: 4 },
        { status: 429, requests: 2 },
      ],
    });
    t.same(await a.stats(owner, { endpointId: 'ep_b', from: T0 - 3 * day, to: T0 + day, interval: 'day' }), {
      totals: figures(5, 79, 4, 0.2, getLogs),
      methods: [
        { method: 'eth_getLogs', ...figures(1, 75, 0, 1, getLogs) },
        { method: 'eth_blockNumber', ...figures(4, 4, 4, 0, untimed) },
      ],
      series: [
        { t: T0 - 2 * day, ...figures(4, 4, 4, 0, untimed) },
        { t: T0, ...figures(1, 75, 0, 1, getLogs) },
      ],
      statuses: [{ status: -32000, requests: 4 }],
    });
    t.same(await a.stats(owner, { from: T0, to: T0 + 61, interval: 'minute' }), {
      totals: figures(4, 105, 0, 1, { p50: 9, p95: 140, p99: 148 }),
      methods: [
        { method: 'eth_getLogs', ...figures(1, 75, 0, 1, getLogs) },
        { method: 'eth_call', ...figures(3, 30, 0, 1, { p50: 8.5, p95: 9.85, p99: 9.97 }) },
      ],
      series: [{ t: T0 + 60, ...figures(4, 105, 0, 1, { p50: 9, p95: 140, p99: 148 }) }],
      statuses: [],
    });
    const none = { totals: figures(0, 0, 0, null, untimed), methods: [], series: [], statuses: [] };
    t.same(await a.stats(bob, { endpointId: 'ep_a', from: 0, to: 2e9, interval: 'day' }), none, "another owner's endpoint: zeros");
    t.same(await a.stats(2 ** 40, { from: 0, to: 2e9, interval: 'day' }), none);
  },

  async "failures: newest first, the owner's endpoint only, at most limit"(t, { accounts: a, query }) {
    const owner = (await a.createOwner('acme', 'free', 10)).id;
    const bob = (await a.createOwner('bob', 'free', 10)).id;
    const insert = `INSERT INTO call_failures (endpoint_id, owner_id, at, method, http_status, code, error, message, upstream)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`;
    await query(insert, ['ep_a', owner, T0 * 1000, 'eth_call', 429, -32005, 'rate_limited', 'Rate limit exceeded', null]);
    await query(insert, ['ep_a', owner, T0 * 1000 + 1500, 'eth_getLogs', 502, -32603, 'upstream_error', 'Upstream node error', 'node-1']);
    await query(insert, [
      'ep_a',
      owner,
      T0 * 1000 + 2000,
      'eth_call',
      200,
      -32000,
      null,
      'The node answered this JSON-RPC error',
      'node-2',
    ]);
    await query(insert, ['ep_b', bob, T0 * 1000, 'eth_call', 401, -32001, 'unauthorized', 'Missing or invalid API key', null]);
    const all = await a.failures(owner, 'ep_a', 10);
    t.same(
      all.map((f) => [f.time, f.method, f.http_status, f.code, f.error, f.upstream]),
      [
        [T0 + 2, 'eth_call', 200, -32000, null, 'node-2'],
        [T0 + 1, 'eth_getLogs', 502, -32603, 'upstream_error', 'node-1'],
        [T0, 'eth_call', 429, -32005, 'rate_limited', null],
      ],
      'newest first, with the node that failed',
    );
    t.equal(all[1]?.message, 'Upstream node error');
    t.same((await a.failures(owner, 'ep_a', 1)).length, 1, 'limit');
    t.same(await a.failures(owner, 'ep_b', 10), [], "another owner's endpoint: none");
    t.same(await a.failures(bob, 'ep_b', 10), [
      {
        time: T0,
        method: 'eth_call',
        http_status: 401,
        code: -32001,
        error: 'unauthorized',
        message: 'Missing or invalid API key',
        upstream: null,
      },
    ]);
  },

  async 'names: refused alike before anything is written, stored as given'(t, { accounts: a, query }) {
    const bad = ['row\nforged', '\u001b[31mred', 'nul\u0000', 'lone\udc00', '\u202eevil', '', 'x'.repeat(101)];
    for (const name of bad) {
      await t.rejects(a.createOwner(name, 'free', 1), RangeError, JSON.stringify(name));
    }
    await t.rejects(
      a.createOwner('row\nforged', 'free', 1),
      new RangeError('owner name must not contain control, format or line-separator characters (found U+000A)'),
    );
    t.same(await query('SELECT count(*) AS n FROM owners'), [{ n: 0 }], 'no owner was written');
    const name = '東京 🦊 👩‍💻';
    const { id } = await a.createOwner(name, 'free', 1);
    t.equal((await a.owner(id))?.name, name);
    for (const bad1 of bad) {
      await t.rejects(a.createEndpoint(id, 'mainnet', bad1, 10), RangeError, JSON.stringify(bad1));
    }
    await t.rejects(
      a.createEndpoint(id, 'mainnet', 'x'.repeat(101), 10),
      new RangeError('endpoint name must be 1 to 100 characters, got 101'),
    );
    t.same(await a.listEndpoints(id), []);
    made(await a.createEndpoint(id, 'mainnet', name, 10));
    made(await a.createEndpoint(id, 'mainnet', 'x'.repeat(100), 10));
    t.same((await a.listEndpoints(id)).map((e) => e.name).sort(), [name, 'x'.repeat(100)].sort());
  },

  async 'another store on the same database sees the writes; a closed store rejects'(t, { accounts: a, another }) {
    const b = await another();
    const { id, managementKey } = await a.createOwner('acme', 'free', 10);
    const ep = made(await b.createEndpoint(id, 'mainnet', undefined, 10));
    t.equal((await a.endpointByKey(ep.apiKey))?.endpointId, ep.id);
    t.equal((await b.ownerByManagementKey(managementKey))?.id, id);
    t.equal(await a.deleteEndpoint(id, ep.id), true);
    t.equal(await b.endpointByKey(ep.apiKey), null);
    await b.close();
    await b.close();
    const late = b.listOwners();
    t.ok(late instanceof Promise, 'a call on a closed store returns');
    await t.rejects(late);
    t.same((await a.listOwners()).length, 1, 'the first store is untouched');
  },
};

for (const engine of [sqlite, postgres]) {
  t.test(engine.kind, async (t) => {
    const fresh = await engine.start(t);
    for (const [name, run] of Object.entries(CASES)) {
      t.test(name, async (t) => {
        const h = await fresh(t);
        t.equal(h.accounts.kind, engine.kind);
        await run(t, h);
      });
    }
  });
}
