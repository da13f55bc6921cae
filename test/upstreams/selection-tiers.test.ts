import t from 'tap';
import type { BudgetLimits } from '../../src/upstreams/node-budget.js';
import { NodeAttempt } from '../../src/chain/attempts.js';
import { createChainHealth, type ChainHealth } from '../../src/upstreams/selection.js';
import { seeded } from '../support/seeded.js';

const NO_LIMIT: BudgetLimits = { rps: null, maxInFlight: null };

function chain(tiers: number[], budgets?: BudgetLimits[], clock = { now: 1_000 }): ChainHealth {
  return createChainHealth(
    tiers.map((_, i) => `http://node${i}:8545`),
    { maxLagBlocks: 5, now: () => clock.now, random: seeded(7), tiers, ...(budgets !== undefined ? { budgets } : {}) },
  );
}

function fail(h: ChainHealth, i: number): void {
  for (let k = 0; k < 3; k++) h.upstreams[i]!.record('failed', 1);
}

function counts(h: ChainHealth, draws: number, exclude?: ReadonlySet<number>): { got: number[]; none: number } {
  const got = h.upstreams.map(() => 0);
  let none = 0;
  for (let k = 0; k < draws; k++) {
    const i = h.pick(exclude);
    if (i === null) none++;
    else got[i]!++;
  }
  return { got, none };
}

t.test('tiers: the lowest tier with a node in rotation takes every call', async (t) => {
  const h = chain([1, 0, 0, 2]);
  t.same(counts(h, 400).got[0], 0, 'tier 1 gets nothing while tier 0 is up');
  t.same(counts(h, 400).got[3], 0);
  fail(h, 1);
  t.same(counts(h, 400).got, [0, 0, 400, 0], 'the other tier-0 node takes them all');
  fail(h, 2);
  t.same(counts(h, 400).got, [400, 0, 0, 0], 'tier 1 once tier 0 is out');
  fail(h, 0);
  t.same(counts(h, 400).got, [0, 0, 0, 400], 'then tier 2');
});

t.test('tiers: a retry excluding the last node of its tier goes up a tier', async (t) => {
  const h = chain([0, 1, 1]);
  t.equal(h.pick(), 0);
  const { got } = counts(h, 400, new Set([0]));
  t.equal(got[0], 0);
  t.ok(got[1]! > 100 && got[2]! > 100, `tier 1 shared: ${got}`);
});

t.test('tiers: a lagging or short-of-head lower tier sends calls up', async (t) => {
  const h = chain([0, 1]);
  h.upstreams[0]!.reportHead(90);
  h.upstreams[1]!.reportHead(100);
  t.equal(h.pick(), 1, 'tier 0 lags more than max_lag_blocks');
  h.upstreams[0]!.reportHead(98);
  t.equal(h.pick(), 0, 'within lag: tier 0 again');
  t.equal(h.pick(undefined, null, 100), 1, 'a call about block 100 goes where it is');
});

t.test('tiers: none configured above 0 changes nothing (all share)', async (t) => {
  const h = chain([0, 0]);
  const { got } = counts(h, 400);
  t.ok(got[0]! > 100 && got[1]! > 100, `${got}`);
});

t.test('rps: a node at its budget is skipped, calls spill, then none', async (t) => {
  const clock = { now: 1_000 };
  const h = chain([0, 1], [{ rps: 3, maxInFlight: null }, NO_LIMIT], clock);
  const got: number[] = [];
  for (let k = 0; k < 5; k++) {
    const i = h.pick()!;
    h.charge(i, clock.now);
    got.push(i);
  }
  t.same(got, [0, 0, 0, 1, 1], 'three to tier 0, then up a tier');
  clock.now = 1_999;
  t.equal(h.pick(), 1);
  clock.now = 2_000;
  t.equal(h.pick(), 0, 'a second later, room again');

  const alone = chain([0], [{ rps: 1, maxInFlight: null }], clock);
  alone.charge(0, clock.now);
  t.equal(alone.pick(), null);
  t.equal(alone.shortOfBudget, true, 'refused for the budget');
  fail(alone, 0);
  clock.now += 1_000;
  t.equal(alone.pick(), null);
  t.equal(alone.shortOfBudget, false, 'out of rotation is not the budget');
});

t.test('max_in_flight: a node with that many calls in flight is skipped', async (t) => {
  const h = chain([0, 0], [{ rps: null, maxInFlight: 1 }, NO_LIMIT]);
  h.upstreams[0]!.inflight = 1;
  t.same(counts(h, 200).got, [0, 200]);
  h.upstreams[1]!.inflight = 5;
  h.upstreams[0]!.inflight = 0;
  t.ok(counts(h, 200).got[0]! > 0, 'room again');
});

t.test('429: the node gets no call during its cooldown, then does', async (t) => {
  const clock = { now: 1_000 };
  const h = chain([0, 1], undefined, clock);
  h.coolDown(0, 1_000);
  t.equal(h.pick(), 1, 'cooling: the provider takes it');
  t.same(h.healthyIndices(), [0, 1], 'still in rotation');
  clock.now = 1_999;
  t.equal(h.pick(), 1);
  clock.now = 2_000;
  t.equal(h.pick(), 0);
  h.coolDown(0, null);
  h.coolDown(1, null);
  t.equal(h.pick(), null);
  t.equal(h.shortOfBudget, true);
  clock.now = 3_000;
  t.equal(h.pick(), 0, 'the default cooldown is a second');
});

t.test('withRoom: a broadcast skips nodes at their budget, and says so when none has room', async (t) => {
  const clock = { now: 1_000 };
  const open = chain([0, 0, 1], [NO_LIMIT, NO_LIMIT, NO_LIMIT], clock);
  const all = [0, 1, 2];
  t.equal(open.withRoom(all), all, 'no limit and no cooldown: the same list, nothing looked at');
  const h = chain([0, 0, 1], [{ rps: 1, maxInFlight: null }, { rps: null, maxInFlight: 1 }, NO_LIMIT], clock);
  t.same(h.withRoom(all), [0, 1, 2], 'every node has room at first');
  h.charge(0, clock.now);
  h.upstreams[1]!.inflight = 1;
  t.same(h.withRoom(all), [2], 'rps spent and max_in_flight reached: left out');
  h.coolDown(2, 5_000);
  t.same(h.withRoom(all), [], 'the third cools down after a 429');
  t.equal(h.shortOfBudget, true, 'none left for its budget: upstream_budget');
  clock.now += 1_001;
  h.upstreams[1]!.inflight = 0;
  t.same(h.withRoom(all), [0, 1], 'a second later the rps and in-flight budgets have room again; the cooldown runs on');
});

t.test('chargeAgain: first sends and second writes together never exceed rps in any sliding second', async (t) => {
  const clock = { now: 0 };
  const h = chain([0], [{ rps: 5, maxInFlight: null }], clock);
  const random = seeded(11);
  const writes: number[] = [];
  const again = { asked: 0, let: 0 };
  const open: NodeAttempt[] = [];
  // Calls and the upstream client's second writes of them (moves, re-sends), at random moments over 20 s.
  for (clock.now = 0; clock.now < 20_000; clock.now += Math.floor(random() * 40)) {
    if (random() < 0.5) {
      if (h.pick() === null) continue;
      open.push(new NodeAttempt(h, 0));
      writes.push(clock.now);
    } else if (open.length > 0) {
      again.asked++;
      if (!h.chargeAgain(0, random() < 0.5)) continue;
      again.let++;
      writes.push(clock.now);
    }
    if (open.length > 3) open.shift()!.settle('ok');
  }
  // Every window that could hold the most opens at a write.
  const most = Math.max(...writes.map((w) => writes.filter((x) => x >= w && x < w + 1_000).length));
  t.ok(most <= 5, `at most 5 writes in any second: ${most}`);
  t.ok(again.let > 0 && again.let < again.asked, `second writes go while there is room, not otherwise: ${again.let} of ${again.asked}`);
  t.ok(writes.length >= 90, `the budget was used: ${writes.length} writes in 20 s`);
});

t.test('chargeAgain: a copy still on its socket needs room under max_in_flight; a re-send of the call does not', async (t) => {
  const h = chain([0], [{ rps: null, maxInFlight: 1 }]);
  const a = new NodeAttempt(h, 0);
  t.equal(h.chargeAgain(0, true), false, 'a move would put a second copy in flight');
  t.equal(h.chargeAgain(0, false), true, 'a re-send after the socket was lost is the one call in flight');
  a.settle('ok');
  t.equal(chain([0]).chargeAgain(0, true), true, 'a node without a budget takes every second write');
});

t.test('chargeAgain: no second write to a node cooling down after a 429', async (t) => {
  const clock = { now: 1_000 };
  const h = chain([0], [NO_LIMIT], clock);
  h.coolDown(0, 1_000);
  t.equal(h.chargeAgain(0, false), false);
  clock.now = 2_000;
  t.equal(h.chargeAgain(0, false), true);
});
