/**
 * The event-stream relay: the main thread's hub keeps one upstream stream per topic (on the fake Beacon node,
 * whose streams the tests count and drop) and serves worker threads through serveEventRelay; each worker's own
 * hub opens its links through connectEventRelay. Real worker threads (from dist/: build first) for the whole
 * road; a MessageChannel pair in this thread, over a main hub on links the test plays, for the status rules.
 */
import t, { type Test } from 'tap';
import { MessageChannel, type MessagePort } from 'node:worker_threads';
import { connectEventRelay, type EventRelayServer, serveEventRelay } from '../../src/fanout/event-relay.js';
import { createSseHub, type SseHub, type SseHubOptions } from '../../src/fanout/sse-hub.js';
import { createHttpUpstream } from '../../src/upstreams/http-client.js';
import { openSseLink } from '../../src/upstreams/sse-link.js';
import { fakeBeacon, type FakeBeacon } from '../support/fake-beacon.js';
import { waitFor } from '../support/wait-for.js';
import { relayWorker } from '../support/relay-workers.js';

interface Received {
  started: boolean;
  text: string;
  closedWith: string | null;
}

const KEEP_ALIVE = ': keep-alive';

/** The main thread's hub of chain 'beacon' on the fake node: real sse-links, a heartbeat every `heartbeatMs`. */
function mainHub(t: Test, node: FakeBeacon, opts: { heartbeatMs?: number; openTimeoutMs?: number } = {}): SseHub {
  const upstream = createHttpUpstream({ url: node.url });
  const hub = createSseHub({
    heartbeatMs: opts.heartbeatMs ?? 60_000,
    maxBufferedBytes: 1 << 20,
    openTimeoutMs: opts.openTimeoutMs ?? 30_000,
    openLink: (topic, onFrame, onStatus) =>
      openSseLink({ upstream, topic, onFrame, onStatus, log: () => {}, backoff: { initialMs: 20, maxMs: 100 } }),
  });
  t.teardown(() => {
    hub.close();
    upstream.close();
  });
  return hub;
}

/** The events of `topic` in a client's text, by their `n`, in order. */
function numbersOf(text: string, topic: string): number[] {
  const out: number[] = [];
  for (const frame of text.split('\n\n')) {
    if (!frame.startsWith(`event: ${topic}\n`)) continue;
    out.push((JSON.parse(frame.slice(frame.indexOf('data: ') + 6)) as { n: number }).n);
  }
  return out;
}

const range = (from: number, to: number): number[] => Array.from({ length: to - from + 1 }, (_, i) => from + i);

t.test('2 worker threads with clients on two topics: one upstream stream per topic, every event once per client', async (t) => {
  const node = await fakeBeacon(t);
  // The main hub's heartbeat fires many times during the test: relayed, it would reach the workers' clients.
  const hub = mainHub(t, node, { heartbeatMs: 20 });
  const servers: EventRelayServer[] = [];
  const serve = (port: MessagePort) => {
    const server = serveEventRelay(port, (chain) => (chain === 'beacon' ? hub : null));
    servers.push(server);
    return server;
  };
  const workers = [relayWorker(t, 'events', serve), relayWorker(t, 'events', serve)];
  for (const w of workers) {
    await w.ask({ cmd: 'add', clients: 10, topics: ['head'] });
    await w.ask({ cmd: 'add', clients: 5, topics: ['head', 'block'] });
  }
  /** Per worker, its 10 clients of head, then its 5 of head and block. */
  const received = async (): Promise<{ head: Received[]; both: Received[] }> => {
    const answers = await Promise.all(workers.map((w) => w.ask<Received[]>({ cmd: 'received' })));
    return { head: answers.flatMap((a) => a.slice(0, 10)), both: answers.flatMap((a) => a.slice(10)) };
  };
  const untilAll = async (what: string, done: (r: Received, topics: string[]) => boolean): Promise<void> => {
    const all = async (): Promise<boolean> => {
      const { head, both } = await received();
      return head.every((r) => done(r, ['head'])) && both.every((r) => done(r, ['head', 'block']));
    };
    await waitFor(all, { what, ms: 10_000 });
  };
  await untilAll('every client started', (r) => r.started);
  t.same(
    servers.map((s) => s.links()),
    [2, 2],
    'one relay client per worker and topic',
  );

  node.emit('head', 5);
  node.emit('block', 3);
  const expected: Record<string, number[]> = { head: range(1, 5), block: range(1, 3) };
  await untilAll('every event', (r, topics) => topics.every((topic) => numbersOf(r.text, topic).length === expected[topic]!.length));
  await new Promise((r) => setTimeout(r, 100)); // anything doubled would show up here
  const { head, both } = await received();
  const final = [...head, ...both];
  t.equal(final.length, 30);
  t.equal(node.streamsOpened('head'), 1, 'one upstream stream of head for the process');
  t.equal(node.streamsOpened('block'), 1, 'and one of block');
  t.same(
    final.filter((r) => JSON.stringify(numbersOf(r.text, 'head')) !== JSON.stringify(expected.head)).length,
    0,
    'every client got every head event once, in order',
  );
  t.same(
    both.filter((r) => JSON.stringify(numbersOf(r.text, 'block')) !== JSON.stringify(expected.block)).length,
    0,
    'the clients of both topics got every block event once, in order',
  );
  t.same(head.filter((r) => r.text.includes('event: block')).length, 0, 'and the others none');
  t.same(final.filter((r) => r.text.includes(KEEP_ALIVE)).length, 0, "the main hub's heartbeats are not relayed");
  t.same(final.filter((r) => r.closedWith !== null).length, 0);

  await workers[0]!.ask({ cmd: 'removeAll' });
  await waitFor(() => servers[0]!.links() === 0, { what: 'the first worker let go' });
  t.equal(node.streamsOpen('head'), 1, 'the other worker keeps the upstream streams');
  await workers[1]!.terminate();
  await waitFor(() => servers[1]!.links() === 0, { what: 'the dead worker let go' });
  await waitFor(() => node.streamsOpen('head') === 0 && node.streamsOpen('block') === 0, { what: 'the upstream streams closed' });
  t.equal(hub.clients(), 0);
});

t.test("a worker's clients: started once the upstream stream is open, ended 'unavailable' by the worker's own timeout", async (t) => {
  // The first two stream requests are refused: the link opens on its third try.
  const node = await fakeBeacon(t, { refuseStreams: 2 });
  // The main hub's own open timeout passes long before: a relay client is not ended by it.
  const hub = mainHub(t, node, { openTimeoutMs: 1 });
  const servers: EventRelayServer[] = [];
  const serve = (port: MessagePort) => {
    const server = serveEventRelay(port, (chain) => (chain === 'beacon' ? hub : null));
    servers.push(server);
    return server;
  };
  const worker = relayWorker(t, 'events', serve);
  await worker.ask({ cmd: 'add', clients: 3, topics: ['head'] });
  await waitFor(() => node.streamsOpen('head') === 1, { what: 'the stream open upstream' });
  const deadline = Date.now() + 10_000;
  let got: Received[] = [];
  while (!(got = await worker.ask<Received[]>({ cmd: 'received' })).every((r) => r.started)) {
    if (Date.now() > deadline) throw new Error('the clients were not started');
    await new Promise((r) => setTimeout(r, 20));
  }
  t.same(
    got.map((r) => r.closedWith),
    [null, null, null],
    'started, not ended',
  );
  t.equal(node.streamsOpened('head'), 1, 'one stream, opened on the third request');

  const dead = await fakeBeacon(t, { refuseStreams: 1_000_000 });
  const deadHub = mainHub(t, dead, { openTimeoutMs: 1 });
  const lonely = relayWorker(t, 'events', (port) => serveEventRelay(port, () => deadHub), { openTimeoutMs: 300 });
  await lonely.ask({ cmd: 'add', clients: 2, topics: ['head'] });
  const end = Date.now() + 10_000;
  let ended: Received[] = [];
  while ((ended = await lonely.ask<Received[]>({ cmd: 'received' })).some((r) => r.closedWith === null)) {
    if (Date.now() > end) throw new Error('the clients were not ended');
    await new Promise((r) => setTimeout(r, 20));
  }
  t.same(
    ended.map((r) => [r.started, r.closedWith]),
    [
      [false, 'unavailable'],
      [false, 'unavailable'],
    ],
    'never started, ended unavailable (the 502 of today)',
  );
  await waitFor(() => deadHub.clients() === 0, { what: 'the main hub let go of the topic' });
});

/** Links the test plays on the main hub: status() opens or loses the upstream stream, emit() sends a frame. */
function playedLinks() {
  const links: Array<{ topic: string; emit(frame: Buffer): void; status(open: boolean): void; closed: boolean }> = [];
  const openLink: SseHubOptions['openLink'] = (topic, onFrame, onStatus) => {
    const link = { topic, emit: onFrame, status: onStatus, closed: false };
    links.push(link);
    return { close: () => void (link.closed = true) };
  };
  const live = (topic: string) => links.filter((l) => l.topic === topic && !l.closed);
  return { links, openLink, live };
}

function testClient() {
  const c = {
    started: false,
    text: '',
    closedWith: null as string | null,
    start: () => void (c.started = true),
    write(bytes: Buffer) {
      c.text += bytes.toString();
      return true;
    },
    close: (reason: string) => void (c.closedWith = reason),
  };
  return c;
}

t.test("the upstream stream's status reaches the worker's hub; a main hub that closes is asked again", async (t) => {
  const played = playedLinks();
  const hubOptions = { openLink: played.openLink, heartbeatMs: 60_000, maxBufferedBytes: 1 << 20, openTimeoutMs: 30_000 };
  let mainHub = createSseHub(hubOptions);
  const { port1, port2 } = new MessageChannel();
  const server = serveEventRelay(port1, () => mainHub);
  const client = connectEventRelay(port2, { retryMs: 50 });
  const statuses: boolean[] = [];
  const relayed = client.openLink('beacon');
  const workerHub = createSseHub({
    ...hubOptions,
    openLink: (topic, onFrame, onStatus, onSlow) =>
      relayed(
        topic,
        onFrame,
        (open) => {
          statuses.push(open);
          onStatus(open);
        },
        onSlow,
      ),
  });
  t.teardown(() => {
    workerHub.close();
    mainHub.close();
    client.close();
    server.close();
  });

  const first = testClient();
  workerHub.add(first, ['head']);
  await waitFor(() => played.live('head').length === 1, { what: 'the main link' });
  t.equal(first.started, false, 'not started while the upstream stream is not open');
  played.live('head')[0]!.status(true);
  await waitFor(() => first.started, { what: 'started' });
  played.live('head')[0]!.emit(Buffer.from('event: head\ndata: {"n":1}\n\n'));
  await waitFor(() => first.text !== '', { what: 'the frame' });
  t.equal(first.text, 'event: head\ndata: {"n":1}\n\n');

  played.live('head')[0]!.status(false);
  await waitFor(() => statuses.length === 2, { what: 'the loss passed on' });
  const late = testClient();
  workerHub.add(late, ['head']);
  t.equal(late.started, false, 'a client joining while the stream is lost waits, as today');
  played.live('head')[0]!.status(true);
  await waitFor(() => late.started, { what: 'the late client started' });
  t.same(statuses, [true, false, true]);
  t.equal(first.closedWith, null, 'the started client stayed');

  // A reload: the main hub closes and another takes its place; the worker's link asks again and finds it.
  const old = mainHub;
  mainHub = createSseHub(hubOptions);
  old.close();
  await waitFor(() => statuses.length === 4, { what: 'the end passed on as a loss' });
  await waitFor(() => played.live('head').length === 1 && mainHub.clients() === 1, { what: 'a link on the new hub' });
  played.live('head')[0]!.status(true);
  await waitFor(() => statuses.length === 5, { what: 'open again' });
  played.live('head')[0]!.emit(Buffer.from('event: head\ndata: {"n":2}\n\n'));
  await waitFor(() => first.text.includes('"n":2') && late.text.includes('"n":2'), { what: 'the frame through the new hub' });
  t.same(statuses, [true, false, true, false, true]);
  t.same([first.closedWith, late.closedWith], [null, null], 'no worker client noticed but for the gap');
});

t.test('a worker that does not keep up: past maxBacklogBytes its clients are ended as slow; it is served again once drained', async (t) => {
  const MAX = 1 << 20;
  const played = playedLinks();
  const hub = createSseHub({ openLink: played.openLink, heartbeatMs: 60_000, maxBufferedBytes: 64 << 20, openTimeoutMs: 30_000 });
  t.teardown(() => hub.close());
  const servers: EventRelayServer[] = [];
  const worker = relayWorker(t, 'events', (port) => {
    const server = serveEventRelay(port, () => hub, { maxBacklogBytes: MAX });
    servers.push(server);
    return server;
  });
  const server = servers[0]!;
  await worker.ask({ cmd: 'add', clients: 2, topics: ['head'] });
  await waitFor(() => played.live('head').length === 1, { what: 'the topic linked' });
  played.live('head')[0]!.status(true);
  const frame = (n: number, pad = ''): Buffer => Buffer.from(`event: head\ndata: ${JSON.stringify({ n, pad })}\n\n`);
  played.live('head')[0]!.emit(frame(0));
  await waitFor(() => server.links() === 1 && server.backlogBytes() === 0, { what: 'the first frame acknowledged' });

  const blocked = worker.ask({ cmd: 'block', ms: 1500 });
  await waitFor(() => worker.busy(), { what: 'the worker busy' });
  const big = frame(1, 'ab'.repeat(32 * 1024));
  for (let i = 0; i < 64; i++) played.live('head')[0]?.emit(big);
  t.equal(server.links(), 0, '4 MiB offered to a busy worker: its link is dropped once 1 MiB is queued');
  t.equal(hub.clients(), 0, 'and taken off the main hub, so nothing more is queued for it');
  t.ok(server.backlogBytes() <= MAX + big.length, `the queue stopped at the bound (${server.backlogBytes()} bytes)`);

  await blocked;
  let received: Received[] = [];
  const allClosed = async (): Promise<boolean> => {
    received = await worker.ask<Received[]>({ cmd: 'received' });
    return received.every((r) => r.closedWith !== null);
  };
  await waitFor(allClosed, { what: 'every client closed', ms: 10_000 });
  const queued = Math.floor(MAX / big.length) + 1;
  t.same(
    received.map((r) => [r.closedWith, numbersOf(r.text, 'head').length]),
    [
      ['slow', 1 + queued],
      ['slow', 1 + queued],
    ],
    `each client got what was queued up to the bound (1 + ${queued} events), then was ended as a slow consumer`,
  );

  await waitFor(() => server.backlogBytes() === 0, { what: 'drained' });
  await worker.ask({ cmd: 'add', clients: 1, topics: ['head'] });
  await waitFor(() => server.links() === 1 && played.live('head').length === 1, { what: 'linked again' });
  played.live('head')[0]!.status(true);
  played.live('head')[0]!.emit(frame(2));
  await waitFor(() => server.backlogBytes() === 0, { what: 'the new client served' });
  const thirdServed = async (): Promise<boolean> => {
    received = await worker.ask<Received[]>({ cmd: 'received' });
    return numbersOf(received[2]!.text, 'head').length > 0;
  };
  await waitFor(thirdServed, { what: 'the third client served', ms: 10_000 });
  t.same(numbersOf(received[2]!.text, 'head'), [2], 'a client added after the worker drained is served');
});
