/**
 * A chain's breaker (config chains.<slug>.failover.breaker) in one node's health, on a fake clock: its streak,
 * rate, minimum calls and window in place of the built-in figures, and with open_s a node that stays out that
 * long whatever its probes say, then comes back half-open and is out again at its first failure.
 */
import t from 'tap';
import { BUILT_IN_BREAKER, type BreakerPolicy, createUpstreamHealth, type UpstreamHealth } from '../../src/upstreams/health.js';

function fakeClock(): { now: () => number; advance(ms: number): void } {
  let at = 0;
  return { now: () => at, advance: (ms) => void (at += ms) };
}

function node(breaker: Partial<BreakerPolicy>, now: () => number): UpstreamHealth {
  return createUpstreamHealth('a', { now, breaker: { ...BUILT_IN_BREAKER, ...breaker } });
}

function outcomes(u: UpstreamHealth, pattern: string): void {
  for (const c of pattern) u.record(c === 'F' ? 'failed' : 'ok', 10);
}

t.test('failure_streak: out after that many failures in a row, not before', async (t) => {
  const c = fakeClock();
  const u = node({ failureStreak: 5 }, c.now);
  outcomes(u, 'FFFF');
  t.notOk(u.failing, 'four in a row: still in (the built-in breaker would be out at three)');
  outcomes(u, 'F');
  t.ok(u.failing);
});

t.test('failure_rate, min_calls and window_s', async (t) => {
  const c = fakeClock();
  const u = node({ failureStreak: 100, failureRate: 0.3, minCalls: 20, windowMs: 3000 }, c.now);
  outcomes(u, 'OOFOOFOOFOOFOOFOOFO'); // 19 outcomes, 6 failed
  t.notOk(u.failing, 'fewer than min_calls: not judged');
  outcomes(u, 'O'); // 20, 30%
  t.notOk(u.failing, '30%, and only a failure is judged');
  outcomes(u, 'F'); // 21, 7 failed = 33%
  t.ok(u.failing, 'over failure_rate once min_calls are counted');
  const w = node({ failureStreak: 100, minCalls: 4, windowMs: 2000 }, c.now);
  outcomes(w, 'FFO');
  c.advance(3000);
  outcomes(w, 'OF');
  t.notOk(w.failing, 'failures out of the 2 s window do not count');
  t.equal(w.status().calls, 2);
});

t.test('open_s: out that long whatever the probes; then half-open, out again at a failure', async (t) => {
  const c = fakeClock();
  const u = node({ openMs: 30_000, halfOpenProbes: 2 }, c.now);
  outcomes(u, 'FFF');
  t.ok(u.failing);
  c.advance(10_000);
  u.reportProbe(100, 5);
  t.ok(u.failing, 'a good probe before open_s: still out');
  c.advance(20_000);
  u.reportProbe(101, 5);
  t.notOk(u.failing, 'after open_s a good probe lets it back, half-open');
  outcomes(u, 'O');
  outcomes(u, 'F');
  t.ok(u.failing, 'a failure among the half-open calls: out again at once');
  c.advance(29_000);
  u.reportProbe(102, 5);
  t.ok(u.failing, 'open anew for open_s');
  c.advance(1000);
  u.reportProbe(103, 5);
  t.notOk(u.failing);
  outcomes(u, 'OO');
  outcomes(u, 'F');
  t.notOk(u.failing, 'two calls answered: closed, one failure is only a failure again');
});

t.test('without open_s: back at the next good probe, as built in', async (t) => {
  const c = fakeClock();
  const u = node({}, c.now);
  outcomes(u, 'FFF');
  c.advance(1);
  u.reportProbe(5, 1);
  t.notOk(u.failing);
  outcomes(u, 'F');
  t.notOk(u.failing, 'not half-open: one failure does not take it out');
});
