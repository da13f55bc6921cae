/**
 * The served head (chain/served-head.ts) over a chain health driven by hand with a fake clock, as the runtime
 * wires it (ChainHealthOptions.onHeads): the highest block k nodes in rotation reached (min_nodes, or a majority),
 * never back while some node in rotation has it, down with its nodes when every one is below it (logged once);
 * and a forwarded eth_blockNumber, over real anvils on one chain, answered with it whichever node answered.
 */
import t from 'tap';
import { createServedHead, nodesToAgree, type ServedHeadTracker } from '../../src/chain/served-head.js';
import { methodRow } from '../../src/jsonrpc/methods.js';
import type { AnswerSink } from '../../src/pipeline/forward.js';
import { routeCall } from '../../src/pipeline/route-call.js';
import { createChainHealth, type ChainHealth } from '../../src/upstreams/selection.js';
import { chainOver } from '../support/chain.js';
import { sameChainAnvils } from '../support/same-chain.js';

interface Served {
  health: ChainHealth;
  served: ServedHeadTracker;
  /** Each head watch() told, in order. */
  told: number[];
  /** Each warn logged, with its fields. */
  warns: Array<{ msg: string; fields: Record<string, string | number> | undefined }>;
  /** The gauge's last value. */
  gauge: { value: number | null };
  /** Reports the heads of nodes 0, 1, … in order (null: no report). */
  heads(...heads: Array<number | null>): void;
}

function servedOver(n: number, minNodes?: number, maxLagBlocks = 5): Served {
  const now = 1_000;
  let served: ServedHeadTracker | null = null;
  const health = createChainHealth(
    Array.from({ length: n }, (_, i) => `http://node${i}:8545`),
    { maxLagBlocks, now: () => now, onHeads: () => served?.update() },
  );
  const warns: Served['warns'] = [];
  const gauge = { value: null as number | null };
  served = createServedHead(health, {
    minNodes,
    log: (level, msg, fields) => {
      if (level === 'warn') warns.push({ msg, fields });
    },
    gauge: {
      set(v: number) {
        gauge.value = v;
      },
    },
  });
  const told: number[] = [];
  served.watch((head) => told.push(head));
  return {
    health,
    served,
    told,
    warns,
    gauge,
    heads(...heads) {
      heads.forEach((h, i) => {
        if (h !== null) health.upstreams[i]!.reportHead(h);
      });
    },
  };
}

function fail(h: ChainHealth, i: number): void {
  for (let k = 0; k < 3; k++) h.upstreams[i]!.record('failed', 1);
}

t.test('nodesToAgree: min_nodes, else a majority of the nodes in rotation, never more than there are', async (t) => {
  t.same(
    [1, 2, 3, 4, 5].map((n) => nodesToAgree(n, undefined)),
    [1, 2, 2, 3, 3],
  );
  t.equal(nodesToAgree(3, 1), 1);
  t.equal(nodesToAgree(3, 3), 3);
  t.equal(nodesToAgree(2, 3), 2, 'more than in rotation: all of them');
});

t.test('three nodes at 10, 12 and 15: min_nodes 1, 2, 3 and the default majority', async (t) => {
  for (const [minNodes, want] of [
    [1, 15],
    [2, 12],
    [3, 10],
    [undefined, 12],
  ] as const) {
    const s = servedOver(3, minNodes);
    s.heads(10, 12, 15);
    t.equal(s.served.now(), want, `min_nodes ${minNodes ?? 'default (2 of 3)'}: ${want}`);
    t.equal(s.gauge.value, want, 'the gauge shows it');
    t.equal(s.told.at(-1), want, 'watchers are told');
  }
});

t.test('at a start, nothing is served until k nodes told a head; the first to answer does not set it', async (t) => {
  const s = servedOver(3);
  t.equal(s.served.now(), null, 'nothing known');
  s.heads(15);
  t.equal(s.served.now(), null, 'one head of three nodes: no majority yet');
  s.heads(null, 10);
  t.equal(s.served.now(), 10, 'two heads: the lower one is what two nodes have reached');
  s.heads(null, null, 12);
  t.equal(s.served.now(), 12);
  t.same(s.told, [10, 12], 'each change told once, in order');
  s.health.upstreams[0]!.reportHead(15);
  t.same(s.told, [10, 12], 'a report that changes nothing is not told');
});

t.test('mining moves it; a node leaving rotation never takes it back', async (t) => {
  const s = servedOver(3);
  s.heads(10, 12, 15);
  s.heads(13, 14, 16);
  t.equal(s.served.now(), 14);
  fail(s.health, 1);
  t.same(s.health.healthyIndices(), [0, 2]);
  t.equal(s.served.now(), 14, 'node 1 failing: 13 and 16 are left, and 16 has reached 14, so 14 stays');
  s.heads(18);
  t.equal(s.served.now(), 16, 'two in rotation: both must reach it');
  // Node 0 lags out of rotation: more than five blocks behind the best head.
  s.heads(null, null, 25);
  t.same(s.health.healthyIndices(), [2]);
  t.equal(s.served.now(), 25, 'one node in rotation: its head');
  t.same(s.warns, [], 'nothing went back');
  s.health.upstreams[1]!.reportProbe(25, 1);
  t.same(s.health.healthyIndices(), [1, 2], 'node 1 restored by a probe');
  t.equal(s.served.now(), 25);
});

t.test('min_nodes above the nodes in rotation: the head every node in rotation has reached', async (t) => {
  const s = servedOver(3, 3);
  s.heads(10, 12, 15);
  t.equal(s.served.now(), 10);
  fail(s.health, 0);
  t.equal(s.served.now(), 12, 'two nodes left with min_nodes 3: both have reached 12');
  s.heads(null, 14, 16);
  t.equal(s.served.now(), 14);
});

t.test('every node in rotation goes back (a reorg to a shorter chain, a reset): it follows them, logged once', async (t) => {
  const s = servedOver(3);
  s.heads(20, 20, 20);
  t.equal(s.served.now(), 20);
  s.heads(18);
  t.equal(s.served.now(), 20, 'one node back: two still have 20');
  s.heads(null, 18);
  t.equal(s.served.now(), 20, 'two back: the third still has 20, and it is in rotation');
  t.same(s.warns, []);
  s.heads(null, null, 17);
  t.equal(s.served.now(), 18, 'every node below 20: down to what two of them reached');
  t.same(s.told, [20, 18]);
  t.equal(s.gauge.value, 18);
  t.equal(s.warns.length, 1, 'logged once');
  t.match(s.warns[0], { msg: /went back from 20 to 18/, fields: { from: 20, to: 18 } });
  s.heads(19, 19, 19);
  t.equal(s.served.now(), 19, 'and up again from there');
  t.equal(s.warns.length, 1);
});

t.test('a reset deeper than any reorg: nodes lag out one by one, then the chain follows them down', async (t) => {
  const s = servedOver(3);
  s.heads(500, 500, 500);
  s.heads(0);
  t.same(s.health.healthyIndices(), [1, 2], 'node 0 reset: far behind, out for lagging');
  t.equal(s.served.now(), 500);
  s.heads(null, 1);
  t.equal(s.served.now(), 500, 'node 2 alone in rotation still has 500');
  s.heads(null, null, 2);
  t.same(s.health.healthyIndices(), [0, 1, 2], 'all on the new chain');
  t.equal(s.served.now(), 1);
  t.equal(s.warns.length, 1);
  t.match(s.warns[0]!.fields, { from: 500, to: 1 });
});

t.test('the nodes that had it all leave rotation: the rest are all below it, so it follows them', async (t) => {
  const s = servedOver(3, 2);
  s.heads(10, 14, 14);
  t.equal(s.served.now(), 14);
  fail(s.health, 1);
  fail(s.health, 2);
  t.same(s.health.healthyIndices(), [0]);
  t.equal(s.served.now(), 10, 'no node in rotation has 14');
  t.equal(s.warns.length, 1);
});

t.test('no node in rotation: the head stays as it was', async (t) => {
  const s = servedOver(2);
  s.heads(7, 7);
  fail(s.health, 0);
  fail(s.health, 1);
  t.same(s.health.healthyIndices(), []);
  t.equal(s.served.now(), 7);
  t.same(s.warns, []);
});

t.test('a single node: the head served is its head, up and down', async (t) => {
  const s = servedOver(1);
  t.equal(s.served.now(), null);
  s.heads(5);
  t.equal(s.served.now(), 5);
  s.heads(9);
  t.equal(s.served.now(), 9);
  s.heads(8);
  t.equal(s.served.now(), 8, 'a reorg one block shorter: followed');
  t.equal(s.warns.length, 1);
  t.same(s.told, [5, 9, 8]);
});

t.test('now() is a field read: no work per call', async (t) => {
  const s = servedOver(3);
  s.heads(10, 12, 15);
  let reads = 0;
  const upstreams = s.health.upstreams;
  const counted = new Proxy(upstreams, {
    get(target, key, receiver) {
      reads++;
      return Reflect.get(target, key, receiver);
    },
  });
  Object.defineProperty(s.health, 'upstreams', { value: counted });
  for (let k = 0; k < 1000; k++) s.served.now();
  t.equal(reads, 0, 'the health is not read');
});

/** eth_blockNumber forwarded to a node of `chain` (routeCall, as the pipeline sends it): the whole answer's text. */
function forwardedBlockNumber(chain: ReturnType<typeof chainOver>, id: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const row = methodRow('eth_blockNumber');
    if (row === undefined) throw new Error('eth_blockNumber is not in the catalogue');
    const sink: AnswerSink & { failedUpstream?: string } = {
      whole: (body) => resolve(body.toString()),
      begin() {},
      chunk: () => true,
      end: () => reject(new Error('streamed')),
      fail: (_started, reason) => reject(new Error(reason)),
    };
    routeCall(chain, row, '[]', String(id), sink);
  });
}

t.test('a forwarded eth_blockNumber answers the served head, whichever node answered it', async (t) => {
  const nodes = await sameChainAnvils(t, 3, { transfers: false });
  await nodes.mineTo(0, 10);
  await nodes.mineTo(1, 12);
  await nodes.mineTo(2, 15);
  const chain = chainOver(
    t,
    nodes.nodes.map((n) => n.url),
  );
  // The first probes' reports (until a majority has told a head, a forwarded answer is the node's own).
  for (const [i, head] of [10, 12, 15].entries()) chain.health.upstreams[i]!.reportHead(head);
  // A write just now: freshHead() is null, so every eth_blockNumber is asked of a node (one drawn at random).
  chain.noteWrite();
  t.equal(chain.freshHead(), null);
  const answers: string[] = [];
  for (let id = 1; id <= 30; id++) answers.push(await forwardedBlockNumber(chain, id));
  t.same(
    new Set(answers.map((a) => JSON.parse(a).result)),
    new Set(['0xc']),
    'every answer the head two of three have: never 10, never 15',
  );
  t.equal(answers[6], '{"jsonrpc":"2.0","id":7,"result":"0xc"}', "with the call's id");
  t.ok(
    chain.health.upstreams.every((u) => u.status().calls > 0),
    'each node answered some (drawn at random: 3 × (2/3)^30 that one never is)',
  );
});
