/**
 * The feeds relay: the main thread's feeds (one upstream subscription per kind and params, on a real anvil behind
 * a relay the tests cut and restore) serving worker threads through serveFeedRelay, each worker's hub over
 * connectFeedRelay. Real worker threads (from dist/: build first) for the whole road, MessageChannel pairs in
 * this thread for the relay's own rules.
 */
import t, { type Test } from 'tap';
import { MessageChannel, type MessagePort } from 'node:worker_threads';
import { type FeedRelayServer, serveFeedRelay } from '../../src/fanout/feed-relay.js';
import type { FeedListener, Feeds } from '../../src/fanout/feeds.js';
import { connectFeedRelay } from '../../src/fanout/remote-feeds.js';
import { ECHO_TOPIC } from '../support/contract.js';
import { closedPort } from '../support/fake-upstream.js';
import { type RelayWorker, relayWorker } from '../support/relay-workers.js';
import { tcpRelay } from '../support/tcp-relay.js';
import { anvilFor, blockNumber, DEV_ADDRESS, feedsFor, mine, nodeAt, numbersOf, recorder, sleep } from './feed-harness.js';
import { waitFor } from '../support/wait-for.js';

async function relayedAnvil(t: Test) {
  const node = await anvilFor(t);
  const relay = await tcpRelay(t, { port: node.port });
  return { node, relay, upstream: nodeAt(`relay-${relay.port}`, relay.wsUrl, relay.url) };
}

const range = (from: number, to: number): number[] => Array.from({ length: to - from + 1 }, (_, i) => from + i);

interface Received {
  sub: string[];
  results: Array<{ number: string; hash: string }>;
  closes: string[];
}

const numbersIn = (r: Received): number[] => r.results.map((h) => Number(h.number));

/** What the workers' subscribers received, once `done` holds for every one of them (asked every 20 ms). */
async function untilReceived(workers: RelayWorker[], what: string, done: (numbers: number[]) => boolean): Promise<Received[]> {
  let all: Received[] = [];
  const check = async (): Promise<boolean> => {
    all = (await Promise.all(workers.map((w) => w.ask<Received[]>({ cmd: 'received' })))).flat();
    return all.every((r) => done(numbersIn(r)));
  };
  await waitFor(check, { what, ms: 15_000 });
  return all;
}

/** A relay server over `feeds` as chain 'dev', kept in `servers`. */
function serveDev(feeds: Feeds, servers: FeedRelayServer[]) {
  return (port: MessagePort): FeedRelayServer => {
    const server = serveFeedRelay(port, (chain) => (chain === 'dev' ? feeds : null));
    servers.push(server);
    return server;
  };
}

/** A relay in this thread: the worker's end as a FeedRelayClient, the main's end as a server. */
function channel(t: Test, feeds: Feeds, opts: { stateIntervalMs?: number } = {}) {
  const { port1, port2 } = new MessageChannel();
  const server = serveFeedRelay(port1, (chain) => (chain === 'dev' ? feeds : null), opts);
  const client = connectFeedRelay(port2);
  t.teardown(() => {
    client.close();
    server.close();
  });
  return { server, client, remote: client.feeds('dev') };
}

t.test('2 worker threads, 40 subscribers each: one upstream subscription, every head once and in order across a cut', async (t) => {
  const { node, relay, upstream } = await relayedAnvil(t);
  const { feeds } = feedsFor(t, { nodes: [upstream], maxOutageMs: 60_000, lingerMs: 100 });
  const servers: FeedRelayServer[] = [];
  const workers = [relayWorker(t, 'feeds', serveDev(feeds, servers)), relayWorker(t, 'feeds', serveDev(feeds, servers))];
  const direct = recorder();
  const directHold = feeds.subscribe('newHeads', undefined, direct);

  for (const w of workers) {
    const { ids, failures } = await w.ask<{ ids: string[]; failures: string[] }>({ cmd: 'subscribe', conns: 40, kind: 'newHeads' });
    t.equal(ids.length, 40, 'every subscribe on the worker got an id');
    t.same(failures, []);
  }
  t.same(
    servers.map((s) => s.holds()),
    [1, 1],
    'each worker holds one relay hold for its 40 subscribers',
  );
  t.equal(feeds.upstreamSubscriptions(), 1, 'the main feeds hold one upstream subscription');
  t.equal(relay.requests('eth_subscribe'), 1, 'the node saw one eth_subscribe');

  const start = await blockNumber(node.url);
  await mine(node.url, 3);
  await untilReceived(workers, 'three heads', (n) => n.length === 3);

  relay.cut();
  await waitFor(() => feeds.upstreamSubscriptions() === 0, { what: 'the loss noticed', ms: 10_000 });
  for (let i = 0; i < 4; i++) {
    await mine(node.url);
    await sleep(200);
  }
  relay.restore();
  await untilReceived(workers, 'the heads mined during the cut', (n) => n.includes(start + 7));
  await mine(node.url, 3);
  const last = start + 10;
  await untilReceived(workers, 'the last head', (n) => n.includes(last));
  await waitFor(() => numbersOf(direct).includes(last), { what: 'the last head, directly', ms: 10_000 });
  await sleep(100); // anything late or doubled would show up here

  const all = await untilReceived(workers, 'the answers', () => true);
  t.equal(all.length, 80);
  t.same(numbersOf(direct), range(start + 1, last), 'the direct listener: every number once, in order');
  t.same(
    all.filter((r) => JSON.stringify(numbersIn(r)) !== JSON.stringify(range(start + 1, last))).length,
    0,
    'every relayed subscriber: the same',
  );
  t.same(
    all.filter((r) => JSON.stringify(r.results) !== JSON.stringify(direct.parsed())).length,
    0,
    'and the very heads the direct listener got',
  );
  t.equal(new Set(all.map((r) => r.sub[0])).size, 2, 'one subscription id per worker (each its own hub)');
  t.same(
    all.flatMap((r) => r.closes),
    [],
    'no subscriber was closed',
  );
  t.equal(relay.requests('eth_subscribe'), 2, 'one upstream subscription again after the cut');

  directHold.remove();
  await workers[0]!.ask({ cmd: 'unsubscribeAll' });
  await waitFor(() => servers[0]!.holds() === 0, { what: 'the first worker let go', ms: 10_000 });
  await mine(node.url);
  await untilReceived([workers[1]!], 'the other worker still gets heads', (n) => n.includes(last + 1));
  await sleep(100);
  t.same(
    (await untilReceived([workers[0]!], 'the answers', () => true)).filter((r) => numbersIn(r).includes(last + 1)).length,
    0,
    'the worker that left got no more',
  );
  t.equal(relay.requests('eth_unsubscribe'), 0, 'its subscribers keep the upstream subscription');
  await workers[1]!.ask({ cmd: 'unsubscribeAll' });
  await waitFor(() => relay.requests('eth_unsubscribe') === 1, { what: 'eth_unsubscribe at the node', ms: 10_000 });
  t.equal(feeds.upstreamSubscriptions(), 0, 'the last unsubscribe on every worker ended the upstream subscription');
  t.same(
    servers.map((s) => s.holds()),
    [0, 0],
  );
});

t.test('a worker thread that dies lets go of its holds: the upstream subscription ends with the last one', async (t) => {
  const { node, relay, upstream } = await relayedAnvil(t);
  const { feeds } = feedsFor(t, { nodes: [upstream], maxOutageMs: 60_000, lingerMs: 100 });
  const servers: FeedRelayServer[] = [];
  const workers = [relayWorker(t, 'feeds', serveDev(feeds, servers)), relayWorker(t, 'feeds', serveDev(feeds, servers))];
  for (const w of workers) await w.ask({ cmd: 'subscribe', conns: 5, kind: 'newHeads' });
  await workers[0]!.ask({ cmd: 'subscribe', conns: 5, kind: 'logs', params: { topics: [ECHO_TOPIC] } });
  t.equal(relay.requests('eth_subscribe'), 2, 'one upstream subscription per kind and params');

  await workers[0]!.terminate();
  await waitFor(() => servers[0]!.holds() === 0, { what: 'the dead worker let go', ms: 10_000 });
  await waitFor(() => relay.requests('eth_unsubscribe') === 1, { what: 'the logs subscription ended', ms: 10_000 });
  t.equal(feeds.upstreamSubscriptions(), 1, 'the newHeads subscription stays for the live worker');
  const start = await blockNumber(node.url);
  await mine(node.url);
  const got = await untilReceived([workers[1]!], 'a head on the live worker', (n) => n.includes(start + 1));
  t.equal(got.length, 5);

  await workers[1]!.terminate();
  await waitFor(() => relay.requests('eth_unsubscribe') === 2, { what: 'the newHeads subscription ended', ms: 10_000 });
  t.equal(feeds.upstreamSubscriptions(), 0);
});

t.test('a worker holds one relay hold per kind and params, however many of its listeners share it', async (t) => {
  const { node, relay, upstream } = await relayedAnvil(t);
  const { feeds } = feedsFor(t, { nodes: [upstream], maxOutageMs: 60_000, lingerMs: 100 });
  const { server, remote } = channel(t, feeds);
  const heads = Array.from({ length: 3 }, recorder);
  const sameLogs = Array.from({ length: 2 }, recorder);
  const otherLogs = recorder();
  const holds = [
    ...heads.map((l) => remote.subscribe('newHeads', undefined, l)),
    remote.subscribe('logs', { address: DEV_ADDRESS, topics: [ECHO_TOPIC] }, sameLogs[0]!),
    remote.subscribe('logs', { topics: [ECHO_TOPIC], address: DEV_ADDRESS }, sameLogs[1]!),
    remote.subscribe('logs', { topics: [ECHO_TOPIC] }, otherLogs),
  ];
  for (const h of holds) t.equal(await h.whenLive(10_000), null);
  t.equal(server.holds(), 3, 'newHeads, and one per distinct logs filter (key order does not matter)');
  t.equal(relay.requests('eth_subscribe'), 3);
  t.ok(
    holds.every((h) => h.live()),
    'live() on every hold',
  );

  const start = await blockNumber(node.url);
  await mine(node.url, 2);
  await waitFor(() => heads.every((l) => l.texts.length === 2), { what: 'two heads each', ms: 10_000 });
  await sleep(50);
  t.same(
    heads.map(numbersOf),
    heads.map(() => [start + 1, start + 2]),
    'each listener gets each head once',
  );

  holds[0]!.remove();
  holds[1]!.remove();
  t.equal(server.holds(), 3, 'the hold stays while a listener is left');
  holds[2]!.remove();
  await waitFor(() => server.holds() === 2, { what: 'the newHeads hold released', ms: 10_000 });
  for (const h of holds) h.remove();
  await waitFor(() => server.holds() === 0, { what: 'every hold released', ms: 10_000 });
  await waitFor(() => relay.requests('eth_unsubscribe') === 3, { what: 'every upstream subscription ended', ms: 10_000 });
});

t.test('whenLive, live(), head() and upstreamSubscriptions() mirror the main feeds', async (t) => {
  const { node, relay, upstream } = await relayedAnvil(t);
  const { feeds } = feedsFor(t, { nodes: [upstream], maxOutageMs: 60_000 });
  const { remote } = channel(t, feeds, { stateIntervalMs: 50 });
  t.equal(remote.head(), null, 'no head before any');
  t.equal(remote.upstreamSubscriptions(), 0);
  const listener = recorder();
  const changes: boolean[] = [];
  const hold = remote.subscribe('newHeads', undefined, { ...listener, liveChanged: (live) => void changes.push(live) });
  t.notOk(hold.live(), 'not live before the main side says so');
  t.equal(await hold.whenLive(10_000), null, 'whenLive: null once the upstream subscription opened');
  await waitFor(() => hold.live(), { what: 'live() mirrored', ms: 10_000 });
  t.equal(await hold.whenLive(1), null, 'at once while live');
  await mine(node.url, 2);
  await waitFor(() => listener.texts.length === 2, { what: 'two heads', ms: 10_000 });
  await waitFor(() => remote.head()?.number === feeds.head()?.number, { what: 'head mirrored', ms: 10_000 });
  t.same(remote.head(), feeds.head(), "head() is the main feeds' head");
  t.equal(remote.upstreamSubscriptions(), 1, "upstreamSubscriptions() is the main feeds' count");

  // One more upstream subscription made on the main thread only reaches the mirror through the state interval.
  const direct = feeds.subscribe('newPendingTransactions', undefined, recorder());
  t.equal(await direct.whenLive(10_000), null);
  await waitFor(() => remote.upstreamSubscriptions() === 2, { what: 'count mirrored', ms: 10_000 });

  relay.cut();
  await waitFor(() => !hold.live(), { what: 'the loss mirrored', ms: 10_000 });
  t.same(changes, [true, false], 'liveChanged passed on');
  relay.restore();
  await waitFor(() => hold.live(), { what: 'live again', ms: 10_000 });
  t.same(changes, [true, false, true]);

  const down = await closedPort();
  const dead = feedsFor(t, { nodes: [nodeAt(`down-${down}`, `ws://127.0.0.1:${down}`, `http://127.0.0.1:${down}`)], maxOutageMs: 60_000 });
  const deadRemote = channel(t, dead.feeds).remote;
  const deadHold = deadRemote.subscribe('newHeads', undefined, recorder());
  t.equal(await deadHold.whenLive(10_000), 'the upstream WebSocket could not be reached', "the main feeds' reason");
  t.notOk(deadHold.live());
});

t.test('a loss on the main side reaches every local listener; close() releases every hold', async (t) => {
  const { relay, upstream } = await relayedAnvil(t);
  const { feeds } = feedsFor(t, { nodes: [upstream], maxOutageMs: 500 });
  const { server, client, remote } = channel(t, feeds);
  const listeners = Array.from({ length: 4 }, recorder);
  const holds = listeners.map((l) => remote.subscribe('newHeads', undefined, l));
  t.equal(await holds[0]!.whenLive(10_000), null);
  await sleep(600); // past maxOutageMs with the link up: nothing lost
  relay.cut();
  await waitFor(() => listeners.every((l) => l.losses.length === 1), { what: 'every listener lost', ms: 10_000 });
  t.match(listeners[0]!.losses[0], /upstream unavailable for more than 0.5 s/, "the main feeds' reason");
  t.equal(server.holds(), 0, 'the hold is gone on the main side');
  t.notOk(holds[0]!.live());
  t.equal(await holds[0]!.whenLive(1000), 'upstream subscription lost');

  relay.restore();
  const later = recorder();
  const laterHold = remote.subscribe('newHeads', undefined, later);
  t.equal(await laterHold.whenLive(10_000), null, 'a new subscribe makes a new hold');
  t.equal(server.holds(), 1);
  t.same(
    listeners.map((l) => l.losses.length),
    [1, 1, 1, 1],
    'each lost once',
  );

  const unserved = channel(t, feeds).client.feeds('nowhere');
  const stray = recorder();
  unserved.subscribe('newHeads', undefined, stray);
  await waitFor(() => stray.losses.length === 1, { what: 'a chain the main thread lacks: lost', ms: 10_000 });
  t.match(stray.losses[0], /no upstream subscriptions on chain nowhere/);

  remote.close();
  await waitFor(() => server.holds() === 0, { what: 'close() released the hold', ms: 10_000 });
  t.throws(() => remote.subscribe('newHeads', undefined, recorder()), /subscribe after close/);
  t.same(later.losses, [], 'close() tells no listener');
  t.not(client.feeds('dev'), remote, 'a closed chain is made anew on the next ask');
});

/** Feeds in this thread that the test drives: every subscribe is live at once; notify() reaches every listener. */
function drivenFeeds() {
  const listeners = new Set<FeedListener>();
  const feeds: Feeds = {
    subscribe(_kind, _params, listener) {
      listeners.add(listener);
      return { remove: () => listeners.delete(listener), live: () => true, whenLive: async () => null };
    },
    upstreamSubscriptions: () => listeners.size,
    head: () => null,
    deliveredLogs: async () => [],
    close: () => listeners.clear(),
  };
  const notify = (json: string): void => {
    for (const l of [...listeners]) l.notify(json);
  };
  return { feeds, listeners, notify };
}

t.test(
  'a worker that does not keep up: past maxBacklogBytes its subscribers are closed saying so, nothing more is queued for it',
  async (t) => {
    const MAX = 1 << 20;
    const driven = drivenFeeds();
    const servers: FeedRelayServer[] = [];
    const logged: string[] = [];
    const worker = relayWorker(t, 'feeds', (port) => {
      const server = serveFeedRelay(port, (chain) => (chain === 'dev' ? driven.feeds : null), {
        maxBacklogBytes: MAX,
        log: (_level, msg) => logged.push(msg),
      });
      servers.push(server);
      return server;
    });
    const server = servers[0]!;
    const subscribed = await worker.ask<{ ids: string[] }>({ cmd: 'subscribe', conns: 3, kind: 'newHeads' });
    t.equal(subscribed.ids.length, 3, 'three subscribers on the worker');
    t.equal(server.holds(), 1, 'sharing one hold');

    // A notification the worker keeps up with is acknowledged: the backlog goes back to nothing.
    driven.notify('{"n":0}');
    await waitFor(() => server.backlogBytes() === 0, { what: 'the first notification acknowledged', ms: 10_000 });

    const blocked = worker.ask({ cmd: 'block', ms: 1500 });
    await waitFor(() => worker.busy(), { what: 'the worker busy', ms: 10_000 });
    const json = JSON.stringify({ n: 1, pad: 'ab'.repeat(32 * 1024) });
    for (let i = 0; i < 64; i++) driven.notify(json);
    t.equal(server.holds(), 0, '4 MiB offered to a busy worker: its hold is dropped once 1 MiB is queued');
    t.equal(driven.listeners.size, 0, 'its listener is off the feed, so nothing more is queued for it');
    t.ok(server.backlogBytes() <= MAX + json.length, `the queue stopped at the bound (${server.backlogBytes()} bytes)`);
    t.same(logged, ['feeds relay: a worker thread too slow for its notifications; its subscriptions dropped']);

    await blocked;
    let received: Received[] = [];
    const allClosed = async (): Promise<boolean> => {
      received = await worker.ask<Received[]>({ cmd: 'received' });
      return received.every((r) => r.closes.length > 0);
    };
    await waitFor(allClosed, { what: 'every client closed', ms: 10_000 });
    const reason = '1011 worker thread too slow: over 1024 KB of notifications unread';
    t.same(
      received.map((r) => r.closes),
      [[reason], [reason], [reason]],
      'each subscriber closed once, 1011, with the reason',
    );
    const queued = Math.floor(MAX / json.length) + 1;
    t.same(
      received.map((r) => r.results.length),
      [1 + queued, 1 + queued, 1 + queued],
      `each got the notifications queued up to the bound (1 + ${queued}), and none after`,
    );

    const again = await worker.ask<{ ids: string[] }>({ cmd: 'subscribe', conns: 1, kind: 'newHeads' });
    t.equal(again.ids.length, 1, 'drained, the worker may subscribe again');
    driven.notify('{"n":2}');
    await waitFor(() => server.backlogBytes() === 0, { what: 'acknowledged', ms: 10_000 });
    const last = await worker.ask<Received[]>({ cmd: 'received' });
    t.same(last[3]!.results, [{ n: 2 }], 'and is served');
  },
);

t.test(
  "an owner's subscribers on two workers: every notification reaches both, each charged or closed; none left open once unpaid",
  async (t) => {
    // The case once seen end to end: one worker's subscriber had one notification, the other's had more and used
    // up the balance. Here worker A is held busy after its first notification while B charges the next; A is
    // closed at the notification it then cannot pay, not left open with its one notification.
    const PRICE = 10;
    const balance = new Int32Array(new SharedArrayBuffer(4));
    Atomics.store(balance, 0, 3 * PRICE + PRICE / 2);
    const driven = drivenFeeds();
    const servers: FeedRelayServer[] = [];
    const data = { balance: balance.buffer as SharedArrayBuffer, price: PRICE };
    const [a, b] = [0, 1].map(() => relayWorker(t, 'feeds', serveDev(driven.feeds, servers), data)) as [RelayWorker, RelayWorker];
    for (const w of [a, b])
      t.equal((await w.ask<{ ids: string[] }>({ cmd: 'subscribe', conns: 1, kind: 'newHeads', owner: 1 })).ids.length, 1);
    const got = async (w: RelayWorker): Promise<Received> => (await w.ask<Received[]>({ cmd: 'received' }))[0]!;

    driven.notify('{"n":1}');
    await untilReceived([a, b], 'the first notification on both', (n) => n.length === 1);
    const blocked = a.ask({ cmd: 'block', ms: 1000 });
    await waitFor(() => a.busy(), { what: 'A busy', ms: 10_000 });
    driven.notify('{"n":2}');
    await untilReceived([b], 'the second on B', (n) => n.length === 2);
    t.equal(Atomics.load(balance, 0), PRICE / 2, 'three notifications paid: half a price left');
    t.same((await got(b)).closes, [], 'B, paid for both, is open');

    await blocked;
    await waitFor(async () => (await got(a)).closes.length > 0, { what: 'A closed', ms: 10_000 });
    t.same(
      [(await got(a)).closes, (await got(a)).results.length],
      [['1008 Insufficient RU balance'], 1],
      'A, busy while B spent the balance, is closed at the notification it then cannot pay, after its one',
    );
    driven.notify('{"n":3}');
    await waitFor(async () => (await got(b)).closes.length > 0, { what: 'B closed', ms: 10_000 });
    t.same([(await got(b)).closes, (await got(b)).results.length], [['1008 Insufficient RU balance'], 2], 'B at its next one');
    t.equal(Atomics.load(balance, 0), PRICE / 2, 'nothing more was taken: exactly what was delivered was charged');
  },
);

t.test("a worker asks the main thread's memory of delivered logs; none from a chain without feeds or once closed", async (t) => {
  const driven = drivenFeeds();
  const asked: Array<[unknown, number]> = [];
  const block = { number: 7, hash: '0xb7', logs: ['{"logIndex":"0x0"}'] };
  driven.feeds.deliveredLogs = async (params, from) => {
    asked.push([params, from]);
    return [block];
  };
  const { client, remote } = channel(t, driven.feeds);
  t.same(await remote.deliveredLogs({ address: '0x1' }, 5), [block], "the main thread's answer");
  t.same(asked, [[{ address: '0x1' }, 5]], 'with the filter and the block asked');
  t.same(await client.feeds('other').deliveredLogs({}, 1), [], 'a chain without feeds: none');
  const pending = remote.deliveredLogs({}, 1);
  remote.close();
  t.same(await pending, [], 'an ask in flight when the chain closes: none');
  t.same(await remote.deliveredLogs({}, 1), [], 'after close: none');
});
