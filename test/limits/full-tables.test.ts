/**
 * A full limit table never switches a limit off: a flood of 200,000 distinct addresses through tables sized
 * for 100,000 (the defaults) leaves a steady client, and a client first seen while the table is full, limited
 * at their rates, with the rate limiter, the unknown-key guard and the connection counts, in one thread and
 * over shared memory alike; the entries the flood took over are counted (the evictions metric's source).
 * Real threads are in shared-threads.test.ts.
 */
import t from 'tap';
import { allocateSharedCounts, createSharedCounts } from '../../src/limits/shared-counts.js';
import { allocateSharedUnknownKeys, createSharedUnknownKeyGuard } from '../../src/limits/shared-unknown-keys.js';
import { allocateSharedWindows, createSharedWindowLimiter } from '../../src/limits/shared-window.js';
import { createSlidingWindowLimiter, type SlidingWindowLimiter } from '../../src/limits/sliding-window.js';
import { createUnknownKeyGuard, type UnknownKeyGuard } from '../../src/limits/unknown-keys.js';
import { createConnectionCounts, type ConnectionCounts } from '../../src/pipeline/stream-limits.js';
import { createWindowCount } from '../support/window-count.js';

const FLOOD = 200_000;
/** The flood's ith address: one per /64, as a flood of IPv6 clients is keyed (limits/address-key.ts). */
const flooder = (i: number): string => `2001:db8:${(i >>> 16).toString(16)}:${(i & 0xffff).toString(16)}::/64`;
const STEADY = '198.51.100.7';
const NEWCOMER = '2001:db8:ffff:1::/64';
const CLIENTS = [STEADY, NEWCOMER] as const;
/** The flood address after which the newcomer comes: past the 125,000 slots a table for 100,000 keys has. */
const NEWCOMER_FROM = 150_000;

interface Made<L> {
  limiter: L;
  evictions: () => number;
}

/** What `make` builds with an onEvict, beside the count of its calls. */
function counted<L>(make: (onEvict: () => void) => L): Made<L> {
  let n = 0;
  return { limiter: make(() => void n++), evictions: () => n };
}

const RATE: Array<{ name: string; make: (now: () => number) => Made<SlidingWindowLimiter> }> = [
  { name: 'in-process', make: (now) => counted((onEvict) => createSlidingWindowLimiter({ now, onEvict })) },
  { name: 'shared memory', make: (now) => counted((onEvict) => createSharedWindowLimiter(allocateSharedWindows(), { now, onEvict })) },
];

for (const impl of RATE) {
  t.test(`${impl.name} rate limiter: 200,000 addresses in one second leave every client limited at its rate`, async (t) => {
    let at = 0;
    const { limiter, evictions } = impl.make(() => at);
    const LIMIT = 10;
    const seen = { [STEADY]: createWindowCount(), [NEWCOMER]: createWindowCount() };
    const admitted = { [STEADY]: 0, [NEWCOMER]: 0 };
    let worst = 0;
    let floodAdmitted = 0;
    // One flood address every 4 µs (200,000 in 0.8 s, so all are live at once: twice what the table holds);
    // the steady client from the start and the newcomer from 0.6 s (the table full) take every millisecond.
    for (let i = 0; i < FLOOD; i++) {
      at = i * 0.004;
      if (limiter.take(flooder(i), LIMIT).ok) floodAdmitted++;
      if (i % 250 !== 0) continue;
      for (const client of CLIENTS) {
        if (client === NEWCOMER && i < NEWCOMER_FROM) continue;
        if (!limiter.take(client, LIMIT).ok) continue;
        admitted[client]++;
        seen[client].add(at, 1);
        worst = Math.max(worst, seen[client].within(at));
      }
    }
    t.equal(floodAdmitted, FLOOD, 'each flood address takes within its own limit');
    t.ok(evictions() > 0, `the table was full: ${evictions()} entries that still counted were taken over`);
    t.equal(worst, LIMIT, 'no client ever had more than its limit in a second');
    t.equal(admitted[STEADY], LIMIT, `the steady client: ${LIMIT} in 0.8 s`);
    t.equal(admitted[NEWCOMER], LIMIT, `the client first seen in the full table: ${LIMIT} in 0.2 s`);
  });
}

const GUARDS: Array<{ name: string; make: (now: () => number) => Made<UnknownKeyGuard> }> = [
  { name: 'in-process', make: (now) => counted((onEvict) => createUnknownKeyGuard({ now, onEvict })) },
  {
    name: 'shared memory',
    make: (now) => counted((onEvict) => createSharedUnknownKeyGuard(allocateSharedUnknownKeys(), { now, onEvict })),
  },
];

for (const impl of GUARDS) {
  t.test(`${impl.name} unknown-key guard: 200,000 guessing addresses in a minute leave every address throttled`, async (t) => {
    let at = 0;
    const { limiter: guard, evictions } = impl.make(() => at);
    const passed = { [STEADY]: 0, [NEWCOMER]: 0 };
    for (let i = 0; i < FLOOD; i++) {
      at = i * 0.25;
      guard.refuse(flooder(i));
      if (i % 1000 !== 0) continue;
      for (const client of CLIENTS) {
        if (client === NEWCOMER && i < NEWCOMER_FROM) continue;
        // Two guesses each time: 400 from the steady address and 100 from the newcomer within the minute.
        for (let g = 0; g < 2; g++) if (!guard.refuse(client)) passed[client]++;
      }
    }
    t.ok(evictions() > 0, `the table was full: ${evictions()} addresses still counted were taken over`);
    t.equal(passed[STEADY], 20, 'the steady address: 20 unknown keys in the minute, then 429');
    t.equal(passed[NEWCOMER], 20, 'the address first seen in the full table: 20, then 429');
    t.ok(guard.throttled(NEWCOMER), 'and it reads as throttled');
  });
}

const COUNTS: Array<{ name: string; make: () => Made<ConnectionCounts> }> = [
  // One thread keeps a count only while something is open: a map as large as the open connections, never full.
  { name: 'in-process', make: () => ({ limiter: createConnectionCounts(), evictions: () => 0 }) },
  { name: 'shared memory', make: () => counted((onEvict) => createSharedCounts(allocateSharedCounts(), { onEvict })) },
];

for (const impl of COUNTS) {
  t.test(`${impl.name} connection counts: 200,000 addresses holding one open leave every address capped`, async (t) => {
    const { limiter: counts, evictions } = impl.make();
    const opened = { [STEADY]: 0, [NEWCOMER]: 0 };
    for (let i = 0; i < FLOOD; i++) {
      counts.open(flooder(i));
      if (i % 1000 !== 0) continue;
      for (const client of CLIENTS) {
        if (client === NEWCOMER && i < NEWCOMER_FROM) continue;
        if (counts.tryOpen(client, 3)) opened[client]++;
      }
    }
    if (impl.name === 'shared memory') t.ok(evictions() > 0, `the table was full: ${evictions()} keys with something open were taken over`);
    t.equal(opened[STEADY], 3, 'the steady address: 3 open at most');
    t.equal(opened[NEWCOMER], 3, 'the address first seen in the full table: 3 open at most');
  });
}
