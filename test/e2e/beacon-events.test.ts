/**
 * The Beacon event stream through the gateway. Against a counting fake node: 200 clients over mixed
 * topics share exactly one upstream stream per topic, each receives exactly its topics in upstream
 * order, a dropped upstream stream is reopened while clients stay connected, and the last listener of
 * a topic leaving closes its upstream stream; a keyed stream pays 10 RU at open and 1 per event.
 * Against the devnet's beacon node after a real anvil: blocks mined with evm_mine arrive as head and
 * block events, exactly as a client of the node itself receives them.
 */
import t, { type Test } from 'tap';
import { startBeaconNode } from '../../src/devnet/beacon/beacon-node.js';
import { createOwnerAdmin } from '../../src/tenancy/owners.js';
import { type EventStream, openEventStream } from '../support/event-stream.js';
import { type FakeBeacon, fakeBeacon } from '../support/fake-beacon.js';
import { waitFor } from '../support/wait-for.js';
import { devnetBeacon } from '../support/devnet-beacon.js';
import { closedPort } from '../support/fake-upstream.js';
import { anvilFor, evmChain, gatewayFor, type TestGateway } from '../support/gateway.js';
import { rpc, send } from '../support/rpc.js';

const EVENTS_PATH = '/eth/v1/events';

function endpointFor(
  g: TestGateway,
  network: string,
  ru: number,
): { ownerId: number; key: string; endpointId: string; managementKey: string } {
  const owner = createOwnerAdmin(g.gateway.context.tenancy.store!).createOwner(`o${Math.random()}`, 'growth', ru);
  const made = g.gateway.context.tenancy.directory!.createEndpoint(owner.id, network, 'events', 10);
  if (!('apiKey' in made)) throw new Error(made.error);
  return { ownerId: owner.id, key: made.apiKey, endpointId: made.endpoint.id, managementKey: owner.managementKey };
}

/** The event streams the gateway asked of the node, one topic each. */
const upstreamStreams = (node: FakeBeacon): string[] => node.requests.filter((r) => r.target.startsWith(EVENTS_PATH)).map((r) => r.target);

/** The numbers of one topic's events a client received, in arrival order. */
function numbersOf(stream: EventStream, topic: string): number[] {
  return stream.events.filter((e) => e.event === topic).map((e) => (JSON.parse(e.data) as { n: number }).n);
}

const range = (from: number, to: number): number[] => Array.from({ length: to - from + 1 }, (_, i) => from + i);

function assertBeaconError(t: Test, s: EventStream, status: number, message: RegExp, what: string): void {
  t.equal(s.status, status, `${what}: ${status}`);
  const body = JSON.parse(s.text()) as Record<string, unknown>;
  t.same(Object.keys(body).sort(), ['code', 'message'], `${what}: Beacon error shape`);
  t.equal(body.code, status, `${what}: code equals the status`);
  t.match(body.message, message, `${what}: message`);
}

async function fakeChain(t: Test, extra: Record<string, unknown> = {}): Promise<{ node: FakeBeacon; g: TestGateway }> {
  const node = await fakeBeacon(t);
  const g = await gatewayFor(t, {
    chains: { 'devnet-beacon': { kind: 'beacon', upstreams: [{ url: node.url }] } },
    sse: { max_connections_per_ip: 1000 },
    ...extra,
  });
  return { node, g };
}

t.test(
  '200 clients over mixed topics: one upstream stream per topic, each client its topics in order, drop and recovery, last leaver closes',
  async (t) => {
    const { node, g } = await fakeChain(t);
    const base = `${g.base}/v1/rpc/public${EVENTS_PATH}`;
    // Query forms, the topics each asks for, and how many clients use it: 200 in all.
    const groups: Array<{ query: string; topics: string[]; count: number }> = [
      { query: 'topics=head', topics: ['head'], count: 50 },
      { query: 'topics=block', topics: ['block'], count: 40 },
      { query: 'topics=head,block', topics: ['head', 'block'], count: 40 },
      { query: 'topics=head&topics=block', topics: ['head', 'block'], count: 40 },
      { query: 'topics=finalized_checkpoint,head', topics: ['finalized_checkpoint', 'head'], count: 30 },
    ];
    const clients: Array<{ stream: EventStream; topics: string[]; group: number }> = [];
    for (const [group, { query, topics, count }] of groups.entries()) {
      const opened = await Promise.all(Array.from({ length: count }, () => openEventStream(`${base}?${query}`)));
      for (const stream of opened) clients.push({ stream, topics, group });
    }
    t.teardown(() => {
      for (const c of clients) c.stream.close();
    });
    t.equal(clients.length, 200);
    t.ok(
      clients.every((c) => c.stream.status === 200 && c.stream.headers['content-type'] === 'text/event-stream'),
      'all 200 streams open as text/event-stream',
    );

    const topics = ['head', 'block', 'finalized_checkpoint'];
    await waitFor(() => topics.every((tp) => node.streamsOpen(tp) === 1), { what: 'one upstream stream per topic' });
    t.same(
      upstreamStreams(node).sort(),
      topics.map((tp) => `${EVENTS_PATH}?topics=${tp}`).sort(),
      'the node was asked for exactly one stream per topic, one topic each',
    );

    // Interleaved across topics; within a topic the node's order is 1, 2, 3, ...
    node.emit('head', 2);
    node.emit('block', 3);
    node.emit('finalized_checkpoint', 1);
    node.emit('head', 3);
    node.emit('block', 2);
    node.emit('finalized_checkpoint', 2);
    const expected = { head: 5, block: 5, finalized_checkpoint: 3 } as Record<string, number>;
    const total = (ts: string[]): number => ts.reduce((s, tp) => s + expected[tp]!, 0);
    await waitFor(() => clients.every((c) => c.stream.events.length >= total(c.topics)), { what: 'every client has its events' });
    let exact = 0;
    for (const c of clients) {
      const names = new Set(c.stream.events.map((e) => e.event));
      const own = [...names].every((n) => c.topics.includes(n));
      const inOrder = c.topics.every((tp) => JSON.stringify(numbersOf(c.stream, tp)) === JSON.stringify(range(1, expected[tp]!)));
      const labelled = c.stream.events.every((e) => (JSON.parse(e.data) as { topic: string }).topic === e.event);
      if (own && inOrder && labelled && c.stream.events.length === total(c.topics)) exact++;
      else t.fail(`client of ${groups[c.group]!.query}: ${JSON.stringify(c.stream.events.slice(0, 20))}`);
    }
    t.equal(exact, 200, 'each of the 200 clients received exactly its topics, each 1..n in upstream order');

    // The node drops the head stream: the gateway opens it again; no client is dropped, none reconnects.
    const headClients = clients.filter((c) => c.topics.includes('head'));
    node.drop('head');
    await waitFor(() => node.streamsOpened('head') === 2 && node.streamsOpen('head') === 1, { what: 'the head stream reopened', ms: 5000 });
    t.equal(node.streamsOpened('block'), 1, 'the block stream was not touched');
    t.equal(node.streamsOpened('finalized_checkpoint'), 1);
    t.ok(
      clients.every((c) => !c.stream.ended()),
      'no client stream ended',
    );
    node.emit('head', 4);
    node.emit('block', 1);
    expected.head = 9;
    expected.block = 6;
    await waitFor(() => clients.every((c) => c.stream.events.length >= total(c.topics)), { what: 'events after the reconnection' });
    const continued = headClients.filter((c) => JSON.stringify(numbersOf(c.stream, 'head')) === JSON.stringify(range(1, 9))).length;
    t.equal(continued, headClients.length, `all ${headClients.length} head clients got 1..5 then 6..9 on the stream they opened`);
    t.ok(
      clients.every((c) => c.stream.events.length === total(c.topics)),
      'no duplicates, nothing foreign',
    );
    t.equal(upstreamStreams(node).length, 4, 'four upstream streams in all: three, and head once more');

    // The last listeners of finalized_checkpoint leave: its upstream stream closes, head's stays.
    for (const c of clients.filter((c) => c.group === 4)) c.stream.close();
    await waitFor(() => node.streamsOpen('finalized_checkpoint') === 0, { what: 'the finalized_checkpoint stream closed', ms: 5000 });
    t.equal(node.streamsOpen('head'), 1, 'head still has listeners and its stream');
    t.equal(node.streamsOpen('block'), 1);
    // block's listeners are groups 1, 2 and 3: all but the last one leaving keeps the stream.
    const blockClients = clients.filter((c) => c.topics.includes('block'));
    for (const c of blockClients.slice(1)) c.stream.close();
    await new Promise((r) => setTimeout(r, 200));
    t.equal(node.streamsOpen('block'), 1, 'one block listener left: its stream stays');
    node.emit('block', 1);
    await waitFor(() => numbersOf(blockClients[0]!.stream, 'block').includes(7), { what: 'the last block listener gets block 7' });
    blockClients[0]!.stream.close();
    await waitFor(() => node.streamsOpen('block') === 0, { what: 'the block stream closed', ms: 5000 });
    for (const c of clients) c.stream.close();
    await waitFor(() => topics.every((tp) => node.streamsOpen(tp) === 0), { what: 'every upstream stream closed', ms: 5000 });
    t.equal(upstreamStreams(node).length, 4, 'no stream was opened for leaving clients');
  },
);

t.test('topics: unknown or missing → 400 in the Beacon shape, no upstream stream', async (t) => {
  const { node, g } = await fakeChain(t);
  const base = `${g.base}/v1/rpc/public${EVENTS_PATH}`;
  for (const [query, message] of [
    ['topics=bogus', /Invalid topic 'bogus'/],
    ['topics=head,bogus', /Invalid topic 'bogus'/],
    ['topics=head&topics=Head', /Invalid topic 'Head'/],
    ['topics=', /topics is required/],
    ['', /topics is required/],
    ['topic=head', /topics is required/],
  ] as const) {
    const s = await openEventStream(`${base}${query === '' ? '' : `?${query}`}`);
    await waitFor(() => s.ended(), { what: `the answer to ?${query} ends` });
    assertBeaconError(t, s, 400, message, `?${query}`);
  }
  await new Promise((r) => setTimeout(r, 100));
  t.same(upstreamStreams(node), [], 'no stream was opened upstream');
});

t.test('RU: a keyed stream costs 10 at open and 1 per delivered event; an owner out of RU has it ended', async (t) => {
  const { node, g } = await fakeChain(t, { sse: { max_connections_per_ip: 1000, heartbeat_s: 1 } });
  const ledger = g.gateway.context.tenancy.ledger;
  const owner = endpointFor(g, 'devnet-beacon', 1000);
  const s = await openEventStream(`${g.base}/v1/rpc/${owner.key}${EVENTS_PATH}?topics=head,block`);
  t.equal(s.status, 200);
  t.equal(ledger.available(owner.ownerId), 990, '10 RU at open');
  await waitFor(() => node.streamsOpen('head') === 1 && node.streamsOpen('block') === 1, { what: 'both upstream streams' });
  node.emit('head', 3);
  node.emit('block', 4);
  await waitFor(() => s.events.length === 7, { what: '7 events' });
  t.equal(ledger.available(owner.ownerId), 983, '1 RU per delivered event');
  const comments = s.comments;
  await waitFor(() => s.comments > comments, { what: 'a heartbeat comment (sse.heartbeat_s 1)', ms: 3000 });
  t.equal(ledger.available(owner.ownerId), 983, 'heartbeat comments cost nothing');
  node.emit('finalized_checkpoint', 5);
  await new Promise((r) => setTimeout(r, 100));
  t.equal(ledger.available(owner.ownerId), 983, 'events of topics it did not ask for cost nothing');
  ledger.flush();
  t.equal(ledger.available(owner.ownerId), 983, 'the flushed balance agrees');

  const poor = endpointFor(g, 'devnet-beacon', 9);
  const refused = await openEventStream(`${g.base}/v1/rpc/${poor.key}${EVENTS_PATH}?topics=head`);
  await waitFor(() => refused.ended(), { what: 'the 402 ends' });
  assertBeaconError(t, refused, 402, /Insufficient RU balance/, '9 RU for a 10 RU stream');
  t.equal(ledger.available(poor.ownerId), 9, 'the refusal cost nothing');

  const short = endpointFor(g, 'devnet-beacon', 12);
  const s2 = await openEventStream(`${g.base}/v1/rpc/${short.key}${EVENTS_PATH}?topics=head`);
  t.equal(s2.status, 200);
  node.emit('head', 5);
  await waitFor(() => s2.ended(), { what: 'the stream out of RU ends' });
  t.equal(numbersOf(s2, 'head').length, 2, 'two events paid for with the 2 RU left, then the stream ended');
  t.equal(s2.lastComment, ': closed: Insufficient RU balance', 'its last line names why');
  const last = numbersOf(s2, 'head').at(-1);
  t.ok(s2.text().endsWith(`data: {"topic":"head","n":${last}}\n\n: closed: Insufficient RU balance\n\n`), 'right after its last event');
  t.equal(ledger.available(short.ownerId), 0);
  t.ok(!s.ended(), "the other owner's stream goes on");

  const unknown = await openEventStream(`${g.base}/v1/rpc/${'z'.repeat(32)}${EVENTS_PATH}?topics=head`);
  await waitFor(() => unknown.ended(), { what: 'the 401 ends' });
  assertBeaconError(t, unknown, 401, /Missing or invalid API key/, 'unknown key');
});

t.test('the devnet beacon node: evm_mine produces head and block events through the gateway, as the node sends them', async (t) => {
  const { anvil, node, g } = await devnetBeacon(t);
  const viaGateway = await openEventStream(`${g.base}/devnet-beacon/v1/rpc/public${EVENTS_PATH}?topics=head&topics=block`);
  const direct = await openEventStream(`${node.url}${EVENTS_PATH}?topics=head,block`);
  t.teardown(() => {
    viaGateway.close();
    direct.close();
  });
  t.equal(viaGateway.status, 200);
  t.equal(viaGateway.headers['content-type'], 'text/event-stream');
  // The two streams open at different moments: mine until a block reaches the client through the
  // gateway, and compare what follows.
  const deadline = performance.now() + 10_000;
  while (!viaGateway.events.some((e) => e.event === 'block')) {
    if (performance.now() > deadline) throw new Error('no block event through the gateway within 10 s');
    await rpc(anvil.url, 'evm_mine');
    await new Promise((r) => setTimeout(r, 300));
  }
  await waitFor(() => viaGateway.events.length > 0 && direct.events.length > 0, { what: 'the warm-up blocks in both streams', ms: 2000 });
  await new Promise((r) => setTimeout(r, 200));
  const start = node.headSlot();
  const after = (e: { data: string }): boolean => Number((JSON.parse(e.data) as { slot: string }).slot) > start;
  const hashes: string[] = [];
  for (let i = 1; i <= 3; i++) {
    await rpc(anvil.url, 'evm_mine');
    await waitFor(() => node.headSlot() === start + i, { what: `slot ${start + i}`, ms: 5000 });
    const root = (await (await fetch(`${node.url}/eth/v1/beacon/blocks/${start + i}/root`)).json()) as { data: { root: string } };
    hashes.push(root.data.root);
  }
  await waitFor(() => viaGateway.events.filter(after).length >= 6, { what: '3 head and 3 block events through the gateway', ms: 5000 });
  await new Promise((r) => setTimeout(r, 200));
  for (const topic of ['head', 'block']) {
    const got = viaGateway.events.filter((e) => e.event === topic && after(e));
    const want = direct.events.filter((e) => e.event === topic && after(e));
    t.same(got, want, `${topic}: the gateway's events equal the node's own, byte for byte`);
    const data = got.map((e) => JSON.parse(e.data) as { slot: string; block: string });
    t.same(
      data.map((d) => d.slot),
      [1, 2, 3].map((i) => String(start + i)),
      `${topic}: slots ${start + 1}..${start + 3}`,
    );
    t.same(
      data.map((d) => d.block),
      hashes,
      `${topic}: block roots are the node's roots of those slots`,
    );
  }
  t.equal(viaGateway.events.filter(after).length, 6, 'nothing else arrived');
  t.ok(
    viaGateway.events.every((e) => e.event === 'head' || e.event === 'block'),
    'only the topics asked for',
  );
});

async function untilAsync(what: string, ready: () => Promise<boolean>, ms: number): Promise<void> {
  const deadline = performance.now() + ms;
  while (!(await ready())) {
    if (performance.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

t.test('two beacon nodes: when the first dies, calls and the event stream go on from the other; with none, 502 at once', async (t) => {
  const anvil = await anvilFor(t);
  const first = await startBeaconNode({ executionUrl: anvil.url, pollMs: 50 });
  const second = await startBeaconNode({ executionUrl: anvil.url, pollMs: 50 });
  let firstStopped = false;
  t.teardown(async () => {
    if (!firstStopped) await first.stop();
    await second.stop();
  });
  const g = await gatewayFor(t, {
    server: { default_chain: 'devnet' },
    chains: { devnet: evmChain([anvil.url]), 'devnet-beacon': { kind: 'beacon', upstreams: [{ url: first.url }, { url: second.url }] } },
  });
  const base = `${g.base}/devnet-beacon/v1/rpc/public`;
  const stream = await openEventStream(`${base}${EVENTS_PATH}?topics=head`);
  t.teardown(() => stream.close());
  const heads = (): number[] => stream.events.map((e) => Number((JSON.parse(e.data) as { slot: string }).slot));
  const mineUntilHead = async (what: string): Promise<void> => {
    const had = stream.events.length;
    const deadline = performance.now() + 10_000;
    while (stream.events.length === had) {
      if (performance.now() > deadline) throw new Error(`no head event ${what} within 10 s`);
      await rpc(anvil.url, 'evm_mine');
      await new Promise((r) => setTimeout(r, 200));
    }
  };
  await mineUntilHead('through the gateway');

  await first.stop();
  firstStopped = true;
  // While the dead node is still in rotation, a GET sent to it is tried again on the other: no client sees it.
  const statuses = await Promise.all(Array.from({ length: 10 }, () => send('GET', `${base}/eth/v1/node/version`).then((r) => r.status)));
  t.same(statuses, Array(10).fill(200), 'every call right after the death answered');
  await untilAsync(
    'the dead node out of rotation',
    async () => {
      const h = (await send('GET', `${g.base}/healthz`)).json as { chains: Record<string, { upstreams: Array<{ in_rotation: boolean }> }> };
      return !h.chains['devnet-beacon']!.upstreams[0]!.in_rotation;
    },
    6000,
  );
  t.equal((await send('GET', `${base}/eth/v1/node/version`)).status, 200, 'calls answered by the second node');
  await mineUntilHead('after the first node died');
  const slots = heads();
  t.ok(slots.at(-1)! > slots[0]!, `the stream went on from the second node (slots ${slots.join(', ')})`);
  t.equal(new Set(slots).size, slots.length, 'no slot twice');

  await second.stop();
  await untilAsync('no node in rotation', async () => (await send('GET', `${g.base}/readyz`)).status === 503, 6000);
  const started = performance.now();
  const r = await send('GET', `${base}/eth/v1/node/version`);
  const took = performance.now() - started;
  t.equal(r.status, 502);
  t.match(r.json, { code: 502, message: /No healthy upstream/ }, 'in the Beacon error shape');
  t.ok(took < 500, `at once (${Math.round(took)} ms), not after the timeout`);
});

t.test('an upstream stream that cannot be opened: 502 in the Beacon shape after timeout_s, before any event, at no cost', async (t) => {
  const down = await closedPort();
  const g = await gatewayFor(t, {
    chains: { 'devnet-beacon': { kind: 'beacon', timeout_s: 1, upstreams: [{ url: `http://127.0.0.1:${down}` }] } },
  });
  const ledger = g.gateway.context.tenancy.ledger;
  const owner = endpointFor(g, 'devnet-beacon', 1000);
  for (const [who, base] of [
    ['public', `${g.base}/v1/rpc/public`],
    ['keyed', `${g.base}/v1/rpc/${owner.key}`],
  ] as const) {
    const s = await openEventStream(`${base}${EVENTS_PATH}?topics=head,block`);
    await waitFor(() => s.ended(), { what: `the ${who} answer ends` });
    assertBeaconError(
      t,
      s,
      502,
      /^Upstream node error: no upstream event stream opened within 1 s \(chains\.devnet-beacon\.timeout_s\)$/,
      who,
    );
    t.equal(s.comments, 0, `${who}: no stream was begun`);
  }
  ledger.flush();
  t.equal(ledger.available(owner.ownerId), 1000, 'the stream that never opened cost nothing');
  t.match(await g.gateway.streamStats(), { sseClients: 0 }, 'no client left behind');
});

t.test('the 200 waits for the upstream stream: a node that refuses twice, then streams; later clients start at once', async (t) => {
  const node = await fakeBeacon(t, { refuseStreams: 2 });
  const g = await gatewayFor(t, { chains: { 'devnet-beacon': { kind: 'beacon', upstreams: [{ url: node.url }] } } });
  const url = `${g.base}/v1/rpc/public${EVENTS_PATH}?topics=head`;
  const first = await openEventStream(url);
  t.teardown(() => first.close());
  t.equal(first.status, 200);
  t.equal(node.streamsOpened('head'), 1, 'the head came once the node had opened the upstream stream, after its two refusals');
  t.equal(upstreamStreams(node).length, 3);
  const second = await openEventStream(url);
  t.teardown(() => second.close());
  t.equal(second.status, 200, 'a client of the open topic gets its 200 at once');
  node.emit('head', 2);
  await waitFor(() => first.events.length === 2 && second.events.length === 2, { what: 'both have both events' });
  t.same(
    [numbersOf(first, 'head'), numbersOf(second, 'head')],
    [
      [1, 2],
      [1, 2],
    ],
  );
  t.equal(upstreamStreams(node).length, 3, 'no more upstream streams');
});

t.test('a stream the gateway ends says why in its last line: key revoked, slow consumer, shutdown', async (t) => {
  const { node, g } = await fakeChain(t, { sse: { max_connections_per_ip: 1000, max_buffered_bytes: 1024 } });
  const owner = endpointFor(g, 'devnet-beacon', 1_000_000);
  const keyed = await openEventStream(`${g.base}/v1/rpc/${owner.key}${EVENTS_PATH}?topics=head`);
  const slow = await openEventStream(`${g.base}/v1/rpc/public${EVENTS_PATH}?topics=block`);
  const steady = await openEventStream(`${g.base}/v1/rpc/public${EVENTS_PATH}?topics=head`);
  t.teardown(() => {
    for (const s of [keyed, slow, steady]) s.close();
  });
  t.same([keyed.status, slow.status, steady.status], [200, 200, 200]);

  const deleted = await send('DELETE', `${g.base}/api/dashboard/endpoints?id=${owner.endpointId}`, undefined, {
    authorization: `Bearer ${owner.managementKey}`,
  });
  t.equal(deleted.status, 200);
  await waitFor(() => keyed.ended(), { what: "the revoked key's stream ends" });
  t.equal(keyed.lastComment, ': closed: API key revoked');

  // A client that stops reading: 64 KB events until the gateway holds more than 1 KiB for it and cuts it.
  slow.pause();
  const stats = () => g.gateway.streamStats();
  for (let i = 0; i < 200 && (await stats()).sseSlowClients !== 1; i++) {
    node.emit('block', 20, 64 * 1024);
    await new Promise((r) => setTimeout(r, 20));
  }
  t.equal((await stats()).sseSlowClients, 1, 'the gateway counted one slow client');
  slow.resume();
  await waitFor(() => slow.ended(), { what: 'the slow stream ends', ms: 20_000 });
  t.equal(slow.lastComment, ': closed: slow consumer', 'reading again, it finds what was queued, then why it ended');
  t.ok(slow.events.length > 0 && slow.events.every((e) => e.event === 'block'), `after ${slow.events.length} events`);

  t.notOk(steady.ended(), 'the other stream goes on');
  await g.gateway.stop();
  await waitFor(() => steady.ended(), { what: 'the last stream ends at the stop' });
  t.equal(steady.lastComment, ': closed: Server shutting down');
});
