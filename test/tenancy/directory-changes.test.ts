import t from 'tap';
import { createLedger } from '../../src/metering/ledger.js';
import type { Store } from '../../src/store/open.js';
import { createDirectory, type Directory } from '../../src/tenancy/directory.js';
import { applyFencePatch, type FenceSettings, NO_FENCES } from '../../src/fences/settings.js';
import { createEndpointTable, newEndpointId } from '../../src/tenancy/endpoints.js';
import { newKey } from '../../src/tenancy/keys.js';
import { createOwnerAdmin, type OwnerAdmin } from '../../src/tenancy/owners.js';
import { type Teardown, tempDbPath, tempStore } from '../store/temp-store.js';

// What another connection's commit does to the daemon's key cache: only the keys a change names are
// read again (the key-change log, store/migrations.ts); the ledger's writes change none.

interface Setup {
  daemon: Store;
  cliStore: Store;
  dir: Directory;
  admin: OwnerAdmin;
  /** SQLite reads of a key made so far by the directory. */
  reads(): number;
}

/** The daemon's connection (directory, its key reads counted) and the CLI's (admin) on one file. */
function setup(t: Teardown): Setup {
  const path = tempDbPath(t);
  const daemon = tempStore(t, path);
  const cliStore = tempStore(t, path);
  const sql = daemon.sql.directory;
  const byHash = sql.endpointByKeyHash;
  let reads = 0;
  sql.endpointByKeyHash = new Proxy(byHash, {
    get(target, prop, receiver) {
      if (prop !== 'get') return Reflect.get(target, prop, receiver);
      return (...args: Parameters<typeof byHash.get>) => {
        reads++;
        return target.get(...args);
      };
    },
  });
  return { daemon, cliStore, dir: createDirectory(daemon), admin: createOwnerAdmin(cliStore), reads: () => reads };
}

function made(dir: Directory, owner: number): { id: string; apiKey: string } {
  const r = dir.createEndpoint(owner, 'mainnet', undefined, 100);
  if (r.kind === 'refused') throw new Error(`createEndpoint refused: ${r.error}`);
  return { id: r.endpoint.id, apiKey: r.apiKey };
}

/** Two owners, two endpoints for the first and one for the second, every key looked up once. */
function seeded(t: Teardown) {
  const s = setup(t);
  const { id: a } = s.admin.createOwner('a', 'free', 1_000_000);
  const { id: b } = s.admin.createOwner('b', 'free', 1_000_000);
  const a1 = made(s.dir, a);
  const a2 = made(s.dir, a);
  const b1 = made(s.dir, b);
  s.dir.refreshIfChanged();
  for (const e of [a1, a2, b1]) s.dir.endpointByKey(e.apiKey);
  return { ...s, a, b, a1, a2, b1 };
}

t.test("another connection's ledger flush (balances, usage rows) forgets no key", async (t) => {
  const { cliStore, dir, reads, a, a1, a2, b1 } = seeded(t);
  const unknown = 'z'.repeat(32);
  t.equal(dir.endpointByKey(unknown), null);
  const before = reads();
  const ledger = createLedger(cliStore, { flushIntervalMs: 60_000 });
  t.teardown(() => ledger.close());
  for (let i = 0; i < 3; i++) {
    ledger.settle(ledger.reserve(a, 5)!, 5, { endpointId: a1.id, method: 'eth_call', status: 0 });
    t.ok(ledger.flush());
    t.equal(dir.refreshIfChanged(), true, 'the commit is seen (the ledger re-reads balances on it)');
  }
  for (const e of [a1, a2, b1]) t.ok(dir.endpointByKey(e.apiKey));
  t.equal(dir.endpointByKey(unknown), null);
  t.equal(reads(), before, 'every key, the unknown one too, answered from the cache');
  t.same(dir.cacheSizes(), { found: 3, missing: 1 });
});

t.test('a deletion by another connection forgets that key alone and revokes it', async (t) => {
  const { dir, reads, a, a1, a2, b1, cliStore } = seeded(t);
  // The CLI's deleteOwner deletes endpoints with the same statement: here one endpoint alone.
  cliStore.write(() => cliStore.sql.directory.deleteEndpoint.get(1, a1.id, a));
  const before = reads();
  t.ok(dir.endpointByKey(a1.apiKey), 'cached until the refresh');
  t.equal(dir.refreshIfChanged(), true);
  t.same(dir.takeRevokedEndpointIds(), [a1.id]);
  t.same(dir.cacheSizes(), { found: 2, missing: 0 });
  t.ok(dir.endpointByKey(a2.apiKey));
  t.ok(dir.endpointByKey(b1.apiKey));
  t.equal(reads(), before, 'the other keys are still cached');
  t.equal(dir.endpointByKey(a1.apiKey), null);
  t.equal(reads(), before + 1, 'the deleted key is read again');
});

t.test("a suspension forgets the owner's keys alone; lifting it makes them work again", async (t) => {
  const { dir, admin, reads, a, a1, a2, b1 } = seeded(t);
  t.ok(admin.setSuspended(a, true));
  t.equal(dir.refreshIfChanged(), true);
  t.same(dir.takeRevokedEndpointIds().sort(), [a1.id, a2.id].sort());
  t.same(dir.cacheSizes(), { found: 1, missing: 0 });
  const before = reads();
  t.ok(dir.endpointByKey(b1.apiKey));
  t.equal(reads(), before, "the other owner's key is still cached");
  // Known, and told so (403 owner_suspended), not refused as an unknown key.
  t.equal(dir.endpointByKey(a1.apiKey)?.suspended, true);
  t.equal(dir.endpointByKey(a1.apiKey)?.suspended, true, 'remembered');
  t.equal(reads(), before + 1);

  t.ok(admin.setSuspended(a, false));
  t.equal(dir.refreshIfChanged(), true);
  t.equal(dir.endpointByKey(a1.apiKey)?.suspended, false, 'the suspended grant was forgotten');
  t.same(dir.takeRevokedEndpointIds(), []);
});

t.test("a plan change forgets the owner's keys alone, read again with the new plan", async (t) => {
  const { dir, admin, reads, b, a1, a2, b1 } = seeded(t);
  t.ok(admin.setPlan(b, 'growth'));
  t.equal(dir.endpointByKey(b1.apiKey)!.plan, 'free', 'cached until the refresh');
  t.equal(dir.refreshIfChanged(), true);
  const before = reads();
  t.equal(dir.endpointByKey(b1.apiKey)!.plan, 'growth');
  t.ok(dir.endpointByKey(a1.apiKey));
  t.ok(dir.endpointByKey(a2.apiKey));
  t.equal(reads(), before + 1, "only the changed owner's key is read");
  t.same(dir.takeRevokedEndpointIds(), [], 'nothing to close');
});

t.test('an endpoint made by another connection is found though its key was a remembered miss', async (t) => {
  const { cliStore, dir, a } = seeded(t);
  // A key made here, stored by the other connection as its createEndpoint would, after it was refused.
  const key = newKey('api');
  t.equal(dir.endpointByKey(key.key), null);
  cliStore.write(() => cliStore.sql.directory.insertEndpoint.run(newEndpointId(), a, 'mainnet', null, key.hash, key.prefix, 1, null));
  t.equal(dir.endpointByKey(key.key), null, 'remembered as a miss until the refresh');
  t.equal(dir.refreshIfChanged(), true);
  t.equal(dir.endpointByKey(key.key)!.ownerId, a);
  t.same(dir.cacheSizes(), { found: 4, missing: 0 }, 'the keys found are kept');
});

t.test('a reader that missed pruned rows reads every key again', async (t) => {
  const { daemon, cliStore, admin, reads, a, b, a1, a2, b1 } = seeded(t);
  const late = createDirectory(daemon);
  t.ok(late.endpointByKey(b1.apiKey));
  // Rows the late directory has not read, then pruned as a day later.
  admin.setSuspended(a, true);
  admin.setPlan(b, 'growth');
  const cli = createDirectory(cliStore);
  t.equal(cli.pruneChanges(Date.now() + 2 * 86_400_000, 86_400), 4, 'every row but the last');
  t.equal(late.refreshIfChanged(), true);
  t.same(late.cacheSizes(), { found: 0, missing: 0 });
  const before = reads();
  t.equal(late.endpointByKey(b1.apiKey)!.plan, 'growth', 'read again');
  t.equal(late.endpointByKey(a1.apiKey)?.suspended, true);
  t.equal(reads(), before + 2);
  t.same(late.takeRevokedEndpointIds().sort(), [a1.id, a2.id].sort(), 'the suspension is still seen');
});

t.test('a store fault while a suspension is read: the keys are refused at once, the sockets closed at the next read', async (t) => {
  const s = seeded(t);
  t.ok(s.admin.setSuspended(s.a, true));
  const sql = s.daemon.sql.directory;
  const suspendedOf = sql.ownerSuspended;
  let fail = true;
  sql.ownerSuspended = new Proxy(suspendedOf, {
    get(target, prop, receiver) {
      if (prop !== 'get') return Reflect.get(target, prop, receiver);
      return (...args: Parameters<typeof suspendedOf.get>) => {
        if (fail) throw new Error('SQLITE_IOERR: disk I/O error');
        return target.get(...args);
      };
    },
  });
  t.throws(() => s.dir.refreshIfChanged(), /SQLITE_IOERR/, 'the read failed');
  t.equal(s.dir.endpointByKey(s.a1.apiKey)?.suspended, true, "the suspended owner's keys are refused already");
  t.equal(s.dir.endpointByKey(s.b1.apiKey)?.suspended, false, "the other owner's still served");
  t.same(s.dir.takeRevokedEndpointIds(), [], 'no socket closed yet');
  fail = false;
  t.equal(s.dir.refreshIfChanged(), true, 'the change is read again at the next call');
  t.same(s.dir.takeRevokedEndpointIds().sort(), [s.a1.id, s.a2.id].sort(), 'and its sockets are closed');
});

const patchWith = (body: Record<string, unknown>) => (current: FenceSettings) => applyFencePatch(current, body);

t.test("a patch of restrictions by another connection forgets that endpoint's key alone and closes its sockets", async (t) => {
  const { dir, cliStore, reads, a, a1, a2, b1 } = seeded(t);
  // The CLI's connection, as `chaingate endpoint set` writes.
  const cli = createEndpointTable(cliStore);
  const patched = cli.patchEndpointFences(a, a1.id, patchWith({ allowed_ips: ['10.0.0.0/8'] }));
  t.equal(patched?.ok, true);
  t.equal(dir.endpointByKey(a1.apiKey)?.fences, null, 'cached until the refresh');
  t.equal(dir.refreshIfChanged(), true);
  t.same(dir.takeRevokedEndpointIds(), [a1.id], 'its sockets are closed: their clients reconnect under the new settings');
  t.same(dir.cacheSizes(), { found: 2, missing: 0 });
  const before = reads();
  t.ok(dir.endpointByKey(a2.apiKey));
  t.ok(dir.endpointByKey(b1.apiKey));
  t.equal(reads(), before, 'the other keys are still cached');
  t.same(dir.endpointByKey(a1.apiKey)?.fences?.settings.allowed_ips, ['10.0.0.0/8'], 'read again, restricted');
  t.equal(reads(), before + 1);

  // A patch that changes nothing writes nothing: no row, nothing forgotten.
  t.equal(cli.patchEndpointFences(a, a1.id, patchWith({ allowed_ips: ['10.0.0.0/8'] }))?.ok, true);
  t.equal(dir.refreshIfChanged(), false);
  t.same(dir.takeRevokedEndpointIds(), []);
});

t.test('a rotation by another connection: both keys forgotten, the old one served until its end, then refused', async (t) => {
  const { daemon, cliStore, admin, reads } = setup(t);
  let ms = 1_700_000_000_000;
  const now = () => ms;
  const dir = createDirectory(daemon, { now });
  const cli = createEndpointTable(cliStore, now);
  const { id: a } = admin.createOwner('a', 'free', 1000);
  const ep = made(dir, a);
  t.ok(dir.endpointByKey(ep.apiKey));
  const logged = (): number => cliStore.db.prepare('SELECT count(*) FROM key_changes').pluck().get() as number;
  const rows = logged();
  const r = cli.rotateEndpointKey(a, ep.id, 60)!;
  t.same(cliStore.db.prepare('SELECT kind, endpoint_id FROM key_changes ORDER BY seq DESC LIMIT 1').get(), {
    kind: 'endpoint_changed',
    endpoint_id: ep.id,
  });
  t.equal(logged(), rows + 1, 'one row for the key and its previous one changed together');
  t.ok(dir.endpointByKey(r.apiKey), 'a key never met is read from the store');
  t.equal(dir.endpointByKey(ep.apiKey)?.keyExpiresAtMs, null, 'the old key: cached as it was until the refresh');
  t.same(dir.cacheSizes(), { found: 2, missing: 0 });
  t.equal(dir.refreshIfChanged(), true);
  t.same(dir.takeRevokedEndpointIds(), [ep.id]);
  t.same(dir.cacheSizes(), { found: 0, missing: 0 }, 'both keys of the endpoint forgotten');
  t.equal(dir.endpointByKey(r.apiKey)?.keyExpiresAtMs, null, 'the new key works');
  const old = dir.endpointByKey(ep.apiKey);
  t.equal(old?.keyExpiresAtMs, ms + 60_000, 'the old one until its end');
  t.same(dir.cacheSizes(), { found: 2, missing: 0 }, 'both cached');

  ms += 59_999;
  t.equal(dir.endpointByKey(ep.apiKey), old, 'from the cache');
  ms += 1;
  t.equal(dir.endpointByKey(ep.apiKey), null, 'at its end: refused, without any change read');
  const afterEnd = reads();
  t.equal(dir.endpointByKey(ep.apiKey), null);
  t.equal(reads(), afterEnd, 'then remembered as a miss');
  t.ok(dir.endpointByKey(r.apiKey));

  // Rotated again at once: both keys cached for the endpoint are forgotten.
  const again = cli.rotateEndpointKey(a, ep.id, 30)!;
  t.ok(dir.endpointByKey(r.apiKey), 'cached until the refresh');
  t.equal(dir.refreshIfChanged(), true);
  t.same(dir.takeRevokedEndpointIds(), [ep.id]);
  t.equal(dir.endpointByKey(r.apiKey)?.keyExpiresAtMs, ms + 30_000, 'the replaced key, in its grace now');
  t.ok(dir.endpointByKey(again.apiKey));
  const zero = cli.rotateEndpointKey(a, ep.id, 0)!;
  t.equal(dir.refreshIfChanged(), true);
  t.same(dir.cacheSizes(), { found: 0, missing: 0 }, 'the current and the previous key forgotten');
  t.equal(dir.endpointByKey(r.apiKey), null, 'grace 0: neither old key works');
  t.equal(dir.endpointByKey(again.apiKey), null);
  t.ok(dir.endpointByKey(zero.apiKey));
});

t.test("the directory's own patch and rotation apply at once, here and for its sockets", async (t) => {
  const { dir, a, a1, a2 } = seeded(t);
  const patched = dir.patchEndpointFences(a, a1.id, patchWith({ allowed_methods: ['eth_call'] }));
  t.same(patched?.ok && patched.endpoint.fences, { ...NO_FENCES, allowed_methods: ['eth_call'] });
  t.ok(dir.endpointByKey(a1.apiKey)?.fences?.methods, 'the next call is checked');
  const r = dir.rotateEndpointKey(a, a2.id, 10)!;
  t.ok(dir.endpointByKey(r.apiKey), 'the new key at once');
  t.not(dir.endpointByKey(a2.apiKey)?.keyExpiresAtMs, null, 'the old one in its grace');
  t.same(dir.takeRevokedEndpointIds(), [a1.id, a2.id]);
  t.equal(dir.refreshIfChanged(), false, 'its own writes are read already');
});

t.test('fences.contracts_cover_balance reaches the compiled restrictions', async (t) => {
  const { daemon, admin } = setup(t);
  const { id: a } = admin.createOwner('a', 'free', 1000);
  const settings = applyFencePatch(NO_FENCES, { allowed_contracts: ['0x00000000000000000000000000000000000000aa'] });
  if (!settings.ok) throw new Error('bad settings');
  for (const balance of [false, true]) {
    const dir = createDirectory(daemon, { fences: { balance } });
    const r = dir.createEndpoint(a, 'mainnet', undefined, 10, settings.settings);
    if (r.kind !== 'created') throw new Error('refused');
    t.equal(dir.endpointByKey(r.apiKey)?.fences?.options.balance, balance);
  }
});
