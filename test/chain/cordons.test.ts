import t from 'tap';
import { applyCordons, createCordons } from '../../src/chain/cordons.js';
import { createChainHealth } from '../../src/upstreams/selection.js';

t.test('the set: keyed by chain and node, changes told once', async (t) => {
  const c = createCordons();
  const told: string[] = [];
  const undo = c.watch((chain, node, on) => told.push(`${chain}/${node}=${on}`));
  t.equal(c.set('eth', 'a', true), true);
  t.equal(c.set('eth', 'a', true), false, 'already cordoned: no change');
  t.equal(c.has('eth', 'a'), true);
  t.equal(c.has('base', 'a'), false, 'another chain, same node name');
  c.set('base', 'a', true);
  t.same(c.list(), [
    { chain: 'eth', node: 'a' },
    { chain: 'base', node: 'a' },
  ]);
  c.set('eth', 'a', false);
  undo();
  c.set('eth', 'b', true);
  t.same(told, ['eth/a=true', 'base/a=true', 'eth/a=false']);
});

t.test('a cordoned node is out of rotation with its reason, never picked, and back when uncordoned', async (t) => {
  const rotation: string[] = [];
  const health = createChainHealth(['a', 'b'], {
    maxLagBlocks: 5,
    onRotation: (name, on, reason) => rotation.push(`${name} ${on} ${reason}`),
  });
  health.upstreams[0]!.reportHead(10);
  health.upstreams[1]!.reportHead(10);
  health.upstreams[0]!.setCordoned(true);
  t.match(health.upstreams[0]!.status(), { inRotation: false, reason: 'cordoned' });
  for (let i = 0; i < 50; i++) t.equal(health.pick(), 1);
  t.same(health.healthyIndices(), [1]);
  health.upstreams[0]!.reportHead(20);
  t.equal(health.bestHead(), 10, "a cordoned node's head is not the chain's best");
  health.upstreams[0]!.setCordoned(false);
  t.same(rotation, ['a false cordoned', 'a true recovered', 'b false lagging']);
  t.same(health.healthyIndices(), [0], 'back; b now lags behind it');
});

t.test('a runtime made anew (a reload) finds its nodes cordoned; its undo stops following', async (t) => {
  const cordons = createCordons();
  cordons.set('eth', 'b', true);
  cordons.set('other', 'a', true);
  const first = createChainHealth(['a', 'b'], { maxLagBlocks: 5 });
  const undo = applyCordons(cordons, { slug: 'eth', names: ['a', 'b'], upstreams: first.upstreams });
  t.same(
    first.upstreams.map((u) => u.cordoned),
    [false, true],
  );
  undo();
  // The reload: a new runtime of the same chain, its nodes in another order.
  const second = createChainHealth(['b', 'a'], { maxLagBlocks: 5 });
  applyCordons(cordons, { slug: 'eth', names: ['b', 'a'], upstreams: second.upstreams });
  t.same(
    second.upstreams.map((u) => u.cordoned),
    [true, false],
  );
  cordons.set('eth', 'a', true);
  t.equal(second.upstreams[1]!.cordoned, true, 'a change reaches the new runtime');
  t.equal(first.upstreams[0]!.cordoned, false, 'and not the old one, which stopped following');
  cordons.set('eth', 'nobody', true);
  t.same(
    second.upstreams.map((u) => u.cordoned),
    [true, true],
  );
});
