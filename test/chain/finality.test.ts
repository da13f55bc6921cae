/**
 * A chain's safe and finalized blocks (chain/finality.ts, finality-reads.ts): the tracker on a fake clock and
 * fake readings (read when due, never back, dropped when the chain's final blocks are undone), the beacon
 * reader against fake beacon nodes (checkpoint roots to execution blocks, each root asked once, unknown roots,
 * a failing node), and the nodes' own tags on a real anvil.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import t from 'tap';
import { validateConfig } from '../../src/config/schema.js';
import { createChainFinality, type FinalBlock, type FinalityReading, type FinalityTimers, finalThrough } from '../../src/chain/finality.js';
import { readBeaconFinality, readNodeFinality } from '../../src/chain/finality-reads.js';
import { createChainRuntime } from '../../src/chain/runtime.js';
import { result } from '../support/dev-chain.js';
import { fakeBeacon } from '../support/fake-beacon.js';
import { fakeUpstream } from '../support/fake-upstream.js';
import { anvilFor } from '../support/gateway.js';
import { waitFor } from '../support/wait-for.js';

const block = (number: number): FinalBlock => ({ number, hash: `0x${number.toString(16).padStart(64, '0')}` });

/** A tracker whose readings the test gives (each `read` waits for the next `answer`), on a fake clock and timer. */
function trackerOf(opts: { scope?: () => string } = {}) {
  let now = 0;
  const pending: Array<(r: FinalityReading) => void> = [];
  const signals: AbortSignal[] = [];
  const ticks: Array<() => void> = [];
  const gauges = { finalized: [] as number[], safe: [] as number[] };
  const timers: FinalityTimers = {
    setInterval(fn) {
      ticks.push(fn);
      return ticks.length;
    },
    clearInterval() {
      ticks.length = 0;
    },
  };
  const finality = createChainFinality({
    read: (signal) => {
      signals.push(signal);
      return new Promise((resolve) => pending.push(resolve));
    },
    scope: opts.scope ?? (() => 'devnet'),
    now: () => now,
    pollMs: 1000,
    timers,
    gauge: (tag) => ({ set: (v: number) => gauges[tag].push(v) }),
  });
  return {
    finality,
    gauges,
    signals,
    ticks,
    advance: (ms: number) => {
      now += ms;
    },
    readings: () => pending.length,
    /** Answers the oldest reading and lets its promise settle. */
    async answer(reading: FinalityReading) {
      pending.shift()!(reading);
      await new Promise((r) => setImmediate(r));
    },
  };
}

t.test('read when asked and due, one reading at a time, at most once per poll interval', async (t) => {
  const k = trackerOf();
  t.equal(k.finality.finalized(), null, 'nothing known before the first reading');
  t.equal(k.readings(), 1, 'asking started a reading');
  t.equal(k.finality.safe(), null);
  t.equal(k.readings(), 1, 'not a second while one runs');
  await k.answer({ finalized: block(64), safe: block(96) });
  t.same(k.finality.finalized(), block(64));
  t.same(k.finality.safe(), block(96));
  k.advance(999);
  k.finality.finalized();
  t.equal(k.readings(), 0, 'none within the poll interval');
  k.advance(1);
  k.finality.finalized();
  t.equal(k.readings(), 1, 'one once it is due');
  t.same(k.gauges, { finalized: [64], safe: [96] }, 'the gauges are set by a reading');
});

t.test('never back: a lower or unknown reading keeps the blocks held; safe is never below finalized', async (t) => {
  const k = trackerOf();
  k.finality.finalized();
  await k.answer({ finalized: block(64), safe: block(96) });
  k.advance(1000);
  k.finality.finalized();
  await k.answer({ finalized: block(32), safe: null });
  t.same(k.finality.finalized(), block(64), 'a node behind does not take finalized back');
  t.same(k.finality.safe(), block(96), 'an unknown safe keeps the one held');
  k.advance(1000);
  k.finality.finalized();
  await k.answer({ finalized: { number: 64, hash: `0x${'ab'.repeat(32)}` }, safe: block(96) });
  t.same(k.finality.finalized(), block(64), 'another block at the same height does not replace the held one');
  k.advance(1000);
  k.finality.finalized();
  await k.answer({ finalized: block(128), safe: block(96) });
  t.same(k.finality.finalized(), block(128), 'a higher one is taken');
  t.same(k.finality.safe(), block(128), 'safe follows finalized when finalized passed it');
  t.same(k.gauges.safe.at(-1), 128);
});

t.test('the chain final blocks undone (its cache scope changed): what is held goes, and is read again', async (t) => {
  let scope = 'devnet';
  const k = trackerOf({ scope: () => scope });
  k.finality.finalized();
  await k.answer({ finalized: block(64), safe: block(96) });
  t.same(k.finality.finalized(), block(64));
  scope = 'devnet#1';
  t.equal(k.finality.finalized(), null, 'dropped at the first look after the change');
  t.equal(k.readings(), 1, 'and read again at once, though the last reading is recent');
  await k.answer({ finalized: block(8), safe: block(16) });
  t.same(k.finality.finalized(), block(8), 'the new chain’s blocks, lower than the old ones');

  k.advance(1000);
  k.finality.finalized();
  scope = 'devnet#2';
  await k.answer({ finalized: block(200), safe: block(232) });
  t.equal(k.finality.finalized(), null, 'a reading started before the change is thrown away');
});

t.test('start: a reading now and at each tick; close stops the timer and aborts the reading', async (t) => {
  const k = trackerOf();
  k.finality.start();
  t.equal(k.readings(), 1, 'read at the start');
  t.equal(k.ticks.length, 1, 'one timer');
  k.finality.start();
  t.equal(k.ticks.length, 1, 'start is idempotent');
  await k.answer({ finalized: block(1), safe: block(2) });
  k.advance(1000);
  k.ticks[0]!();
  t.equal(k.readings(), 1, 'a tick reads');
  k.finality.close();
  t.equal(k.ticks.length, 0, 'the timer is stopped');
  t.ok(k.signals.at(-1)!.aborted, 'the reading in flight is aborted');
  await k.answer({ finalized: block(9), safe: block(9) });
  t.same(k.finality.finalized(), block(1), 'nothing is taken after close');
});

t.test('finalThrough: the finalized block when known, else head minus finality_depth', async (t) => {
  const known = { finalized: () => block(100), safe: () => block(120), close() {} };
  const unknown = { finalized: () => null, safe: () => null, close() {} };
  t.equal(finalThrough(known, 500, 64), 100, 'finalized decides, whatever the depth says');
  t.equal(finalThrough(known, null, 64), 100, 'even without a head');
  t.equal(finalThrough(unknown, 500, 64), 436, 'the fixed depth as the fallback');
  t.equal(finalThrough(unknown, null, 64), null);
});

const ROOT = (n: number): string => `0x${n.toString(16).padStart(2, '0').repeat(32)}`;
const ZERO = `0x${'0'.repeat(64)}`;

function send(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) }).end(text);
}

/** A beacon node whose checkpoints are `checkpoints()` and whose blocks are `blocks` (root → payload or null). */
function beaconAnswers(checkpoints: () => { finalized: string; justified: string }, blocks: Map<string, object | null>) {
  return (req: IncomingMessage, res: ServerResponse): void => {
    const path = req.url ?? '';
    if (path === '/eth/v1/beacon/states/head/finality_checkpoints') {
      const c = checkpoints();
      const cp = (root: string) => ({ epoch: '2', root });
      send(res, 200, { data: { previous_justified: cp(c.finalized), current_justified: cp(c.justified), finalized: cp(c.finalized) } });
      return;
    }
    const m = /^\/eth\/v2\/beacon\/blocks\/(0x[0-9a-f]{64})$/.exec(path);
    const payload = m === null ? undefined : blocks.get(m[1]!);
    if (payload === undefined) return send(res, 404, { code: 404, message: 'block not found' });
    const body = payload === null ? { randao_reveal: '0x' } : { execution_payload: payload };
    send(res, 200, { version: 'electra', data: { message: { slot: '64', body } } });
  };
}

function beaconChain(urls: string[]) {
  const r = validateConfig({
    storage: { path: '/tmp/unused.db' },
    chains: { 'devnet-beacon': { kind: 'beacon', upstreams: urls.map((url) => ({ url })) } },
  });
  if (!r.ok) throw new Error(r.errors.join('\n'));
  return createChainRuntime(r.config.chains['devnet-beacon']!);
}

const payload = (n: number) => ({ block_number: String(n), block_hash: block(n).hash.toUpperCase().replace('0X', '0x') });

t.test('beacon: the checkpoints’ roots as execution blocks, each root asked once', async (t) => {
  let now = { finalized: ROOT(1), justified: ROOT(2) };
  const blocks = new Map<string, object | null>([
    [ROOT(1), payload(64)],
    [ROOT(2), payload(96)],
    [ROOT(3), payload(128)],
  ]);
  const node = await fakeBeacon(t, { answer: beaconAnswers(() => now, blocks) });
  const beacon = beaconChain([node.url]);
  t.teardown(() => beacon.close());
  const read = readBeaconFinality(() => beacon);
  const signal = new AbortController().signal;
  t.same(await read(signal), { finalized: block(64), safe: block(96) }, 'block numbers and lowercase hashes of the payloads');
  now = { finalized: ROOT(2), justified: ROOT(3) };
  t.same(await read(signal), { finalized: block(96), safe: block(128) });
  const asked = node.requests.filter((r) => r.target.startsWith('/eth/v2/beacon/blocks/')).map((r) => r.target.slice(-64, -62));
  t.same(asked.sort(), ['01', '02', '03'], 'each root’s block asked once, then remembered');
  t.ok(
    node.requests.every((r) => r.method === 'GET'),
    'only GETs',
  );
  t.same(await readBeaconFinality(() => null)(signal), { finalized: null, safe: null }, 'no beacon chain (a reload removed it): unknown');
});

t.test('beacon: a zero root, a pre-merge block or a root no node has is unknown; the last is asked again', async (t) => {
  let now = { finalized: ZERO, justified: ROOT(7) };
  const blocks = new Map<string, object | null>([[ROOT(7), null]]);
  const node = await fakeBeacon(t, { answer: beaconAnswers(() => now, blocks) });
  const beacon = beaconChain([node.url]);
  t.teardown(() => beacon.close());
  const read = readBeaconFinality(() => beacon);
  const signal = new AbortController().signal;
  t.same(await read(signal), { finalized: null, safe: null });
  t.notOk(
    node.requests.some((r) => r.target.endsWith(ZERO)),
    'a zero root is never asked',
  );
  now = { finalized: ROOT(7), justified: ROOT(8) };
  t.same(await read(signal), { finalized: null, safe: null }, 'ROOT(8) is not found');
  blocks.set(ROOT(8), payload(40));
  t.same(await read(signal), { finalized: null, safe: block(40) }, 'asked again, now found; the pre-merge block stays unknown');
  t.equal(node.requests.filter((r) => r.target.endsWith(ROOT(7).slice(2))).length, 1, 'the pre-merge root was asked once');
});

t.test('beacon: a node that fails is left for another in rotation', async (t) => {
  const blocks = new Map<string, object | null>([
    [ROOT(1), payload(64)],
    [ROOT(2), payload(96)],
  ]);
  const down = await fakeBeacon(t, { answer: (_req, res) => send(res, 503, { code: 503, message: 'syncing' }) });
  const up = await fakeBeacon(t, { answer: beaconAnswers(() => ({ finalized: ROOT(1), justified: ROOT(2) }), blocks) });
  const beacon = beaconChain([down.url, up.url]);
  t.teardown(() => beacon.close());
  const read = readBeaconFinality(() => beacon);
  // Nodes are picked at random among those in rotation: read until the failing one has been left for good.
  let wrong = 0;
  for (let k = 0; k < 200 && !beacon.health.upstreams[0]!.failing; k++) {
    const reading = await read(new AbortController().signal);
    if (reading.finalized?.number !== 64 || reading.safe?.number !== 96) wrong++;
  }
  t.equal(wrong, 0, 'every reading told the blocks, from the node that answers');
  t.ok(down.requests.length >= 1, 'the failing node was asked');
  t.ok(beacon.health.upstreams[0]!.failing, 'and counted as failing in the beacon chain’s health (out of rotation)');
  t.same(await read(new AbortController().signal), { finalized: block(64), safe: block(96) });
});

function evmChain(urls: string[]) {
  const r = validateConfig({
    storage: { path: '/tmp/unused.db' },
    chains: { devnet: { chain_id: 31337, upstreams: urls.map((url) => ({ url })) } },
  });
  if (!r.ok) throw new Error(r.errors.join('\n'));
  return createChainRuntime(r.config.chains.devnet!);
}

t.test('without a beacon chain: the nodes’ own finalized and safe blocks (anvil)', async (t) => {
  // anvil's safe block is one epoch behind its head, finalized two.
  const anvil = await anvilFor(t, { args: ['--slots-in-an-epoch', '2'] });
  await result(anvil.url, 'anvil_mine', ['0xa']);
  const chain = evmChain([anvil.url]);
  t.teardown(() => chain.close());
  const byTag = async (tag: string): Promise<FinalBlock> => {
    const b = await result<{ number: string; hash: string }>(anvil.url, 'eth_getBlockByNumber', [tag, false]);
    return { number: Number(b.number), hash: b.hash };
  };
  const reading = await readNodeFinality(chain)(new AbortController().signal);
  t.same(reading, { finalized: await byTag('finalized'), safe: await byTag('safe') });
  t.equal(reading.finalized?.number, 6);
  t.equal(reading.safe?.number, 8);

  t.equal(chain.finality.finalized(), null, 'the runtime reads when first asked');
  await waitFor(() => chain.finality.finalized()?.number === 6, { what: 'the runtime’s finalized block' });
  t.same(chain.finality.safe(), await byTag('safe'));
});

t.test('without a beacon chain: a node that does not know the tags leaves them unknown', async (t) => {
  const node = await fakeUpstream(t, (socket, request) => {
    const id = /"id":(\d+)/.exec(request)?.[1] ?? '1';
    const body = `{"jsonrpc":"2.0","id":${id},"error":{"code":-32602,"message":"invalid block tag"}}`;
    socket.write(`HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`);
  });
  const chain = evmChain([node.url]);
  t.teardown(() => chain.close());
  t.same(await readNodeFinality(chain)(new AbortController().signal), { finalized: null, safe: null });
  t.ok(node.requests.some((r) => r.includes('"finalized"')) && node.requests.some((r) => r.includes('"safe"')), 'both tags were asked');
});

t.test('without a beacon chain: an answer of megabytes is given up unread, with no verdict on the node', async (t) => {
  const node = await fakeUpstream(t, (socket, request) => {
    const id = /"id":(\d+)/.exec(request)?.[1] ?? '1';
    const body = `{"jsonrpc":"2.0","id":${id},"result":{"number":"0x6","hash":"0x${'ab'.repeat(32)}","pad":"${'0'.repeat(5_000_000)}"}}`;
    socket.write(`HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`);
  });
  const chain = evmChain([node.url]);
  t.teardown(() => chain.close());
  for (let k = 0; k < 4; k++)
    t.same(await readNodeFinality(chain)(new AbortController().signal), { finalized: null, safe: null }, `reading ${k + 1}`);
  t.equal(chain.health.upstreams[0]!.failing, false, 'the node stays in rotation');
  t.equal(chain.pickHealthy()?.index, 0);
});

t.test('workers: the main thread relays each change; a worker attaching later gets the last; a retired runtime is not heard', async (t) => {
  const { MessageChannel } = await import('node:worker_threads');
  const { createChainRelayClient, createChainRelayHost } = await import('../../src/chain/relay.js');
  const { createChainHealth } = await import('../../src/upstreams/selection.js');
  const host = createChainRelayHost(() => undefined);
  const heardBy = (port: import('node:worker_threads').MessagePort) => {
    const heard: FinalityReading[] = [];
    const client = createChainRelayClient(port);
    t.teardown(() => client.close());
    const health = createChainHealth(['a'], { maxLagBlocks: 5 });
    return { heard, follow: () => client.follow('devnet', health, { hear: (r) => heard.push(r) }) };
  };
  const first = new MessageChannel();
  host.attach(first.port1);
  const one = heardBy(first.port2);
  one.follow();
  const retired = host.finality('devnet');
  const live = host.finality('devnet');
  live({ finalized: block(64), safe: block(96) });
  retired({ finalized: block(999), safe: block(999) });
  await waitFor(() => one.heard.length === 1, { what: 'the worker hears the change' });
  const second = new MessageChannel();
  host.attach(second.port1);
  const two = heardBy(second.port2);
  await new Promise((r) => setTimeout(r, 20));
  two.follow();
  await waitFor(() => two.heard.length === 1, { what: 'a worker attaching later hears the last blocks' });
  t.same(one.heard, [{ finalized: block(64), safe: block(96) }], 'only the newest runtime of the chain is relayed');
  t.same(two.heard, one.heard);
  first.port1.close();
  second.port1.close();
});
