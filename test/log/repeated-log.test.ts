/** A condition repeated on every request is logged when it starts, summarised at most once a period, and when it ends. */
import t from 'tap';
import { textLogger } from '../support/log-lines.js';
import { createRepeatedLog } from '../../src/repeated-log.js';

function fakeTime() {
  let now = 0;
  const timers: Array<{ at: number; fn: () => void; live: boolean }> = [];
  return {
    now: () => now,
    schedule(fn: () => void, ms: number) {
      const timer = { at: now + ms, fn, live: true };
      timers.push(timer);
      return () => void (timer.live = false);
    },
    advance(ms: number) {
      const end = now + ms;
      for (;;) {
        const next = timers.filter((x) => x.live && x.at <= end).sort((a, b) => a.at - b.at)[0];
        if (next === undefined) break;
        now = next.at;
        next.live = false;
        next.fn();
      }
      now = end;
    },
  };
}

t.test('start, summaries with counts, end after a quiet period', async (t) => {
  const lines: string[] = [];
  const time = fakeTime();
  const log = createRepeatedLog(textLogger(lines), { summaryMs: 5000, now: time.now, schedule: time.schedule });
  const fail = (reason: string) => log.report('devnet a:1', 'upstream calls fail', { chain: 'devnet', upstream: 'a:1' }, { reason });
  fail('refused');
  t.same(lines, ['warn upstream calls fail chain=devnet upstream=a:1 reason=refused'], 'the first occurrence at once, with its reason');
  for (let i = 0; i < 499; i++) fail('refused');
  time.advance(4999);
  t.equal(lines.length, 1, 'nothing more within the period, however many occur');
  time.advance(1);
  t.same(lines.slice(1), ['warn upstream calls fail: still happening chain=devnet upstream=a:1 count=499 total=500 reason=refused']);
  fail('timeout');
  time.advance(5000);
  t.same(lines.slice(2), ['warn upstream calls fail: still happening chain=devnet upstream=a:1 count=1 total=501 reason=timeout']);
  t.equal(log.active(), 1);
  time.advance(5000);
  t.same(lines.slice(3), ['info upstream calls fail: ended chain=devnet upstream=a:1 total=501 duration_s=15'], 'a quiet period ends it');
  t.equal(log.active(), 0);
  fail('refused');
  t.equal(lines.length, 5, 'a new occurrence starts it again');
});

t.test('conditions are kept apart by key; close stops the timers', async (t) => {
  const lines: string[] = [];
  const time = fakeTime();
  const log = createRepeatedLog(textLogger(lines), { summaryMs: 1000, now: time.now, schedule: time.schedule });
  log.report('a', 'x fails', { node: 'a' });
  log.report('b', 'x fails', { node: 'b' });
  log.report('a', 'x fails', { node: 'a' });
  t.same(lines, ['warn x fails node=a', 'warn x fails node=b']);
  log.close();
  time.advance(10_000);
  t.equal(lines.length, 2, 'nothing after close');
  t.equal(log.active(), 0);
});
