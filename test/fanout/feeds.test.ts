/**
 * The chain's feeds against real anvil nodes, reached through a relay the tests cut and restore:
 * one upstream subscription per feed whatever the listeners, every head and log once and in order
 * across upstream loss and node switches, reorgs passed on, lingering and outage limits.
 */
import t, { type Test } from 'tap';
import type { Timers } from '../../src/upstreams/ws-link.js';
import { ECHO_TOPIC } from '../support/contract.js';
import { closedPort } from '../support/fake-upstream.js';
import { tcpRelay } from '../support/tcp-relay.js';
import {
  anvilFor,
  blockAt,
  blockNumber,
  call,
  deployEcho,
  echo,
  feedsFor,
  headerOf,
  mine,
  nodeAt,
  numbersOf,
  recorder,
  type Recorder,
  sleep,
} from './feed-harness.js';
import { waitFor } from '../support/wait-for.js';

async function relayedAnvil(t: Test) {
  const node = await anvilFor(t);
  const relay = await tcpRelay(t, { port: node.port });
  return { node, relay, upstream: nodeAt(`relay-${relay.port}`, relay.wsUrl, relay.url) };
}

const range = (from: number, to: number): number[] => Array.from({ length: to - from + 1 }, (_, i) => from + i);

/** Every recorder got exactly the same notification texts. */
function sameForAll(t: Test, recorders: Recorder[], what: string): void {
  const first = JSON.stringify(recorders[0]!.texts);
  t.equal(recorders.filter((r) => JSON.stringify(r.texts) !== first).length, 0, `${what}: every listener got the identical sequence`);
}

async function expectHeadsFrom(t: Test, url: string, heads: Array<Record<string, unknown>>): Promise<void> {
  const mismatched: number[] = [];
  for (const head of heads) {
    const block = await blockAt(url, Number(head.number));
    if (JSON.stringify(head) !== JSON.stringify(headerOf(block))) mismatched.push(Number(head.number));
  }
  t.same(mismatched, [], "each head is the node's block of that number, header fields only");
}

t.test('1,000 listeners share one upstream subscription and get identical ordered heads', async (t) => {
  const { node, relay, upstream } = await relayedAnvil(t);
  const { feeds } = feedsFor(t, { nodes: [upstream], maxOutageMs: 60_000 });
  const listeners = Array.from({ length: 1000 }, recorder);
  for (const l of listeners) feeds.subscribe('newHeads', undefined, l);
  await waitFor(() => feeds.upstreamSubscriptions() === 1, { what: 'the upstream subscription', ms: 10_000 });
  const start = await blockNumber(node.url);
  await mine(node.url, 5);
  await waitFor(() => listeners.every((l) => l.texts.length === 5), { what: 'five heads', ms: 10_000 });
  t.equal(relay.requests('eth_subscribe'), 1, 'the node saw exactly one eth_subscribe');
  t.equal(relay.unreadableFrames, 0, 'every frame to the node was read');
  t.same(numbersOf(listeners[0]!), range(start + 1, start + 5), 'heads in order, each once');
  sameForAll(t, listeners, '1,000 listeners');
  await expectHeadsFrom(t, node.url, listeners[0]!.parsed());
  t.same(feeds.head(), { number: start + 5, hash: listeners[0]!.parsed()[4]!.hash }, 'head() is the latest head delivered');
});

t.test('an upstream cut while blocks are mined: every listener gets every number once, in order', async (t) => {
  const { node, relay, upstream } = await relayedAnvil(t);
  const { feeds, logs } = feedsFor(t, { nodes: [upstream], maxOutageMs: 60_000 });
  const listeners = Array.from({ length: 100 }, recorder);
  for (const l of listeners) feeds.subscribe('newHeads', undefined, l);
  await waitFor(() => feeds.upstreamSubscriptions() === 1, { what: 'the upstream subscription', ms: 10_000 });
  const start = await blockNumber(node.url);
  await mine(node.url, 3);
  await waitFor(() => listeners[0]!.texts.length === 3, { what: 'three heads', ms: 10_000 });

  relay.cut();
  await waitFor(() => feeds.upstreamSubscriptions() === 0, { what: 'the loss noticed', ms: 10_000 });
  for (let i = 0; i < 4; i++) {
    await mine(node.url);
    await sleep(250);
  }
  relay.restore();
  // Made up for as soon as the link is back, before any new block announces the gap.
  await waitFor(() => listeners.every((l) => numbersOf(l).includes(start + 7)), { what: 'the heads mined during the cut', ms: 10_000 });
  t.same(numbersOf(listeners[0]!), range(start + 1, start + 7), 'the heads mined during the cut, backfilled');
  await mine(node.url, 3);
  const last = start + 10;
  await waitFor(() => listeners.every((l) => numbersOf(l).includes(last)), { what: 'the last head', ms: 10_000 });
  await sleep(100); // anything late or doubled would show up here

  t.same(numbersOf(listeners[0]!), range(start + 1, last), 'numbers continue across the cut, none missing, none twice');
  sameForAll(t, listeners, 'after the cut');
  await expectHeadsFrom(t, node.url, listeners[0]!.parsed());
  t.equal(relay.requests('eth_subscribe'), 2, 'one new upstream subscription after the cut');
  t.ok(
    logs.some((l) => l.startsWith('warn upstream subscription link lost')),
    'the loss is logged',
  );
  t.ok(
    logs.some((l) => l.startsWith('info upstream subscriptions restored')),
    'the recovery is logged',
  );
  t.notOk(
    logs.some((l) => l.includes(relay.wsUrl)),
    'the log names the node by label, never by URL',
  );
});

t.test('heads announced while a backfill is in flight wait behind it; those it already sent are not sent twice', async (t) => {
  const { node, relay, upstream } = await relayedAnvil(t);
  let slowMs = 0;
  const slowCalls: string[] = [];
  const slowUpstream = {
    ...upstream,
    call: async (method: string, params: unknown[]) => {
      if (slowMs > 0) {
        slowCalls.push(method);
        await sleep(slowMs);
      }
      return upstream.call(method, params);
    },
  };
  const { feeds } = feedsFor(t, { nodes: [slowUpstream], maxOutageMs: 60_000 });
  const listener = recorder();
  const deliveredAt = new Map<number, number>();
  feeds.subscribe('newHeads', undefined, {
    notify(json) {
      listener.notify(json);
      deliveredAt.set(Number((JSON.parse(json) as { number: string }).number), Date.now());
    },
    lost: listener.lost,
  });
  await waitFor(() => feeds.upstreamSubscriptions() === 1, { what: 'the upstream subscription', ms: 10_000 });
  const start = await blockNumber(node.url);
  await mine(node.url, 2);
  await waitFor(() => listener.texts.length === 2, { what: 'two heads', ms: 10_000 });

  relay.cut();
  await waitFor(() => feeds.upstreamSubscriptions() === 0, { what: 'the loss noticed', ms: 10_000 });
  await mine(node.url, 3);
  slowMs = 400;
  relay.restore();
  await waitFor(() => relay.requests('eth_subscribe') === 2, { what: 'subscribed again', ms: 10_000 });
  // Announced live on the new subscription while its backfill still waits on HTTP.
  await mine(node.url, 3);
  const minedAt = Date.now();
  await waitFor(() => numbersOf(listener).includes(start + 8), { what: 'the last head', ms: 10_000 });
  await sleep(100);
  t.ok(slowCalls.length > 0, 'the backfill went through the slow HTTP');
  t.ok(deliveredAt.get(start + 3)! > minedAt, 'the first missed head was delivered after the later heads were announced');
  t.same(numbersOf(listener), range(start + 1, start + 8), 'still every number once, in order');
  await expectHeadsFrom(t, node.url, listener.parsed());
});

t.test('logs across a cut: every matching log once, in order; feeds are per distinct filter', async (t) => {
  const { node, relay, upstream } = await relayedAnvil(t);
  const address = await deployEcho(node.url);
  const { feeds } = feedsFor(t, { nodes: [upstream], maxOutageMs: 60_000 });
  const listeners = Array.from({ length: 20 }, recorder);
  for (const l of listeners) feeds.subscribe('logs', { address, topics: [ECHO_TOPIC] }, l);
  // The same filter written in another key order is the same feed.
  const reordered = recorder();
  feeds.subscribe('logs', { topics: [ECHO_TOPIC], address }, reordered);
  const elsewhere = recorder();
  feeds.subscribe('logs', { address, topics: ['0x' + 'ab'.repeat(32)] }, elsewhere);
  await waitFor(() => feeds.upstreamSubscriptions() === 2, { what: 'two upstream subscriptions', ms: 10_000 });
  t.equal(relay.requests('eth_subscribe'), 2, 'one upstream subscription per distinct filter');

  const payloads = range(1, 12).map((i) => `0x${i.toString(16).padStart(2, '0')}`);
  for (const data of payloads.slice(0, 3)) await echo(node.url, address, data);
  await waitFor(() => listeners[0]!.texts.length === 3, { what: 'three logs', ms: 10_000 });

  relay.cut();
  await waitFor(() => feeds.upstreamSubscriptions() === 0, { what: 'the loss noticed', ms: 10_000 });
  await echo(node.url, address, payloads[3]!);
  // Two logs in one block, so the block's logs are told apart by logIndex.
  await call(node.url, 'evm_setAutomine', [false]);
  await echo(node.url, address, payloads[4]!, false);
  await echo(node.url, address, payloads[5]!, false);
  await mine(node.url);
  await call(node.url, 'evm_setAutomine', [true]);
  await echo(node.url, address, payloads[6]!);
  await sleep(500);
  relay.restore();
  await waitFor(() => feeds.upstreamSubscriptions() === 2, { what: 'resubscribed', ms: 10_000 });
  for (const data of payloads.slice(7)) await echo(node.url, address, data);
  await waitFor(() => listeners.every((l) => l.texts.length >= payloads.length), { what: 'every log', ms: 10_000 });
  await sleep(100);

  const got = listeners[0]!.parsed();
  t.same(
    got.map((l) => l.data),
    payloads,
    'every payload once, in order',
  );
  sameForAll(t, [...listeners, reordered], 'logs listeners');
  const onNode = (await call(node.url, 'eth_getLogs', [{ address, topics: [ECHO_TOPIC], fromBlock: '0x0' }])) as Array<
    Record<string, unknown>
  >;
  t.same(
    got.map((l) => `${l.blockHash}:${l.logIndex}:${l.transactionHash}`),
    onNode.map((l) => `${l.blockHash}:${l.logIndex}:${l.transactionHash}`),
    "the logs are the node's own, block hash and index included",
  );
  t.ok(new Set(got.map((l) => l.blockNumber)).size < got.length, 'one block held two of them');
  t.equal(elsewhere.texts.length, 0, 'a filter matching nothing got nothing');
  t.equal(relay.requests('eth_subscribe'), 4, 'both feeds subscribed again after the cut, once each');
});

t.test('the last listener leaving drops the upstream subscription within 5 s; a quick return reuses it', async (t) => {
  const { node, relay, upstream } = await relayedAnvil(t);
  const { feeds } = feedsFor(t, { nodes: [upstream], maxOutageMs: 60_000 });
  const first = recorder();
  const hold = feeds.subscribe('newHeads', undefined, first);
  await waitFor(() => feeds.upstreamSubscriptions() === 1, { what: 'the upstream subscription', ms: 10_000 });
  hold.remove();
  const second = recorder();
  const holdAgain = feeds.subscribe('newHeads', undefined, second);
  await sleep(2500);
  t.equal(relay.requests('eth_unsubscribe'), 0, 'a return within the linger keeps the subscription');
  await mine(node.url);
  await waitFor(() => second.texts.length === 1, { what: 'a head for the returning listener', ms: 10_000 });
  t.equal(relay.requests('eth_subscribe'), 1, 'and no new one was opened');
  t.equal(first.texts.length, 0, 'the listener that left gets nothing');

  const left = Date.now();
  holdAgain.remove();
  await waitFor(() => relay.requests('eth_unsubscribe') === 1, { what: 'eth_unsubscribe at the node', ms: 5000 });
  const took = Date.now() - left;
  t.ok(took >= 1500, `it lingered first (${took} ms)`);
  t.equal(feeds.upstreamSubscriptions(), 0);
  t.equal(feeds.head(), null, 'no newHeads feed, no head');

  const third = recorder();
  feeds.subscribe('newHeads', undefined, third);
  await waitFor(() => feeds.upstreamSubscriptions() === 1, { what: 'a new upstream subscription', ms: 10_000 });
  t.equal(relay.requests('eth_subscribe'), 2, 'a later subscribe opens a new one');
  await mine(node.url);
  await waitFor(() => third.texts.length === 1, { what: 'a head for the new listener', ms: 10_000 });
  t.equal(second.texts.length, 1, 'the one that left got no more');
});

t.test('an upstream away longer than maxOutageMs: every listener of every feed is lost', async (t) => {
  const { node, relay, upstream } = await relayedAnvil(t);
  const { feeds, logs } = feedsFor(t, { nodes: [upstream], maxOutageMs: 600 });
  const heads = Array.from({ length: 10 }, recorder);
  const logsListeners = Array.from({ length: 5 }, recorder);
  const pending = recorder();
  for (const l of heads) feeds.subscribe('newHeads', undefined, l);
  for (const l of logsListeners) feeds.subscribe('logs', { topics: [ECHO_TOPIC] }, l);
  feeds.subscribe('newPendingTransactions', undefined, pending);
  await waitFor(() => feeds.upstreamSubscriptions() === 3, { what: 'three upstream subscriptions', ms: 10_000 });
  // The outage clock runs from the first subscribe until every feed has caught up; on a loaded machine
  // that can take a moment after the subscriptions exist. Past maxOutageMs with the link up, nothing
  // may have been lost: the clock is then stopped, and the cut below starts it afresh.
  const all = [...heads, ...logsListeners, pending];
  await sleep(700);
  t.same(all.filter((l) => l.losses.length > 0).length, 0, 'nothing lost while the link is up');

  const cutAt = Date.now();
  relay.cut();
  await waitFor(() => all.every((l) => l.losses.length > 0), { what: 'every listener lost', ms: 5000 });
  const took = Date.now() - cutAt;
  // libuv starts a timer from the loop's cached time, which may be a few ms behind the clock read here.
  t.ok(took >= 590, `not before maxOutageMs (${took} ms)`);
  t.same(new Set(all.map((l) => l.losses.length)), new Set([1]), 'each listener is told once');
  t.match(pending.losses[0], /upstream unavailable/);
  t.equal(feeds.upstreamSubscriptions(), 0);
  t.ok(logs.some((l) => l.startsWith('warn upstream outage: subscriptions dropped')));

  // WebSocket handshakes, not TCP connections: a plain HTTP call (a head read) may reach the node meanwhile.
  const upgradesAfterLoss = relay.upgrades.length;
  relay.restore();
  await sleep(500);
  t.equal(relay.upgrades.length, upgradesAfterLoss, 'no reconnecting once the feeds are gone');
  const later = recorder();
  feeds.subscribe('newHeads', undefined, later);
  await waitFor(() => feeds.upstreamSubscriptions() === 1, { what: 'a new upstream subscription', ms: 10_000 });
  await mine(node.url);
  await waitFor(() => later.texts.length === 1, { what: 'a head', ms: 10_000 });
  t.equal(heads[0]!.texts.length, 0, 'lost listeners get nothing more');
});

t.test('a subscribe while the upstream is down registers and is served once it is back', async (t) => {
  const { node, relay, upstream } = await relayedAnvil(t);
  relay.cut();
  const { feeds } = feedsFor(t, { nodes: [upstream], maxOutageMs: 10_000 });
  const listener = recorder();
  feeds.subscribe('newHeads', undefined, listener);
  await sleep(500);
  t.equal(feeds.upstreamSubscriptions(), 0, 'nothing upstream while cut');
  relay.restore();
  await waitFor(() => feeds.upstreamSubscriptions() === 1, { what: 'subscribed once back', ms: 10_000 });
  const start = await blockNumber(node.url);
  await mine(node.url, 2);
  await waitFor(() => listener.texts.length === 2, { what: 'two heads', ms: 10_000 });
  t.same(numbersOf(listener), [start + 1, start + 2]);
  t.same(listener.losses, []);
});

t.test('whenLive: null once the upstream subscription is open; with every node unreachable, why not, once each was tried', async (t) => {
  const { upstream } = await relayedAnvil(t);
  const { feeds } = feedsFor(t, { nodes: [upstream], maxOutageMs: 60_000 });
  const hold = feeds.subscribe('newHeads', undefined, recorder());
  t.equal(await hold.whenLive(60_000), null, 'null once the upstream subscription opened');
  t.ok(hold.live(), 'and live() says so');
  t.equal(await hold.whenLive(1), null, 'at once while it is open');

  const down = [await closedPort(), await closedPort()];
  const dead = feedsFor(t, {
    nodes: down.map((p) => nodeAt(`down-${p}`, `ws://127.0.0.1:${p}`, `http://127.0.0.1:${p}`)),
    maxOutageMs: 60_000,
  });
  const listener = recorder();
  const deadHold = dead.feeds.subscribe('newHeads', undefined, listener);
  t.equal(await deadHold.whenLive(60_000), 'none of the 2 upstream WebSockets could be reached');
  for (const p of down)
    t.ok(
      dead.logs.some((l) => l.includes('upstream subscription link lost') && l.includes(`down-${p}`)),
      `node down-${p} was tried`,
    );
  t.notOk(deadHold.live());
  t.same(listener.losses, [], 'the listener itself is kept, as before (the outage limit decides)');
});

t.test('liveChanged: a listener is told when its upstream subscription opens, is lost with the link, and opens again', async (t) => {
  const { relay, upstream } = await relayedAnvil(t);
  const { feeds } = feedsFor(t, { nodes: [upstream], maxOutageMs: 60_000 });
  const changes: boolean[] = [];
  const hold = feeds.subscribe('newHeads', undefined, { ...recorder(), liveChanged: (live) => void changes.push(live) });
  await waitFor(() => changes.length === 1, { what: 'the upstream subscription', ms: 10_000 });
  t.same(changes, [true], 'told it opened');
  t.ok(hold.live(), 'as live() says');
  relay.cut();
  await waitFor(() => changes.length === 2, { what: 'the loss told', ms: 10_000 });
  t.same(changes, [true, false], 'told it was lost with its link');
  t.notOk(hold.live(), 'as live() says');
  relay.restore();
  await waitFor(() => changes.length === 3, { what: 'the new upstream subscription told', ms: 10_000 });
  t.same(changes, [true, false, true], 'told it opened again');
  t.ok(hold.live());
});

t.test('when its node dies the feed moves to the next healthy one and numbers go on without gap or repeat', async (t) => {
  const a = await relayedAnvil(t);
  const b = await relayedAnvil(t);
  const c = await tcpRelay(t, { port: 9 }); // never used: said unhealthy
  c.cut();
  // Independent chains: b is ahead, and its hashes differ from a's.
  await call(b.node.url, 'anvil_mine', ['0xa']);
  const { feeds, logs } = feedsFor(t, {
    nodes: [a.upstream, nodeAt('unhealthy', c.wsUrl, c.url), b.upstream],
    isHealthy: (i) => i !== 1,
    maxOutageMs: 30_000,
  });
  const listeners = Array.from({ length: 10 }, recorder);
  for (const l of listeners) feeds.subscribe('newHeads', undefined, l);
  await waitFor(() => feeds.upstreamSubscriptions() === 1, { what: 'subscribed on a', ms: 10_000 });
  await mine(a.node.url, 3);
  await waitFor(() => listeners[0]!.texts.length === 3, { what: 'three heads from a', ms: 10_000 });

  await a.node.stop();
  await waitFor(() => b.relay.requests('eth_subscribe') === 1 && feeds.upstreamSubscriptions() === 1, {
    what: 'subscribed on b',
    ms: 10_000,
  });
  await mine(b.node.url, 2);
  await waitFor(() => numbersOf(listeners[0]!).includes(12), { what: "b's twelfth block", ms: 10_000 });
  await sleep(100);

  t.same(numbersOf(listeners[0]!), range(1, 12), "a's 1-3, then b's 4-10 backfilled, then b's live 11-12");
  sameForAll(t, listeners, 'after the switch');
  const heads = listeners[0]!.parsed();
  const fromB = await Promise.all(range(4, 12).map(async (n) => (await blockAt(b.node.url, n)).hash));
  t.same(
    heads.slice(3).map((h) => h.hash),
    fromB,
    "numbers 4-12 are b's blocks",
  );
  t.equal(c.connections, 0, 'the unhealthy node was skipped');
  t.equal(a.relay.requests('eth_subscribe'), 1);
  t.ok(
    logs.some((l) => l.includes(`relay-${a.relay.port}`)),
    'the loss names the node by label',
  );
});

t.test('a node that leaves rotation with its socket open: the feed moves to one in rotation, without gap or repeat', async (t) => {
  const a = await relayedAnvil(t);
  const b = await relayedAnvil(t);
  await call(b.node.url, 'anvil_mine', ['0xa']);
  const inRotation = [true, true];
  const { feeds, logs } = feedsFor(t, {
    nodes: [a.upstream, b.upstream],
    isHealthy: (i) => inRotation[i]!,
    rotationCheckMs: 100,
    maxOutageMs: 30_000,
  });
  const listener = recorder();
  feeds.subscribe('newHeads', undefined, listener);
  await waitFor(() => feeds.upstreamSubscriptions() === 1, { what: 'subscribed on a', ms: 10_000 });
  await mine(a.node.url, 3);
  await waitFor(() => listener.texts.length === 3, { what: 'three heads from a', ms: 10_000 });
  await sleep(300);
  t.equal(b.relay.requests('eth_subscribe'), 0, 'a in rotation: the link stays on it');

  inRotation[0] = false; // as when a lags past max_lag_blocks: its socket stays open
  await waitFor(() => b.relay.requests('eth_subscribe') === 1 && feeds.upstreamSubscriptions() === 1, {
    what: 'subscribed on b',
    ms: 10_000,
  });
  await mine(b.node.url, 1);
  await waitFor(() => numbersOf(listener).includes(11), { what: "b's eleventh block", ms: 10_000 });
  await sleep(100);
  t.same(numbersOf(listener), range(1, 11), "a's 1-3, b's 4-10 backfilled, b's live 11");
  t.ok(
    logs.some((l) => l.includes('out of rotation')),
    'the move is logged',
  );

  inRotation[1] = false; // no node in rotation: the link stays where it is rather than go nowhere
  await sleep(400);
  t.equal(b.relay.requests('eth_subscribe'), 1, 'with none in rotation the link stays: nothing subscribed again');
  t.equal(a.relay.requests('eth_subscribe'), 1, 'nor moved back to a');
});

t.test('a reorg passes through: the replaced number again, with its new hash', async (t) => {
  const { node, upstream } = await relayedAnvil(t);
  const { feeds } = feedsFor(t, { nodes: [upstream], maxOutageMs: 60_000 });
  const listener = recorder();
  feeds.subscribe('newHeads', undefined, listener);
  await waitFor(() => feeds.upstreamSubscriptions() === 1, { what: 'the upstream subscription', ms: 10_000 });
  await mine(node.url);
  const snapshot = await call(node.url, 'evm_snapshot');
  await mine(node.url, 2);
  await waitFor(() => listener.texts.length === 3, { what: 'three heads', ms: 10_000 });
  const replaced = listener.parsed()[1]!;
  await call(node.url, 'evm_revert', [snapshot]);
  await mine(node.url);
  await waitFor(() => listener.texts.length === 4, { what: 'the replacement', ms: 10_000 });
  const replacement = listener.parsed()[3]!;
  t.equal(replacement.number, replaced.number, 'the same number is sent again');
  t.not(replacement.hash, replaced.hash, 'with another hash');
  t.equal(replacement.hash, (await blockAt(node.url, 2)).hash, "the node's block 2 now");
  t.same(feeds.head(), { number: 2, hash: replacement.hash }, 'head() follows the reorg');

  // anvil_reorg replaces the top blocks and announces each replacement.
  await mine(node.url, 3); // 3, 4, 5
  await waitFor(() => numbersOf(listener).includes(5), { what: 'head 5', ms: 10_000 });
  const before = listener.texts.length;
  await call(node.url, 'anvil_reorg', [2, []]);
  await waitFor(() => listener.texts.length === before + 2, { what: 'two replacements', ms: 10_000 });
  const [r4, r5] = listener.parsed().slice(before);
  t.same([Number(r4!.number), Number(r5!.number)], [4, 5]);
  t.equal(r5!.hash, (await blockAt(node.url, 5)).hash, "the node's new block 5");
});

t.test('newPendingTransactions: one upstream subscription, subscribed again after a cut', async (t) => {
  const { node, relay, upstream } = await relayedAnvil(t);
  const address = await deployEcho(node.url);
  const { feeds } = feedsFor(t, { nodes: [upstream], maxOutageMs: 60_000 });
  const listeners = [recorder(), recorder()];
  for (const l of listeners) feeds.subscribe('newPendingTransactions', undefined, l);
  const full = recorder();
  feeds.subscribe('newPendingTransactions', true, full);
  await waitFor(() => feeds.upstreamSubscriptions() === 2, { what: 'two upstream subscriptions', ms: 10_000 });
  const first = await echo(node.url, address, '0x01');
  await waitFor(() => listeners.every((l) => l.texts.length === 1) && full.texts.length === 1, {
    what: 'the first transaction',
    ms: 10_000,
  });
  t.same(listeners[0]!.texts, [JSON.stringify(first)], 'its hash');
  t.equal((full.parsed()[0] as { hash?: string }).hash, first, 'with fullTransactions, the transaction itself');

  relay.cut();
  await waitFor(() => feeds.upstreamSubscriptions() === 0, { what: 'the loss noticed', ms: 10_000 });
  relay.restore();
  await waitFor(() => feeds.upstreamSubscriptions() === 2, { what: 'subscribed again', ms: 10_000 });
  const second = await echo(node.url, address, '0x02');
  await waitFor(() => listeners.every((l) => l.texts.length === 2), { what: 'the second transaction', ms: 10_000 });
  t.same(listeners[1]!.texts, [JSON.stringify(first), JSON.stringify(second)]);
  t.equal(relay.requests('eth_subscribe'), 4, 'two feeds, subscribed twice each');
});

/** Timers the test fires by hand; only the feeds' own timers go through them. */
function manualTimers() {
  let clock = 0;
  const pending = new Map<number, { fn: () => void; ms: number }>();
  let next = 0;
  const timers: Timers = {
    setTimeout(fn, ms) {
      pending.set(++next, { fn, ms });
      return next;
    },
    clearTimeout(handle) {
      pending.delete(handle as number);
    },
    now: () => clock,
  };
  /** Fires the pending timer of exactly `ms`; returns whether there was one. */
  const fire = (ms: number): boolean => {
    for (const [id, timer] of pending) {
      if (timer.ms !== ms) continue;
      pending.delete(id);
      clock += ms;
      timer.fn();
      return true;
    }
    return false;
  };
  const delays = () => [...pending.values()].map((x) => x.ms);
  return { timers, fire, delays, pending };
}

t.test('reconnect delays double from 100 ms to 5 s within their jitter; the outage timer drops the listeners', async (t) => {
  const { relay, upstream } = await relayedAnvil(t);
  relay.cut();
  for (const [name, draw, scale] of [
    ['longest draw', () => 0.999999, 1],
    ['shortest draw', () => 0, 0.5],
  ] as const) {
    await t.test(name, async (t) => {
      const manual = manualTimers();
      const { feeds } = feedsFor(t, { nodes: [upstream], maxOutageMs: 60_000, timers: manual.timers, random: draw });
      const listener = recorder();
      feeds.subscribe('newHeads', undefined, listener);
      t.same(manual.delays(), [60_000], 'the outage clock starts with the first attempt');
      const seen: number[] = [];
      for (const full of [100, 200, 400, 800, 1600, 3200, 5000, 5000]) {
        const expected = Math.round(full * scale);
        await waitFor(() => manual.delays().some((d) => Math.round(d) === expected), { what: `a retry after ${full} ms`, ms: 5000 });
        const delay = manual.delays().find((d) => Math.round(d) === expected)!;
        seen.push(Math.round(delay));
        manual.fire(delay);
      }
      t.same(
        seen,
        [100, 200, 400, 800, 1600, 3200, 5000, 5000].map((d) => Math.round(d * scale)),
      );
      t.same(listener.losses, [], 'no loss before the outage timer');
      t.ok(manual.fire(60_000), 'the outage timer was pending');
      t.equal(listener.losses.length, 1, 'its firing loses the listener');
      t.same(manual.delays(), [], 'no retry is left pending');
    });
  }
});
