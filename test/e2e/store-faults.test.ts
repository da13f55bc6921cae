/**
 * Store faults met by a real `chaingate serve` process: SQLite locked by another process past the
 * busy timeout, and a disk the WAL itself filled. No fault may end the process; management routes
 * answer 503 in their shape; debits wait in memory and reach the file exactly once the store takes
 * them; after a full disk the daemon gives the WAL's space back by itself.
 */
import t, { type Test } from 'tap';
import { mkdtempSync, rmSync, statfsSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { openStore } from '../../src/store/open.js';
import { createDirectory } from '../../src/tenancy/directory.js';
import { createOwnerAdmin } from '../../src/tenancy/owners.js';
import { anvilFor } from '../support/gateway.js';
import { type Daemon, hammer, startDaemon, stopDaemon } from '../support/daemon.js';
import { rpc, send } from '../support/rpc.js';
import { smallVolume } from '../support/small-volume.js';
import { invariantGaps } from '../store/temp-store.js';
import { waitFor } from '../support/wait-for.js';

const CREDIT = 1_000_000_000;
/** eth_chainId's price. */
const RU = 5;

/** A database with one premium owner and `endpoints` endpoints on devnet; the store is closed (its WAL checkpointed). */
function seed(db: string, endpoints: number): { ownerId: number; managementKey: string; endpoints: Array<{ id: string; apiKey: string }> } {
  const store = openStore(db);
  const owner = createOwnerAdmin(store).createOwner('acme', 'premium', CREDIT);
  const directory = createDirectory(store);
  const made = Array.from({ length: endpoints }, (_, i) => {
    const r = directory.createEndpoint(owner.id, 'devnet', `ep${i}`, 10);
    if ('error' in r) throw new Error(r.error);
    return { id: r.endpoint.id, apiKey: r.apiKey };
  });
  store.close();
  return { ownerId: owner.id, managementKey: owner.managementKey, endpoints: made };
}

/** `chaingate serve` on the database `db` in front of anvil, its config in a temp directory; killed at teardown. */
async function daemonOn(t: Test, db: string, anvilUrl: string, flushMs: number): Promise<Daemon> {
  const dir = mkdtempSync(join(tmpdir(), 'chaingate-faults-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const cfg = join(dir, 'config.yaml');
  // Management rates lifted: the tests send management requests back to back. A room reserve that fits
  // a 2 MB volume twice over (the default's 4 MB would not be written).
  writeFileSync(
    cfg,
    `server: { host: 127.0.0.1, port: 0 }\nmanagement: { rps_per_key: 1000000, rps_per_ip: 1000000 }\nstorage: { path: ${JSON.stringify(db)}, reserve_bytes: 262144 }\nledger: { flush_interval_ms: ${flushMs} }\nchains:\n  devnet:\n    chain_id: 31337\n    upstreams: [{ url: "${anvilUrl}" }]\n`,
  );
  const d = await startDaemon(t, cfg);
  t.teardown(() => stopDaemon(d));
  return d;
}

/** What the file says of the owner: stored balance, and the served (status 0) requests and RU of its usage. */
function stored(db: string, ownerId: number): { balance: number; served: number; ru: number; gaps: Array<{ id: number; gap: number }> } {
  const file = new Database(db, { readonly: true });
  try {
    const usage = ['usage_minute', 'usage_hour', 'usage_day']
      .map(
        (table) =>
          file
            .prepare(
              `SELECT coalesce(sum(ru), 0) AS ru, coalesce(sum(CASE WHEN status = 0 THEN requests ELSE 0 END), 0) AS served FROM ${table} WHERE owner_id = ?`,
            )
            .get(ownerId) as { ru: number; served: number },
      )
      .reduce((a, b) => ({ ru: a.ru + b.ru, served: a.served + b.served }));
    const balance = file.prepare('SELECT ru_balance FROM owners WHERE id = ?').pluck().get(ownerId) as number;
    return { balance, ...usage, gaps: invariantGaps(file) };
  } finally {
    file.close();
  }
}

/** The file accounts for exactly the `served` calls of 5 RU: usage rows, RU, balance, and the invariant. */
function storedExactly(t: Test, db: string, ownerId: number, served: number): void {
  const after = stored(db, ownerId);
  t.equal(after.served, served, 'every call answered 200 is stored, once');
  t.equal(after.ru, served * RU);
  t.equal(after.balance, CREDIT - served * RU);
  t.same(after.gaps, [{ id: ownerId, gap: 0 }], 'credits − usage RU = balance');
}

function alive(d: Daemon): boolean {
  return d.child.exitCode === null && d.child.signalCode === null;
}

async function stopGracefully(d: Daemon): Promise<number | null> {
  const exited = new Promise<number | null>((r) => d.child.once('exit', (code) => r(code)));
  d.child.kill('SIGTERM');
  return exited;
}

t.test('SQLite locked by another process: management answers 503, the daemon lives on, debits reach the file exactly', async (t) => {
  const node = await anvilFor(t);
  const dir = mkdtempSync(join(tmpdir(), 'chaingate-locked-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const db = join(dir, 'chaingate.db');
  const {
    ownerId,
    managementKey,
    endpoints: [used, doomed],
  } = seed(db, 2);
  const d = await daemonOn(t, db, node.url, 200);
  const base = `http://127.0.0.1:${d.port}`;
  const url = `${base}/v1/rpc/${used!.apiKey}`;
  const auth = { authorization: `Bearer ${managementKey}` };
  const json = { 'content-type': 'application/json' };

  let served = 0;
  // 1,100 RU of debits, as in the probe that crashed the daemon.
  for (let i = 0; i < 220; i++) {
    if ((await rpc(url, 'eth_chainId')).status === 200) served++;
  }
  t.equal(served, 220);

  // The CLI (or a backup, or an operator's sqlite3) holding the write lock far past the daemon's 100 ms.
  const lock = new Database(db);
  lock.exec('BEGIN IMMEDIATE');
  let lockHeld = true;
  t.teardown(() => {
    if (lockHeld) lock.exec('ROLLBACK');
    lock.close();
  });
  // Calls are admitted until a flush with debits pending fails; from then on they are refused with 503.
  let refused = await rpc(url, 'eth_chainId');
  for (let i = 0; refused.status === 200 && i < 400; i++) {
    served++;
    await new Promise((r) => setTimeout(r, 5));
    refused = await rpc(url, 'eth_chainId');
  }
  t.equal(refused.status, 503, 'a flush failed: calls that need metering are refused');
  t.match(refused.json, { error: { code: -32099 } });

  const posted = await send('POST', `${base}/api/dashboard/endpoints`, JSON.stringify({ network: 'devnet', name: 'during' }), {
    ...auth,
    ...json,
  });
  t.equal(posted.status, 503, 'a store fault is not a client error');
  t.match(posted.json, { error: { code: 'store_unavailable', message: /busy or full/ } });
  const garbled = await send('POST', `${base}/api/dashboard/endpoints`, '{"network": ', { ...auth, ...json });
  t.equal(garbled.status, 400, "a parse error is still the client's");
  t.match(garbled.json, { error: { code: 'bad_request', message: 'body is not valid JSON' } });
  const deletedByQuery = await send('DELETE', `${base}/api/dashboard/endpoints?id=${doomed!.id}`, undefined, auth);
  t.equal(deletedByQuery.status, 503);
  t.match(deletedByQuery.json, { error: { code: 'store_unavailable', message: /busy or full/ } });
  const deletedByBody = await send('DELETE', `${base}/api/dashboard/endpoints`, JSON.stringify({ id: doomed!.id }), { ...auth, ...json });
  t.equal(deletedByBody.status, 503);
  t.match(deletedByBody.json, { error: { code: 'store_unavailable' } });

  t.ok(alive(d), 'the daemon is still running');
  const account = await send('GET', `${base}/api/dashboard/account`, undefined, auth);
  t.equal(account.status, 200, 'and serving its reads');
  t.match(account.json, { data: { ru_balance: CREDIT - served * RU } }, 'the live balance counts every debit still in memory');
  // The log comes through a pipe of its own: it may trail the answers.
  const faults = (): string[] =>
    d
      .log()
      .split('\n')
      .filter((l) => l.includes('store fault; answered 503'));
  await waitFor(() => faults().length >= 3, { what: 'the faults in the log', ms: 15_000 });
  t.equal(faults().length, 3, 'each faulted request logged once: its handler ran once');
  t.ok(
    faults().every((l) => l.includes('database is locked')),
    "and logged with SQLite's reason",
  );
  t.match(d.log(), /ledger flush failed; debits kept in memory/);

  lock.exec('ROLLBACK');
  lockHeld = false;
  let back = await rpc(url, 'eth_chainId');
  await waitFor(
    async () => {
      if (back.status === 200) return true;
      back = await rpc(url, 'eth_chainId');
      return false;
    },
    { what: 'a call to be served again', ms: 15_000 },
  );
  served++;
  const created = await send('POST', `${base}/api/dashboard/endpoints`, JSON.stringify({ network: 'devnet' }), { ...auth, ...json });
  t.equal(created.status, 201);
  const deleted = await send('DELETE', `${base}/api/dashboard/endpoints?id=${doomed!.id}`, undefined, auth);
  t.equal(deleted.status, 200);
  t.match(deleted.json, { data: { id: doomed!.id, deleted: true } });

  t.equal(await stopGracefully(d), 0);
  const file = new Database(db, { readonly: true });
  t.same(
    file.prepare(`SELECT coalesce(name, '-') FROM endpoints ORDER BY 1`).pluck().all(),
    ['-', 'ep0', 'ep1'],
    'the refused POST created nothing',
  );
  file.close();
  storedExactly(t, db, ownerId, served);
});

t.test('the WAL fills a 2 MB volume: the daemon checkpoints it, serves again without a restart, RU exact', async (t) => {
  const node = await anvilFor(t);
  const volume = smallVolume(t, '2m');
  const db = join(volume, 'chaingate.db');
  const {
    ownerId,
    endpoints: [ep],
  } = seed(db, 1);
  // A short flush interval grows the WAL fast (each flush appends a few pages); SQLite's own
  // checkpoint waits for 1000 pages (4 MB), more than the volume holds.
  const d = await daemonOn(t, db, node.url, 10);
  const url = `http://127.0.0.1:${d.port}/v1/rpc/${ep!.apiKey}`;

  let stop = false;
  let full = false;
  let servedSinceFull = 0;
  const statuses = new Map<number, number>();
  const loops = Array.from({ length: 8 }, () =>
    hammer(
      url,
      () => stop,
      (status) => {
        statuses.set(status, (statuses.get(status) ?? 0) + 1);
        if (status === 200 && full) servedSinceFull++;
      },
    ),
  );
  try {
    await waitFor(() => (full = /ledger flush failed.*database or disk is full/.test(d.log())), { what: 'the disk to fill', ms: 60_000 });
    // Before the fix every flush failed from here on, and every call needing metering got 503.
    await waitFor(() => servedSinceFull >= 500, { what: 'calls served after the disk filled', ms: 20_000 }).catch(() => {});
  } finally {
    stop = true;
  }
  const served = (await Promise.all(loops)).reduce((a, b) => a + b, 0);
  t.ok(alive(d), 'no restart');
  t.ok(
    servedSinceFull >= 500,
    `served again after the disk filled (${servedSinceFull} calls; answers by status: ${JSON.stringify([...statuses])})`,
  );
  t.match(d.log(), /WAL checkpointed after a store fault/);
  // Idle now: the last debits reach the file at the next flushes.
  await waitFor(() => stored(db, ownerId).served === served, { what: 'every debit to be stored', ms: 15_000 });
  t.equal(await stopGracefully(d), 0);
  storedExactly(t, db, ownerId, served);
});

t.test('a full disk under management writes alone: 503 in the management shape, then a checkpoint once room exists', async (t) => {
  const node = await anvilFor(t);
  const volume = smallVolume(t, '2m');
  const db = join(volume, 'chaingate.db');
  const { managementKey } = seed(db, 0);
  const d = await daemonOn(t, db, node.url, 10);
  const base = `http://127.0.0.1:${d.port}`;
  const headers = { authorization: `Bearer ${managementKey}`, 'content-type': 'application/json' };
  const create = (): ReturnType<typeof send> => send('POST', `${base}/api/dashboard/endpoints`, '{"network":"devnet"}', headers);

  // Something else (logs, say) takes all but 256 KB of the volume.
  const { bavail, bsize } = statfsSync(volume);
  const filler = join(volume, 'filler');
  writeFileSync(filler, Buffer.alloc(bavail * bsize - 262_144));
  // No paid traffic: only management writes grow the WAL, so no ledger flush ever fails.
  let answer = await create();
  for (let i = 0; answer.status === 201 && i < 200; i++) {
    const id = (answer.json as { data: { id: string } }).data.id;
    answer = await send('DELETE', `${base}/api/dashboard/endpoints?id=${id}`, undefined, headers);
    if (answer.status === 200) answer = await create();
  }
  t.equal(answer.status, 503, 'a store fault is answered 503');
  t.match(answer.json, { error: { code: 'store_unavailable', message: /busy or full/ } });
  await waitFor(
    () => /store fault; answered 503 during="(POST|DELETE) \/api\/dashboard\/endpoints" error="database or disk is full"/.test(d.log()),
    { what: 'the fault in the log', ms: 15_000 },
  );
  t.ok(alive(d), 'the daemon lives on');

  rmSync(filler);
  await waitFor(() => /WAL checkpointed after a store fault/.test(d.log()), { what: 'the WAL checkpoint', ms: 15_000 });
  t.equal(statSync(`${db}-wal`).size, 0, 'the WAL gave its room back');
  const again = await create();
  t.equal(again.status, 201, 'written again, with no restart');
  t.equal(await stopGracefully(d), 0);
});
