/**
 * Which key a full limit table gives up: the one whose count is lowest, of those the least recently seen (of
 * its probe run in shared memory, shared-table.ts; of the 8 least recently used in one thread). A flood of keys counting once each must then only ever take over one another, never a key
 * that counts more, however long ago that key was last seen: by recency alone, it was the key seen least
 * often (a client whose thread was descheduled, or one sending in bursts) that lost its count, again and
 * again, and got its limit several times over. Fake clocks throughout; real threads are in
 * shared-threads.test.ts, floods of the default tables in full-tables.test.ts.
 */
import t from 'tap';
import { allocateSharedCounts, createSharedCounts } from '../../src/limits/shared-counts.js';
import { allocateSharedUnknownKeys, createSharedUnknownKeyGuard } from '../../src/limits/shared-unknown-keys.js';
import { allocateSharedWindows, createSharedWindowLimiter } from '../../src/limits/shared-window.js';
import { createSlidingWindowLimiter, type SlidingWindowLimiter } from '../../src/limits/sliding-window.js';
import { createUnknownKeyGuard, type UnknownKeyGuard } from '../../src/limits/unknown-keys.js';
import { createWindowCount } from '../support/window-count.js';

/** A key of the flood: one per /64, as IPv6 clients are keyed (limits/address-key.ts). */
const flooder = (i: number): string => `2001:db8:${(i >>> 16).toString(16)}:${(i & 0xffff).toString(16)}::/64`;
const HEAVY = '198.51.100.7';

/**
 * One kind of table, for 4 keys (in shared memory 5 slots: a single probe run), whose heavy key counts 3 and
 * is then at its cap; `room` keys fit before the first eviction.
 */
interface Kind {
  name: string;
  room: number;
  make(now: () => number, onEvict: () => void): { heavy(): void; oneShot(key: string): void; capped(): boolean };
}

function rateWindows(name: string, room: number, make: (now: () => number, onEvict: () => void) => SlidingWindowLimiter): Kind {
  return {
    name,
    room,
    make(now, onEvict) {
      const limiter = make(now, onEvict);
      return {
        heavy: () => {
          for (let n = 0; n < 3; n++) limiter.take(HEAVY, 3);
        },
        oneShot: (key) => void limiter.take(key, 3),
        capped: () => !limiter.take(HEAVY, 3).ok,
      };
    },
  };
}

function guard(name: string, room: number, make: (now: () => number, onEvict: () => void) => UnknownKeyGuard): Kind {
  return {
    name,
    room,
    make(now, onEvict) {
      const guard = make(now, onEvict);
      return {
        heavy: () => {
          for (let n = 0; n < 3; n++) guard.refuse(HEAVY);
        },
        oneShot: (key) => void guard.refuse(key),
        capped: () => guard.throttled(HEAVY) && guard.refuse(HEAVY),
      };
    },
  };
}

const KINDS: Kind[] = [
  rateWindows('shared rate windows (units taken in the second)', 5, (now, onEvict) =>
    createSharedWindowLimiter(allocateSharedWindows({ maxKeys: 4 }), { now, onEvict }),
  ),
  rateWindows('in-process rate windows', 4, (now, onEvict) => createSlidingWindowLimiter({ maxKeys: 4, now, onEvict })),
  guard('shared unknown-key guard (guesses in the minute)', 5, (now, onEvict) =>
    createSharedUnknownKeyGuard(allocateSharedUnknownKeys({ maxAddresses: 4 }), { maxPerMinute: 3, now, onEvict }),
  ),
  guard('in-process unknown-key guard', 4, (now, onEvict) => createUnknownKeyGuard({ maxAddresses: 4, maxPerMinute: 3, now, onEvict })),
  {
    name: 'shared connection counts (open)',
    room: 5,
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
    // 200 one-shot keys, each seen after the heavy key, in its table (its run of 5 slots in shared memory).
    for (let i = 0; i < 200; i++) {
      at = 100 + i;
      table.oneShot(flooder(i));
    }
    t.equal(evictions, 201 - kind.room, `the table was full: every key past the first ${kind.room} took over one still counting`);
    t.ok(table.capped(), 'the heavy key, least recently seen of all, kept its count: still at its cap');
  });
}

const BURSTS: Array<{ name: string; turnover: number; make: (now: () => number, onEvict: () => void) => SlidingWindowLimiter }> = [
  // 1,250 slots, replaced in about 31 ms by 40 new keys a millisecond each taking once.
  {
    name: 'shared',
    turnover: 31,
    make: (now, onEvict) => createSharedWindowLimiter(allocateSharedWindows({ maxKeys: 1000 }), { now, onEvict }),
  },
  { name: 'in-process', turnover: 25, make: (now, onEvict) => createSlidingWindowLimiter({ maxKeys: 1000, now, onEvict }) },
];

for (const impl of BURSTS)
  t.test(
    `${impl.name} rate windows: a client sending in bursts keeps its limit through a flood turning the table over every ${impl.turnover} ms`,
    async (t) => {
      let at = 0;
      let evictions = 0;
      const limiter = impl.make(
        () => at,
        () => void evictions++,
      );
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
    },
  );
