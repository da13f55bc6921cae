/**
 * createTenancy on a real SQLite file next to a second connection playing the CLI: method prices from
 * the catalogue and the config, the once-a-second look for the CLI's changes (top-ups re-read, revoked
 * endpoints handed to the closer), store faults logged and repaired, and close() flushing the ledger.
 */
import t, { type Test } from 'tap';
import { textLogger } from '../support/log-lines.js';
import Database from 'better-sqlite3';
import { validateConfig } from '../../src/config/schema.js';
import { createTenancy, REFRESH_INTERVAL_MS, type Tenancy } from '../../src/pipeline/tenancy.js';
import { createOwnerAdmin } from '../../src/tenancy/owners.js';
import { tempDbPath, tempStore } from '../store/temp-store.js';
import { waitFor } from '../support/wait-for.js';

interface Setup {
  tenancy: Tenancy;
  path: string;
  logLines: string[];
}

function tenancyFor(t: Test, raw: Record<string, unknown> = {}): Setup {
  const path = tempDbPath(t);
  const r = validateConfig({
    storage: { path },
    chains: { devnet: { chain_id: 31337, upstreams: [{ url: 'http://127.0.0.1:1' }] } },
    ...raw,
  });
  if (!r.ok) throw new Error(r.errors.join('\n'));
  const logLines: string[] = [];
  const tenancy = createTenancy(r.config, textLogger(logLines));
  t.teardown(() => {
    if (tenancy.store!.db.open) tenancy.close();
  });
  return { tenancy, path, logLines };
}

t.test("ruCost: the config's prices over the catalogue's, ru.default for the rest", async (t) => {
  const { tenancy } = tenancyFor(t, { ru: { default: 7, methods: { eth_getLogs: 80, eth_chainId: 0 } } });
  const cases: Array<[string, number, string]> = [
    ['eth_blockNumber', 10, "the catalogue's own price"],
    ['eth_getLogs', 80, "a config price replaces the catalogue's"],
    ['eth_chainId', 0, 'a config price of 0 is a price, not a gap'],
    ['eth_getBalance', 7, 'a method without a price of its own costs ru.default'],
    ['(invalid)', 7, 'so does anything else'],
  ];
  for (const [method, ru, why] of cases) t.equal(tenancy.ruCost(method), ru, `${method}: ${why}`);
  t.equal(tenancyFor(t).tenancy.ruCost('eth_getBalance'), 15, 'the default ru.default is 15');
});

t.test("the CLI's changes reach the daemon within the refresh interval", async (t) => {
  const { tenancy, path } = tenancyFor(t);
  const admin = createOwnerAdmin(tempStore(t, path));
  const revoked: string[] = [];
  tenancy.onRevoked((id) => revoked.push(id));
  const alice = admin.createOwner('alice', 'free', 100).id;
  const bob = admin.createOwner('bob', 'free', 100).id;
  const endpoint = (owner: number): { id: string; key: string } => {
    const r = tenancy.directory!.createEndpoint(owner, 'devnet', undefined, 10);
    if ('error' in r) throw new Error(r.error);
    return { id: r.endpoint.id, key: r.apiKey };
  };
  const [a1, a2, b1] = [endpoint(alice), endpoint(alice), endpoint(bob)];
  t.equal(tenancy.ledger.available(alice), 100, 'the balance is read once');

  admin.topUp(alice, 50);
  admin.setSuspended(bob, true);
  await waitFor(() => revoked.length > 0, { ms: 3 * REFRESH_INTERVAL_MS });
  t.same(revoked, [b1.id], "the suspended owner's endpoint is handed to the closer");
  t.equal(tenancy.ledger.available(alice), 150, 'the top-up is read again');
  // Known and refused 403 owner_suspended by the request path (not the 401 of an unknown key).
  t.equal(tenancy.directory!.endpointByKey(b1.key)?.suspended, true, "and the suspended owner's key says so");

  admin.deleteOwner(alice);
  await waitFor(() => revoked.length > 1, { ms: 3 * REFRESH_INTERVAL_MS });
  t.same(revoked.slice(1).sort(), [a1.id, a2.id].sort(), "a deleted owner's endpoints, each once");
  await new Promise((r) => setTimeout(r, REFRESH_INTERVAL_MS + 200));
  t.equal(revoked.length, 3, 'nothing is handed over twice');
});

t.test('storeFault: logged with where it happened; a fault other than a lock has the WAL checkpointed', async (t) => {
  const { tenancy, path, logLines } = tenancyFor(t);
  const owner = createOwnerAdmin(tenancy.store!).createOwner('acme', 'free', 100).id;
  const ep = tenancy.directory!.createEndpoint(owner, 'devnet', undefined, 10);
  if ('error' in ep) throw new Error(ep.error);
  const charge = (): void => {
    const r = tenancy.ledger.reserve(owner, 1)!;
    tenancy.ledger.settle(r, 1, { endpointId: ep.endpoint.id, method: 'eth_call', status: 0 });
  };

  tenancy.storeFault('GET /api/dashboard/account', new Database.SqliteError('database is locked', 'SQLITE_BUSY'));
  t.match(logLines.at(-1), /^error store fault; answered 503 during="GET \/api\/dashboard\/account" error="database is locked"$/);
  charge();
  t.ok(tenancy.ledger.flush());
  t.notOk(
    logLines.some((l) => /checkpoint/i.test(l)),
    'a lock needs no repair',
  );

  // A reader on another connection keeps the checkpoint from completing: logged once, retried at each flush.
  tenancy.storeFault('POST /rpc', new Database.SqliteError('disk I/O error', 'SQLITE_IOERR'));
  const reader = new Database(path);
  t.teardown(() => reader.close());
  reader.exec('BEGIN');
  reader.prepare('SELECT count(*) FROM owners').get();
  for (let i = 0; i < 3; i++) {
    charge();
    t.ok(tenancy.ledger.flush(), 'the debits are written all the same');
  }
  const incomplete = logLines.filter((l) => l.startsWith('warn WAL checkpoint after a store fault did not complete'));
  t.equal(incomplete.length, 1, 'the same reason is logged once');
  reader.exec('COMMIT');
  charge();
  t.ok(tenancy.ledger.flush());
  t.equal(logLines.filter((l) => l === 'info WAL checkpointed after a store fault: its space is free again').length, 1);
  charge();
  t.ok(tenancy.ledger.flush());
  t.equal(logLines.filter((l) => /checkpoint/i.test(l)).length, 2, 'one checkpoint per fault');
});

t.test('close(): flushes the debits, closes the store, and says when the last flush failed', async (t) => {
  for (const locked of [false, true]) {
    const { tenancy, path } = tenancyFor(t, { ledger: { flush_interval_ms: 60_000 } });
    const owner = createOwnerAdmin(tenancy.store!).createOwner('acme', 'free', 100).id;
    const r = tenancy.ledger.reserve(owner, 30)!;
    tenancy.ledger.settle(r, 30, { endpointId: 'ep_aaaaaaaaaaaaaaaa', method: 'eth_call', status: 0 });
    const cli = new Database(path);
    if (locked) cli.exec('BEGIN IMMEDIATE');
    t.equal(await tenancy.close(), !locked, locked ? 'false: the write lock was held' : 'true: flushed');
    t.equal(tenancy.store!.db.open, false, 'the store is closed');
    if (locked) cli.exec('ROLLBACK');
    const balance = (cli.prepare('SELECT ru_balance FROM owners WHERE id = ?').get(owner) as { ru_balance: number }).ru_balance;
    t.equal(balance, locked ? 100 : 70, locked ? 'the debit is lost' : 'the debit is in the file');
    cli.close();
  }
});
