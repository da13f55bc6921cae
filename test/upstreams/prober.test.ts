import t from 'tap';
import { startProber, type ProberTimers } from '../../src/upstreams/prober.js';
import { createChainHealth, type ChainHealth } from '../../src/upstreams/selection.js';

/** Lets every settled promise run its callbacks. */
function flush(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

interface Scheduled {
  id: number;
  at: number;
  every: number | null;
  fn: () => void;
}

/** A clock and timers that move only when told, firing due timers in time order and flushing promises after each. */
function fakeTime() {
  let now = 0;
  let nextId = 1;
  const pending = new Map<number, Scheduled>();
  const schedule = (fn: () => void, ms: number, every: number | null): number => {
    const id = nextId++;
    pending.set(id, { id, at: now + ms, every, fn });
    return id;
  };
  const timers: ProberTimers = {
    setInterval: (fn, ms) => schedule(fn, ms, ms),
    clearInterval: (handle) => pending.delete(handle as number),
    setTimeout: (fn, ms) => schedule(fn, ms, null),
    clearTimeout: (handle) => pending.delete(handle as number),
  };
  return {
    timers,
    now: () => now,
    pending,
    after(ms: number, fn: () => void): void {
      schedule(fn, ms, null);
    },
    async advanceTo(target: number): Promise<void> {
      for (;;) {
        let due: Scheduled | undefined;
        for (const s of pending.values()) {
          if (s.at <= target && (due === undefined || s.at < due.at || (s.at === due.at && s.id < due.id))) due = s;
        }
        if (due === undefined) break;
        now = due.at;
        if (due.every === null) pending.delete(due.id);
        else due.at += due.every;
        due.fn();
        await flush();
      }
      await flush();
      now = target;
    },
  };
}

/** How a fake node answers a probe: with a head (after some ms), by failing (at once or after some ms), by
 *  hanging, or with nonsense. */
type Behaviour = { head: number; afterMs?: number } | { failAfterMs: number } | 'fail' | 'hang' | 'garbage' | 'throw';

interface ProbeCall {
  index: number;
  at: number;
  signal: AbortSignal;
}

function setup(n: number, behaviour: Behaviour[], maxLagBlocks = 5) {
  const time = fakeTime();
  const health = createChainHealth(
    Array.from({ length: n }, (_, i) => `http://node${i}:8545`),
    { maxLagBlocks, now: time.now, random: () => 0.5 },
  );
  const calls: ProbeCall[] = [];
  const probe = (index: number, signal: AbortSignal): Promise<number> => {
    calls.push({ index, at: time.now(), signal });
    const b = behaviour[index]!;
    if (b === 'throw') throw new Error('probe broke');
    if (b === 'fail') return Promise.reject(new Error('connection refused'));
    if (b === 'garbage') return Promise.resolve(Number.NaN);
    if (b === 'hang') {
      return new Promise((_, reject) => signal.addEventListener('abort', () => reject(new Error('aborted'))));
    }
    if ('failAfterMs' in b) return new Promise((_, reject) => time.after(b.failAfterMs, () => reject(new Error('timeout'))));
    if (b.afterMs === undefined) return Promise.resolve(b.head);
    return new Promise((resolve) => time.after(b.afterMs!, () => resolve(b.head)));
  };
  const startsOf = (index: number) => calls.filter((c) => c.index === index).map((c) => c.at);
  return { time, health, calls, probe, startsOf };
}

function fail(h: ChainHealth, i: number): void {
  for (let k = 0; k < 3; k++) h.upstreams[i]!.record('failed', 1);
}

t.test('a failing node is probed every intervalMs, never faster, one probe at a time', async (t) => {
  const { time, health, probe, startsOf } = setup(1, ['fail']);
  const prober = startProber(health, probe, { timers: time.timers });
  t.teardown(() => prober.stop());
  await time.advanceTo(60_000);
  const starts = startsOf(0);
  // Head polls at 0, 5 s and 10 s while still in rotation (the third failure takes it out), then one
  // probe per 2 s tick.
  const expected = [0, 5_000, 10_000];
  for (let at = 12_000; at <= 60_000; at += 2_000) expected.push(at);
  t.same(starts, expected);
  t.equal(health.pick(), null);
  t.equal(health.upstreams[0]!.status().reason, 'failing');
});

t.test('a single node that recovers is back within one probe interval', async (t) => {
  for (const afterMs of [0, 300]) {
    const behaviour: Behaviour[] = ['fail'];
    const { time, health, probe } = setup(1, behaviour);
    fail(health, 0);
    t.equal(health.pick(), null, 'out: the caller answers 502 at once');
    const prober = startProber(health, probe, { timers: time.timers });
    const servedAt: number[] = [];
    for (let at = 100; at <= 7_300; at += 100) {
      await time.advanceTo(at);
      if (health.pick() !== null) servedAt.push(at);
    }
    t.same(servedAt, [], 'out while the node is down, though probed');
    behaviour[0] = { head: 321, afterMs };
    let back = -1;
    for (let at = 7_400; at <= 20_000 && back < 0; at += 100) {
      await time.advanceTo(at);
      if (health.pick() !== null) back = at;
    }
    prober.stop();
    t.equal(back, 8_000 + afterMs, `back at the next 2 s tick plus the answer (${afterMs} ms)`);
    t.equal(health.bestHead(), 321);
  }
});

t.test('a probe that hangs is given up and the next one restores the node', async (t) => {
  const behaviour: Behaviour[] = ['hang'];
  const { time, health, probe, calls, startsOf } = setup(1, behaviour);
  fail(health, 0);
  const prober = startProber(health, probe, { timers: time.timers, probeTimeoutMs: 3_000 });
  t.teardown(() => prober.stop());
  await time.advanceTo(2_500);
  t.same(startsOf(0), [2_000], 'first probe at the first tick, hanging');
  behaviour[0] = { head: 9 };
  await time.advanceTo(4_999);
  t.same(startsOf(0), [2_000], 'no second probe while the first is in flight');
  t.equal(calls[0]!.signal.aborted, false);
  await time.advanceTo(5_000);
  t.equal(calls[0]!.signal.aborted, true, 'the hung probe is aborted at its deadline, 3 s after it started');
  await time.advanceTo(5_999);
  t.same(startsOf(0), [2_000], 'the next probe waits for the next tick');
  t.equal(health.pick(), null);
  await time.advanceTo(6_000);
  t.same(startsOf(0), [2_000, 6_000]);
  t.equal(health.pick(), 0);
  t.ok(6_000 - 2_500 <= 10_000, 'back within 10 s of recovering');
  // The hung probe counted as one failure; the good one then restored the node and started afresh.
  t.equal(health.upstreams[0]!.status().calls, 1);
});

t.test('a node in rotation whose head poll hangs is out the moment the poll is given up, as a hang', async (t) => {
  // Defaults as the gateway runs them (chain/runtime.ts): polls every 1 s, probes every 1.5 s, given up after 2.5 s.
  // 'hang' never settles by itself; failAfterMs 2_500 fails when the poll is given up, as a request timeout
  // equal to probeTimeoutMs did: it counted as an ordinary failure, and three polls were needed (9.5 s).
  for (const hang of ['hang', { failAfterMs: 2_500 }] as const) {
    const what = JSON.stringify(hang);
    const behaviour: Behaviour[] = [{ head: 7 }, { head: 7 }];
    const { time, health, probe, startsOf } = setup(2, behaviour);
    const prober = startProber(health, probe, { timers: time.timers, intervalMs: 1_500, headIntervalMs: 1_000, probeTimeoutMs: 2_500 });
    await time.advanceTo(500);
    t.same(health.healthyIndices(), [0, 1], `${what}: both answered the first poll`);
    behaviour[0] = hang;
    let out = -1;
    for (let at = 600; at <= 12_000 && out < 0; at += 100) {
      await time.advanceTo(at);
      if (!health.healthyIndices().includes(0)) out = at;
    }
    prober.stop();
    t.equal(out, 3_500, `${what}: out when the poll started at 1 s is given up, 2.5 s later`);
    t.same(startsOf(0), [0, 1_000], `${what}: one hanging poll was enough`);
    t.equal(health.upstreams[0]!.status().reason, 'failing', what);
    const { calls, errorRate } = health.upstreams[0]!.status();
    t.equal(Math.round(calls * errorRate), 1, `${what}: one failure counted (${calls} outcomes, ${errorRate} failed)`);
  }
});

t.test('a poll a second late makes its node suspected until it answers or is given up', async (t) => {
  const behaviour: Behaviour[] = [{ head: 7 }, { head: 7 }];
  const { time, health, probe } = setup(2, behaviour);
  const prober = startProber(health, probe, { timers: time.timers, intervalMs: 1_500, headIntervalMs: 1_000, probeTimeoutMs: 2_500 });
  t.teardown(() => prober.stop());
  await time.advanceTo(500);
  // Late but answering: suspected from 1 s into the poll until its answer at 1.2 s.
  behaviour[0] = { head: 8, afterMs: 1_200 };
  await time.advanceTo(1_999);
  t.equal(health.upstreams[0]!.suspected, false, 'the poll started at 1 s is not late yet');
  await time.advanceTo(2_000);
  t.equal(health.upstreams[0]!.suspected, true, 'a second late: suspected');
  t.same(health.healthyIndices(), [0, 1], 'and still in rotation');
  t.same(
    Array.from({ length: 20 }, () => health.pick()),
    Array(20).fill(1),
    'calls go to the other node',
  );
  await time.advanceTo(2_200);
  t.equal(health.upstreams[0]!.suspected, false, 'the answer ends it');
  t.equal(health.upstreams[0]!.head, 8);
  // Hanging: suspected a second into the next poll (at 3 s), out when it is given up (at 5.5 s).
  behaviour[0] = 'hang';
  await time.advanceTo(3_999);
  t.equal(health.upstreams[0]!.suspected, false);
  await time.advanceTo(4_000);
  t.equal(health.upstreams[0]!.suspected, true);
  await time.advanceTo(5_500);
  t.same(health.healthyIndices(), [1]);
  t.equal(health.upstreams[0]!.probeSince, null, 'given up: no probe in flight');
});

t.test('heads are polled every headIntervalMs only for nodes no feed keeps current', async (t) => {
  // Node 1 answers in 300 ms: its head is reported after the poll started, and still polled every 5 s.
  const { time, health, probe, startsOf } = setup(2, [{ head: 100 }, { head: 100, afterMs: 300 }]);
  const prober = startProber(health, probe, { timers: time.timers });
  t.teardown(() => prober.stop());
  for (let at = 0; at <= 30_000; at += 1_000) {
    await time.advanceTo(at);
    health.upstreams[0]!.reportHead(100);
  }
  t.same(startsOf(0), [0], 'node 0 has a feed: polled once, at start');
  t.same(startsOf(1), [0, 5_000, 10_000, 15_000, 20_000, 25_000, 30_000]);
});

t.test('a lagging node is probed and back once it has caught up', async (t) => {
  const behaviour: Behaviour[] = [{ head: 100 }, { head: 90 }];
  const { time, health, probe, startsOf } = setup(2, behaviour);
  const prober = startProber(health, probe, { timers: time.timers });
  t.teardown(() => prober.stop());
  await time.advanceTo(1);
  t.same(health.healthyIndices(), [0]);
  t.equal(health.upstreams[1]!.status().reason, 'lagging');
  await time.advanceTo(4_500);
  behaviour[1] = { head: 96 };
  await time.advanceTo(5_999);
  t.same(health.healthyIndices(), [0]);
  await time.advanceTo(6_000);
  t.same(health.healthyIndices(), [0, 1], '4 blocks behind: back');
  t.same(startsOf(1), [0, 2_000, 4_000, 6_000]);
  t.same(startsOf(0), [0, 5_000]);
});

t.test('a probe that answers nonsense or throws counts as failed', async (t) => {
  for (const b of ['garbage', 'throw'] as const) {
    const { time, health, probe } = setup(1, [b]);
    const prober = startProber(health, probe, { timers: time.timers });
    await time.advanceTo(10_000);
    prober.stop();
    const s = health.upstreams[0]!.status();
    t.equal(s.reason, 'failing', b);
    t.equal(s.head, null, b);
    t.equal(s.errorRate, 1, b);
  }
});

t.test('stop() ends both loops and ignores probes still in flight', async (t) => {
  const { time, health, probe, calls } = setup(2, [{ head: 5, afterMs: 500 }, 'hang']);
  const prober = startProber(health, probe, { timers: time.timers });
  t.equal(calls.length, 2, 'both polled at start');
  await time.advanceTo(100);
  prober.stop();
  prober.stop();
  t.equal(calls[1]!.signal.aborted, true);
  t.equal(calls[0]!.signal.aborted, true);
  await time.advanceTo(60_000);
  t.equal(calls.length, 2, 'nothing probed after stop');
  t.equal(health.upstreams[0]!.head, null, 'the late answer is ignored');
  t.equal(health.upstreams[0]!.status().calls, 0);
  t.equal(time.pending.size, 0, "both intervals and the probes' deadlines cleared");
  t.same(
    health.upstreams.map((u) => u.probeSince),
    [null, null],
    'no probe left in flight',
  );
});

t.test('options are checked; the default timers start and stop', async (t) => {
  const { health, probe, calls } = setup(1, [{ head: 1 }]);
  for (const key of ['intervalMs', 'headIntervalMs', 'probeTimeoutMs'] as const) {
    for (const bad of [0, -5, Number.NaN, Number.POSITIVE_INFINITY]) {
      t.throws(() => startProber(health, probe, { [key]: bad }), RangeError, `${key} ${bad}`);
    }
  }
  t.equal(calls.length, 0, 'a refused configuration probes nothing');
  const prober = startProber(health, probe);
  t.equal(calls.length, 1, 'the first head poll is at start');
  prober.stop();
});
