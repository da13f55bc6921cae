/**
 * eth_subscribe fan-out end to end against a real anvil, its WebSocket reached through a TCP relay
 * that counts the eth_subscribe calls on the wire and can be cut: one upstream subscription for a
 * thousand subscribers, no gap and no duplicate across an upstream loss, a non-reading client cut
 * while the others keep up, unsubscribe scoped to its connection, RU per delivered notification
 * and the close at zero balance, and the 1011 close when the upstream stays away. A subscribe that
 * cannot get an upstream subscription (no upstream WebSocket reachable, none within timeout_s) is
 * answered with the upstream error at once, never with an id that would not deliver.
 */
import t, { type Test } from 'tap';
import { createOwnerAdmin } from '../../src/tenancy/owners.js';
import type { Feeds } from '../../src/fanout/feeds.js';
import { toNewHead } from '../../src/fanout/head-feed.js';
import { ECHO_TOPIC, RUNTIME_BYTECODE } from '../support/contract.js';
import { closedPort, fakeUpstream } from '../support/fake-upstream.js';
import { anvilFor, gatewayFor, type TestGateway } from '../support/gateway.js';
import { rpc, send } from '../support/rpc.js';
import { type Answer, nodeCall, openSubscriber, type Subscriber, waitUntil } from '../support/subscriber.js';
import { tcpRelay, type TcpRelay } from '../support/tcp-relay.js';
import { wsUrl } from '../support/ws.js';
import { minedReceipt } from '../support/dev-chain.js';
import type { AnvilNode } from '../../src/devnet/anvil.js';
import { waitFor } from '../support/wait-for.js';

// anvil's first development account (unlocked: eth_sendTransaction from it needs no signature).
const DEV_ADDRESS = '0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266';
/** Where the Echo contract's code is put with anvil_setCode: every call to it emits one log. */
const ECHO_ADDRESS = '0x00000000000000000000000000000000000ec40e';
const ECHO_FILTER = { address: ECHO_ADDRESS, topics: [ECHO_TOPIC] };

interface Devnet {
  node: AnvilNode;
  relay: TcpRelay;
  g: TestGateway;
  /** The chain's upstream subscription feeds (gauge: upstream subscriptions open). */
  feeds: Feeds;
  publicUrl: string;
}

/** anvil (automine: a block per transaction or evm_mine), its WebSocket behind the relay, its HTTP direct. */
async function devnet(t: Test, extra: Record<string, unknown> = {}): Promise<Devnet> {
  const node = await anvilFor(t, { chainId: 31337 });
  const relay = await tcpRelay(t, { port: node.port });
  const g = await gatewayFor(t, { chains: { devnet: { chain_id: 31337, upstreams: [{ url: node.url, ws: relay.wsUrl }] } }, ...extra });
  const feeds = g.gateway.context.chains.get('devnet')!.feeds;
  if (feeds === null) throw new Error('the devnet chain has no feeds: its upstream ws was not configured');
  return { node, relay, g, feeds, publicUrl: wsUrl(g.base, '/v1/rpc/public') };
}

/** Opens `n` subscribers, `batch` upgrades at a time. */
async function openMany(t: Test, url: string, n: number, batch = 100): Promise<Subscriber[]> {
  const out: Subscriber[] = [];
  while (out.length < n) {
    const k = Math.min(batch, n - out.length);
    out.push(...(await Promise.all(Array.from({ length: k }, () => openSubscriber(t, url)))));
  }
  return out;
}

const numberOf = (r: Record<string, unknown>): number => parseInt(r.number as string, 16);
const range = (from: number, to: number): number[] => Array.from({ length: to - from + 1 }, (_, i) => from + i);
const blockNumber = async (node: AnvilNode): Promise<number> => Number(await nodeCall<string>(node.url, 'eth_blockNumber'));
const lastNumber = (s: Subscriber, id: string): number => {
  const r = s.resultsOf(id);
  return r.length === 0 ? -1 : numberOf(r[r.length - 1]!);
};
/** One Echo call from the dev account, mined at once; its transaction hash. */
const emitEcho = (node: AnvilNode, data: string): Promise<string> =>
  nodeCall<string>(node.url, 'eth_sendTransaction', [{ from: DEV_ADDRESS, to: ECHO_ADDRESS, data, gas: '0x30000' }]);
/** RU of one delivered notification at the default price: 5 per started 250 bytes. */
const notificationRu = (bytes: number): number => 5 * Math.ceil(bytes / 250);

function keyedEndpoint(g: TestGateway, ru: number): { ownerId: number; key: string; endpointId: string; managementKey: string } {
  const owner = createOwnerAdmin(g.gateway.context.tenancy.store!).createOwner(`o${Math.random()}`, 'growth', ru);
  const made = g.gateway.context.tenancy.directory!.createEndpoint(owner.id, 'devnet', 'subs', 10);
  if (!('apiKey' in made)) throw new Error(made.error);
  return { ownerId: owner.id, key: made.apiKey, endpointId: made.endpoint.id, managementKey: owner.managementKey };
}

t.test('1,000 newHeads subscribers: one upstream subscription, the same ordered blocks for all, shared first id', async (t) => {
  const { node, relay, g, feeds, publicUrl } = await devnet(t, { websocket: { max_connections_per_ip: 1100 } });
  const subs = await openMany(t, publicUrl, 1000);
  const ids = await Promise.all(subs.map((s) => s.subscribe('newHeads')));
  t.match(ids[0], /^0x[0-9a-f]{32}$/, 'a node-shaped id: 0x and 32 hex digits');
  t.equal(new Set(ids).size, 1, "every connection's first newHeads subscription has the same id");
  const second = await subs[0]!.subscribe('newHeads');
  t.not(second, ids[0], 'a second newHeads subscription on the same connection gets another id');
  t.match(second, /^0x[0-9a-f]{32}$/);
  await waitUntil(() => feeds.upstreamSubscriptions() === 1, 10_000, 'the upstream subscription');

  const start = await blockNumber(node);
  const BLOCKS = 5;
  for (let i = 0; i < BLOCKS; i++) await nodeCall(node.url, 'evm_mine');
  const id = ids[0]!;
  const waited = await waitUntil(
    () => subs.every((s) => s.resultsOf(id).length >= BLOCKS) && subs[0]!.resultsOf(second).length >= BLOCKS,
    20_000,
    'every subscriber has every block',
    () => `${subs.filter((s) => s.resultsOf(id).length < BLOCKS).length} behind`,
  );
  t.comment(`1,000 subscribers had ${BLOCKS} blocks ${waited.toFixed(0)} ms after the last evm_mine answered`);

  t.equal(relay.requests('eth_subscribe'), 1, 'exactly one eth_subscribe reached the upstream, for 1,001 subscriptions');
  t.equal(relay.connections, 1, 'over one upstream WebSocket');
  t.match(
    await g.gateway.streamStats(),
    { wsConnections: 1000, subscriptions: 1001, upstreamSubscriptions: 1 },
    "the gateway's own gauges agree",
  );
  const expected = range(start + 1, start + BLOCKS);
  const wrong = subs.filter((s) => JSON.stringify(s.resultsOf(id).map(numberOf)) !== JSON.stringify(expected));
  t.equal(wrong.length, 0, `all 1,000 received blocks ${expected.join(', ')} in order, once each`);
  t.same(subs[0]!.resultsOf(second).map(numberOf), expected, 'the second subscription gets the same blocks');
  t.ok(
    subs.every((s) => s.notifications.every((n) => n.subscription === id || s === subs[0])),
    'only their own id on the other connections',
  );
  // The heads are the node's: the hash of every block matches anvil's own answer.
  for (const head of subs[999]!.resultsOf(id)) {
    const block = await nodeCall<{ hash: string; parentHash: string }>(node.url, 'eth_getBlockByNumber', [head.number, false]);
    t.equal(head.hash, block.hash, `block ${numberOf(head)}: the node's hash`);
  }
  t.notOk('transactions' in subs[0]!.resultsOf(id)[0]!, 'a header, not a block with its transactions');
});

t.test('the upstream socket cut mid-stream and restored: no gap and no duplicate in heads, every log once', async (t) => {
  const { node, relay, g, feeds, publicUrl } = await devnet(t);
  await nodeCall(node.url, 'anvil_setCode', [ECHO_ADDRESS, RUNTIME_BYTECODE]);
  const heads = await openMany(t, publicUrl, 20);
  const headIds = await Promise.all(heads.map((s) => s.subscribe('newHeads')));
  const logs = await openMany(t, publicUrl, 5);
  const logIds = await Promise.all(logs.map((s) => s.subscribe('logs', ECHO_FILTER)));
  // One connection holds both kinds.
  const both = heads[0]!;
  const bothLogs = await both.subscribe('logs', ECHO_FILTER);
  await waitUntil(() => feeds.upstreamSubscriptions() === 2, 10_000, 'the newHeads and logs upstream subscriptions');
  t.equal(relay.requests('eth_subscribe'), 2, 'one upstream subscription per kind and filter');

  const start = await blockNumber(node);
  const sent: Array<{ hash: string; whileCut: boolean }> = [];
  let minedWhileCut = 0;
  let cut = false;
  let stop = false;
  const miner = (async () => {
    for (let i = 0; !stop; i++) {
      if (i % 3 === 0) sent.push({ hash: await emitEcho(node, `0x${(i + 1).toString(16).padStart(8, '0')}`), whileCut: cut });
      else await nodeCall(node.url, 'evm_mine');
      if (cut) minedWhileCut++;
      await new Promise((r) => setTimeout(r, 60));
    }
  })();
  await new Promise((r) => setTimeout(r, 700));
  relay.cut();
  cut = true;
  await new Promise((r) => setTimeout(r, 1500));
  cut = false;
  relay.restore();
  await new Promise((r) => setTimeout(r, 1500));
  stop = true;
  await miner;
  const final = await blockNumber(node);
  t.ok(minedWhileCut >= 5, `${minedWhileCut} blocks mined while the upstream socket was cut`);
  t.ok(sent.filter((s) => s.whileCut).length >= 2, `${sent.filter((s) => s.whileCut).length} logs emitted while cut`);

  await waitUntil(
    () =>
      heads.every((s, k) => lastNumber(s, headIds[k]!) === final) &&
      logs.every((s, k) => s.resultsOf(logIds[k]!).length >= sent.length) &&
      both.resultsOf(bothLogs).length >= sent.length,
    15_000,
    'every subscriber caught up after the restore',
  );
  const expected = range(start + 1, final);
  const gaps = heads.flatMap((s, k) => {
    const got = s.resultsOf(headIds[k]!).map(numberOf);
    return JSON.stringify(got) === JSON.stringify(expected) ? [] : [`subscriber ${k}: ${got.join(',')}`];
  });
  t.same(gaps, [], `all 20 newHeads subscribers got blocks ${start + 1}..${final} (${expected.length}) exactly once, in order`);
  // Heads made up for over HTTP have the live heads' shape and chain onto them.
  const got = heads[0]!.resultsOf(headIds[0]!);
  const shape = Object.keys(got[0]!).sort().join(',');
  t.equal(
    got.filter((h) => Object.keys(h).sort().join(',') !== shape).length,
    0,
    `every head has the same fields (${shape.split(',').length})`,
  );
  t.equal(got.filter((h, i) => i > 0 && h.parentHash !== got[i - 1]!.hash).length, 0, 'each head names the previous one as its parent');
  const tip = await nodeCall<{ hash: string }>(node.url, 'eth_getBlockByNumber', ['latest', false]);
  t.equal(got[got.length - 1]!.hash, tip.hash, "the last head is the node's tip");
  const hashes = sent.map((s) => s.hash);
  for (const [k, s] of [...logs.map((x, k) => [x, logIds[k]!] as const), [both, bothLogs] as const].entries()) {
    const got = s[0].resultsOf(s[1]);
    t.same(
      got.map((l) => l.transactionHash),
      hashes,
      `logs subscriber ${k}: each of the ${hashes.length} logs once, in order`,
    );
    t.ok(
      got.every((l) => l.removed === false && (l.topics as string[])[0] === ECHO_TOPIC),
      'none removed, all Echo logs',
    );
  }
  t.ok(relay.connections >= 2, `the gateway reconnected (${relay.connections} upstream connections)`);
  t.ok(
    relay.requests('eth_subscribe') >= 4 && relay.requests('eth_subscribe') % 2 === 0,
    `and resubscribed both kinds on each new connection (${relay.requests('eth_subscribe')} eth_subscribe in all)`,
  );
  t.ok(
    g.logLines.some((l) => l.includes('upstream subscriptions restored')),
    'the gateway logged the restore',
  );
  t.equal(feeds.upstreamSubscriptions(), 2, 'still one upstream subscription per kind');
});

t.test('a subscriber that stops reading is cut while the others keep receiving every block', async (t) => {
  const { g, node, publicUrl, feeds } = await devnet(t, { websocket: { max_buffered_bytes: 4096 } });
  const fast = await openMany(t, publicUrl, 5);
  const fastIds = await Promise.all(fast.map((s) => s.subscribe('newHeads')));
  // The non-reader holds 40 newHeads subscriptions, so each block puts about 70 KB on its socket and
  // the kernel's buffers (a few MB on loopback) fill within a hundred blocks or so.
  const slow = await openSubscriber(t, publicUrl);
  const slowIds: string[] = [];
  for (let i = 0; i < 40; i++) slowIds.push(await slow.subscribe('newHeads'));
  t.equal(new Set(slowIds).size, 40, 'forty ids on one connection');
  await waitUntil(() => feeds.upstreamSubscriptions() === 1, 10_000, 'the upstream subscription');
  (slow.ws as unknown as { _socket: { pause(): void } })._socket.pause();

  const start = await blockNumber(node);
  const ROUNDS = 4;
  const PER_ROUND = 150;
  const lags: number[] = [];
  for (let r = 1; r <= ROUNDS; r++) {
    await nodeCall(node.url, 'anvil_mine', [`0x${PER_ROUND.toString(16)}`]);
    const top = start + r * PER_ROUND;
    lags.push(
      await waitUntil(
        () => fast.every((s, k) => lastNumber(s, fastIds[k]!) >= top),
        5000,
        `round ${r}: the readers have block ${top}`,
        () => fast.map((s, k) => `${lastNumber(s, fastIds[k]!)}${s.isClosed ? ' closed' : ''}`).join(', '),
      ),
    );
  }
  const total = ROUNDS * PER_ROUND;
  t.comment(
    `after each anvil_mine of ${PER_ROUND} blocks the readers had all of them within ${Math.max(...lags).toFixed(0)} ms (worst of ${ROUNDS} rounds)`,
  );
  const expected = range(start + 1, start + total);
  for (const [k, s] of fast.entries()) {
    t.notOk(s.isClosed, `reader ${k} stays open`);
    t.ok(
      JSON.stringify(s.resultsOf(fastIds[k]!).map(numberOf)) === JSON.stringify(expected),
      `reader ${k} got all ${total} blocks once, in order`,
    );
  }
  t.equal((await g.gateway.streamStats()).slowConsumers, 1, 'the gateway counted one slow consumer');
  t.equal((await g.gateway.streamStats()).subscriptions, 5, "the non-reader's 40 subscriptions are gone, the readers' 5 remain");
  // Reading again, the client finds what was queued before the cut, then the end of its socket.
  (slow.ws as unknown as { _socket: { resume(): void } })._socket.resume();
  await waitUntil(
    () => slow.isClosed,
    20_000,
    'the non-reading client is closed',
    () => `it has ${slow.notifications.length} notifications`,
  );
  const how = await slow.closed;
  t.ok(how.code === 1008 || how.code === 1006, `the non-reading client's socket ended (${how.code} ${how.reason})`);
  if (how.code === 1008) t.equal(how.reason, 'slow consumer');
  const got = slow.resultsOf(slowIds[39]!).length;
  t.ok(got < total, `it had received ${got} of ${total} blocks when it was cut`);
  t.same(
    slow.resultsOf(slowIds[0]!).map(numberOf),
    range(start + 1, start + slow.resultsOf(slowIds[0]!).length),
    'what it did get has no gap',
  );
  t.comment(
    `${slow.notifications.length} notifications (${slow.notifications.reduce((a, n) => a + n.bytes, 0)} bytes) had been queued for it`,
  );
});

t.test('websocket.max_buffered_bytes smaller than one notification does not cut a subscriber that reads', async (t) => {
  // Fails against src/server/ws-rpc.ts as of this writing: WsConn.overLimit counts the message about
  // to be sent against the limit, so a 1.8 KB newHeads over the 1024-byte limit (the smallest the
  // schema accepts) closes an idle, reading subscriber with 1008 "slow consumer" before its first block.
  const { g, node, publicUrl, feeds } = await devnet(t, { websocket: { max_buffered_bytes: 1024 } });
  const s = await openSubscriber(t, publicUrl);
  const id = await s.subscribe('newHeads');
  await waitUntil(() => feeds.upstreamSubscriptions() === 1, 10_000, 'the upstream subscription');
  for (let i = 0; i < 3; i++) await nodeCall(node.url, 'evm_mine');
  await Promise.race([waitUntil(() => s.resultsOf(id).length === 3, 5000, 'three blocks').catch(() => {}), s.closed]);
  t.notOk(s.isClosed, `the reader stays open${s.isClosed ? ` (closed: ${JSON.stringify(await s.closed)})` : ''}`);
  t.equal(s.resultsOf(id).length, 3, 'and receives every block');
  // What the gateway sends for the newest block, built from the node's own answer: over the limit.
  const latest = toNewHead(await nodeCall<Record<string, unknown>>(node.url, 'eth_getBlockByNumber', ['latest', false]));
  const bytes = Buffer.byteLength(
    JSON.stringify({ jsonrpc: '2.0', method: 'eth_subscription', params: { subscription: id, result: latest } }),
  );
  t.ok(bytes > 1024, `one newHeads notification is ${bytes} bytes, more than the limit`);
  t.equal((await g.gateway.streamStats()).slowConsumers, 0, 'no slow consumer counted');
});

t.test('unsubscribe is scoped to its connection; the last subscriber leaving drops the upstream subscription', async (t) => {
  const { node, relay, g, feeds, publicUrl } = await devnet(t);
  await nodeCall(node.url, 'anvil_setCode', [ECHO_ADDRESS, RUNTIME_BYTECODE]);
  const [a, b, c] = (await openMany(t, publicUrl, 3)) as [Subscriber, Subscriber, Subscriber];
  const a0 = await a.subscribe('newHeads');
  const b0 = await b.subscribe('newHeads');
  const b1 = await b.subscribe('newHeads');
  const bLogs = await b.subscribe('logs', ECHO_FILTER);
  const cLogs = await c.subscribe('logs', ECHO_FILTER);
  t.equal(a0, b0, 'first newHeads ids are shared across connections');
  t.equal(bLogs, cLogs, 'first logs ids with the same filter are shared too');
  await waitUntil(() => feeds.upstreamSubscriptions() === 2, 10_000, 'the upstream subscriptions');

  t.same((await a.request('eth_unsubscribe', [b1])).result, false, "another connection's id: false");
  t.same((await a.request('eth_unsubscribe', [bLogs])).result, false, "another connection's logs id: false");
  t.same((await a.request('eth_unsubscribe', ['0x00000000000000000000000000000001'])).result, false, 'an unknown id: false');
  const before = await blockNumber(node);
  const echo = await emitEcho(node, '0x01');
  await waitUntil(
    () => b.resultsOf(b1).length === 1 && b.resultsOf(bLogs).length === 1 && c.resultsOf(cLogs).length === 1,
    5000,
    'b and c still served',
  );
  t.equal(numberOf(b.resultsOf(b1)[0]!), before + 1, "b's second subscription survived a's attempt");
  t.equal(b.resultsOf(bLogs)[0]!.transactionHash, echo);

  t.same((await b.request('eth_unsubscribe', [b1])).result, true, 'own id: true');
  t.same((await b.request('eth_unsubscribe', [b1])).result, false, 'the same id again: false');
  await nodeCall(node.url, 'evm_mine');
  await waitUntil(() => b.resultsOf(b0).length === 2, 5000, "b's remaining subscription served");
  await new Promise((r) => setTimeout(r, 200));
  t.equal(b.resultsOf(b1).length, 1, 'nothing more for an unsubscribed id');

  // Leave every way there is: unsubscribe (a), close (b), a dropped socket (c).
  t.same((await a.request('eth_unsubscribe', [a0])).result, true);
  b.ws.close(1000);
  await b.closed;
  c.ws.terminate();
  await c.closed;
  const left = performance.now();
  t.equal(relay.requests('eth_unsubscribe'), 0, 'nothing unsubscribed upstream while subscribers remained');
  const dropped = await waitUntil(
    () => relay.requests('eth_unsubscribe') === 2 && feeds.upstreamSubscriptions() === 0,
    5000,
    'both upstream subscriptions dropped within 5 s',
    () => `eth_unsubscribe seen ${relay.requests('eth_unsubscribe')}, gauge ${feeds.upstreamSubscriptions()}`,
  );
  t.ok(performance.now() - left <= 5000, `the upstream subscriptions went ${dropped.toFixed(0)} ms after the last subscriber left`);
  t.equal(relay.requests('eth_subscribe'), 2, 'and were never resubscribed meanwhile');
  t.match(await g.gateway.streamStats(), { wsConnections: 1, subscriptions: 0, upstreamSubscriptions: 0 });
  t.notOk(a.isClosed, 'a connection without subscriptions stays open');
  t.match((await a.request('eth_chainId')).result, '0x7a69');
});

t.test('RU per delivered notification by its bytes, usage statistics, and the close at zero balance', async (t) => {
  const { node, g, feeds, publicUrl } = await devnet(t);
  const ledger = g.gateway.context.tenancy.ledger;
  const rich = keyedEndpoint(g, 1_000_000);
  const [a, b] = (await openMany(t, wsUrl(g.base, `/v1/rpc/${rich.key}`), 2)) as [Subscriber, Subscriber];
  const aId = await a.subscribe('newHeads');
  const bId = await b.subscribe('newHeads');
  const pub = await openSubscriber(t, publicUrl);
  const pubId = await pub.subscribe('newHeads');
  await waitUntil(() => feeds.upstreamSubscriptions() === 1, 10_000, 'the upstream subscription');
  ledger.flush();
  t.equal(ledger.available(rich.ownerId), 1_000_000 - 2 * 10, 'eth_subscribe costs its table price (10 RU)');

  const BLOCKS = 5;
  for (let i = 0; i < BLOCKS; i++) await nodeCall(node.url, 'evm_mine');
  await waitUntil(
    () => a.resultsOf(aId).length === BLOCKS && b.resultsOf(bId).length === BLOCKS,
    10_000,
    'both keyed subscribers have every block',
  );
  await new Promise((r) => setTimeout(r, 100));
  const delivered = [...a.notifications, ...b.notifications];
  t.equal(delivered.length, 2 * BLOCKS, 'nothing beyond the mined blocks was delivered');
  const charged = delivered.reduce((sum, n) => sum + notificationRu(n.bytes), 0);
  t.comment(
    `notification sizes ${[...new Set(delivered.map((n) => n.bytes))].join(', ')} bytes → ${notificationRu(delivered[0]!.bytes)} RU each`,
  );
  ledger.flush();
  t.equal(
    ledger.available(rich.ownerId),
    1_000_000 - 20 - charged,
    `${2 * BLOCKS} notifications cost ceil(bytes/250)×5 = ${charged} RU in all`,
  );
  const stats = await send('GET', `${g.base}/api/dashboard/endpoints/stats?id=${rich.endpointId}&interval=minute`, undefined, {
    authorization: `Bearer ${rich.managementKey}`,
  });
  t.equal(stats.status, 200);
  const data = (
    stats.json as { data: { totals: { requests: number; ru: number }; methods: Array<{ method: string; requests: number; ru: number }> } }
  ).data;
  t.same(
    data.methods.find((m) => m.method === 'eth_subscription'),
    {
      method: 'eth_subscription',
      requests: 2 * BLOCKS,
      ru: charged,
      errors: 0,
      success_rate: 1,
      latency_ms: { p50: null, p95: null, p99: null },
    },
    'each delivered notification is a request in the usage statistics, with its RU (deliveries are not timed)',
  );
  t.match(data.totals, { requests: 2 + 2 * BLOCKS, ru: 20 + charged }, 'totals include the subscriptions and their notifications');

  // An owner with two subscriptions and a balance for them, two notifications each and half of one more:
  // a notification is charged for all of an owner's subscriptions at once. Both on one connection, so one
  // worker thread delivers them: with several workers, an owner's subscribers on different workers are
  // each charged by their own worker.
  const price = notificationRu(delivered[0]!.bytes);
  const poorStart = 2 * 10 + 4 * price + Math.floor(price / 2);
  const poor = keyedEndpoint(g, poorStart);
  const [p] = (await openMany(t, wsUrl(g.base, `/v1/rpc/${poor.key}`), 1)) as [Subscriber];
  const pId = await p.subscribe('newHeads');
  const qId = await p.subscribe('newHeads');
  const pubBefore = pub.resultsOf(pubId).length;
  for (let i = 0; i < 3; i++) await nodeCall(node.url, 'evm_mine');
  const deadline = new Promise<null>((r) => setTimeout(() => r(null), 10_000));
  t.same(
    await Promise.race([p.closed, deadline]),
    { code: 1008, reason: 'Insufficient RU balance' },
    'closed with 1008 when the balance runs out',
  );
  t.same([p.resultsOf(pId).length, p.resultsOf(qId).length], [2, 2], 'after the two notifications each it could pay for');
  ledger.flush();
  const paid = p.notifications.reduce((sum, n) => sum + notificationRu(n.bytes), 0);
  t.equal(ledger.available(poor.ownerId), poorStart - 20 - paid, 'charged exactly what they received; the refused one costs nothing');
  t.ok(ledger.available(poor.ownerId) >= 0, 'never below zero');
  await waitUntil(
    () => pub.resultsOf(pubId).length === pubBefore + 3 && a.resultsOf(aId).length === BLOCKS + 3,
    5000,
    'others keep receiving',
  );
  t.notOk(a.isClosed || b.isClosed || pub.isClosed, "another owner's and the public subscribers stay open");
});

t.test('the upstream away longer than websocket.max_upstream_outage_s closes subscribers with 1011', async (t) => {
  const { node, relay, feeds, publicUrl } = await devnet(t, { websocket: { max_upstream_outage_s: 2 } });
  const heads = await openMany(t, publicUrl, 3);
  const headIds = await Promise.all(heads.map((s) => s.subscribe('newHeads')));
  const logs = await openSubscriber(t, publicUrl);
  await logs.subscribe('logs', ECHO_FILTER);
  await waitUntil(() => feeds.upstreamSubscriptions() === 2, 10_000, 'the upstream subscriptions');
  await nodeCall(node.url, 'evm_mine');
  await waitUntil(() => heads.every((s, k) => s.resultsOf(headIds[k]!).length === 1), 5000, 'served before the cut');

  relay.cut();
  const cutAt = performance.now();
  const all = [...heads, logs];
  await waitUntil(() => all.every((s) => s.isClosed), 15_000, 'every subscriber closed');
  const after = performance.now() - cutAt;
  for (const s of all) t.match(await s.closed, { code: 1011, reason: /upstream unavailable for more than 2 s/ });
  t.ok(after >= 1900, `not before the 2 s allowed (closed ${after.toFixed(0)} ms after the cut)`);
  t.ok(after < 6000, 'nor long after it');
  t.equal(feeds.upstreamSubscriptions(), 0);

  // Once the upstream is back, a new subscriber is served again.
  relay.restore();
  const again = await openSubscriber(t, publicUrl);
  const id = await again.subscribe('newHeads');
  await waitUntil(() => feeds.upstreamSubscriptions() === 1, 10_000, 'a new upstream subscription');
  await nodeCall(node.url, 'evm_mine');
  await waitUntil(() => again.resultsOf(id).length === 1, 5000, 'a head after the outage');
});

/** Resets an anvil to a fresh chain whose block 1 holds a transaction, so its blocks differ from the old chain's. */
async function resetToNewChain(node: AnvilNode): Promise<void> {
  await nodeCall(node.url, 'anvil_reset', []);
  const hash = await nodeCall<string>(node.url, 'eth_sendTransaction', [
    { from: DEV_ADDRESS, to: '0x000000000000000000000000000000000000dead', value: '0x1' },
  ]);
  await minedReceipt(node.url, hash);
}

const hashAt = async (node: AnvilNode, n: number): Promise<string> =>
  (await nodeCall<{ hash: string }>(node.url, 'eth_getBlockByNumber', [`0x${n.toString(16)}`, false])).hash;

t.test(
  "a node reset to a fresh chain, deeper than a reorg: subscribers get the new chain's heads, and the head and cache follow",
  async (t) => {
    // One worker: the test reads that worker's cache (each worker keeps its own, docs/workers.md).
    const { node, g, feeds, publicUrl } = await devnet(t, { server: { workers: 1 } });
    const httpUrl = `${g.base}/v1/rpc/public`;
    const subs = await openMany(t, publicUrl, 3);
    const ids = await Promise.all(subs.map((s) => s.subscribe('newHeads')));
    await waitUntil(() => feeds.upstreamSubscriptions() === 1, 10_000, 'the upstream subscription');
    await nodeCall(node.url, 'anvil_mine', ['0xc8']);
    await waitUntil(() => subs.every((s, k) => lastNumber(s, ids[k]!) === 200), 10_000, 'head 200 for every subscriber');
    const gatewayHead = async (): Promise<unknown> => ((await rpc(httpUrl, 'eth_blockNumber')).json as { result?: unknown }).result;
    await waitFor(async () => (await gatewayHead()) === '0xc8', { what: 'the gateway at head 200' });
    // Block 5 is final (anvil's finalized block is 64 below head 200): the gateway keeps its answer.
    const finality = g.gateway.context.chains.get('devnet')!.finality;
    await waitFor(() => finality.finalized()?.number === 136, { what: 'the finalized block 136', ms: 10_000 });
    const blockFive = async (): Promise<string> =>
      ((await rpc(httpUrl, 'eth_getBlockByNumber', ['0x5', false])).json as { result: { hash: string } }).result.hash;
    const oldFive = await blockFive();
    const cache = g.gateway.context.chains.get('devnet')!.cache;
    const hits = cache.stats().hits;
    t.equal(await blockFive(), oldFive);
    t.equal(cache.stats().hits, hits + 1, "the old chain's block 5 is answered from the cache");

    await resetToNewChain(node);
    await nodeCall(node.url, 'anvil_mine', ['0x9']);
    const waited = await waitUntil(
      () => subs.every((s, k) => lastNumber(s, ids[k]!) === 10),
      10_000,
      "the new chain's head 10 for every subscriber",
    );
    t.comment(`subscribers had the new chain's head 10 ${waited.toFixed(0)} ms after it was mined`);
    const expected = [...range(1, 200), ...range(1, 10)];
    t.same(
      subs.filter((s, k) => JSON.stringify(s.resultsOf(ids[k]!).map(numberOf)) !== JSON.stringify(expected)).length,
      0,
      'every subscriber: 1..200 of the old chain, then 1..10 of the new one, once each',
    );
    const fresh = subs[0]!.resultsOf(ids[0]!).slice(200);
    t.same(
      fresh.map((h) => h.hash),
      await Promise.all(range(1, 10).map((n) => hashAt(node, n))),
      "the new chain's blocks",
    );
    for (const line of [
      'newHeads feed resumes on a new chain from head 1',
      'deeper than a reorg: treated as a new chain',
      'chain head went back from 200 to',
    ]) {
      t.ok(
        g.logLines.some((l) => l.includes(line)),
        `logged: ${line}`,
      );
    }

    await waitFor(async () => (await gatewayHead()) === '0xa', { what: 'the gateway at head 10' });
    t.equal(await gatewayHead(), '0xa', 'eth_blockNumber follows the new chain');
    const newFive = await blockFive();
    t.not(newFive, oldFive, "the old chain's cached block 5 is not served for the new chain");
    t.equal(newFive, await hashAt(node, 5), "the new chain's block 5");
  },
);

t.test(
  'two nodes: one reset is left behind while the other carries the subscriptions; both reset, the new chain is followed',
  async (t) => {
    const [a, b] = await Promise.all([anvilFor(t, { chainId: 31337 }), anvilFor(t, { chainId: 31337 })]);
    const [ra, rb] = await Promise.all([tcpRelay(t, { port: a.port }), tcpRelay(t, { port: b.port })]);
    const g = await gatewayFor(t, {
      chains: {
        devnet: {
          chain_id: 31337,
          max_lag_blocks: 5,
          // The head of one node is served (by default two of two must have it): the feed follows b alone.
          consistency: { min_nodes: 1 },
          upstreams: [
            { url: a.url, ws: ra.wsUrl },
            { url: b.url, ws: rb.wsUrl },
          ],
        },
      },
    });
    const chain = g.gateway.context.chains.get('devnet')!;
    const s = await openSubscriber(t, wsUrl(g.base, '/v1/rpc/public'));
    const id = await s.subscribe('newHeads');
    await waitUntil(() => chain.feeds!.upstreamSubscriptions() === 1 && ra.requests('eth_subscribe') === 1, 10_000, 'subscribed on a');
    await Promise.all([nodeCall(a.url, 'anvil_mine', ['0xc8']), nodeCall(b.url, 'anvil_mine', ['0xc8'])]);
    await waitUntil(() => lastNumber(s, id) === 200 && chain.health.upstreams.every((u) => u.head === 200), 10_000, 'both nodes at 200');

    await resetToNewChain(a);
    await waitUntil(() => rb.requests('eth_subscribe') === 1 && chain.feeds!.upstreamSubscriptions() === 1, 10_000, 'the feed moved to b');
    await nodeCall(b.url, 'evm_mine');
    await waitUntil(() => lastNumber(s, id) === 201, 10_000, "b's 201");
    t.same(s.resultsOf(id).map(numberOf), range(1, 201), "a's new chain was never sent: 1..200, then b's 201");
    t.ok(
      g.logLines.some((l) => l.includes('deeper than a reorg: treated as a new chain')),
      "a's reset is logged",
    );
    t.ok(
      g.logLines.some((l) => l.includes('newHeads feed drops the heads of a node that went back from 200 to 1')),
      'and its heads dropped',
    );
    t.ok(
      g.logLines.some((l) => l.includes('out of rotation')),
      'and the move off a',
    );

    await resetToNewChain(b);
    await nodeCall(b.url, 'anvil_mine', ['0x2']);
    await waitUntil(() => lastNumber(s, id) === 3, 10_000, "b's new chain");
    t.same(s.resultsOf(id).map(numberOf), [...range(1, 201), 1, 2, 3], "every node on a new chain: it is followed from b's head 1");
    t.same(
      s
        .resultsOf(id)
        .slice(201)
        .map((h) => h.hash),
      await Promise.all([1, 2, 3].map((n) => hashAt(b, n))),
      "b's new blocks",
    );
    t.ok(
      g.logLines.some((l) => l.includes('newHeads feed resumes on a new chain from head 1')),
      'logged',
    );
  },
);

/** The answer to a subscribe that could not get an upstream subscription (request() matched it by its id): -32603, no result. */
function assertUpstreamError(t: Test, a: Answer, message: RegExp, what: string): void {
  t.notOk('result' in a, `${what}: no subscription id`);
  t.equal(a.error?.code, -32603, `${what}: the upstream error's code`);
  t.match(a.error?.message, message, `${what}: the reason`);
}

t.test('eth_subscribe with the only upstream WebSocket unreachable: -32603 at once, no id, no RU; the socket stays', async (t) => {
  const node = await anvilFor(t, { chainId: 31337 });
  const down = await closedPort();
  // timeout_s far above request()'s 10 s: an answer that waited for it would fail the test.
  const g = await gatewayFor(t, {
    chains: { devnet: { chain_id: 31337, timeout_s: 120, upstreams: [{ url: node.url, ws: `ws://127.0.0.1:${down}` }] } },
  });
  const ledger = g.gateway.context.tenancy.ledger;
  const owner = keyedEndpoint(g, 1000);
  const s = await openSubscriber(t, wsUrl(g.base, `/v1/rpc/${owner.key}`));
  for (const params of [['newHeads'], ['logs', ECHO_FILTER], ['newHeads']]) {
    const a = await s.request('eth_subscribe', params);
    assertUpstreamError(t, a, /^Upstream node error: the upstream WebSocket could not be reached$/, String(params[0]));
  }
  t.equal(s.notifications.length, 0, 'no notification');
  t.match(await g.gateway.streamStats(), { subscriptions: 0 }, 'no subscription held');
  ledger.flush();
  t.equal(ledger.available(owner.ownerId), 1000, 'the refused subscribes cost nothing');
  t.notOk(s.isClosed, 'the socket stays open');
  t.match((await s.request('eth_chainId')).result, '0x7a69', 'and answers calls');
});

t.test("eth_subscribe with an upstream WebSocket that never answers its handshake: -32603 after the chain's timeout_s", async (t) => {
  const node = await anvilFor(t, { chainId: 31337 });
  const hanging = await fakeUpstream(t, 'hang');
  const g = await gatewayFor(t, {
    chains: { devnet: { chain_id: 31337, timeout_s: 1, upstreams: [{ url: node.url, ws: `ws://127.0.0.1:${hanging.port}` }] } },
  });
  const s = await openSubscriber(t, wsUrl(g.base, '/v1/rpc/public'));
  const a = await s.request('eth_subscribe', ['newHeads']);
  assertUpstreamError(t, a, /^Upstream node error: no upstream subscription within 1 s$/, 'a hanging handshake');
  t.ok(
    hanging.requests.some((r) => /^GET .* HTTP\/1\.1/.test(r) && /upgrade: websocket/i.test(r)),
    'the gateway did try the node',
  );
  t.match(await g.gateway.streamStats(), { subscriptions: 0 });
});

t.test('during an outage a new subscribe is refused while the subscribers already there are kept; once back it is served', async (t) => {
  const { node, relay, feeds, publicUrl } = await devnet(t);
  const kept = await openSubscriber(t, publicUrl);
  const keptId = await kept.subscribe('newHeads');
  await waitUntil(() => feeds.upstreamSubscriptions() === 1, 10_000, 'the upstream subscription');
  relay.cut();
  await waitUntil(() => feeds.upstreamSubscriptions() === 0, 10_000, 'the loss noticed');

  const late = await openSubscriber(t, publicUrl);
  const refused = await late.request('eth_subscribe', ['newHeads']);
  assertUpstreamError(t, refused, /could not be reached/, 'a subscribe while the only node is cut');
  t.notOk(kept.isClosed, 'the subscriber from before the outage is kept');

  relay.restore();
  await waitUntil(() => feeds.upstreamSubscriptions() === 1, 10_000, 'the upstream subscription back');
  const lateId = await late.subscribe('newHeads');
  t.equal(lateId, keptId, "once back, the late subscriber gets the kind's shared id");
  const start = await blockNumber(node);
  await nodeCall(node.url, 'evm_mine');
  await waitUntil(() => late.resultsOf(lateId).length === 1 && lastNumber(kept, keptId) === start + 1, 5000, 'both served the next block');
  t.equal(numberOf(late.resultsOf(lateId)[0]!), start + 1);
});
