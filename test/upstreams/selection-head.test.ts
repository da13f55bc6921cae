/**
 * pick() with a minimum head (issue 32 §2): only nodes whose known head has reached it, the highest ones when
 * none has (or none at all on request), never a node with no head known while a head is asked for, and the
 * minimum together with a NodeChoice, an exclusion and suspected nodes. Over a real ChainHealth on fake heads.
 */
import t from 'tap';
import { createChainHealth, type ChainHealth } from '../../src/upstreams/selection.js';
import { seeded } from '../support/seeded.js';

function chain(heads: Array<number | null>, seed = 7): ChainHealth {
  const h = createChainHealth(
    heads.map((_, i) => `node${i}`),
    { maxLagBlocks: 5, now: () => 1_000, random: seeded(seed) },
  );
  for (const [i, head] of heads.entries()) if (head !== null) h.upstreams[i]!.reportHead(head);
  return h;
}

/** The set of nodes `draws` picks went to (null counted as -1). */
function picked(draws: number, pick: () => number | null): number[] {
  const seen = new Set<number>();
  for (let k = 0; k < draws; k++) seen.add(pick() ?? -1);
  return [...seen].sort((a, b) => a - b);
}

t.test('only nodes whose known head has reached the minimum', async (t) => {
  const h = chain([100, 98, 100, 97]);
  t.same(
    picked(400, () => h.pick(undefined, null, 100)),
    [0, 2],
    'head 100: the two nodes at 100',
  );
  t.same(
    picked(400, () => h.pick(undefined, null, 98)),
    [0, 1, 2],
    'head 98: every node at 98 or more',
  );
  t.same(
    picked(400, () => h.pick(undefined, null, null)),
    [0, 1, 2, 3],
    'no minimum: every node in rotation',
  );
  t.same(
    picked(400, () => h.pick(undefined, null, 0)),
    [0, 1, 2, 3],
    'block 0: every node with a head',
  );
});

t.test('none has reached it: the highest ones, or none when asked for none', async (t) => {
  const h = chain([97, 99, 99, 96]);
  t.same(
    picked(400, () => h.pick(undefined, null, 100)),
    [1, 2],
    'the nodes at 99, the least behind',
  );
  t.equal(h.pick(undefined, null, 100, 'none'), null, "'none': no node");
  t.same(
    picked(200, () => h.pick(new Set([1, 2]), null, 100)),
    [0],
    'the highest among those not excluded',
  );
  t.equal(h.pick(new Set([0, 1, 2, 3]), null, 100), null, 'every node excluded: none');
});

t.test('a node with no head known is not eligible while a head is asked for', async (t) => {
  const h = chain([100, null, 100]);
  t.same(
    picked(400, () => h.pick(undefined, null, 50)),
    [0, 2],
    'the node with no head is left out',
  );
  t.same(
    picked(400, () => h.pick(new Set([0, 2]), null, 200)),
    [1],
    'but when no other node is left, any one is taken',
  );
  t.equal(h.pick(new Set([0, 2]), null, 50, 'none'), null, "and with 'none', not even that one");
  const unknown = chain([null, null]);
  t.same(
    picked(200, () => unknown.pick(undefined, null, 10)),
    [0, 1],
    'no head known at all: any node',
  );
});

t.test('with a NodeChoice: the preferred nodes that reached it first, then any that serves', async (t) => {
  const h = chain([100, 100, 98, 100]);
  const choice = { serves: [true, true, true, false], prefer: [false, false, true, false] };
  t.same(
    picked(200, () => h.pick(undefined, choice, 98)),
    [2],
    'the preferred node has reached 98',
  );
  t.same(
    picked(400, () => h.pick(undefined, choice, 100)),
    [0, 1],
    'it has not reached 100: the others that serve',
  );
  t.same(
    picked(200, () => h.pick(new Set([0, 1]), choice, 101)),
    [2],
    'none at 101 that serves: the highest that serves',
  );
});

t.test('suspected nodes: left for another that reached the head, taken when only they have', async (t) => {
  // The clock stands at 1 s: a probe in flight since 0 is a second late.
  const h = chain([100, 100, 98]);
  h.upstreams[0]!.probeSince = 0;
  t.equal(h.upstreams[0]!.suspected, true);
  t.same(
    picked(200, () => h.pick(undefined, null, 100)),
    [1],
    'the one at 100 not suspected',
  );
  h.upstreams[1]!.probeSince = 0;
  t.same(
    picked(200, () => h.pick(undefined, null, 99)),
    [0, 1],
    'both at the head suspected: both, not the node behind',
  );
});

t.test('equal heads: the same draw as without a minimum', async (t) => {
  const a = chain([100, 100, 100], 11);
  const b = chain([100, 100, 100], 11);
  const withHead = Array.from({ length: 50 }, () => a.pick(undefined, null, 100));
  const without = Array.from({ length: 50 }, () => b.pick());
  t.same(withHead, without);
});
