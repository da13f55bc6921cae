/**
 * A chain's runtime: the choice of upstream by health, the fresh-head rule behind eth_blockNumber answers,
 * and the gateway's own calls moved off a node that does not answer. Against a real anvil and a closed port.
 */
import t from 'tap';
import { validateConfig } from '../../src/config/schema.js';
import { createChainRuntime, HEAD_FRESH_MS, WRITE_SETTLE_MS } from '../../src/chain/runtime.js';
import { NodeRpcError } from '../../src/upstreams/rpc-call.js';
import { anvilFor } from '../support/gateway.js';
import { fakeBeacon, until } from '../support/fake-beacon.js';
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
  t.same([...named].sort(), ['http://127.0.0.1:1', 'http://127.0.0.1:2'], 'round robin over all for the Beacon forwarder');
});

t.test('freshHead: the best head while reported recently and after the last write', async (t) => {
  const chain = chainOver(['http://127.0.0.1:1', 'http://127.0.0.1:2']);
  t.teardown(() => chain.close());
  t.equal(chain.freshHead(), null, 'no head known');
  chain.health.upstreams[0]!.reportHead(7);
  chain.health.upstreams[1]!.reportHead(9);
  t.equal(chain.freshHead(), 9);
  chain.noteWrite();
  t.equal(chain.freshHead(), null, 'a write makes heads reported before it stale');
  chain.health.upstreams[1]!.reportHead(10);
  t.equal(chain.freshHead(), null, `nor those reported within ${WRITE_SETTLE_MS} ms of it`);
  await new Promise((r) => setTimeout(r, WRITE_SETTLE_MS + 20));
  chain.health.upstreams[0]!.reportHead(8);
  t.equal(chain.freshHead(), null, 'the best head is still one from before the write settled');
  chain.health.upstreams[1]!.reportHead(10);
  t.equal(chain.freshHead(), 10);
  fail(chain, 1);
  t.equal(chain.freshHead(), 8, "a failing node's head does not count");
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
  await until('the head stream opens', () => started);
  node.emit('head', 1);
  await until('the head stream delivers', () => written.some((w) => w.startsWith('event: head')));
  t.equal(node.streamsOpen('head'), 1, 'one upstream stream for the topic');
  t.same(chain.upstreams[0]!.stats().busy, 0, "the stream holds no socket of the calls' pool");
  chain.close();
  t.same(ends, ['shutdown'], 'closing the chain ends its streams');
  await until('the upstream stream is closed', () => node.streamsOpen('head') === 0);
});
