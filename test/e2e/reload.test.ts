/**
 * Live reload (SIGHUP) of a running daemon, and `chaingate status` against it: a reload that adds a
 * chain and changes a plan's rate applies while a newHeads subscriber on another chain keeps receiving
 * every head; one that is invalid, or changes what needs a restart, changes nothing and is counted as a
 * failure; a chain removed has its WebSockets closed with 1001.
 */
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { openStore } from '../../src/store/open.js';
import { createDirectory } from '../../src/tenancy/directory.js';
import { createOwnerAdmin } from '../../src/tenancy/owners.js';
import { startDaemon, stopDaemon } from '../support/daemon.js';
import { scrape } from '../support/exposition.js';
import { anvilFor } from '../support/gateway.js';
import { rpc } from '../support/rpc.js';
import { openSubscriber } from '../support/subscriber.js';
import { openSocket } from '../support/ws.js';

const main = fileURLToPath(new URL('../../dist/main.js', import.meta.url));

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

async function waitFor(what: string, check: () => boolean | Promise<boolean>, ms = 15_000): Promise<void> {
  const until = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Statuses of `n` keyed calls sent one after another. */
async function burst(url: string, n: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push((await rpc(url, 'eth_chainId')).status);
  return out;
}

t.test('SIGHUP: a chain added and a plan changed apply; subscribers of other chains keep every head', async (t) => {
  const first = await anvilFor(t, { chainId: 31337, blockTime: 1 });
  const second = await anvilFor(t, { chainId: 31338 });
  const dir = mkdtempSync(join(tmpdir(), 'chaingate-reload-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const db = join(dir, 'chaingate.db');
  const store = openStore(db);
  const owner = createOwnerAdmin(store).createOwner('acme', 'metered', 1_000_000_000);
  const made = createDirectory(store).createEndpoint(owner.id, 'devnet', 'app', 10);
  store.close();
  if ('error' in made) throw new Error(made.error);
  const metricsPort = await freePort();
  const cfg = join(dir, 'config.yaml');
  const devnet = `  devnet:\n    chain_id: 31337\n    upstreams: [{ url: "${first.url}", ws: "${first.wsUrl}", name: first }]\n`;
  const extra = `  extra:\n    chain_id: 31338\n    upstreams: [{ url: "${second.url}", name: second }]\n`;
  const write = (plans: string, chains: string, more = ''): void =>
    writeFileSync(
      cfg,
      `server: { host: 127.0.0.1, port: 0, default_chain: devnet }\nstorage: { path: ${JSON.stringify(db)} }\n` +
        `metrics: { port: ${metricsPort} }\nplans:\n${plans}chains:\n${chains}${more}`,
    );
  write('  metered: { rps: 2 }\n', devnet);
  const d = await startDaemon(t, cfg);
  const base = `http://127.0.0.1:${d.port}`;
  const keyed = `${base}/v1/rpc/${made.apiKey}`;
  const reloads = async (result: string): Promise<number> =>
    (await scrape(metricsPort)).value('chaingate_config_reloads_total', { result });
  const logged = (text: RegExp): boolean => text.test(d.log());

  const sub = await openSubscriber(t, `${base.replace('http', 'ws')}/v1/rpc/public`);
  const id = await sub.subscribe('newHeads');
  await waitFor('a first head', () => sub.resultsOf(id).length >= 1);
  t.ok((await burst(keyed, 6)).includes(429), 'plan metered allows 2 requests a second');
  t.equal((await rpc(`${base}/extra/v1/rpc/public`, 'eth_chainId')).status, 404, 'chain extra is not configured yet');

  write('  metered: { rps: 1000 }\n', devnet + extra);
  const headsBefore = sub.resultsOf(id).length;
  d.child.kill('SIGHUP');
  await waitFor('the reload', () => logged(/info config reloaded .*chains_added=extra/));
  t.same(await burst(keyed, 6), [200, 200, 200, 200, 200, 200], "the plan's new rate applies at once");
  const chainId = await rpc(`${base}/extra/v1/rpc/public`, 'eth_chainId');
  t.match(chainId.json, { result: '0x7a6a' }, 'the added chain serves');
  await waitFor('two more heads', () => sub.resultsOf(id).length >= headsBefore + 2);
  const numbers = sub.resultsOf(id).map((h) => Number(h.number));
  t.same(
    numbers,
    numbers.map((_, i) => numbers[0]! + i),
    `the subscriber on devnet got every head, no gap, through the reload (${numbers[0]}..${numbers.at(-1)})`,
  );
  t.notOk(sub.isClosed, 'and its socket stayed open');
  t.equal(await reloads('success'), 1);

  // Invalid: every error logged with its key path; nothing changes.
  writeFileSync(cfg, `server: { port: 0, default_chain: devnet }\nplans:\n  metered: { rps: -1 }\nchains:\n${devnet}${extra}surprise: 1\n`);
  d.child.kill('SIGHUP');
  await waitFor('the refusal', async () => (await reloads('failure')) === 1);
  // The log comes through a pipe of its own: it may trail the counter.
  await waitFor('both errors in the log', () => logged(/error="plans\.metered\.rps/) && logged(/error="surprise/));
  t.ok(
    logged(/error config reload refused: the running config stays .*error="plans\.metered\.rps: must be an integer/),
    'names plans.metered.rps',
  );
  t.ok(logged(/error config reload refused.*error="surprise: unknown key/), 'and the unknown key');
  t.match((await rpc(`${base}/extra/v1/rpc/public`, 'eth_chainId')).json, { result: '0x7a6a' }, 'the running config stays');

  // A change only a restart applies: refused whole, the rest of the file not applied either.
  write('  metered: { rps: 1000 }\n', devnet, '');
  writeFileSync(cfg, `${String(spawnSync('cat', [cfg]).stdout).replace(`metrics: { port: ${metricsPort} }`, 'metrics: { port: 1 }')}`);
  d.child.kill('SIGHUP');
  await waitFor('the second refusal', async () => (await reloads('failure')) === 2);
  await waitFor('the second refusal in the log', () => logged(/error="metrics\.port/));
  t.ok(logged(/error="metrics\.port: applies only on a restart \(\d+ → 1\)/), 'the restart-only key is named');
  t.equal((await rpc(`${base}/extra/v1/rpc/public`, 'eth_chainId')).status, 200, 'and chain extra, dropped in that file, still serves');

  // Removed: its sockets are closed with 1001 "chain removed"; the other chain's subscriber stays.
  const onExtra = await openSocket(t, `${base.replace('http', 'ws')}/extra/v1/rpc/public`);
  write('  metered: { rps: 1000 }\n', devnet);
  d.child.kill('SIGHUP');
  t.same(await onExtra.closed, { code: 1001, reason: 'chain removed' });
  t.equal((await rpc(`${base}/extra/v1/rpc/public`, 'eth_chainId')).status, 404, 'chain extra is gone');
  t.equal(await reloads('success'), 2);
  t.notOk(sub.isClosed, 'the devnet subscriber is still open');

  // chaingate status against the running daemon: ready.
  const status = spawnSync(process.execPath, [main, 'status', '--config', cfg], { encoding: 'utf8' });
  t.equal(status.status, 0, status.stderr);
  t.match(status.stdout, /devnet: ready, head \d+/);
  t.match(status.stdout, /first\s+in rotation/);
  t.match(status.stdout, /1 subscriptions/);
  t.notMatch(status.stdout, first.url, 'no upstream URL in the output');
  await stopDaemon(d);
  const down = spawnSync(process.execPath, [main, 'status', '--config', cfg], { encoding: 'utf8' });
  t.equal(down.status, 2, 'exit 2 once the daemon is gone');
  t.match(down.stderr, /cannot reach the daemon at http:\/\/127\.0\.0\.1:\d+\/status/);
  t.notMatch(down.stderr, /Usage/, 'a message, not the usage text');
});

t.test('chaingate status: a chain with no node in rotation exits 1', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'chaingate-status-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const metricsPort = await freePort();
  const deadPort = await freePort();
  const cfg = join(dir, 'config.yaml');
  writeFileSync(
    cfg,
    `server: { port: 0 }\nstorage: { path: ${JSON.stringify(join(dir, 'c.db'))} }\nmetrics: { port: ${metricsPort} }\n` +
      `chains:\n  dead:\n    chain_id: 5\n    upstreams: [{ url: "http://127.0.0.1:${deadPort}", name: gone }]\n`,
  );
  await startDaemon(t, cfg);
  let r = spawnSync(process.execPath, [main, 'status', '--config', cfg], { encoding: 'utf8' });
  await waitFor('the node to leave the rotation', () => {
    r = spawnSync(process.execPath, [main, 'status', '--config', cfg], { encoding: 'utf8' });
    return r.status === 1;
  });
  t.match(r.stdout, /dead: NOT READY \(no node in rotation\)/);
  t.match(r.stdout, /gone\s+out \(failing\)/);
});
