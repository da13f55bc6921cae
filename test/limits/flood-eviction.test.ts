/**
 * Which key a full shared table gives up (shared-table.ts): the one whose count is lowest, of those the least
 * recently seen. A flood of keys counting once each must then only ever take over one another, never a key
 * that counts more, however long ago that key was last seen: by recency alone, it was the key seen least
 * often (a client whose thread was descheduled, or one sending in bursts) that lost its count, again and
 * again, and got its limit several times over. Fake clocks throughout; real threads are in
 * shared-threads.test.ts, floods of the default tables in full-tables.test.ts.
 */
import t from 'tap';
import { allocateSharedCounts, createSharedCounts } from '../../src/limits/shared-counts.js';
import { allocateSharedUnknownKeys, createSharedUnknownKeyGuard } from '../../src/limits/shared-unknown-keys.js';
import { allocateSharedWindows, createSharedWindowLimiter } from '../../src/limits/shared-window.js';
import { createWindowCount } from '../support/window-count.js';

/** A key of the flood: one per /64, as IPv6 clients are keyed (limits/address-key.ts). */
const flooder = (i: number): string => `2001:db8:${(i >>> 16).toString(16)}:${(i & 0xffff).toString(16)}::/64`;
const HEAVY = '198.51.100.7';

/** One kind of table, 4 keys (5 slots: a single probe run), whose heavy key counts 3 and is then at its cap. */
interface Kind {
  name: string;
  make(now: () => number, onEvict: () => void): { heavy(): void; oneShot(key: string): void; capped(): boolean };
}

const KINDS: Kind[] = [
  {
    name: 'rate windows (units taken in the second)',
    make(now, onEvict) {
      const limiter = createSharedWindowLimiter(allocateSharedWindows({ maxKeys: 4 }), { now, onEvict });
      return {
        heavy: () => {
          for (let n = 0; n < 3; n++) limiter.take(HEAVY, 3);
        },
        oneShot: (key) => void limiter.take(key, 3),
        capped: () => !limiter.take(HEAVY, 3).ok,
      };
    },
  },
  {
    name: 'unknown-key guard (guesses in the minute)',
    make(now, onEvict) {
      const guard = createSharedUnknownKeyGuard(allocateSharedUnknownKeys({ maxAddresses: 4 }), { maxPerMinute: 3, now, onEvict });
      return {
        heavy: () => {
          for (let n = 0; n < 3; n++) guard.refuse(HEAVY);
        },
        oneShot: (key) => void guard.refuse(key),
        capped: () => guard.throttled(HEAVY) && guard.refuse(HEAVY),
      };
    },
  },
  {
    name: 'connection counts (open)',
    make(now, onEvict) {
      const counts = createSharedCounts(allocateSharedCounts({ maxKeys: 4 }), { now, onEvict });
      return {
        heavy: () => {
          for (let n = 0; n < 3; n++) counts.open(HEAVY);
        },
        oneShot: (key) => counts.open(key),
        capped: () => counts.count(HEAVY) === 3 && !counts.tryOpen(HEAVY, 3),
      };
    },
  },
];

for (const kind of KINDS) {
  t.test(`${kind.name}: a flood of one-shot keys takes over only its own, not a key counting 3 seen before it`, async (t) => {
    let at = 0;
    let evictions = 0;
    const table = kind.make(
      () => at,
      () => void evictions++,
    );
    table.heavy();
    // 200 one-shot keys, each seen after the heavy key, in its run of 5 slots: 196 find it full.
    for (let i = 0; i < 200; i++) {
      at = 100 + i;
      table.oneShot(flooder(i));
    }
    t.equal(evictions, 196, 'the table was full: every key past the fifth took over one still counting');
    t.ok(table.capped(), 'the heavy key, least recently seen of all, kept its count: still at its cap');
  });
}

t.test('rate windows: a client sending in bursts keeps its limit through a flood turning the table over every 31 ms', async (t) => {
  let at = 0;
  let evictions = 0;
  // 1,250 slots; 40 new keys a millisecond, each taking once, replace them all in about 31 ms.
  const limiter = createSharedWindowLimiter(allocateSharedWindows({ maxKeys: 1000 }), { now: () => at, onEvict: () => void evictions++ });
  const LIMIT = 10;
  const seen = createWindowCount();
  let admitted = 0;
  let worst = 0;
  let key = 0;
  for (let ms = 0; ms < 3000; ms++) {
    at = ms;
    // The client: 20 takes every 250 ms, so at 10 a second it is seen far less often than the table turns over.
    if (ms % 250 === 0) {
      for (let n = 0; n < 20; n++) {
        if (!limiter.take(HEAVY, LIMIT).ok) continue;
        admitted++;
        seen.add(at, 1);
        worst = Math.max(worst, seen.within(at));
      }
    }
    for (let n = 0; n < 40; n++) limiter.take(flooder(key++), LIMIT);
  }
  t.ok(evictions > 100_000, `the table was full: ${evictions} keys still counting taken over`);
  t.equal(worst, LIMIT, `at most ${LIMIT} in any second`);
  t.equal(admitted, 3 * LIMIT, `${LIMIT} a second over 3 s`);
});
