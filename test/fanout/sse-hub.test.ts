import t, { type Test } from 'tap';
import { createServer, type ServerResponse } from 'node:http';
import { createSseHub, parseEventTopics, type HubTimers, type SseClient, type SseHubOptions } from '../../src/fanout/sse-hub.js';
import { createHttpUpstream } from '../../src/upstreams/http-client.js';
import { openSseLink } from '../../src/upstreams/sse-link.js';
import { listenOn } from '../upstreams/exchange-harness.js';
import { waitFor } from '../support/wait-for.js';

const KEEP_ALIVE = ': keep-alive\n\n';

/** Intervals and timeouts that fire only when the test advances time. */
function fakeTimers() {
  // A timeout is an entry with ms 0: it fires once.
  const intervals = new Map<number, { fn: () => void; ms: number; due: number }>();
  let now = 0;
  let nextId = 1;
  const start = (fn: () => void, ms: number, every: boolean): number => {
    const id = nextId++;
    intervals.set(id, { fn, ms: every ? ms : 0, due: now + ms });
    return id;
  };
  const timers: HubTimers = {
    setInterval: (fn, ms) => start(fn, ms, true),
    clearInterval: (id) => void intervals.delete(id as number),
    setTimeout: (fn, ms) => start(fn, ms, false),
    clearTimeout: (id) => void intervals.delete(id as number),
  };
  function advance(ms: number): void {
    const until = now + ms;
    for (;;) {
      let next: [number, { fn: () => void; ms: number; due: number }] | undefined;
      for (const e of intervals) if (e[1].due <= until && (next === undefined || e[1].due < next[1].due)) next = e;
      if (next === undefined) break;
      const [id, iv] = next;
      now = iv.due;
      if (iv.ms === 0) intervals.delete(id);
      else iv.due += iv.ms;
      iv.fn();
    }
    now = until;
  }
  return { timers, advance, active: () => intervals.size };
}

interface FakeLink {
  topic: string;
  emit: (frame: Buffer) => void;
  /** Plays the upstream stream opening (true) or an open one being lost (false). */
  status: (open: boolean) => void;
  closed: boolean;
}

/**
 * openLink that records each link; emit() plays the upstream, and keeps working after close to test the hub's
 * guard. With `opening: 'at once'` every link reports its stream open from inside openLink (the hub must not
 * start a client half joined); with 'later' the test calls status(true).
 */
function fakeLinks(opening: 'at once' | 'later' = 'at once') {
  const opened: FakeLink[] = [];
  const openLink: SseHubOptions['openLink'] = (topic, onFrame, onStatus) => {
    const link: FakeLink = { topic, emit: onFrame, status: onStatus, closed: false };
    opened.push(link);
    if (opening === 'at once') onStatus(true);
    return { close: () => void (link.closed = true) };
  };
  const live = (topic: string): FakeLink => {
    const found = opened.filter((l) => l.topic === topic && !l.closed);
    if (found.length !== 1) throw new Error(`${found.length} live links for ${topic}`);
    return found[0]!;
  };
  return { opened, openLink, live };
}

interface FakeClient extends SseClient {
  name: string;
  started: boolean;
  received: Buffer[];
  /** What write() answers. */
  writable: boolean;
  closedWith: string | undefined;
  text(): string[];
}

function fakeClient(name: string): FakeClient {
  const client: FakeClient = {
    name,
    started: false,
    received: [],
    writable: true,
    closedWith: undefined,
    start() {
      if (client.started) throw new Error(`${name} started twice`);
      client.started = true;
    },
    write(bytes) {
      if (!client.started) throw new Error(`${name} written before its start`);
      client.received.push(bytes);
      return client.writable;
    },
    close(reason) {
      if (client.closedWith !== undefined) throw new Error(`${name} closed twice`);
      client.closedWith = reason;
    },
    text: () => client.received.map((b) => b.toString()),
  };
  return client;
}

const frameOf = (topic: string, n: number, pad = 0) => Buffer.from(`event: ${topic}\ndata: {"n":${n}}${' '.repeat(pad)}\n\n`);

/** A hub on fake links and fake timers; `options` override its defaults. */
function testHub(options: Partial<SseHubOptions> = {}, opening: 'at once' | 'later' = 'at once') {
  const links = fakeLinks(opening);
  const clock = fakeTimers();
  const hub = createSseHub({
    openLink: links.openLink,
    heartbeatMs: 15_000,
    maxBufferedBytes: 1000,
    openTimeoutMs: 30_000,
    timers: clock.timers,
    ...options,
  });
  return { hub, links, clock };
}

t.test('200 clients over mixed topics: one link per topic, each client its own topics in upstream order', async (t) => {
  const delivered = new Map<SseClient, number>();
  const { hub, links, clock } = testHub({
    maxBufferedBytes: 1 << 20,
    onDelivered: (client, _topic, bytes) => delivered.set(client, (delivered.get(client) ?? 0) + bytes),
  });
  const TOPICS = ['head', 'block', 'finalized_checkpoint', 'chain_reorg'];
  const clients = Array.from({ length: 200 }, (_, i) => {
    const mask = (i % 15) + 1;
    const topics = TOPICS.filter((_, k) => mask & (1 << k));
    // The order a client names its topics in says nothing about delivery order.
    if (i % 2 === 1) topics.reverse();
    const client = fakeClient(`c${i}`);
    return { client, topics, listener: hub.add(client, topics) };
  });
  t.same(links.opened.map((l) => l.topic).sort(), [...TOPICS].sort(), 'exactly one link per topic');
  t.same(hub.topicsOpen().sort(), [...TOPICS].sort());
  t.equal(hub.clients(), 200);

  const emitted: Array<{ topic: string; frame: Buffer }> = [];
  for (let n = 0; n < 20; n++) {
    for (let k = 0; k < TOPICS.length; k++) {
      const topic = TOPICS[(n + k) % TOPICS.length]!;
      const frame = frameOf(topic, n);
      emitted.push({ topic, frame });
      links.live(topic).emit(frame);
    }
  }
  let wrong = 0;
  for (const { client, topics } of clients) {
    const expected = emitted.filter((e) => topics.includes(e.topic)).map((e) => e.frame);
    const sameBuffers = client.received.length === expected.length && client.received.every((b, j) => b === expected[j]);
    if (!sameBuffers) wrong++;
    const bytes = expected.reduce((sum, f) => sum + f.length, 0);
    if (delivered.get(client) !== bytes) wrong++;
  }
  t.equal(wrong, 0, 'every client got the very Buffers of its topics, in order, each metered once');

  // Leaving in an order unrelated to joining: a topic's link closes exactly when its last listener leaves.
  let early = 0;
  const order = clients.map((c, i) => ({ c, key: (i * 7919) % 200 })).sort((a, b) => a.key - b.key);
  for (let i = 0; i < order.length; i++) {
    order[i]!.c.listener.remove();
    const remaining = order.slice(i + 1).map((o) => o.c);
    for (const link of links.opened) {
      const wanted = remaining.some((c) => c.topics.includes(link.topic));
      if (link.closed === wanted) early++;
    }
  }
  t.equal(early, 0);
  t.same(hub.topicsOpen(), []);
  t.equal(hub.clients(), 0);
  t.equal(clock.active(), 0, 'no heartbeat timer without clients');
  t.equal(links.opened.length, TOPICS.length);
});

t.test('a client asking two topics (one twice) gets each event of both once', async (t) => {
  const { hub, links } = testHub();
  const both = fakeClient('both');
  hub.add(both, ['head', 'block', 'head']);
  hub.add(fakeClient('other'), ['block']);
  t.same(
    links.opened.map((l) => l.topic),
    ['head', 'block'],
  );
  links.live('head').emit(frameOf('head', 1));
  links.live('block').emit(frameOf('block', 1));
  links.live('head').emit(frameOf('head', 2));
  t.same(both.text(), [frameOf('head', 1), frameOf('block', 1), frameOf('head', 2)].map(String));
  t.throws(() => hub.add(fakeClient('none'), []), TypeError);
  t.equal(hub.clients(), 2, 'a refused add leaves nothing behind');
});

t.test('a slow client is cut past maxBufferedBytes while the others keep receiving', async (t) => {
  const delivered: string[] = [];
  const slowOnes: SseClient[] = [];
  const { hub, links } = testHub({
    onDelivered: (client) => delivered.push((client as FakeClient).name),
    onSlowClient: (client) => slowOnes.push(client),
  });
  const slow = fakeClient('slow');
  const steady = fakeClient('steady');
  const lagging = fakeClient('lagging');
  slow.writable = false;
  lagging.writable = false;
  hub.add(slow, ['head']);
  hub.add(steady, ['head']);
  const laggingListener = hub.add(lagging, ['head']);
  // 100-byte frames: after the first (taken by the socket), ten wait for `slow` = 1000 bytes, still allowed.
  const frames = Array.from({ length: 15 }, (_, i) => frameOf('head', i + 10, 100 - frameOf('head', i + 10).length));
  t.equal(frames[0]!.length, 100);
  const emit = (i: number) => links.live('head').emit(frames[i]!);
  for (let i = 0; i < 6; i++) emit(i);
  lagging.writable = true;
  laggingListener.drained();
  for (let i = 6; i < 11; i++) emit(i);
  t.equal(slow.closedWith, undefined, 'exactly maxBufferedBytes waiting is not yet too many');
  t.equal(hub.clients(), 3);
  emit(11);
  t.equal(slow.closedWith, 'slow');
  t.same(slowOnes, [slow]);
  t.equal(hub.clients(), 2);
  for (let i = 12; i < 15; i++) emit(i);

  t.same(slow.received, [frames[0]], 'the slow client got only what its socket took');
  t.same(steady.received, frames);
  t.same(lagging.received, frames, 'a client that drained in time got everything in order');
  t.equal(delivered.filter((n) => n === 'slow').length, 1, 'frames dropped with a slow client are not metered');
  t.equal(delivered.filter((n) => n === 'lagging').length, 15);
  t.same(hub.topicsOpen(), ['head']);
});

t.test('a drain that meets backpressure again keeps the rest held, in order', async (t) => {
  const { hub, links } = testHub({ maxBufferedBytes: 10_000 });
  const client = fakeClient('c');
  const listener = hub.add(client, ['head', 'block']);
  client.writable = false;
  const sent = [frameOf('head', 1), frameOf('block', 1), frameOf('head', 2), frameOf('block', 2), frameOf('head', 3)];
  for (const f of sent) links.live(f.includes('head') ? 'head' : 'block').emit(f);
  t.equal(client.received.length, 1, 'after a refused write, frames are held');
  // The socket takes one more and is full again: one frame per drain.
  listener.drained();
  t.equal(client.received.length, 2);
  client.writable = true;
  listener.drained();
  t.same(client.received, sent);
  listener.drained();
  t.same(client.received, sent, 'a spare drain writes nothing twice');
});

t.test('the heartbeat reaches clients that are not backpressured, and is no event', async (t) => {
  let deliveries = 0;
  const { hub, links, clock } = testHub({ maxBufferedBytes: 10_000, onDelivered: () => deliveries++ });
  const idle = fakeClient('idle');
  const blocked = fakeClient('blocked');
  const refuses = fakeClient('refuses');
  const idleListener = hub.add(idle, ['head']);
  const blockedListener = hub.add(blocked, ['block']);
  const refusesListener = hub.add(refuses, ['head']);
  t.equal(clock.active(), 1, 'one timer for the hub');
  blocked.writable = false;
  links.live('block').emit(frameOf('block', 1));
  clock.advance(14_999);
  t.same(idle.text(), []);
  refuses.writable = false;
  clock.advance(1);
  t.same(idle.text(), [KEEP_ALIVE]);
  t.same(blocked.text(), [String(frameOf('block', 1))], 'a backpressured client gets no comment');
  t.same(refuses.text(), [KEEP_ALIVE]);
  // The comment filled refuses' socket: the next frame waits for its drain.
  links.live('head').emit(frameOf('head', 1));
  t.same(refuses.text(), [KEEP_ALIVE]);
  t.same(idle.text(), [KEEP_ALIVE, String(frameOf('head', 1))]);
  refuses.writable = true;
  refusesListener.drained();
  t.same(refuses.text(), [KEEP_ALIVE, String(frameOf('head', 1))]);
  blocked.writable = true;
  blockedListener.drained();
  clock.advance(15_000);
  t.same(idle.text(), [KEEP_ALIVE, String(frameOf('head', 1)), KEEP_ALIVE]);
  t.same(blocked.text(), [String(frameOf('block', 1)), KEEP_ALIVE]);
  t.equal(deliveries, 3, 'the frames written count (block 1 once, head 1 twice); comments do not');
  idleListener.remove();
  blockedListener.remove();
  refusesListener.remove();
  t.equal(clock.active(), 0, 'the timer stops with the last client');
  hub.add(fakeClient('again'), ['head']);
  t.equal(clock.active(), 1, 'and starts with the next one');
});

t.test('the last listener leaving closes its link; a late frame of that link reaches nobody', async (t) => {
  const { hub, links } = testHub();
  const a = fakeClient('a');
  const b = fakeClient('b');
  const la = hub.add(a, ['head']);
  const lb = hub.add(b, ['head']);
  const first = links.live('head');
  la.remove();
  la.remove();
  t.equal(first.closed, false, 'b still listens');
  lb.remove();
  t.equal(first.closed, true);
  t.same(hub.topicsOpen(), []);
  const c = fakeClient('c');
  hub.add(c, ['head']);
  t.equal(links.opened.length, 2, 'a new listener opens a new link');
  first.emit(frameOf('head', 1));
  links.live('head').emit(frameOf('head', 2));
  t.same(c.text(), [String(frameOf('head', 2))]);
  t.same(a.received, []);
  t.equal(a.closedWith, undefined, 'a client that left is not closed by the hub');
});

t.test('a client leaving during a fan-out does not disturb the others', async (t) => {
  const listeners = new Map<SseClient, { remove(): void }>();
  const { hub, links } = testHub({
    // Metering that finds a balance exhausted ends that client from inside the delivery.
    onDelivered: (client) => {
      if ((client as FakeClient).name === 'broke') listeners.get(client)!.remove();
    },
  });
  const clients = ['x', 'broke', 'y'].map(fakeClient);
  for (const c of clients) listeners.set(c, hub.add(c, ['head']));
  const link = links.live('head');
  link.emit(frameOf('head', 1));
  link.emit(frameOf('head', 2));
  t.same(
    clients.map((c) => c.received.length),
    [2, 1, 2],
  );
  listeners.get(clients[0]!)!.remove();
  listeners.get(clients[2]!)!.remove();
  t.equal(link.closed, true);
});

t.test('close() ends every client and link; later clients are turned away', async (t) => {
  const { hub, links, clock } = testHub();
  const a = fakeClient('a');
  const b = fakeClient('b');
  const lb = hub.add(b, ['block']);
  // A server removes the listener when it ends the client's stream: harmless during close().
  const la = hub.add(a, ['head', 'block']);
  a.close = (reason) => {
    a.closedWith = reason;
    la.remove();
  };
  hub.close();
  t.equal(a.closedWith, 'shutdown');
  t.equal(b.closedWith, 'shutdown');
  t.ok(links.opened.every((l) => l.closed));
  t.equal(hub.clients(), 0);
  t.same(hub.topicsOpen(), []);
  t.equal(clock.active(), 0);
  lb.drained();
  const late = fakeClient('late');
  hub.add(late, ['head']).remove();
  t.equal(late.closedWith, 'shutdown');
  t.equal(links.opened.length, 2);
  hub.close();
});

t.test('a link that cannot open leaves no trace of the client', async (t) => {
  const links = fakeLinks();
  const clock = fakeTimers();
  const hub = createSseHub({
    openLink: (topic, onFrame, onStatus, onSlow) => {
      if (topic === 'bad') throw new TypeError('cannot open bad');
      return links.openLink(topic, onFrame, onStatus, onSlow);
    },
    heartbeatMs: 1000,
    maxBufferedBytes: 1000,
    openTimeoutMs: 1000,
    timers: clock.timers,
  });
  t.throws(() => hub.add(fakeClient('c'), ['head', 'bad']), /cannot open bad/);
  t.equal(hub.clients(), 0);
  t.same(hub.topicsOpen(), []);
  t.same(
    links.opened.map((l) => [l.topic, l.closed]),
    [['head', true]],
    'the link opened for it is closed again',
  );
  t.equal(clock.active(), 0);
});

t.test('a client starts once the upstream streams of all its topics are open; nothing reaches it before', async (t) => {
  const { hub, links, clock } = testHub({}, 'later');
  const both = fakeClient('both');
  hub.add(both, ['head', 'block']);
  t.equal(both.started, false, 'not started while no stream is open');
  links.live('head').status(true);
  links.live('head').emit(frameOf('head', 1));
  t.equal(both.started, false, 'nor with one of its two open');
  t.same(both.received, [], 'and an event of the open one does not reach it');
  clock.advance(15_000);
  t.same(both.received, [], 'nor does the heartbeat');
  const early = fakeClient('early');
  hub.add(early, ['head']);
  t.equal(early.started, true, 'a client joining an open topic starts at once');
  links.live('block').status(true);
  t.equal(both.started, true, 'started when the last of its streams opens');
  links.live('head').emit(frameOf('head', 2));
  links.live('block').emit(frameOf('block', 1));
  t.same(both.text(), [frameOf('head', 2), frameOf('block', 1)].map(String));
  t.same(early.text(), [String(frameOf('head', 2))]);

  // An open stream lost: started clients stay; a client joining meanwhile waits for it to reopen.
  links.live('head').status(false);
  const late = fakeClient('late');
  hub.add(late, ['head']);
  t.equal(late.started, false, 'a client joining a topic whose stream is being reopened waits');
  links.live('head').status(true);
  t.equal(late.started, true);
  links.live('head').emit(frameOf('head', 3));
  t.same(
    [both, early, late].map((c) => [c.closedWith, c.received.at(-1)?.toString()]),
    [
      [undefined, String(frameOf('head', 3))],
      [undefined, String(frameOf('head', 3))],
      [undefined, String(frameOf('head', 3))],
    ],
    'nobody was ended by the loss; all get the next event',
  );
  t.equal(links.opened.length, 2, 'one link per topic throughout');
  t.equal(clock.active(), 1, 'no open timeout left: only the heartbeat');
});

t.test('a client whose streams do not all open within openTimeoutMs is ended as unavailable, never started', async (t) => {
  const { hub, links, clock } = testHub({}, 'later');
  const open = fakeClient('open');
  hub.add(open, ['head']);
  links.live('head').status(true);
  const waiting = fakeClient('waiting');
  hub.add(waiting, ['head', 'block']);
  const lone = fakeClient('lone');
  hub.add(lone, ['block']);
  clock.advance(29_999);
  t.same([waiting.closedWith, lone.closedWith], [undefined, undefined]);
  clock.advance(1);
  t.same([waiting.closedWith, waiting.started, lone.closedWith, lone.started], ['unavailable', false, 'unavailable', false]);
  t.same(
    links.opened.map((l) => [l.topic, l.closed]),
    [
      ['head', false],
      ['block', true],
    ],
    "block's link closes with its last listener",
  );
  t.equal(open.closedWith, undefined, 'a started client of another topic is not touched');
  links.live('head').emit(frameOf('head', 1));
  t.same(
    open.text().filter((f) => f !== KEEP_ALIVE),
    [String(frameOf('head', 1))],
  );
  t.same(waiting.received, []);
  t.equal(hub.clients(), 1);
  const shut = fakeClient('shut');
  hub.add(shut, ['block']);
  hub.close();
  t.same([shut.closedWith, shut.started], ['shutdown', false], 'a waiting client is ended by close() too');
  t.equal(clock.active(), 0);
});

t.test('a relay client: no keep-alive, not counted, never ended as unavailable, told when its stream is lost and back', async (t) => {
  const delivered: string[] = [];
  const { hub, links, clock } = testHub(
    { onDelivered: (client, topic) => void delivered.push(`${(client as FakeClient).name} ${topic}`) },
    'later',
  );
  const statuses: string[] = [];
  const relay: FakeClient = Object.assign(fakeClient('relay'), {
    relay: true,
    linkStatus: (topic: string, open: boolean) => void statuses.push(`${topic} ${open}`),
  });
  const plain = fakeClient('plain');
  hub.add(relay, ['head']);
  hub.add(plain, ['head']);
  clock.advance(30_000);
  t.same(
    [plain.closedWith, relay.closedWith],
    ['unavailable', undefined],
    'the plain client is ended at openTimeoutMs; the relay waits on',
  );
  clock.advance(120_000);
  t.equal(relay.closedWith, undefined, 'for as long as it stays');
  t.equal(links.opened.length, 1, 'its link kept');
  links.live('head').status(true);
  t.equal(relay.started, true, 'started once the stream opens');
  const seen = fakeClient('seen');
  hub.add(seen, ['head']);
  links.live('head').emit(frameOf('head', 1));
  clock.advance(15_000);
  t.same(relay.text(), [String(frameOf('head', 1))], 'the relay got the frame and no keep-alive');
  t.same(seen.text(), [String(frameOf('head', 1)), KEEP_ALIVE], 'a plain client got both');
  t.same(delivered, ['seen head'], 'onDelivered counts the plain client only');
  links.live('head').status(false);
  links.live('head').status(true);
  t.same(statuses, ['head false', 'head true'], 'linkStatus tells a started client of each change');
  t.equal(seen.closedWith, undefined);
});

t.test('options are validated by name', async (t) => {
  const openLink = fakeLinks().openLink;
  t.throws(() => createSseHub({ openLink, heartbeatMs: 0, maxBufferedBytes: 1, openTimeoutMs: 1 }), /heartbeatMs must be a positive/);
  t.throws(
    () => createSseHub({ openLink, heartbeatMs: 1, maxBufferedBytes: 0.5, openTimeoutMs: 1 }),
    /maxBufferedBytes must be a positive integer/,
  );
  t.throws(() => createSseHub({ openLink, heartbeatMs: 1, maxBufferedBytes: 1, openTimeoutMs: 0 }), /openTimeoutMs must be a positive/);
});

t.test('parseEventTopics', async (t) => {
  t.same(parseEventTopics('head'), { ok: true, topics: ['head'] });
  t.same(parseEventTopics('head,block,head,finalized_checkpoint'), {
    ok: true,
    topics: ['head', 'block', 'finalized_checkpoint'],
  });
  t.same(parseEventTopics(''), { ok: false, message: 'topics must be a comma-separated list of names' });
  t.same(parseEventTopics('head,'), { ok: false, message: 'topics must be a comma-separated list of names' });
  t.same(parseEventTopics('head,Block'), { ok: false, message: 'invalid topic "Block"' });
  t.same(parseEventTopics('head&x=1'), { ok: false, message: 'invalid topic "head&x=1"' });
  t.same(parseEventTopics('h' + 'x'.repeat(64)).ok, false, 'names are at most 64 characters');
  const many = Array.from({ length: 33 }, (_, i) => `t${i}`).join(',');
  t.same(parseEventTopics(many), { ok: false, message: 'at most 32 topics' });
  t.equal(parseEventTopics(many.split(',').slice(0, 32).join(',')).ok, true);
});

/** A node's event endpoint: one stream per request, kept by topic, with the count of streams open per topic. */
async function eventNode(t: Test) {
  const streams = new Map<string, ServerResponse>();
  const requests = new Map<string, number>();
  const open = new Map<string, number>();
  let mostOpen = 0;
  const server = createServer((req, res) => {
    const topic = new URL(req.url!, 'http://x').searchParams.get('topics')!;
    const n = (requests.get(topic) ?? 0) + 1;
    requests.set(topic, n);
    // The first reconnection finds the node still down.
    if (n === 2) {
      res.writeHead(503).end();
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.flushHeaders();
    streams.set(topic, res);
    open.set(topic, (open.get(topic) ?? 0) + 1);
    mostOpen = Math.max(mostOpen, open.get(topic)!);
    res.on('close', () => open.set(topic, open.get(topic)! - 1));
  });
  const { port } = await listenOn(t, server);
  return {
    url: `http://127.0.0.1:${port}`,
    requests: (topic: string) => requests.get(topic) ?? 0,
    open: (topic: string) => open.get(topic) ?? 0,
    mostOpen: () => mostOpen,
    send(topic: string, slot: number) {
      streams.get(topic)!.write(`event: ${topic}\r\ndata: {"slot":"${slot}"}\r\n\r\n`);
    },
    drop(topic: string) {
      streams.get(topic)!.socket!.destroy();
    },
  };
}

t.test('end to end: the node drops and recovers while clients stay connected', async (t) => {
  const node = await eventNode(t);
  const upstream = createHttpUpstream({ url: node.url });
  const warnings: string[] = [];
  const hub = createSseHub({
    heartbeatMs: 60_000,
    maxBufferedBytes: 1 << 20,
    openTimeoutMs: 30_000,
    openLink: (topic, onFrame, onStatus) =>
      openSseLink({
        upstream,
        topic,
        onFrame,
        onStatus,
        log: (level, msg, fields) => void (level === 'warn' && warnings.push(`${msg} ${fields?.topic}`)),
        backoff: { initialMs: 20, maxMs: 100 },
      }),
  });
  t.teardown(() => {
    hub.close();
    upstream.close();
  });
  const a = fakeClient('a');
  const b = fakeClient('b');
  const c = fakeClient('c');
  const listeners = [hub.add(a, ['head']), hub.add(b, ['head', 'block']), hub.add(c, ['block'])];
  await waitFor(() => node.open('head') === 1 && node.open('block') === 1);
  // A client starts once the gateway has read the heads of all its topics' streams; events before that are not its.
  await waitFor(() => a.started && b.started && c.started);

  for (let slot = 1; slot <= 3; slot++) {
    node.send('head', slot);
    node.send('block', slot);
  }
  await waitFor(() => a.received.length === 3 && b.received.length === 6 && c.received.length === 3);
  node.drop('head');
  node.drop('block');
  await waitFor(() => ['head', 'block'].every((topic) => node.requests(topic) === 3 && node.open(topic) === 1));
  for (let slot = 4; slot <= 6; slot++) {
    node.send('head', slot);
    node.send('block', slot);
  }
  await waitFor(() => a.received.length === 6 && b.received.length === 12 && c.received.length === 6);

  const frames = (topic: string) => [1, 2, 3, 4, 5, 6].map((s) => `event: ${topic}\ndata: {"slot":"${s}"}\n\n`);
  t.same(a.text(), frames('head'));
  t.same(c.text(), frames('block'));
  t.same(
    b.text().filter((f) => f.startsWith('event: head')),
    frames('head'),
  );
  t.same(
    b.text().filter((f) => f.startsWith('event: block')),
    frames('block'),
  );
  t.same(
    [a, b, c].map((x) => x.closedWith),
    [undefined, undefined, undefined],
    'no client noticed the outage',
  );
  t.equal(node.mostOpen(), 1, 'never more than one upstream stream per topic');
  const lost = ['sse stream lost block', 'sse stream lost block', 'sse stream lost head', 'sse stream lost head'];
  t.same(warnings.sort(), lost, 'each topic: the drop, then the 503');

  for (const l of listeners) l.remove();
  await waitFor(() => node.open('head') === 0 && node.open('block') === 0);
  t.same(hub.topicsOpen(), []);
});
