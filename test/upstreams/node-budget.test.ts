import t from 'tap';
import {
  FIRST_COOLDOWN_MS,
  MAX_COOLDOWN_MS,
  MAX_DEFAULT_COOLDOWN_MS,
  NodeBudget,
  retryAfterMs,
  STREAK_RESET_MS,
  WINDOW_MS,
} from '../../src/upstreams/node-budget.js';

t.test('rps: no sliding second ever holds more than rps sends', async (t) => {
  const b = new NodeBudget({ rps: 3, maxInFlight: null });
  const sent: number[] = [];
  // A caller that sends whenever there is room, asking every 7 ms for 5 s.
  for (let now = 0; now < 5_000; now += 7) {
    if (b.hasRoom(now, 0)) {
      b.take(now);
      sent.push(now);
    }
  }
  for (let k = 3; k < sent.length; k++) t.ok(sent[k]! - sent[k - 3]! >= WINDOW_MS, `send ${k} is a second after send ${k - 3}`);
  // Three at the start of each second or so: 5 s hold 15, less the rounding to 7 ms steps.
  t.ok(sent.length >= 13 && sent.length <= 15, `sent ${sent.length}`);
});

t.test('rps: room comes back exactly when the oldest send is a second old', async (t) => {
  const b = new NodeBudget({ rps: 2, maxInFlight: null });
  b.take(100);
  b.take(400);
  t.notOk(b.hasRoom(400, 0));
  t.notOk(b.hasRoom(1_099, 0), 'the send at 100 is still within the second');
  t.ok(b.hasRoom(1_100, 0));
  b.take(1_100);
  t.notOk(b.hasRoom(1_399, 0));
  t.ok(b.hasRoom(1_400, 0));
});

t.test('max_in_flight: room while fewer calls are in flight', async (t) => {
  const b = new NodeBudget({ rps: null, maxInFlight: 2 });
  t.ok(b.hasRoom(0, 0));
  t.ok(b.hasRoom(0, 1));
  t.notOk(b.hasRoom(0, 2));
  t.notOk(b.hasRoom(0, 5));
  const free = new NodeBudget({ rps: null, maxInFlight: null });
  t.ok(free.hasRoom(0, 10_000), 'no limit');
});

t.test('cooldown: Retry-After when given, else 1 s doubling to a cap', async (t) => {
  const b = new NodeBudget({ rps: null, maxInFlight: null });
  t.equal(b.coolDown(0, 2_000), 2_000);
  t.notOk(b.hasRoom(1_999, 0));
  t.ok(b.hasRoom(2_000, 0));
  t.equal(b.coolDown(2_000, null), FIRST_COOLDOWN_MS);
  t.equal(b.coolDown(2_500, null), 0, 'a 429 while cooling down starts nothing new');
  t.notOk(b.hasRoom(2_999, 0));
  t.equal(b.coolDown(3_000, null), 2 * FIRST_COOLDOWN_MS, 'the next one soon after doubles');
  t.equal(b.coolDown(5_000, null), 4 * FIRST_COOLDOWN_MS);
  let at = 9_000;
  let ms = 0;
  for (let k = 0; k < 10; k++) {
    ms = b.coolDown(at, null);
    at += ms;
  }
  t.equal(ms, MAX_DEFAULT_COOLDOWN_MS, 'capped');
  t.equal(b.coolDown(at + STREAK_RESET_MS + 1, null), FIRST_COOLDOWN_MS, 'a minute of quiet starts over');
  t.equal(new NodeBudget({ rps: null, maxInFlight: null }).coolDown(0, 86_400_000), MAX_COOLDOWN_MS, 'Retry-After is capped');
});

t.test('Retry-After: delay-seconds and an HTTP date', async (t) => {
  const now = Date.parse('Sun, 29 Nov 2026 18:00:00 GMT');
  t.equal(retryAfterMs('1', now), 1_000);
  t.equal(retryAfterMs(' 120 ', now), 120_000);
  t.equal(retryAfterMs('0', now), 0);
  t.equal(retryAfterMs('Sun, 29 Nov 2026 18:00:05 GMT', now), 5_000);
  t.equal(retryAfterMs('Sun, 29 Nov 2026 17:59:00 GMT', now), 0, 'a date past is now');
  t.equal(retryAfterMs(undefined, now), null);
  t.equal(retryAfterMs('soon', now), null);
  t.equal(retryAfterMs('-1', now), null);
  t.equal(retryAfterMs('1.5', now), null);
  t.equal(retryAfterMs('Sun, 99 Foo 2026', now), null);
});
