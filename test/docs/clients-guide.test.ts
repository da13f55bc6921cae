/**
 * docs/clients.md's viem and ethers examples, each run as printed (its own Node process, the repository's
 * viem and ethers) against a gateway in front of a real anvil, with only the gateway's address swapped
 * in: the batches fit `server.max_batch` (and one made larger fails whole), the key in a header is taken,
 * and each WebSocket example gets new blocks again after its connection is cut and the gateway is back.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { anvilFor, gatewayFor, type TestGateway } from '../support/gateway.js';
import { post, send } from '../support/rpc.js';
import { tcpRelay } from '../support/tcp-relay.js';
import { waitFor } from '../support/wait-for.js';
import { wsUrl } from '../support/ws.js';
import { blockOf, ROOT, swapped } from './doc-blocks.js';

const DOC = 'docs/clients.md';
const MAX_BATCH = 100;

interface Snippet {
  child: ChildProcess;
  out(): string;
  err(): string;
  exited: Promise<number | null>;
}

/** Runs one example as a module of its own, `https://rpc.example.com` and `wss://...` swapped for `base`'s. */
function runSnippet(
  t: Test,
  marker: string,
  base: { http: string; ws: string },
  key: string,
  extra: Array<[string, string]> = [],
): Snippet {
  const dir = mkdtempSync(join(tmpdir(), 'chaingate-client-'));
  // The example imports viem or ethers by name: the repository's, as an application's own node_modules.
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir');
  const text = blockOf(DOC, 'js', marker);
  const swaps: Array<[string, string]> = [...extra];
  if (text.includes('https://rpc.example.com')) swaps.push(['https://rpc.example.com', base.http]);
  if (text.includes('wss://rpc.example.com')) swaps.push(['wss://rpc.example.com', base.ws]);
  writeFileSync(join(dir, 'example.mjs'), swapped(text, swaps));
  const child = spawn(process.execPath, [join(dir, 'example.mjs')], {
    env: { ...process.env, CHAINGATE_KEY: key },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout!.on('data', (b: Buffer) => (out += b.toString()));
  child.stderr!.on('data', (b: Buffer) => (err += b.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  t.teardown(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  });
  return { child, out: () => out, err: () => err, exited };
}

async function finished(s: Snippet, ms = 30_000): Promise<number | null> {
  const timer = setTimeout(() => s.child.kill('SIGKILL'), ms);
  const code = await s.exited;
  clearTimeout(timer);
  return code;
}

async function setup(t: Test): Promise<{ g: TestGateway; key: string; mine: () => Promise<unknown> }> {
  const node = await anvilFor(t);
  const g = await gatewayFor(t, {
    server: { max_batch: MAX_BATCH, workers: 1 },
    // Each call of a batch counts toward the plan's rps: 250 reads at once need room for them.
    plans: { free: { rps: 100_000, max_endpoints: 10 } },
    chains: { devnet: { chain_id: 31337, upstreams: [{ url: node.url, ws: node.wsUrl }] } },
  });
  const owner = await g.gateway.context.tenancy.accounts.createOwner('clients', 'free', 100_000_000);
  const created = await send('POST', `${g.base}/api/dashboard/endpoints`, JSON.stringify({ network: 'devnet' }), {
    authorization: `Bearer ${owner.managementKey}`,
    'content-type': 'application/json',
  });
  if (created.status !== 201) throw new Error(`no endpoint: ${created.text}`);
  const key = (created.json as { data: { api_key: string } }).data.api_key;
  const mine = () => post(node.url, JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'evm_mine', params: [] }));
  return { g, key, mine };
}

t.test('batches: as printed they fit max_batch; one call larger fails whole', async (t) => {
  const { g, key } = await setup(t);
  const base = { http: g.base, ws: wsUrl(g.base, '') };
  // The larger batch waits 50 ms to gather its calls (viem's `wait`, ethers' `batchStallTime`): on a busy
  // machine the 250 calls may reach the scheduler over several turns, and smaller batches would pass.
  for (const [marker, size, over] of [
    ['viem-batch.mjs', 'batchSize: 100', `batchSize: ${MAX_BATCH + 1}, wait: 50`],
    ['ethers-batch.mjs', 'batchMaxCount: 100', `batchMaxCount: ${MAX_BATCH + 1}, batchStallTime: 50`],
  ] as const) {
    t.match(blockOf(DOC, 'js', marker), size, `${marker} sets its batch size to the test's max_batch`);
    const ok = runSnippet(t, marker, base, key);
    t.equal(await finished(ok), 0, `${marker} runs`, { err: ok.err() });
    t.equal(ok.out().trim(), '250 balances', `${marker}: every read answered`);
    const larger = runSnippet(t, marker, base, key, [[size, over]]);
    t.not(await finished(larger), 0, `${marker} with a batch of ${MAX_BATCH + 1} fails`);
    t.match(larger.err(), /413|batch/i, 'refused for its size');
  }
});

t.test('the key in a header', async (t) => {
  const { g, key } = await setup(t);
  const base = { http: g.base, ws: wsUrl(g.base, '') };
  for (const marker of ['viem-header.mjs', 'ethers-header.mjs']) {
    const ok = runSnippet(t, marker, base, key);
    t.equal(await finished(ok), 0, `${marker} runs`, { err: ok.err() });
    t.match(ok.out(), /^block \d+\n$/, `${marker}: answered with the key in X-API-Key`);
    const wrong = runSnippet(t, marker, base, 'x'.repeat(32));
    t.not(await finished(wrong), 0, `${marker} with an unknown key fails: the header is what is read`);
  }
});

for (const marker of ['viem-ws.mjs', 'ethers-ws.mjs']) {
  t.test(`${marker}: new blocks again after the socket is cut`, async (t) => {
    const { g, key, mine } = await setup(t);
    const relay = await tcpRelay(t, { port: g.gateway.port });
    const s = runSnippet(t, marker, { http: relay.url, ws: relay.wsUrl }, key);
    const blocks = (): number[] => [...s.out().matchAll(/^block (\d+)$/gm)].map((m) => Number(m[1]));
    const mining = setInterval(() => void mine().catch(() => {}), 250);
    t.teardown(() => clearInterval(mining));

    await waitFor(() => blocks().length > 0, { what: `${marker}: a first block`, ms: 15_000 });
    const upgrades = relay.upgrades.length;
    relay.cut();
    await waitFor(() => s.err().length > 0, { what: `${marker} sees its socket close`, ms: 10_000 });
    const before = Math.max(...blocks());
    relay.restore();
    await waitFor(() => blocks().some((n) => n > before + 1), { what: `${marker}: blocks on a new socket`, ms: 15_000 });
    t.ok(relay.upgrades.length > upgrades, 'it opened a new WebSocket');
    t.ok(relay.requests('eth_subscribe') >= 2, 'and subscribed again on it');
  });
}
