import t from 'tap';
import v8 from 'node:v8';
import { runInNewContext } from 'node:vm';
import { allocateSharedWindows, createSharedWindowLimiter } from '../../src/limits/shared-window.js';
import {
  createSlidingWindowLimiter,
  type LimiterOptions,
  retryAfterSeconds,
  type SlidingWindowLimiter,
} from '../../src/limits/sliding-window.js';
import { seeded } from '../support/seeded.js';
import { createWindowCount } from '../support/window-count.js';

/** Every implementation of SlidingWindowLimiter: the promises below hold for each. */
const IMPLEMENTATIONS: Array<{
  name: string;
  make: (opts?: LimiterOptions) => SlidingWindowLimiter;
  /** The most keys tracked with a given maxKeys. */
  sizeFor: (maxKeys: number) => number;
  /** Whether a key keeps its place below maxKeys keys (the shared table may give an idle key's slot to another). */
  keepsEveryKey: boolean;
}> = [
  { name: 'in-process', make: (opts) => createSlidingWindowLimiter(opts), sizeFor: (maxKeys) => maxKeys, keepsEveryKey: true },
  {
    name: 'shared memory',
    make: (opts = {}) => createSharedWindowLimiter(allocateSharedWindows({ maxKeys: opts.maxKeys ?? 64 }), { now: opts.now }),
    // A quarter more slots than keys, so probing stays short (shared-table.ts).
    sizeFor: (maxKeys) => Math.ceil(maxKeys * 1.25),
    keepsEveryKey: false,
  },
];

interface FakeClock {
  now: () => number;
  set(ms: number): void;
  advance(ms: number): void;
}

function fakeClock(start = 0): FakeClock {
  let at = start;
  return {
    now: () => at,
    set: (ms) => {
      at = ms;
    },
    advance: (ms) => {
      at += ms;
    },
  };
}

interface Arrival {
  at: number;
  units: number;
}

/** Arrival patterns offering about `factor` times the limit; `integral` puts every arrival on a whole millisecond. */
type Pattern = (rng: () => number, rate: number, seconds: number, integral: boolean) => number[];

const PATTERNS: Record<string, Pattern> = {
  even: (_rng, rate, seconds) => {
    const out: number[] = [];
    for (let at = 0; at < seconds * 1000; at += 1000 / rate) out.push(at);
    return out;
  },
  poisson: (rng, rate, seconds) => {
    const out: number[] = [];
    for (let at = 0; at < seconds * 1000; at += (-Math.log(1 - rng()) * 1000) / rate) out.push(at);
    return out;
  },
  // Bursts of up to two seconds' worth at one instant or spread over 3 ms, at random gaps.
  bursty: (rng, rate, seconds) => {
    const out: number[] = [];
    for (let at = 0; at < seconds * 1000; at += rng() * 1500) {
      const n = 1 + Math.floor(rng() * 2 * rate);
      const spread = rng() < 0.5 ? 0 : 3;
      for (let i = 0; i < n; i++) out.push(at + spread * (i / n));
    }
    return out;
  },
  // Bursts placed on and around 10 ms and 1000 ms boundaries, where bucketed limiters slip.
  edges: (rng, rate, seconds) => {
    const out: number[] = [];
    const offsets = [0, 0.001, 5, 9.999, 10, 10.001, 990, 999, 999.999, 1000, 1000.001, 1005, 1010];
    for (let base = 0; base < seconds * 1000; base += 1000 + Math.floor(rng() * 3) * 10) {
      for (const offset of offsets) {
        if (rng() < 0.5) continue;
        const n = 1 + Math.floor((rng() * rate) / 2);
        for (let i = 0; i < n; i++) out.push(base + offset);
      }
    }
    return out.sort((a, b) => a - b);
  },
};

interface Case {
  name: string;
  limit: number;
  units: (rng: () => number) => number;
  meanUnits: number;
}

const CASES: Case[] = [
  { name: 'limit 1', limit: 1, units: () => 1, meanUnits: 1 },
  { name: 'limit 3', limit: 3, units: () => 1, meanUnits: 1 },
  { name: 'limit 10', limit: 10, units: () => 1, meanUnits: 1 },
  { name: 'limit 100', limit: 100, units: () => 1, meanUnits: 1 },
  { name: 'limit 2500', limit: 2500, units: () => 1, meanUnits: 1 },
  { name: 'limit 1000, units 1-50', limit: 1000, units: (rng) => 1 + Math.floor(rng() * 50), meanUnits: 25 },
  { name: 'RU limit 500000, units 10-2000', limit: 500_000, units: (rng) => 10 + Math.floor(rng() * 1991), meanUnits: 1000 },
];

function arrivals(pattern: Pattern, c: Case, rng: () => number, factor: number, integral: boolean): Arrival[] {
  const rate = (factor * c.limit) / c.meanUnits;
  const seconds = Math.max(4, Math.min(30, Math.floor(60_000 / rate)));
  return pattern(rng, rate, seconds, integral).map((at) => ({ at: integral ? Math.round(at) : at, units: c.units(rng) }));
}

type Make = (opts?: LimiterOptions) => SlidingWindowLimiter;

/** Greedy client: sends everything; returns the worst ratio of units in any second to the limit. */
function greedyWorstRatio(make: Make, c: Case, pattern: Pattern, seed: number, integral: boolean): { ratio: number; admitted: number } {
  const rng = seeded(seed);
  const clock = fakeClock();
  const limiter = make({ now: clock.now });
  const window = createWindowCount();
  let worst = 0;
  let admitted = 0;
  for (const a of arrivals(pattern, c, rng, 3, integral)) {
    clock.set(a.at);
    if (!limiter.take('k', c.limit, a.units).ok) continue;
    window.add(a.at, a.units);
    admitted += a.units;
    // Every second ending at an admitted take; no other second can hold more.
    worst = Math.max(worst, window.within(a.at) / c.limit);
  }
  return { ratio: worst, admitted };
}

/** Client pacing itself to `share` of its limit in every second (the new take included); returns refusals seen. */
function pacedRefusals(
  make: Make,
  c: Case,
  pattern: Pattern,
  seed: number,
  integral: boolean,
  share: number,
): { refused: number; sent: number } {
  const rng = seeded(seed);
  const clock = fakeClock();
  const limiter = make({ now: clock.now });
  const window = createWindowCount();
  let refused = 0;
  let sent = 0;
  for (const a of arrivals(pattern, c, rng, 2, integral)) {
    if (window.within(a.at) + a.units > share * c.limit) continue;
    clock.set(a.at);
    sent++;
    if (limiter.take('k', c.limit, a.units).ok) window.add(a.at, a.units);
    else refused++;
  }
  return { refused, sent };
}

for (const impl of IMPLEMENTATIONS) {
  const make = impl.make;
  t.test(impl.name, async (t) => {
    t.test('no second ever holds more than the limit, whatever the arrivals', async (t) => {
      let worst = 0;
      for (const c of CASES) {
        for (const [name, pattern] of Object.entries(PATTERNS)) {
          for (const integral of [true, false]) {
            for (let seed = 1; seed <= 3; seed++) {
              const { ratio, admitted } = greedyWorstRatio(make, c, pattern, seed, integral);
              worst = Math.max(worst, ratio);
              if (ratio > 1.02) t.fail(`${c.name}, ${name}, integral ${integral}, seed ${seed}: a second held ${ratio} × the limit`);
              if (admitted === 0) t.fail(`${c.name}, ${name}: nothing admitted`);
            }
          }
        }
      }
      t.comment(`worst second / limit over all patterns: ${worst.toFixed(4)}`);
      t.ok(worst <= 1.02, 'within limit + 2% (the contract)');
      t.ok(worst <= 1, 'within the limit itself (what the log-of-latest-times design promises)');
      t.ok(worst >= 0.98, 'greedy clients get close to their limit');
    });

    t.test('a client staying within 98% of its limit in every second is never refused', async (t) => {
      let refused = 0;
      let sent = 0;
      for (const c of CASES) {
        for (const [name, pattern] of Object.entries(PATTERNS)) {
          for (const integral of [true, false]) {
            for (let seed = 1; seed <= 3; seed++) {
              const r = pacedRefusals(make, c, pattern, seed, integral, 0.98);
              refused += r.refused;
              sent += r.sent;
              if (r.refused > 0) t.fail(`${c.name}, ${name}, integral ${integral}, seed ${seed}: ${r.refused} of ${r.sent} refused`);
            }
          }
        }
      }
      t.comment(`refusals at 98%: ${refused} of ${sent} takes`);
      t.equal(refused, 0);
      t.ok(sent > 100_000, 'enough takes were driven to mean something');
    });

    t.test('the same client at 100% would be refused: the 98% test can fail', async (t) => {
      const c = CASES.find((x) => x.name.startsWith('RU'))!;
      const r = pacedRefusals(make, c, PATTERNS.poisson!, 1, false, 1);
      t.ok(r.refused > 0, `${r.refused} of ${r.sent} refused at 100%`);
    });

    t.test('bursts a little more than a second apart are admitted in full', async (t) => {
      // A burst at the very start of a 10 ms bucket and the next one 1000.5 ms later: bucketed
      // limiters that count the older bucket in full refuse the second burst.
      const clock = fakeClock();
      const limiter = make({ now: clock.now });
      for (let burst = 0; burst < 5; burst++) {
        clock.set(10 + burst * 1000.5);
        for (let i = 0; i < 98; i++) t.ok(limiter.take('k', 100).ok, `burst ${burst}, take ${i}`);
      }
      clock.set(10 + 4 * 1000.5 + 999);
      t.ok(limiter.take('k', 100).ok, '99th unit within the same second');
      t.ok(limiter.take('k', 100).ok, '100th unit');
      t.notOk(limiter.take('k', 100).ok, '101st unit refused');
    });

    t.test('retryAfterMs is the time until enough units leave the window', async (t) => {
      const clock = fakeClock();
      const limiter = make({ now: clock.now });
      for (let i = 0; i < 10; i++) t.ok(limiter.take('a', 10).ok);
      clock.set(400);
      t.same(limiter.take('a', 10), { ok: false, retryAfterMs: 600 });
      clock.set(999);
      t.same(limiter.take('a', 10), { ok: false, retryAfterMs: 1 });
      clock.set(1000);
      t.same(limiter.take('a', 10), { ok: true });

      clock.set(0);
      const ru = make({ now: clock.now });
      t.ok(ru.take('b', 100, 60).ok);
      clock.set(300);
      t.ok(ru.take('b', 100, 30).ok);
      clock.set(500);
      t.same(ru.take('b', 100, 20), { ok: false, retryAfterMs: 500 }, 'the 60 leaving is enough');
      t.same(ru.take('b', 100, 70), { ok: false, retryAfterMs: 500 }, 'still only the 60');
      t.same(ru.take('b', 100, 100), { ok: false, retryAfterMs: 800 }, 'needs the 30 as well');
      t.same(ru.take('b', 100, 101), { ok: false, retryAfterMs: Infinity }, 'more than the limit never fits');
      clock.set(1300);
      t.ok(ru.take('b', 100, 100).ok, 'refused takes took nothing');

      const fractional = fakeClock(0.25);
      const f = make({ now: fractional.now });
      t.ok(f.take('c', 1).ok);
      fractional.set(400.5);
      t.same(f.take('c', 1), { ok: false, retryAfterMs: 600 }, '599.75 ms rounds up');
      fractional.set(1000.2);
      t.same(f.take('c', 1), { ok: false, retryAfterMs: 1 }, 'never below 1 ms');
      fractional.set(1000.25);
      t.ok(f.take('c', 1).ok);
    });

    t.test('waiting retryAfterMs is exactly enough, after random traffic', async (t) => {
      let checked = 0;
      for (let seed = 1; seed <= 300; seed++) {
        const rng = seeded(seed);
        const clock = fakeClock();
        const limiter = make({ now: clock.now });
        const limit = [5, 100, 50_000][seed % 3]!;
        const units = (): number => (limit === 50_000 ? 10 + Math.floor(rng() * 1991) : 1 + Math.floor((rng() * limit) / 5));
        for (let at = 0; at < 5000; at += Math.floor(rng() * 30)) {
          clock.set(at);
          const u = units();
          const r = limiter.take('k', limit, u);
          if (r.ok || rng() < 0.9) continue;
          t.ok(r.retryAfterMs >= 1 && Number.isInteger(r.retryAfterMs), `seed ${seed}: whole milliseconds, at least 1`);
          if (r.retryAfterMs > 1) {
            clock.set(at + r.retryAfterMs - 1);
            t.same(limiter.take('k', limit, u), { ok: false, retryAfterMs: 1 }, `seed ${seed}: 1 ms early is refused`);
          }
          clock.set(at + r.retryAfterMs);
          t.ok(limiter.take('k', limit, u).ok, `seed ${seed}: admitted after ${r.retryAfterMs} ms`);
          checked++;
          break;
        }
      }
      t.ok(checked > 250, `${checked} refusals checked`);
    });

    t.test('a plan change applies at once, to units already taken', async (t) => {
      const clock = fakeClock();
      const limiter = make({ now: clock.now });
      for (let i = 0; i < 50; i++) t.ok(limiter.take('k', 100, 2).ok);
      t.notOk(limiter.take('k', 100).ok, 'free plan exhausted');
      t.ok(limiter.take('k', 1000, 900).ok, 'upgrade: headroom at once');
      t.notOk(limiter.take('k', 1000, 1).ok);
      clock.set(500);
      t.same(limiter.take('k', 50), { ok: false, retryAfterMs: 500 }, 'downgrade: waits for all 1000 units to leave');
      clock.set(1000);
      t.ok(limiter.take('k', 50).ok);

      // Random plan changes: every admission keeps the last second within the plan in force.
      const rng = seeded(7);
      const c2 = fakeClock();
      const l2 = make({ now: c2.now });
      const window = createWindowCount();
      let limit = 1000;
      let worst = 0;
      for (let at = 0; at < 60_000; at += rng() * 2) {
        if (rng() < 0.0005) limit = [100, 1000, 5000, 50_000][Math.floor(rng() * 4)]!;
        c2.set(at);
        const u = 1 + Math.floor(rng() * 20);
        if (!l2.take('k', limit, u).ok) continue;
        window.add(at, u);
        worst = Math.max(worst, window.within(at) / limit);
      }
      t.ok(worst <= 1, `last second / plan in force at each admission: worst ${worst.toFixed(4)}`);
    });

    t.test('time comes only from the injected monotonic clock', async (t) => {
      const clock = fakeClock(5_000);
      const limiter = make({ now: clock.now });
      for (let i = 0; i < 5; i++) t.ok(limiter.take('k', 5).ok);
      clock.advance(0);
      t.notOk(limiter.take('k', 5).ok, 'a clock standing still frees nothing');
      clock.advance(3_600_000);
      for (let i = 0; i < 5; i++) t.ok(limiter.take('k', 5).ok, 'an hour later the window is empty');
      t.notOk(limiter.take('k', 5).ok, 'and holds one limit, not more');

      // The default clock is performance.now: wall-clock steps neither free a burst nor lock anyone out.
      const realDateNow = Date.now;
      t.teardown(() => {
        Date.now = realDateNow;
      });
      const wall = make();
      for (let i = 0; i < 3; i++) t.ok(wall.take('k', 3).ok);
      Date.now = () => realDateNow() + 3_600_000;
      const ahead = wall.take('k', 3);
      t.equal(ahead.ok, false, 'wall clock an hour ahead: still refused');
      Date.now = () => realDateNow() - 86_400_000;
      const behind = wall.take('k', 3);
      t.ok(!behind.ok && behind.retryAfterMs <= 1000, 'wall clock a day behind: refused for under a second');
    });

    t.test('evicting idle keys changes nothing', async (t) => {
      // Keys in phases of 1.5 s; a phase's keys evict the phase before last's, which are idle. The
      // small limiter must answer every take exactly as one that never evicts.
      const rng = seeded(11);
      const both = fakeClock();
      const small = make({ now: both.now, maxKeys: 20 });
      const large = make({ now: both.now });
      let differ = 0;
      let refusals = 0;
      for (let at = 0; at < 60_000; at += rng() * 3) {
        both.set(at);
        const phase = Math.floor(at / 1500);
        const key = `k${(phase % 4) * 10 + Math.floor(rng() * 10)}`;
        const a = small.take(key, 20);
        const b = large.take(key, 20);
        if (!b.ok) refusals++;
        if (JSON.stringify(a) !== JSON.stringify(b)) differ++;
        if (small.size > impl.sizeFor(20)) t.fail(`size ${small.size}`);
      }
      t.equal(differ, 0, 'same answers with and without eviction');
      t.ok(refusals > 1000, `the keys were busy enough to be refused (${refusals})`);
      if (impl.keepsEveryKey) t.equal(large.size, 40);
    });

    t.test('arguments are checked', async (t) => {
      const limiter: SlidingWindowLimiter = make({ now: () => 0 });
      for (const limit of [0, -1, Number.NaN, Infinity]) {
        t.throws(() => limiter.take('k', limit), RangeError, `limit ${limit}`);
      }
      for (const units of [0, -5, Number.NaN, Infinity]) {
        t.throws(() => limiter.take('k', 10, units), RangeError, `units ${units}`);
      }
      t.equal(limiter.size, 0, 'bad takes track nothing');
      t.same(limiter.take('k', 2.5, 2.5), { ok: true }, 'fractional limits and units');
      t.same(limiter.take('k', 2.5, 0.5), { ok: false, retryAfterMs: 1000 });
    });
  });
}

t.test('in-process: memory stays bounded: 200k keys with maxKeys 10k', async (t) => {
  v8.setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  const clock = fakeClock();
  const limiter = createSlidingWindowLimiter({ now: clock.now, maxKeys: 10_000 });
  const fill = (from: number, to: number): void => {
    for (let i = from; i < to; i++) {
      clock.advance(0.01);
      if (!limiter.take(`key-${i}`, 100).ok) t.fail(`key-${i} refused`);
      if (limiter.size > 10_000) t.fail(`size ${limiter.size} at key ${i}`);
    }
  };
  gc();
  const before = process.memoryUsage().heapUsed;
  fill(0, 10_000);
  gc();
  const full = process.memoryUsage().heapUsed;
  fill(10_000, 200_000);
  gc();
  const after = process.memoryUsage().heapUsed;
  t.equal(limiter.size, 10_000);
  t.comment(`heap: ${((full - before) / 10_000).toFixed(0)} B per key; after 190k more keys ${((after - full) / 1e6).toFixed(2)} MB more`);
  t.ok(after - full < 2e6, 'evicted windows are reused, not piled up');
});

t.test('in-process: the least recently used key is evicted', async (t) => {
  const clock = fakeClock();
  const limiter = createSlidingWindowLimiter({ now: clock.now, maxKeys: 2 });
  t.ok(limiter.take('b', 1).ok);
  clock.set(100);
  t.ok(limiter.take('a', 1).ok);
  clock.set(1500);
  t.ok(limiter.take('b', 1).ok, 'b used again: now the most recent');
  clock.set(1600);
  t.ok(limiter.take('c', 1).ok, 'c evicts a, idle since 100');
  t.equal(limiter.size, 2);
  clock.set(1700);
  t.notOk(limiter.take('b', 1).ok, 'b kept its take at 1500 (insertion order would have evicted b)');
  clock.set(1800);
  t.notOk(limiter.take('c', 1).ok, 'c kept its take at 1600');

  // More busy keys than maxKeys: memory still wins (fail-open for the evicted key, as documented).
  const busy = createSlidingWindowLimiter({ now: clock.now, maxKeys: 2 });
  for (const key of ['x', 'y', 'z', 'x', 'y', 'z']) busy.take(key, 1);
  t.equal(busy.size, 2);
});

t.test('in-process: maxKeys is checked', async (t) => {
  for (const maxKeys of [0, -1, 1.5, Number.NaN]) {
    t.throws(() => createSlidingWindowLimiter({ maxKeys }), { name: 'RangeError', message: /maxKeys/ }, `maxKeys ${maxKeys}`);
  }
});

t.test('retryAfterSeconds rounds up to whole seconds, at least 1', async (t) => {
  const cases: Array<[number, number]> = [
    [0, 1],
    [1, 1],
    [999, 1],
    [1000, 1],
    [1001, 2],
    [2500, 3],
    [60_000, 60],
  ];
  for (const [ms, s] of cases) t.equal(retryAfterSeconds(ms), s, `${ms} ms`);
});
