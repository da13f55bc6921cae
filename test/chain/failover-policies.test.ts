/**
 * A method's latency window and the hedge delay read from it (chain/failover-policies.ts), on a fake clock: the
 * quantile of the last minute, refreshed at most once a second, half the timeout while too few answers are known.
 */
import t from 'tap';
import { hedgeAfterMs, LatencyWindow, MIN_LATENCY_SAMPLES } from '../../src/chain/failover-policies.js';
import { builtInPolicy, type FailoverPolicy } from '../../src/config/failover.js';

function clock(): { now: () => number; advance(ms: number): void } {
  let at = 1_000_000;
  return { now: () => at, advance: (ms) => void (at += ms) };
}

t.test('the quantile of the window, within a bin (about 9%)', async (t) => {
  const c = clock();
  const w = new LatencyWindow(c.now);
  t.equal(w.quantile(0.9), null, 'nothing known');
  for (let i = 1; i <= 100; i++) w.record(i * 10); // 10 .. 1000 ms
  c.advance(1000);
  const p90 = w.quantile(0.9)!;
  t.ok(p90 >= 900 && p90 <= 900 * 1.1, `p90 ${p90}`);
  const p50 = new LatencyWindow(c.now);
  for (let i = 1; i <= 100; i++) p50.record(i * 10);
  const m = p50.quantile(0.5)!;
  t.ok(m >= 500 && m <= 550, `p50 ${m}`);
});

t.test('read again at most once a second; answers older than a minute leave the window', async (t) => {
  const c = clock();
  const w = new LatencyWindow(c.now);
  for (let i = 0; i < MIN_LATENCY_SAMPLES; i++) w.record(100);
  const first = w.quantile(0.9)!;
  for (let i = 0; i < 200; i++) w.record(2000);
  t.equal(w.quantile(0.9), first, 'within the second: the figure read before');
  c.advance(1000);
  t.ok(w.quantile(0.9)! > 1800, 'a second later: the slow answers count');
  c.advance(70_000);
  t.equal(w.quantile(0.9), null, 'a minute later: nothing is known');
  for (let i = 0; i < MIN_LATENCY_SAMPLES - 1; i++) w.record(50);
  c.advance(1000);
  t.equal(w.quantile(0.9), null, `fewer than ${MIN_LATENCY_SAMPLES} answers are not trusted`);
});

t.test('hedgeAfterMs: half, off, fixed, and a quantile with its fall-backs', async (t) => {
  const c = clock();
  const base = builtInPolicy(2000, 8000);
  const of = (p: Partial<FailoverPolicy>, latency: LatencyWindow | null = null) =>
    hedgeAfterMs({ policy: { ...base, ...p }, latency, answerTimeoutMs: undefined });
  t.equal(of({}), 1000, 'the built-in hedge: half the timeout');
  t.equal(of({ hedge: { kind: 'off' } }), null);
  t.equal(of({ hedgeMax: 0 }), null, 'max 0: no hedge');
  t.equal(of({ hedge: { kind: 'fixed', ms: 150 } }), 150);
  const w = new LatencyWindow(c.now);
  const q = { hedge: { kind: 'quantile', q: 0.9 } } as const;
  t.equal(of(q, w), 1000, 'too few answers: half the timeout');
  for (let i = 0; i < 50; i++) w.record(40);
  c.advance(1000);
  const after = of(q, w)!;
  t.ok(after >= 40 && after < 50, `the method's p90: ${after}`);
  const slow = new LatencyWindow(c.now);
  for (let i = 0; i < 50; i++) slow.record(5000);
  t.equal(of(q, slow), 1000, 'a quantile past the timeout: half the timeout');
});
