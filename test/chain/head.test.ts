/**
 * A chain's head (ChainRuntime.head), over real anvils behind counting proxies (dead and oversized nodes
 * only for the faults): the health tracker's head first, else one eth_blockNumber of the gateway's own at a
 * time and at most once a second; upstreams in turn.
 */
import t from 'tap';
import { upstreamsInTurn } from '../../src/chain/head.js';
import type { ChainRuntime } from '../../src/chain/runtime.js';
import { chainOver, tick } from '../support/chain.js';
import { countingProxy } from '../support/counting-proxy.js';
import { result } from '../support/dev-chain.js';
import { closedPort, fakeUpstream } from '../support/fake-upstream.js';
import { anvilFor } from '../support/gateway.js';

/** Takes the upstream at `index` out of rotation, as three failed calls do. */
function failing(chain: ChainRuntime, index: number): void {
  for (let k = 0; k < 3; k++) chain.health.upstreams[index]!.record('failed', 1);
}

t.test("the gateway's own head: one poll at a time, shared by concurrent callers, at most once a second", async (t) => {
  const node = await anvilFor(t);
  await result(node.url, 'anvil_mine', ['0xa']);
  const proxy = await countingProxy(t, node.url);
  const chain = chainOver(t, [proxy.url]);
  const head = chain.head;
  t.not(chainOver(t, [proxy.url]).head, head, 'each chain its own tracker, made with it');
  t.equal(head.now(), null, 'nothing known at first; now() never waits');
  const fresh = await Promise.all(Array.from({ length: 10 }, () => head.fresh()));
  t.same(fresh, Array(10).fill(10));
  t.equal(proxy.count('eth_blockNumber'), 2, 'the poll now() started, and one more for all who asked after it started');
  t.same(new Set(Array.from({ length: 100 }, () => head.now())), new Set([10]), 'now() tells the polled head');
  t.equal(chain.head.now(), 10);
  t.equal(proxy.count('eth_blockNumber'), 2, 'a head polled within the second is used as it is');
  head.note(42);
  t.equal(head.now(), 42, 'a head learned elsewhere');
  t.equal(await head.fresh(), 10, 'fresh() asks the node: its answer is the best known now');
  t.equal(proxy.count('eth_blockNumber'), 3);
});

t.test("the health tracker's head comes first; fresh() gives the higher of it and a node's answer", async (t) => {
  const node = await anvilFor(t);
  await result(node.url, 'anvil_mine', ['0x5']);
  const proxy = await countingProxy(t, node.url);
  const chain = chainOver(t, [proxy.url]);
  chain.health.upstreams[0]!.reportHead(3);
  const head = chain.head;
  t.equal(head.now(), 3);
  await tick(20);
  t.equal(proxy.count('eth_blockNumber'), 0, 'no poll while the tracker knows a head');
  t.equal(await head.fresh(), 5, 'the node is ahead of the tracker');
  chain.health.upstreams[0]!.reportHead(9);
  t.equal(await head.fresh(), 9, 'the tracker is ahead of the node');
});

t.test('a node that cannot answer with a head is passed over; with none, the head stays unknown', async (t) => {
  const node = await anvilFor(t);
  await result(node.url, 'anvil_mine', ['0x7']);
  const dead = `http://127.0.0.1:${await closedPort()}`;
  const huge = await fakeUpstream(t, (socket) => {
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, result: `0x${'1'.repeat(40_000)}` });
    socket.write(`HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`);
  });
  for (const [why, bad] of [
    ['unreachable', dead],
    ['answers megabytes', huge.url],
  ] as const) {
    const chain = chainOver(t, [bad, node.url]);
    failing(chain, 1);
    t.same(
      upstreamsInTurn(chain).map((u) => u.label),
      [chain.upstreams[0]!.label, chain.upstreams[1]!.label],
      `${why}: the chain's pick first, then the rest`,
    );
    t.equal(await chain.head.fresh(), 7, `${why}: the next node answers`);
  }
  const none = chainOver(t, [dead]);
  t.equal(await none.head.fresh(), null, 'never rejects: null when no node answered');
  t.equal(none.head.now(), null);
  const inTurn = chainOver(t, [dead, node.url, huge.url]);
  failing(inTurn, 0);
  failing(inTurn, 2);
  t.same(
    upstreamsInTurn(inTurn).map((u) => u.label),
    [1, 0, 2].map((i) => inTurn.upstreams[i]!.label),
    'the pick, then the others in configured order',
  );
});
