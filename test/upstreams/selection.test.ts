import t from 'tap';
import { createChainHealth, type ChainHealth, type NodeChoice } from '../../src/upstreams/selection.js';
import { seeded } from '../support/seeded.js';

function chain(n: number, maxLagBlocks = 5, seed = 1): ChainHealth {
  // A clock that stands still: every outcome stays in the window for the whole test.
  return createChainHealth(
    Array.from({ length: n }, (_, i) => `http://node${i}:8545`),
    { maxLagBlocks, now: () => 1_000, random: seeded(seed) },
  );
}

function fail(h: ChainHealth, i: number): void {
  for (let k = 0; k < 3; k++) h.upstreams[i]!.record('failed', 1);
}

/** Share of `draws` picks that went to each index (null picks counted apart). */
function shares(h: ChainHealth, draws: number, exclude?: ReadonlySet<number>): { share: number[]; none: number } {
  const counts = h.upstreams.map(() => 0);
  let none = 0;
  for (let k = 0; k < draws; k++) {
    const i = h.pick(exclude);
    if (i === null) none++;
    else counts[i]!++;
  }
  return { share: counts.map((c) => c / draws), none };
}

t.test('fresh upstreams are all in rotation and all get calls', async (t) => {
  const h = chain(3);
  t.same(h.healthyIndices(), [0, 1, 2]);
  t.equal(h.bestHead(), null);
  const { share } = shares(h, 3000);
  for (const s of share) t.ok(s > 0.28 && s < 0.39, `about a third each: ${share}`);
});

t.test('lag: exactly maxLagBlocks behind stays in, one more block is out', async (t) => {
  const h = chain(2, 5);
  h.upstreams[0]!.reportHead(100);
  h.upstreams[1]!.reportHead(95);
  t.same(h.healthyIndices(), [0, 1]);
  h.upstreams[1]!.reportHead(94);
  t.same(h.healthyIndices(), [0]);
  t.equal(h.upstreams[1]!.status().reason, 'lagging');
  t.equal(h.upstreams[1]!.status().lag, 6);
  t.same(shares(h, 500).share, [1, 0], 'a lagging node gets no calls');
  h.upstreams[1]!.reportHead(101);
  t.same(h.healthyIndices(), [0, 1], 'caught up (and ahead): back in');
  t.equal(h.bestHead(), 101);

  const strict = chain(2, 0);
  strict.upstreams[0]!.reportHead(100);
  strict.upstreams[1]!.reportHead(99);
  t.same(strict.healthyIndices(), [0], 'maxLagBlocks 0: one block behind is out');
});

t.test('bestHead and lag ignore failing upstreams', async (t) => {
  const h = chain(3, 5);
  h.upstreams[0]!.reportHead(500);
  h.upstreams[1]!.reportHead(100);
  h.upstreams[2]!.reportHead(96);
  t.equal(h.bestHead(), 500);
  t.same(h.healthyIndices(), [0]);
  fail(h, 0);
  t.equal(h.bestHead(), 100, "the failing node's head no longer counts");
  t.same(h.healthyIndices(), [1, 2], 'so the others are no longer lagging');
  t.equal(h.upstreams[0]!.status().reason, 'failing');
});

t.test('a node reset to a new chain: logged once, followed only once no node in rotation is ahead of it', async (t) => {
  const lines: string[] = [];
  const h = createChainHealth(['a', 'b', 'c'], {
    maxLagBlocks: 5,
    now: () => 1_000,
    log: (level, msg, fields) => void lines.push(`${level} ${msg} ${JSON.stringify(fields)}`),
  });
  for (const u of h.upstreams) u.reportHead(300);
  t.equal(h.followsNewChain(0, 2), false, 'b and c are at 300: a is only behind the chain');
  t.same(lines, ['warn node head went back from 300 to 2, deeper than a reorg: treated as a new chain {"upstream":"a","from":300,"to":2}']);
  t.equal(h.upstreams[0]!.head, 2, 'the head a feed heard is reported');
  t.same(h.healthyIndices(), [1, 2], 'a lags: out of rotation');
  h.upstreams[1]!.reportHead(1);
  t.equal(h.followsNewChain(0, 3), false, 'c still at 300');
  t.equal(lines.length, 2, "b's reset logged, a's not again");
  fail(h, 2);
  t.equal(h.followsNewChain(0, 4), true, 'c failing, b on the new chain: the chain follows a');
  t.equal(h.followsNewChain(1, 1), true, 'and b, within max_lag_blocks of a');

  const lagging = chain(2, 5);
  lagging.upstreams[0]!.reportHead(300);
  lagging.upstreams[1]!.reportHead(100);
  fail(lagging, 0);
  t.equal(lagging.followsNewChain(1, 101), false, 'a node that never went back is not on a new chain, even when it is all the chain has');
});

t.test('the best head going back more than finalityDepth is told once per drop; less is not', async (t) => {
  const drops: Array<[number, number]> = [];
  const h = createChainHealth(['a', 'b'], {
    maxLagBlocks: 5,
    now: () => 1_000,
    finalityDepth: 64,
    onFinalUndone: (from, to) => void drops.push([from, to]),
  });
  h.upstreams[0]!.reportHead(100);
  h.upstreams[1]!.reportHead(100);
  h.upstreams[0]!.reportHead(36);
  t.same(drops, [], 'b still at 100');
  h.upstreams[1]!.reportHead(36);
  t.same(drops, [], 'back by 64: within the final depth');
  h.upstreams[0]!.reportHead(200);
  h.upstreams[1]!.reportHead(200);
  h.upstreams[0]!.reportHead(3);
  h.upstreams[1]!.reportHead(2);
  t.same(drops, [[200, 3]], 'every node below 200 - 64: final blocks are gone, told once');
  h.upstreams[0]!.reportHead(4);
  t.same(drops, [[200, 3]]);
});

t.test('no upstream in rotation: pick gives null, and a single node comes back on a good probe', async (t) => {
  const h = chain(1);
  t.equal(h.pick(), 0, 'a single fresh node serves');
  fail(h, 0);
  t.equal(h.pick(), null);
  t.same(h.healthyIndices(), []);
  t.equal(h.bestHead(), null);
  h.upstreams[0]!.reportProbe(42, 3);
  t.equal(h.pick(), 0);
  t.equal(h.bestHead(), 42);

  const three = chain(3);
  for (let i = 0; i < 3; i++) fail(three, i);
  t.equal(shares(three, 100).none, 100);
});

t.test('exclude: never an excluded index, null when every node in rotation is excluded', async (t) => {
  const h = chain(3, 5, 7);
  for (let i = 0; i < 3; i++) h.upstreams[i]!.record('ok', 10 * (i + 1));
  for (let mask = 0; mask < 8; mask++) {
    const exclude = new Set([0, 1, 2].filter((i) => (mask & (1 << i)) !== 0));
    const { share, none } = shares(h, 600, exclude);
    for (const i of exclude) t.equal(share[i], 0, `mask ${mask}: ${i} excluded`);
    if (exclude.size === 3) t.equal(none, 600, 'all excluded: null');
    else {
      t.equal(none, 0, `mask ${mask}: always a pick`);
      for (let i = 0; i < 3; i++) if (!exclude.has(i)) t.ok(share[i]! > 0, `mask ${mask}: ${i} gets some`);
    }
  }
  fail(h, 2);
  t.equal(shares(h, 200, new Set([0, 1])).none, 200, 'the only node left is failing');
});

t.test('distribution: the fastest gets most but not all; a node ten times slower gets little', async (t) => {
  const h = chain(3, 5, 42);
  const latencies = [10, 20, 100];
  for (let i = 0; i < 3; i++) for (let k = 0; k < 5; k++) h.upstreams[i]!.record('ok', latencies[i]!);
  const { share } = shares(h, 20_000);
  // Weights 1/10, 1/20, 1/100: 62.5%, 31.25%, 6.25%.
  t.ok(share[0]! > 0.58 && share[0]! < 0.67, `fastest ${share[0]}`);
  t.ok(share[1]! > 0.28 && share[1]! < 0.35, `twice as slow ${share[1]}`);
  t.ok(share[2]! > 0.04 && share[2]! < 0.085, `ten times slower ${share[2]}`);
});

t.test('calls in flight and errors weigh a node down', async (t) => {
  const h = chain(2, 5, 3);
  for (let i = 0; i < 2; i++) h.upstreams[i]!.record('ok', 10);
  h.upstreams[0]!.inflight = 3;
  // Costs 10 × 4 and 10 × 1: weights 1/40 and 1/10, so 20% and 80%.
  let { share } = shares(h, 10_000);
  t.ok(share[0]! > 0.17 && share[0]! < 0.23, `busy node ${share[0]}`);
  h.upstreams[0]!.inflight = 0;

  // Node 1: 2 failures of 5 calls (no streak of 3, under 10 calls): cost / 0.6, so 1/(1 + 0.6) = 37.5%.
  for (const o of ['failed', 'ok', 'failed', 'ok'] as const) h.upstreams[1]!.record(o, 10);
  ({ share } = shares(h, 10_000));
  t.ok(share[1]! > 0.34 && share[1]! < 0.41, `erring node ${share[1]}`);
});

t.test('a node not measured yet is taken to be as fast as the fastest', async (t) => {
  const h = chain(2, 5, 9);
  for (let k = 0; k < 5; k++) h.upstreams[0]!.record('ok', 50);
  const { share } = shares(h, 10_000);
  t.ok(share[1]! > 0.46 && share[1]! < 0.54, `unmeasured node ${share[1]}`);
});

t.test('a suspected node gets no calls while another in rotation is not suspected', async (t) => {
  // The clock stands at 1 s: a probe in flight since 0 is a second late.
  const h = chain(3, 5, 11);
  h.upstreams[0]!.probeSince = 0;
  t.equal(h.upstreams[0]!.suspected, true);
  t.same(h.healthyIndices(), [0, 1, 2], 'it stays in rotation');
  let { share } = shares(h, 3000);
  t.equal(share[0], 0, 'but is not picked');
  t.ok(share[1]! > 0.4 && share[2]! > 0.4, `the others share the calls: ${share}`);
  t.same(shares(h, 300, new Set([1, 2])).share, [1, 0, 0], 'picked when every other is excluded');
  fail(h, 1);
  h.upstreams[2]!.probeSince = 0;
  ({ share } = shares(h, 3000));
  t.ok(share[0]! > 0.4 && share[2]! > 0.4, `every node in rotation suspected: both still serve (${share})`);
  h.upstreams[0]!.probeSince = null;
  ({ share } = shares(h, 300));
  t.same(share, [1, 0, 0], 'the probe answered: it serves again, ahead of the one still suspected');
});

t.test('options are checked', async (t) => {
  t.throws(() => createChainHealth(['a'], { maxLagBlocks: -1 }), RangeError);
  t.throws(() => createChainHealth(['a'], { maxLagBlocks: Number.NaN }), RangeError);
  t.throws(() => createChainHealth([], { maxLagBlocks: 5 }), RangeError);
  const h = createChainHealth(['a', 'b'], { maxLagBlocks: 3 });
  t.equal(h.maxLagBlocks, 3);
  t.same(
    h.upstreams.map((u) => u.label),
    ['a', 'b'],
  );
  const seen = new Set<number | null>();
  for (let k = 0; k < 200; k++) seen.add(h.pick());
  t.same([...seen].sort(), [0, 1], 'defaults (Math.random, performance.now) draw both nodes');
});

t.test('a NodeChoice: only the nodes that serve, the preferred ones first while one is in rotation', async (t) => {
  const h = chain(4);
  const pickAll = (choice: NodeChoice, exclude?: ReadonlySet<number>): Set<number | null> => {
    const seen = new Set<number | null>();
    for (let k = 0; k < 400; k++) seen.add(h.pick(exclude, choice));
    return seen;
  };
  const serves = [true, false, true, true];
  t.same([...pickAll({ serves, prefer: null })].sort(), [0, 2, 3], 'never a node that does not serve');
  t.same([...pickAll({ serves: [false, true, false, false], prefer: null })], [1]);
  t.same([...pickAll({ serves: [false, false, false, false], prefer: null })], [null], 'none serves: null, as with none in rotation');
  const archive = { serves, prefer: [false, false, true, true] };
  t.same([...pickAll(archive)].sort(), [2, 3], 'the preferred nodes alone while one is in rotation');
  t.same([...pickAll(archive, new Set([2]))], [3], 'a second attempt: another preferred node');
  t.same([...pickAll(archive, new Set([2, 3]))], [0], 'no preferred node left: any node that serves');
  fail(h, 2);
  fail(h, 3);
  t.same([...pickAll(archive)], [0], 'the preferred nodes out of rotation: any node that serves');
  fail(h, 0);
  t.same([...pickAll(archive)], [null], 'none that serves in rotation: null');
  t.same([...pickAll({ serves: null, prefer: null })], [1], 'a choice of every node is no choice');
});
