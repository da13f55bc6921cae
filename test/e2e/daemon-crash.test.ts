/**
 * The daemon killed with SIGKILL under load: the file must account for every stored debit exactly
 * (credits − stored usage RU = stored balance), with no double charge and at most one flush
 * interval's debits lost. Also the separate management listener.
 */
import t from 'tap';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer } from 'node:net';
import Database from 'better-sqlite3';
import { openStore } from '../../src/store/open.js';
import { createDirectory } from '../../src/tenancy/directory.js';
import { createOwnerAdmin } from '../../src/tenancy/owners.js';
import { anvilFor } from '../support/gateway.js';
import { send } from '../support/rpc.js';
import { hammer, startDaemon } from '../support/daemon.js';

t.test('kill -9 under load: stored balance, credits and usage agree exactly', async (t) => {
  const node = await anvilFor(t);
  const dir = mkdtempSync(join(tmpdir(), 'chaingate-crash-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const db = join(dir, 'chaingate.db');
  const store = openStore(db);
  const owner = createOwnerAdmin(store).createOwner('load', 'premium', 1_000_000_000);
  const made = createDirectory(store).createEndpoint(owner.id, 'devnet', 'load', 10);
  store.close();
  if ('error' in made) throw new Error(made.error);
  const cfg = join(dir, 'config.yaml');
  writeFileSync(
    cfg,
    `server: { host: 127.0.0.1, port: 0 }\nstorage: { path: ${JSON.stringify(db)} }\nledger: { flush_interval_ms: 200 }\nchains:\n  devnet:\n    chain_id: 31337\n    upstreams: [{ url: "${node.url}" }]\n`,
  );
  const d = await startDaemon(t, cfg);
  const url = `http://127.0.0.1:${d.port}/v1/rpc/${made.apiKey}`;
  let stop = false;
  const started = Date.now();
  const loops = Array.from({ length: 16 }, () => hammer(url, () => stop));
  await new Promise((r) => setTimeout(r, 1500));
  d.child.kill('SIGKILL');
  const killedAfter = Date.now() - started;
  stop = true;
  const answered = (await Promise.all(loops)).reduce((a, b) => a + b, 0);
  await new Promise((r) => d.child.once('exit', r));

  const file = new Database(db, { readonly: true });
  t.teardown(() => file.close());
  const credits = (file.prepare('SELECT SUM(ru) AS s FROM credits WHERE owner_id = ?').get(owner.id) as { s: number }).s;
  const usage = ['usage_minute', 'usage_hour', 'usage_day']
    // Refusals (429 past the plan's rate) are stored too, at 0 RU: count the served calls (status 0).
    .map(
      (table) =>
        file
          .prepare(
            `SELECT COALESCE(SUM(ru), 0) AS s, COALESCE(SUM(CASE WHEN status = 0 THEN requests ELSE 0 END), 0) AS n FROM ${table} WHERE owner_id = ?`,
          )
          .get(owner.id) as { s: number; n: number },
    )
    .reduce((a, b) => ({ s: a.s + b.s, n: a.n + b.n }), { s: 0, n: 0 });
  const balance = (file.prepare('SELECT ru_balance AS b FROM owners WHERE id = ?').get(owner.id) as { b: number }).b;
  t.ok(answered > 100, `the daemon was under load (${answered} answers in ${killedAfter} ms)`);
  t.equal(credits - usage.s, balance, 'credits − stored usage RU = stored balance, exactly');
  t.equal(usage.s, usage.n * 5, 'every stored request is charged once, at its price (eth_chainId: 5 RU)');
  t.ok(usage.n <= answered, `no request is stored that was not answered (${usage.n} stored, ${answered} answered)`);
  const perMs = answered / killedAfter;
  // At most one flush interval (200 ms) of debits is lost; the margin covers a flush in progress and a loaded machine.
  t.ok(
    answered - usage.n <= Math.ceil(perMs * 600) + 16,
    `lost ${answered - usage.n} requests' debits, at most about one flush interval's worth (${Math.round(perMs * 200)})`,
  );
});

t.test('management on its own listener; the main listener then refuses it', async (t) => {
  const node = await anvilFor(t);
  const dir = mkdtempSync(join(tmpdir(), 'chaingate-mgmt-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const db = join(dir, 'chaingate.db');
  const store = openStore(db);
  const owner = createOwnerAdmin(store).createOwner('m', 'free', 100);
  store.close();
  const free = await new Promise<number>((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const p = (s.address() as { port: number }).port;
      s.close(() => resolve(p));
    });
  });
  const cfg = join(dir, 'config.yaml');
  writeFileSync(
    cfg,
    `server: { host: 127.0.0.1, port: 0 }\nmanagement: { host: 127.0.0.1, port: ${free} }\nstorage: { path: ${JSON.stringify(db)} }\nchains:\n  devnet:\n    chain_id: 31337\n    upstreams: [{ url: "${node.url}" }]\n`,
  );
  const d = await startDaemon(t, cfg);
  const onMain = await send('GET', `http://127.0.0.1:${d.port}/api/dashboard/account`, undefined, {
    authorization: `Bearer ${owner.managementKey}`,
  });
  t.equal(onMain.status, 404);
  const onOwn = await send('GET', `http://127.0.0.1:${free}/api/dashboard/account`, undefined, {
    authorization: `Bearer ${owner.managementKey}`,
  });
  t.equal(onOwn.status, 200);
  t.match(onOwn.json, { data: { id: owner.id, ru_balance: 100 } });
  const rpcOnOwn = await send('POST', `http://127.0.0.1:${free}/v1/rpc/public`, '{}', { 'content-type': 'application/json' });
  t.equal(rpcOnOwn.status, 404, 'the management listener serves nothing else');
  d.child.kill('SIGTERM');
  t.equal(await new Promise((r) => d.child.once('exit', r)), 0);
});
