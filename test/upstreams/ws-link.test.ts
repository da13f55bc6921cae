/**
 * One upstream WebSocket link: against anvil through a relay that reads the frames on the wire,
 * and against a scripted WebSocket server for what a real node will not do (answer late, send a
 * notification before the answer that names it, ignore pings).
 */
import t, { type Test } from 'tap';
import { spawnSync } from 'node:child_process';
import { WebSocketServer, type WebSocket as ServerSocket } from 'ws';
import { openWsLink, type WsLink, WsLinkError, type WsLinkOptions } from '../../src/upstreams/ws-link.js';
import { tcpRelay } from '../support/tcp-relay.js';
import { anvilFor, mine, sleep } from '../fanout/feed-harness.js';
import { waitFor } from '../support/wait-for.js';

function linkFor(t: Test, opts: WsLinkOptions): WsLink {
  const link = openWsLink(opts);
  t.teardown(() => link.close());
  return link;
}

async function relayedAnvil(t: Test) {
  const node = await anvilFor(t);
  const relay = await tcpRelay(t, { port: node.port });
  return { node, relay };
}

/** A WebSocket server on 127.0.0.1 port 0 that hands each parsed request to `onRequest`. */
async function scriptedServer(
  t: Test,
  onRequest: (socket: ServerSocket, request: { id: number; method: string; params: unknown[] }) => void,
  autoPong = true,
) {
  const server = new WebSocketServer({ host: '127.0.0.1', port: 0, autoPong });
  const requests: Array<{ id: number; method: string; params: unknown[] }> = [];
  server.on('connection', (socket) => {
    socket.on('message', (data: Buffer) => {
      const request = JSON.parse(data.toString()) as { id: number; method: string; params: unknown[] };
      requests.push(request);
      onRequest(socket, request);
    });
  });
  await new Promise<void>((resolve) => server.once('listening', () => resolve()));
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        for (const c of server.clients) c.terminate();
        server.close(() => resolve());
      }),
  );
  return { url: `ws://127.0.0.1:${(server.address() as { port: number }).port}`, requests };
}

const answer = (socket: ServerSocket, id: number, result: unknown): void => socket.send(JSON.stringify({ jsonrpc: '2.0', id, result }));
const notify = (socket: ServerSocket, subscription: string, result: unknown): void =>
  socket.send(JSON.stringify({ jsonrpc: '2.0', method: 'eth_subscription', params: { subscription, result } }));

t.test("calls carry the link's own numeric ids, the configured headers, and settle with their own answers", async (t) => {
  const { node, relay } = await relayedAnvil(t);
  await mine(node.url, 20);
  const link = linkFor(t, { url: relay.wsUrl, label: 'relay', headers: { 'X-Chaingate-Test': 'yes' } });
  await link.opened;
  const blocks = (await Promise.all(
    Array.from({ length: 20 }, (_, i) => link.call('eth_getBlockByNumber', [`0x${(i + 1).toString(16)}`, false])),
  )) as Array<{ number: string }>;
  t.same(
    blocks.map((b) => Number(b.number)),
    Array.from({ length: 20 }, (_, i) => i + 1),
    'each call got the answer to its own request',
  );
  t.equal(await link.call('eth_chainId', []), '0x7a69');
  const ids = relay.messages.map((m) => (JSON.parse(m) as { id: unknown }).id);
  t.same(
    ids,
    Array.from({ length: 21 }, (_, i) => i + 1),
    'ids 1, 2, 3, ... on the wire',
  );
  t.match(relay.upgrades[0], /^x-chaingate-test: yes$/im, 'the handshake carried the header');
  t.equal(relay.unreadableFrames, 0, 'frames are not compressed');
});

t.test("a JSON-RPC error rejects with the node's code and the link carries on", async (t) => {
  const { relay } = await relayedAnvil(t);
  const link = linkFor(t, { url: relay.wsUrl, label: 'relay' });
  const err = await link.call('eth_noSuchMethod', []).catch((e: unknown) => e);
  t.ok(err instanceof WsLinkError);
  t.equal((err as WsLinkError).kind, 'rpc');
  t.type((err as WsLinkError).rpcCode, 'number');
  t.equal(await link.call('eth_blockNumber', []), '0x0');
});

t.test('notifications go to their own subscription; unsubscribe stops them', async (t) => {
  const { node, relay } = await relayedAnvil(t);
  const link = linkFor(t, { url: relay.wsUrl, label: 'relay' });
  const a: number[] = [];
  const b: number[] = [];
  const idA = await link.subscribe(['newHeads'], (r) => a.push(Number((r as { number: string }).number)));
  const idB = await link.subscribe(['newHeads'], (r) => b.push(Number((r as { number: string }).number)));
  t.not(idA, idB);
  await mine(node.url, 2);
  await waitFor(() => a.length === 2 && b.length === 2, { what: 'two heads each', ms: 10_000 });
  t.equal(await link.unsubscribe(idA), true, 'the node confirms');
  await mine(node.url);
  await waitFor(() => b.length === 3, { what: 'the third head on b', ms: 10_000 });
  await sleep(50);
  t.same(a, [1, 2], 'nothing after unsubscribing');
  t.same(b, [1, 2, 3]);
  t.equal(relay.requests('eth_subscribe'), 2);
  t.equal(relay.requests('eth_unsubscribe'), 1);
});

t.test('a cut closes the link once: the pending call and later ones are rejected as closed', async (t) => {
  const { relay } = await relayedAnvil(t);
  const link = linkFor(t, { url: relay.wsUrl, label: 'relay' });
  await link.opened;
  const reasons: string[] = [];
  link.onClose((r) => reasons.push(r));
  const pending = link.call('eth_blockNumber', []);
  relay.cut();
  const err = (await pending.catch((e: unknown) => e)) as WsLinkError;
  t.equal(err.kind, 'closed', 'the call in flight fails as closed');
  await waitFor(() => reasons.length > 0, { what: 'close reported', ms: 10_000 });
  t.ok(link.closed);
  t.equal(((await link.call('eth_blockNumber', []).catch((e: unknown) => e)) as WsLinkError).kind, 'closed');
  await sleep(50);
  t.equal(reasons.length, 1, 'onClose runs once');
  const late: string[] = [];
  link.onClose((r) => late.push(r));
  t.same(late, reasons, 'a listener added after the close hears it at once');
});

t.test('a refused connection rejects `opened`, reports the close, and never shows the URL', async (t) => {
  const { relay } = await relayedAnvil(t);
  relay.cut();
  const link = linkFor(t, { url: `ws://alice:s3cret@127.0.0.1:${relay.port}/v2/KEYKEYKEY`, label: `ws://127.0.0.1:${relay.port}` });
  const reasons: string[] = [];
  link.onClose((r) => reasons.push(r));
  const err = (await link.opened.catch((e: unknown) => e)) as WsLinkError;
  t.equal(err.kind, 'closed');
  t.equal(reasons.length, 1);
  for (const text of [err.message, reasons[0]!]) {
    t.notMatch(text, /s3cret|KEYKEYKEY|alice/, 'no credentials or path');
  }
  t.match(err.message, `ws://127.0.0.1:${relay.port}`, 'named by its label');
});

t.test('a URL ws cannot use gives a closed link whose errors do not quote it', async (t) => {
  const link = linkFor(t, { url: 'ftp://alice:s3cret@127.0.0.1/KEYKEYKEY', label: 'bad-node' });
  const reasons: string[] = [];
  link.onClose((r) => reasons.push(r));
  const err = (await link.opened.catch((e: unknown) => e)) as WsLinkError;
  t.equal(err.kind, 'closed');
  t.match(err.message, /^bad-node: /);
  t.notMatch(err.message, /s3cret|KEYKEYKEY|alice/);
  t.equal(((await link.call('eth_chainId', []).catch((e: unknown) => e)) as WsLinkError).kind, 'closed');
  await waitFor(() => reasons.length === 1, { what: 'the close reported', ms: 10_000 });
  t.ok(link.closed);
});

t.test('a notification written before the answer naming its id still reaches the subscriber, in order', async (t) => {
  const server = await scriptedServer(t, (socket, req) => {
    if (req.method !== 'eth_subscribe') return;
    notify(socket, '0xabc', 1);
    answer(socket, req.id, '0xabc');
    notify(socket, '0xabc', 2);
  });
  const link = linkFor(t, { url: server.url, label: 'scripted' });
  const got: unknown[] = [];
  t.equal(await link.subscribe(['newHeads'], (r) => got.push(r)), '0xabc');
  await waitFor(() => got.length === 2, { what: 'two notifications', ms: 10_000 });
  t.same(got, [1, 2]);
});

t.test('no answer in time rejects as timeout; a subscription answered too late is unsubscribed', async (t) => {
  const server = await scriptedServer(t, (socket, req) => {
    if (req.method === 'eth_subscribe') setTimeout(() => answer(socket, req.id, '0xlate'), 300);
    if (req.method === 'eth_unsubscribe') answer(socket, req.id, true);
  });
  const link = linkFor(t, { url: server.url, label: 'scripted', callTimeoutMs: 100 });
  const started = Date.now();
  const err = (await link.call('eth_blockNumber', []).catch((e: unknown) => e)) as WsLinkError;
  t.equal(err.kind, 'timeout');
  t.ok(Date.now() - started >= 90, 'not before the timeout');
  const subErr = (await link.subscribe(['newHeads'], () => {}).catch((e: unknown) => e)) as WsLinkError;
  t.equal(subErr.kind, 'timeout');
  await waitFor(() => server.requests.some((r) => r.method === 'eth_unsubscribe'), { what: 'the late subscription dropped', ms: 2000 });
  t.same(server.requests.find((r) => r.method === 'eth_unsubscribe')!.params, ['0xlate']);
  t.notOk(link.closed, 'a timeout alone does not close the link');
});

t.test('a node that stops answering pings is closed', async (t) => {
  for (const autoPong of [false, true]) {
    const server = await scriptedServer(t, () => {}, autoPong);
    const link = linkFor(t, { url: server.url, label: 'scripted', pingIntervalMs: 100 });
    const reasons: string[] = [];
    link.onClose((r) => reasons.push(r));
    await link.opened;
    await sleep(600);
    if (autoPong) t.same(reasons, [], 'a node that answers pings is kept');
    else t.same(reasons, ['no pong from the node'], 'closed for want of a pong');
  }
});

/**
 * Runs the built ws-link in a process whose open-files limit is spent (prlimit), opens a link to a port on
 * loopback and prints the reason it closed with: before the ws library is loaded (loading it needs files) or
 * after (the connect itself fails).
 */
function reasonAtEmfile(preload: boolean): string {
  const linkModule = new URL('../../dist/upstreams/ws-link.js', import.meta.url).href;
  const script = `
    import { openSync } from 'node:fs';
    import { createRequire } from 'node:module';
    const { openWsLink } = await import(${JSON.stringify(linkModule)});
    if (${preload}) createRequire(${JSON.stringify(linkModule)})('ws');
    const held = [];
    try { for (;;) held.push(openSync('/dev/null', 'r')); } catch {}
    const link = openWsLink({ url: 'ws://127.0.0.1:9', label: 'node-a' });
    link.onClose((reason) => { process.stdout.write(reason); process.exit(0); });
  `;
  const r = spawnSync('prlimit', ['--nofile=64:64', process.execPath, '--input-type=module', '-e', script], {
    encoding: 'utf8',
    timeout: 10_000,
  });
  return r.stdout + r.stderr;
}

t.test('out of file descriptors, the link says so, never that the URL is unusable', async (t) => {
  for (const preload of [false, true]) {
    const reason = reasonAtEmfile(preload);
    t.match(
      reason,
      /EMFILE: out of file descriptors: the process is at its open-files limit/,
      `ws ${preload ? 'loaded' : 'not loaded yet'}: ${reason}`,
    );
    t.notMatch(reason, /not a usable/);
  }
});
