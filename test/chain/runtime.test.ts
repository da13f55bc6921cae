/**
 * A chain's runtime: the choice of upstream by health, the fresh served head behind eth_blockNumber answers,
 * the gateway's own calls moved off a node that does not answer, and the state it owns (head, cache view,
 * calls in flight, filters, subscription and event hubs), stopped by close(). Against real anvils, a fake
 * beacon node and a closed port.
 */
import t from 'tap';
import { validateConfig } from '../../src/config/schema.js';
import { createResponseCache, ENTRY_OVERHEAD_BYTES } from '../../src/chain/response-cache.js';
import { createChainRuntime, HEAD_FRESH_MS, WRITE_SETTLE_MS } from '../../src/chain/runtime.js';
import type { SubscriberConn } from '../../src/fanout/subscriptions.js';
import { NodeRpcError } from '../../src/upstreams/rpc-call.js';
import { chainOver as ownedChain, tick } from '../support/chain.js';
import { countingProxy } from '../support/counting-proxy.js';
import { result } from '../support/dev-chain.js';
import { anvilFor } from '../support/gateway.js';
import { fakeBeacon } from '../support/fake-beacon.js';
import { waitFor } from '../support/wait-for.js';
import type { SseEnd } from '../../src/fanout/sse-hub.js';

function chainOver(urls: string[]) {
  const r = validateConfig({
    storage: { path: '/tmp/unused.db' },
    chains: { devnet: { chain_id: 31337, upstreams: urls.map((url) => ({ url })) } },
  });
  if (!r.ok) throw new Error(r.errors.join('\n'));
  return createChainRuntime(r.config.chains.devnet!);
}

const fail = (chain: ReturnType<typeof chainOver>, i: number): void => {
  for (let k = 0; k < 3; k++) chain.health.upstreams[i]!.record('failed', 1);
};

t.test('picks follow health; pickUpstream still names a node when none is in rotation', async (t) => {
  const chain = chainOver(['http://127.0.0.1:1', 'http://127.0.0.1:2']);
  t.teardown(() => chain.close());
  fail(chain, 0);
  for (let k = 0; k < 10; k++) t.equal(chain.pickHealthy()?.index, 1);
  t.equal(chain.pickHealthy(new Set([1])), null, 'nothing else in rotation');
  fail(chain, 1);
  t.equal(chain.pickHealthy(), null);
  const named = new Set([0, 1, 2, 3].map(() => chain.pickUpstream().label));
  t.same([...named].sort(), ['127.0.0.1:1', '127.0.0.1:2'], 'round robin over all for the Beacon forwarder (named by host:port)');
});

t.test('freshHead: the served head while a node at it reported recently and after the last write', async (t) => {
  const chain = chainOver(['http://127.0.0.1:1', 'http://127.0.0.1:2', 'http://127.0.0.1:3']);
  t.teardown(() => chain.close());
  const [a, b, c] = chain.health.upstreams;
  t.equal(chain.freshHead(), null, 'no head known');
  a!.reportHead(7);
  t.equal(chain.freshHead(), null, 'one node of three told its head: none served yet');
  b!.reportHead(9);
  t.equal(chain.freshHead(), 7, 'the head two of three nodes have reached, not the best (9)');
  c!.reportHead(9);
  t.equal(chain.freshHead(), 9);
  t.equal(chain.served.now(), 9);
  chain.noteWrite();
  t.equal(chain.freshHead(), null, 'a write makes heads reported before it stale');
  b!.reportHead(10);
  t.equal(chain.freshHead(), null, `nor those reported within ${WRITE_SETTLE_MS} ms of it`);
  await new Promise((r) => setTimeout(r, WRITE_SETTLE_MS + 20));
  a!.reportHead(8);
  t.equal(chain.freshHead(), null, 'the only report since the write settled is below the served head');
  c!.reportHead(10);
  t.equal(chain.freshHead(), 10);
  fail(chain, 2);
  t.equal(chain.served.now(), 10, 'the node left at 10 keeps it served');
  t.equal(chain.freshHead(), null, "a failing node's report does not count, and the other at 10 is from before the write settled");
  b!.reportHead(10);
  t.equal(chain.freshHead(), 10);
  await new Promise((r) => setTimeout(r, HEAD_FRESH_MS + 50));
  t.equal(chain.freshHead(), null, `not after ${HEAD_FRESH_MS} ms without a report`);
});

t.test('call(): moved once off a node that does not answer; a node error is an answer', async (t) => {
  const node = await anvilFor(t);
  const chain = chainOver(['http://127.0.0.1:1', node.url]);
  t.teardown(() => chain.close());
  for (let k = 0; k < 20; k++) t.equal(await chain.call('eth_chainId', []), '0x7a69', `call ${k}`);
  t.ok(chain.health.upstreams[0]!.status().calls > 0, 'the dead node was tried and its failures counted');
  t.equal(chain.health.upstreams[0]!.status().errorRate, 1);
  const refused = await chain.call('eth_getBalance', ['not an address', 'latest']).then(
    () => null,
    (e: unknown) => e,
  );
  t.ok(refused instanceof NodeRpcError, "the node's error object rejects as a NodeRpcError");
  t.same(
    chain.health.upstreams.map((u) => u.inflight),
    [0, 0],
  );
  fail(chain, 1);
  fail(chain, 0);
  await t.rejects(chain.call('eth_chainId', []), /no healthy upstream/);
});

t.test('events: a beacon chain owns its event hub, streamed from its nodes on clients of their own, closed with the chain', async (t) => {
  const evm = chainOver(['http://127.0.0.1:1']);
  t.teardown(() => evm.close());
  t.equal(evm.events, null, 'no event streams on an evm chain');
  const node = await fakeBeacon(t);
  const r = validateConfig({
    storage: { path: '/tmp/unused.db' },
    chains: { 'devnet-beacon': { kind: 'beacon', upstreams: [{ url: node.url }] } },
  });
  if (!r.ok) throw new Error(r.errors.join('\n'));
  const chain = createChainRuntime(r.config.chains['devnet-beacon']!);
  t.teardown(() => chain.close());
  const written: string[] = [];
  const ends: SseEnd[] = [];
  let started = false;
  chain.events!.add(
    {
      start: () => void (started = true),
      write: (bytes) => written.push(bytes.toString()) > 0,
      close: (reason) => void ends.push(reason),
    },
    ['head'],
  );
  await waitFor(() => started, { what: 'the head stream opens' });
  node.emit('head', 1);
  await waitFor(() => written.some((w) => w.startsWith('event: head')), { what: 'the head stream delivers' });
  t.equal(node.streamsOpen('head'), 1, 'one upstream stream for the topic');
  t.same(chain.upstreams[0]!.stats().busy, 0, "the stream holds no socket of the calls' pool");
  chain.close();
  t.same(ends, ['shutdown'], 'closing the chain ends its streams');
  await waitFor(() => node.streamsOpen('head') === 0, { what: 'the upstream stream is closed' });
});

t.test("the chain's head is its own, read from its health tracker", async (t) => {
  const a = ownedChain(t, ['http://127.0.0.1:1']);
  const b = ownedChain(t, ['http://127.0.0.1:1']);
  a.health.upstreams[0]!.reportHead(7);
  t.equal(a.head.now(), 7, "the tracker's best head");
  b.head.note(3);
  t.equal(b.head.now(), 3, 'a head noted on one chain');
  t.equal(a.head.now(), 7, 'is not the head of another');
});

t.test("one response store for the gateway's budget, read by each chain through its own view", async (t) => {
  const result = Buffer.from('"0x1"');
  // Room for eight entries (the least an entry of an eighth of the budget allows): a ninth on any chain
  // evicts the least recently used, whichever chain it is of.
  const store = createResponseCache(8 * (result.length + ENTRY_OVERHEAD_BYTES));
  const a = ownedChain(t, ['http://127.0.0.1:1'], { responseCache: store });
  const b = ownedChain(t, ['http://127.0.0.1:2'], { responseCache: store }, 'other');
  t.ok(a.cache.enabled);
  a.cache.set(a.cacheScope, 'call', result);
  t.same(a.cache.get('call'), result, 'a chain reads what it kept under its scope');
  t.equal(b.cache.get('call'), undefined, "another chain's view does not see it");
  b.cache.set(b.cacheScope, 'call', result);
  t.equal(store.stats().entries, 2, 'both in the one store');
  for (let k = 0; k < 8; k++) b.cache.set(b.cacheScope, `more${k}`, result);
  t.equal(a.cache.get('call'), undefined, "one chain's answers make room under the shared budget");
  const none = ownedChain(t, ['http://127.0.0.1:3']);
  t.notOk(none.cache.enabled, 'a chain given no store keeps nothing');
});

t.test('each chain owns its table of calls in flight', async (t) => {
  const a = ownedChain(t, ['http://127.0.0.1:1']);
  const b = ownedChain(t, ['http://127.0.0.1:1']);
  let done: ((outcome: { kind: 'streamed' }) => void) | null = null;
  const flight = { attached: 1, ended: false, call: null, close() {} };
  a.inFlight.join(
    'key',
    (d) => {
      done = d;
      return flight;
    },
    () => {},
  );
  t.equal(a.inFlight.inFlight(), 1);
  t.equal(b.inFlight.inFlight(), 0, "another chain's table is empty");
  let led = false;
  b.inFlight.join(
    'key',
    () => {
      led = true;
      return flight;
    },
    () => {},
  );
  t.ok(led, 'the same key on another chain leads a call of its own');
  done!({ kind: 'streamed' });
  t.equal(a.inFlight.inFlight(), 0);
});

t.test("close() drops the chain's filters and stops the block poll that fed them", async (t) => {
  const node = await anvilFor(t);
  const proxy = await countingProxy(t, node.url);
  const chain = ownedChain(t, [proxy.url]);
  const id = (await chain.filters.call('ep:x', 'eth_newBlockFilter', [])) as string;
  t.equal(chain.filters.size(), 1);
  await waitFor(() => proxy.count('eth_getBlockByNumber') > 0, { what: 'the block poll' });
  chain.close();
  t.equal(chain.filters.size(), 0, 'no filter is left');
  t.same(await chain.filters.call('ep:x', 'eth_getFilterLogs', [id]), { code: -32000, message: 'filter not found' });
  const polled = proxy.count('eth_getBlockByNumber');
  await result(node.url, 'anvil_mine', ['0x1']);
  await tick(1_500);
  t.equal(proxy.count('eth_getBlockByNumber'), polled, 'nothing polls the node after close()');
});

/** A subscriber as the hub sees it, collecting what it is sent. */
function subscriber(ownerId: number): SubscriberConn & { got: Buffer[] } {
  const got: Buffer[] = [];
  return {
    ownerId,
    endpointId: 'ep1',
    closed: false,
    firstSubId: null,
    firstSub: null,
    moreSubs: null,
    got,
    deliver: (bytes) => void got.push(bytes),
    close() {},
  };
}

t.test("subscriptions: the chain's hub over its feeds, priced and paid as the gateway says; none without ws", async (t) => {
  const node = await anvilFor(t);
  const r = validateConfig({
    storage: { path: '/tmp/unused.db' },
    server: { default_chain: 'ws' },
    chains: {
      ws: { chain_id: 31337, upstreams: [{ url: node.url, ws: node.url.replace('http', 'ws') }] },
      plain: { chain_id: 1, upstreams: [{ url: node.url }] },
    },
  });
  if (!r.ok) throw new Error(r.errors.join('\n'));
  const charged: Array<[number, string, number, number]> = [];
  const opts = {
    subscriptionMetering: {
      ruPerMessage: (bytes: number) => bytes,
      charge: (ownerId: number, endpointId: string, ru: number, deliveries: number) => {
        charged.push([ownerId, endpointId, ru, deliveries]);
        return true;
      },
    },
  };
  const plain = createChainRuntime(r.config.chains.plain!, opts);
  t.teardown(() => plain.close());
  t.equal(plain.subscriptions, null, 'no hub on a chain without a ws upstream');
  const chain = createChainRuntime(r.config.chains.ws!, opts);
  t.teardown(() => chain.close());
  const hub = chain.subscriptions!;
  const conn = subscriber(42);
  const opened = await hub.subscribe(conn, 'newHeads', undefined);
  t.ok(opened.ok, 'subscribed');
  await result(node.url, 'anvil_mine', ['0x1']);
  await waitFor(() => conn.got.length === 1 && charged.length === 1, { what: 'the new head, charged' });
  t.same(charged, [[42, 'ep1', conn.got[0]!.length, 1]], "one delivery, charged at the metering's price");
  t.equal(hub.stats().subscriptions, 1);
});
