import t from 'tap';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { createDirectory, type Directory } from '../../src/tenancy/directory.js';
import { createOwnerAdmin, type OwnerAdmin } from '../../src/tenancy/owners.js';
import { type Teardown, tempDbPath, tempStore } from '../store/temp-store.js';

interface Setup {
  path: string;
  dir: Directory;
  admin: OwnerAdmin;
}

/** The daemon's connection (directory) and the CLI's (admin) on one file. */
function setup(t: Teardown): Setup {
  const path = tempDbPath(t);
  const daemon = tempStore(t, path);
  const cli = tempStore(t, path);
  return { path, dir: createDirectory(daemon), admin: createOwnerAdmin(cli) };
}

function created(r: ReturnType<Directory['createEndpoint']>): { id: string; apiKey: string } {
  if (r.kind === 'refused') throw new Error(`createEndpoint refused: ${r.error}`);
  return { id: r.endpoint.id, apiKey: r.apiKey };
}

t.test('an endpoint key is found, unknown and malformed keys are not', async (t) => {
  const { dir, admin } = setup(t);
  const { id: owner } = admin.createOwner('acme', 'growth', 100);
  const r = dir.createEndpoint(owner, 'mainnet', 'prod', 10);
  if (r.kind === 'refused') return t.fail('refused');
  t.match(r.endpoint.id, /^ep_[a-z2-7]{16}$/);
  t.equal(r.endpoint.keyPrefix, r.apiKey.slice(0, 8));
  t.equal(r.endpoint.name, 'prod');
  const grant = {
    endpointId: r.endpoint.id,
    ownerId: owner,
    network: 'mainnet',
    plan: 'growth',
    suspended: false,
    fences: null,
    keyExpiresAtMs: null,
  };
  t.same(dir.endpointByKey(r.apiKey), grant);
  t.same(dir.endpointByKey(r.apiKey), grant, 'from the cache');
  t.equal(dir.endpointByKey('x'.repeat(32)), null);
  t.equal(dir.endpointByKey('public'), null);
  t.equal(dir.endpointByKey(r.apiKey.slice(0, 31) + '-'), null);
  t.same(dir.cacheSizes(), { found: 1, missing: 1 }, 'malformed keys are not even remembered');
  t.same(dir.listEndpoints(owner), [r.endpoint]);
  const unnamed = created(dir.createEndpoint(owner, 'sepolia', undefined, 10));
  t.equal(dir.listEndpoints(owner).find((e) => e.id === unnamed.id)!.name, null);
  t.equal(dir.endpointByKey(unnamed.apiKey)!.network, 'sepolia');
});

t.test('keys are stored only as hashes', async (t) => {
  const { path, dir, admin } = setup(t);
  const { id: owner, managementKey } = admin.createOwner('acme', 'free', 100);
  const secondKey = admin.createManagementKey(owner)!;
  const { apiKey } = created(dir.createEndpoint(owner, 'mainnet', undefined, 10));
  t.ok(dir.ownerByManagementKey(managementKey));
  // Every file SQLite wrote (database, WAL, shared memory), read as raw bytes.
  const bytes = readdirSync(dirname(path)).map((f) => readFileSync(join(dirname(path), f)));
  for (const secret of [apiKey, managementKey, secondKey]) {
    t.notOk(
      bytes.some((b) => b.includes(Buffer.from(secret))),
      'the key is not in any file',
    );
    t.ok(
      bytes.some((b) => b.includes(Buffer.from(secret.slice(0, 8)))),
      'its prefix is',
    );
  }
});

t.test('a deleted endpoint is refused at once, even while cached', async (t) => {
  const { dir, admin } = setup(t);
  const { id: owner } = admin.createOwner('acme', 'free', 100);
  const a = created(dir.createEndpoint(owner, 'mainnet', undefined, 10));
  const b = created(dir.createEndpoint(owner, 'mainnet', undefined, 10));
  t.ok(dir.endpointByKey(a.apiKey));
  t.ok(dir.endpointByKey(b.apiKey));
  t.equal(dir.deleteEndpoint(owner, a.id), true);
  t.equal(dir.endpointByKey(a.apiKey), null);
  t.ok(dir.endpointByKey(b.apiKey), 'the other endpoint still works');
  t.equal(dir.deleteEndpoint(owner, a.id), false, 'twice: false');
  t.same(
    dir.listEndpoints(owner).map((e) => e.id),
    [b.id],
  );
  t.same(dir.takeRevokedEndpointIds(), [a.id]);
  t.same(dir.takeRevokedEndpointIds(), [], 'each id once');
});

t.test('suspension, revocation and owner deletion by the CLI reach the daemon on refresh', async (t) => {
  const { dir, admin } = setup(t);
  const { id: owner, managementKey } = admin.createOwner('acme', 'free', 100);
  const { id: other } = admin.createOwner('other', 'free', 100);
  const a = created(dir.createEndpoint(owner, 'mainnet', undefined, 10));
  const b = created(dir.createEndpoint(owner, 'mainnet', undefined, 10));
  const c = created(dir.createEndpoint(other, 'mainnet', undefined, 10));
  t.equal(dir.refreshIfChanged(), true, 'the owners were created by another connection');
  t.equal(dir.refreshIfChanged(), false, 'nothing since');
  t.ok(dir.endpointByKey(a.apiKey));
  t.equal(dir.ownerByManagementKey(managementKey)!.id, owner);

  t.ok(admin.setSuspended(owner, true));
  t.ok(dir.endpointByKey(a.apiKey), 'cached until the refresh');
  t.equal(dir.refreshIfChanged(), true);
  t.equal(dir.endpointByKey(a.apiKey)?.suspended, true, 'a suspended grant: 403, not the 401 of an unknown key');
  t.equal(dir.ownerByManagementKey(managementKey)?.suspended, true, 'its management key too');
  t.equal(dir.owner(owner)!.suspended, true, 'the owner itself is still readable');
  t.same(dir.takeRevokedEndpointIds().sort(), [a.id, b.id].sort());
  t.ok(dir.endpointByKey(c.apiKey), 'another owner is untouched');

  t.ok(admin.setSuspended(owner, false));
  t.equal(dir.refreshIfChanged(), true);
  t.equal(dir.endpointByKey(a.apiKey)?.suspended, false, 'resumed');
  t.same(dir.takeRevokedEndpointIds(), []);

  const second = admin.createManagementKey(owner)!;
  t.equal(admin.revokeManagementKey(owner, managementKey.slice(0, 8)), 'revoked');
  t.equal(dir.ownerByManagementKey(managementKey), null);
  t.equal(dir.ownerByManagementKey(second)!.id, owner);

  t.same(admin.deleteOwner(owner), { endpoints: 2 });
  t.ok(dir.endpointByKey(a.apiKey), 'cached until the refresh');
  t.ok(dir.refreshIfChanged());
  t.equal(dir.endpointByKey(a.apiKey), null);
  t.equal(dir.endpointByKey(b.apiKey), null);
  t.equal(dir.ownerByManagementKey(second), null);
  t.equal(dir.owner(owner), null);
  t.same(dir.takeRevokedEndpointIds().sort(), [a.id, b.id].sort());
  t.same(dir.createEndpoint(owner, 'mainnet', undefined, 10), { kind: 'refused', error: 'no_owner' });
});

t.test('deletions here and by the CLI, interleaved, are each reported exactly once', async (t) => {
  const { dir, admin } = setup(t);
  const { id: owner } = admin.createOwner('acme', 'free', 100);
  const { id: doomed } = admin.createOwner('doomed', 'free', 100);
  const eps = Array.from({ length: 3 }, () => created(dir.createEndpoint(owner, 'mainnet', undefined, 10)));
  const cliSide = created(dir.createEndpoint(doomed, 'mainnet', undefined, 10));
  dir.refreshIfChanged();
  t.ok(dir.deleteEndpoint(owner, eps[0]!.id));
  admin.deleteOwner(doomed); // a deletion the daemon has not seen yet...
  t.ok(dir.deleteEndpoint(owner, eps[1]!.id)); // ...then one of its own after it, which reads the log up to it
  t.same(dir.takeRevokedEndpointIds(), [eps[0]!.id, cliSide.id, eps[1]!.id]);
  t.ok(dir.refreshIfChanged());
  t.same(dir.takeRevokedEndpointIds(), [], 'already applied');
  t.ok(dir.deleteEndpoint(owner, eps[2]!.id));
  admin.topUp(owner, 1);
  t.ok(dir.refreshIfChanged());
  t.same(dir.takeRevokedEndpointIds(), [eps[2]!.id]);
});

t.test('every management operation is scoped to its owner', async (t) => {
  const { dir, admin } = setup(t);
  const { id: alice } = admin.createOwner('alice', 'free', 100);
  const { id: bob } = admin.createOwner('bob', 'free', 100);
  const a = created(dir.createEndpoint(alice, 'mainnet', 'alice-prod', 2));
  t.same(dir.listEndpoints(bob), [], "bob does not see alice's endpoint");
  t.equal(dir.deleteEndpoint(bob, a.id), false, "bob cannot delete alice's endpoint");
  t.equal(dir.deleteEndpoint(bob, 'ep_doesnotexist0000'), false, 'the same answer as for an unknown id');
  t.ok(dir.endpointByKey(a.apiKey), 'and it still works');
  t.same(dir.stats(bob, { endpointId: a.id, from: 0, to: 2e9, interval: 'day' }), {
    totals: { requests: 0, ru: 0, errors: 0, success_rate: null, latency_ms: { p50: null, p95: null, p99: null } },
    methods: [],
    series: [],
    statuses: [],
  });
  // The limit counts each owner's own live endpoints.
  created(dir.createEndpoint(alice, 'mainnet', undefined, 2));
  t.same(dir.createEndpoint(alice, 'mainnet', undefined, 2), { kind: 'refused', error: 'limit' });
  created(dir.createEndpoint(bob, 'mainnet', undefined, 2));
  created(dir.createEndpoint(bob, 'mainnet', undefined, 2));
  t.ok(dir.deleteEndpoint(alice, a.id));
  created(dir.createEndpoint(alice, 'mainnet', undefined, 2));
  t.same(dir.createEndpoint(alice, 'mainnet', undefined, 0), { kind: 'refused', error: 'limit' });
  t.equal(dir.listEndpoints(alice).length, 2);
  t.equal(dir.listEndpoints(bob).length, 2);
});

t.test('owner records', async (t) => {
  const { dir, admin } = setup(t);
  const { id, managementKey } = admin.createOwner('acme', 'premium', 1234);
  t.same(dir.owner(id), { id, name: 'acme', plan: 'premium', ruBalance: 1234, suspended: false });
  t.same(dir.ownerByManagementKey(managementKey), { ...dir.owner(id), role: 'admin' });
  t.equal(dir.owner(id + 1), null);
  t.equal(dir.ownerByManagementKey('x'.repeat(48)), null);
  t.equal(dir.ownerByManagementKey(managementKey.slice(0, 32)), null, 'an API-key-shaped string is not a management key');
});

t.test('an endpoint name that could reach a terminal raw is refused before anything is written', async (t) => {
  const { dir, admin } = setup(t);
  const { id: owner } = admin.createOwner('acme', 'free', 100);
  for (const name of ['prod\nep_forged  1  mainnet', '\u001b[31mred', 'nul\u0000', 'lone\udc00', '', 'x'.repeat(101)]) {
    t.throws(() => dir.createEndpoint(owner, 'mainnet', name, 10), RangeError, JSON.stringify(name));
  }
  t.same(dir.listEndpoints(owner), []);
  t.equal(created(dir.createEndpoint(owner, 'mainnet', '東京 🦊', 10)).id.slice(0, 3), 'ep_');
  t.same(
    dir.listEndpoints(owner).map((e) => e.name),
    ['東京 🦊'],
  );
});
