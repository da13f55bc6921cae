import t from 'tap';
import {
  createUpstreamHealth,
  DEEPEST_REORG,
  ERROR_RATE_LIMIT,
  FAILURE_STREAK,
  isLagging,
  MIN_CALLS_JUDGED,
  SUSPECT_AFTER_MS,
  type UpstreamHealth,
} from '../../src/upstreams/health.js';

function fakeClock(start = 0): { now: () => number; advance(ms: number): void } {
  let at = start;
  return {
    now: () => at,
    advance: (ms) => {
      at += ms;
    },
  };
}

function outcomes(u: UpstreamHealth, pattern: string, latencyMs = 10): void {
  for (const c of pattern) u.record(c === 'F' ? 'failed' : 'ok', latencyMs);
}

t.test('the documented thresholds', async (t) => {
  t.equal(FAILURE_STREAK, 3);
  t.equal(ERROR_RATE_LIMIT, 0.5);
  t.equal(MIN_CALLS_JUDGED, 10);
  t.equal(SUSPECT_AFTER_MS, 1_000);
});

t.test('a fresh upstream is in rotation with nothing known', async (t) => {
  const u = createUpstreamHealth('http://a:8545', { now: fakeClock().now });
  t.same(u.status(), {
    inRotation: true,
    head: null,
    lag: null,
    errorRate: 0,
    calls: 0,
    p50Ms: null,
    ewmaMs: null,
    inflight: 0,
  });
  t.equal(u.failing, false);
});

t.test('three failures in a row take it out; an answer between them resets the streak', async (t) => {
  const clock = fakeClock();
  const u = createUpstreamHealth('a', { now: clock.now });
  outcomes(u, 'FF');
  t.equal(u.status().inRotation, true, 'two failures in a row: still in');
  outcomes(u, '.FF');
  t.equal(u.status().inRotation, true, 'the answer broke the streak (4 of 5 failed, but fewer than 10 calls)');
  outcomes(u, 'F');
  const s = u.status();
  t.equal(s.inRotation, false);
  t.equal(s.reason, 'failing');
  t.equal(s.calls, 6);
  t.equal(s.errorRate, 5 / 6);
});

t.test('half of at least ten calls in the window failing takes it out', async (t) => {
  const clock = fakeClock();
  const u = createUpstreamHealth('a', { now: clock.now });
  outcomes(u, 'F.F.F.F..');
  t.equal(u.status().calls, 9);
  t.equal(u.status().inRotation, true, '4 of 9');
  outcomes(u, 'F');
  t.equal(u.status().inRotation, false, '5 of 10');
  t.equal(u.status().reason, 'failing');

  const v = createUpstreamHealth('b', { now: clock.now });
  outcomes(v, '..F.F.F.F.F');
  t.equal(v.status().inRotation, true, '5 of 11 is under half');
  outcomes(v, '.F');
  t.equal(v.status().inRotation, true, '6 of 13');
  outcomes(v, 'F');
  t.equal(v.status().calls, 14);
  t.equal(v.status().inRotation, false, '7 of 14, with only two in a row');
});

t.test('outcomes older than the 10 s window no longer count', async (t) => {
  const clock = fakeClock(50_000);
  const u = createUpstreamHealth('a', { now: clock.now });
  outcomes(u, 'F.F.F.F.');
  clock.advance(9_000);
  t.equal(u.status().calls, 8, 'still in the window after 9 s');
  clock.advance(1_000);
  t.equal(u.status().calls, 0, 'gone after 10 s');
  outcomes(u, 'F.F');
  // Had the old outcomes counted, 6 failures of 11 would have taken it out.
  t.equal(u.status().inRotation, true);
  t.equal(u.status().errorRate, 2 / 3);
});

t.test('a failing upstream stays out until a probe reads a head, and then starts afresh', async (t) => {
  const clock = fakeClock();
  const u = createUpstreamHealth('a', { now: clock.now });
  outcomes(u, 'FFF');
  t.equal(u.failing, true);
  outcomes(u, '.....', 20);
  t.equal(u.status().reason, 'failing', 'late answers from calls in flight do not restore it');
  u.reportProbe(null, 5);
  t.equal(u.status().reason, 'failing', 'a failed probe does not restore it');
  u.reportProbe(1234, 8);
  const s = u.status();
  t.equal(s.inRotation, true);
  t.equal(s.head, 1234);
  t.equal(s.calls, 1, 'the outcomes of the failing spell are forgotten');
  t.equal(s.errorRate, 0);
  outcomes(u, 'FF');
  t.equal(u.status().inRotation, true, 'the spell that took it out does not count toward the next');
  outcomes(u, 'F');
  t.equal(u.status().reason, 'failing');
});

t.test('suspected while a probe has been unanswered for SUSPECT_AFTER_MS, and only then', async (t) => {
  const clock = fakeClock(5_000);
  const u = createUpstreamHealth('a', { now: clock.now });
  t.equal(u.suspected, false, 'no probe in flight');
  u.probeSince = clock.now();
  clock.advance(SUSPECT_AFTER_MS - 1);
  t.equal(u.suspected, false, 'a probe in flight, not late yet');
  clock.advance(1);
  t.equal(u.suspected, true, 'late');
  t.equal(u.status().inRotation, true, 'suspected is not out of rotation');
  u.probeSince = null;
  t.equal(u.suspected, false, 'the probe ended');
});

t.test('p50 and EWMA come from answered calls only', async (t) => {
  const clock = fakeClock();
  const u = createUpstreamHealth('a', { now: clock.now });
  for (const ms of [10, 20, 30, 40, 50]) u.record('ok', ms);
  u.record('failed', 30_000);
  u.record('failed', 30_000);
  const s = u.status();
  t.ok(s.p50Ms !== null && Math.abs(s.p50Ms - 30) <= 30 * 0.05, `p50 ${s.p50Ms} is 30 within 5%`);
  let ewma = 10;
  for (const ms of [20, 30, 40, 50]) ewma += (ms - ewma) * 0.2;
  t.ok(Math.abs(s.ewmaMs! - ewma) < 1e-9, `ewma ${s.ewmaMs} = ${ewma}`);
  u.record('ok', Number.NaN);
  u.record('ok', -4);
  t.equal(u.status().ewmaMs, s.ewmaMs, 'a latency that is no time leaves the EWMA alone');
  t.equal(u.status().calls, 9, 'but the outcome counts');

  for (let i = 0; i < 11; i++) u.record('ok', 500);
  t.ok(Math.abs(u.status().p50Ms! - 500) <= 25, 'the median follows the majority');
  clock.advance(10_000);
  t.equal(u.status().p50Ms, null, 'and leaves with the window');
  t.not(u.status().ewmaMs, null, 'the EWMA is kept');
});

t.test('heads: latest report wins, nonsense is refused', async (t) => {
  const clock = fakeClock(7);
  const u = createUpstreamHealth('a', { now: clock.now });
  u.reportHead(100);
  t.equal(u.headAt, 7);
  clock.advance(3);
  u.reportHead(98);
  t.equal(u.head, 98, 'a reorg or resync shows');
  t.equal(u.headAt, 10);
  for (const bad of [-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
    t.throws(() => u.reportHead(bad), RangeError);
  }
  t.equal(u.head, 98);
});

t.test('a head gone back more than DEEPEST_REORG marks a new chain until the old head is passed; a reorg does not', async (t) => {
  t.equal(DEEPEST_REORG, 128);
  const reports: Array<[number | null, number]> = [];
  const u = createUpstreamHealth('a', { now: fakeClock().now, onHead: (previous, head) => void reports.push([previous, head]) });
  u.reportHead(1000);
  u.reportHead(1000 - DEEPEST_REORG);
  t.equal(u.newChainFrom, null, 'back by DEEPEST_REORG: a reorg');
  u.reportHead(1000);
  u.reportHead(5);
  t.equal(u.newChainFrom, 1000, 'back by more: a new chain, from head 1000');
  t.equal(u.head, 5, 'the latest report still wins');
  u.reportHead(999);
  t.equal(u.newChainFrom, 1000);
  u.reportHead(1000);
  t.equal(u.newChainFrom, null, 'the old head reached again: nothing tells the chains apart any more');
  t.same(
    reports,
    [
      [null, 1000],
      [1000, 872],
      [872, 1000],
      [1000, 5],
      [5, 999],
      [999, 1000],
    ],
    'every report, with the head before it',
  );
  const probed = createUpstreamHealth('b', { now: fakeClock().now });
  probed.reportProbe(1000, 1);
  outcomes(probed, 'FFF');
  probed.reportProbe(2, 1);
  t.equal(probed.newChainFrom, 1000, "a probe's head counts too");
  t.equal(probed.failing, false);
});

t.test('lag against the best head: exactly maxLagBlocks behind is in, one more is out', async (t) => {
  let best: number | null = 100;
  const u = createUpstreamHealth('a', { now: fakeClock().now, bestHead: () => best, maxLagBlocks: 5 });
  t.equal(u.status().lag, null, 'no head yet: lag unknown, in rotation');
  t.equal(u.status().inRotation, true);
  u.reportHead(95);
  t.equal(u.status().lag, 5);
  t.equal(u.status().inRotation, true);
  u.reportHead(94);
  t.equal(u.status().lag, 6);
  t.equal(u.status().inRotation, false);
  t.equal(u.status().reason, 'lagging');
  best = null;
  t.equal(u.status().inRotation, true, 'no best head known: no lag judged');
  best = 90;
  t.equal(u.status().lag, 0, 'ahead of the best is no lag');
  outcomes(u, 'FFF');
  best = 200;
  t.equal(u.status().reason, 'failing', 'failing is the reason shown when both apply');

  t.equal(isLagging(null, 10, 0), false);
  t.equal(isLagging(10, 10, 0), false);
  t.equal(isLagging(9, 10, 0), true);
  t.throws(() => createUpstreamHealth('a', { maxLagBlocks: -1 }), RangeError);
  t.throws(() => createUpstreamHealth('a', { maxLagBlocks: 1.5 }), RangeError);
});

t.test('failingSince: when the node began failing, null while it is not', async (t) => {
  const clock = fakeClock(5_000);
  const u = createUpstreamHealth('a', { now: clock.now });
  t.equal(u.failingSince, null);
  outcomes(u, 'FF');
  clock.advance(300);
  outcomes(u, 'F');
  t.equal(u.failingSince, 5_300, 'the third failure in a row');
  clock.advance(1_000);
  outcomes(u, 'F');
  t.equal(u.failingSince, 5_300, 'more failures do not move it');
  u.reportProbe(12, 5);
  t.equal(u.failingSince, null, 'restored');
});

t.test('eject() takes a node out as failing until its next good probe; answered calls do not restore it', async (t) => {
  const clock = fakeClock(1000);
  const changes: boolean[] = [];
  const u = createUpstreamHealth('n', { now: clock.now, onFailing: (f) => changes.push(f) });
  u.eject();
  t.equal(u.failing, true);
  t.same(u.status(), { ...u.status(), inRotation: false, reason: 'failing' });
  t.equal(u.failingSince, 1000);
  u.eject();
  t.same(changes, [true], 'told once');
  outcomes(u, 'OOOOO');
  t.equal(u.failing, true, 'calls answered meanwhile do not bring it back');
  u.reportProbe(null, 5);
  t.equal(u.failing, true, 'nor a failed probe');
  u.reportProbe(12, 5);
  t.equal(u.failing, false, 'a good probe does');
  t.same(changes, [true, false]);
});
