// What the shared-memory limiter adds to the promises every limiter keeps (sliding-window.test.ts runs those
// against it too): views over one memory act as one limiter, its storage is bounded and taken back, and a
// full table gives a new key the slot counting least, then least recently seen (full-tables.test.ts and
// flood-eviction.test.ts flood it). Real threads are in shared-threads.test.ts.
import t from 'tap';
import { allocateSharedCounts } from '../../src/limits/shared-counts.js';
import { allocateSharedWindows, createSharedWindowLimiter } from '../../src/limits/shared-window.js';
import { createSlidingWindowLimiter } from '../../src/limits/sliding-window.js';
import { seeded } from '../support/seeded.js';
import { createWindowCount } from '../support/window-count.js';

function fakeClock(): { now: () => number; set(ms: number): void } {
  let at = 0;
  return {
    now: () => at,
    set: (ms) => {
      at = ms;
    },
  };
}

type Limiter = ReturnType<typeof createSharedWindowLimiter>;
type Clock = ReturnType<typeof fakeClock>;

/**
 * Takes for `keys` at 98% of limit 1000 in every second, from `from` for 3 s: one unit every 1.0205 ms, which
 * needs some 50 entries of 20 units. Returns each key's refusals and its worst second.
 */
function paced(limiter: Limiter, clock: Clock, keys: string[], from: number): Array<{ refused: number; worst: number }> {
  const out = keys.map(() => ({ refused: 0, worst: 0, seconds: createWindowCount() }));
  for (let at = from; at < from + 3000; at += 1.0205) {
    clock.set(at);
    keys.forEach((key, k) => {
      const o = out[k]!;
      if (!limiter.take(key, 1000).ok) o.refused++;
      else o.seconds.add(at, 1);
      o.worst = Math.max(o.worst, o.seconds.within(at));
    });
  }
  return out.map(({ refused, worst }) => ({ refused, worst }));
}

t.test('views over one memory limit a key together: the answers of one limiter', async (t) => {
  const rng = seeded(3);
  const clock = fakeClock();
  const memory = allocateSharedWindows({ maxKeys: 100 });
  const views = [1, 2, 3].map(() => createSharedWindowLimiter(memory, { now: clock.now }));
  const apart = [1, 2, 3].map(() => createSharedWindowLimiter(allocateSharedWindows({ maxKeys: 100 }), { now: clock.now }));
  const one = createSlidingWindowLimiter({ now: clock.now });
  let differ = 0;
  let differApart = 0;
  let refused = 0;
  for (let at = 0; at < 20_000; at += rng() * 2) {
    clock.set(at);
    const key = `k${Math.floor(rng() * 5)}`;
    const units = 1 + Math.floor(rng() * 10);
    const view = Math.floor(rng() * 3);
    const expected = JSON.stringify(one.take(key, 500, units));
    if (expected !== JSON.stringify(views[view]!.take(key, 500, units))) differ++;
    if (expected !== JSON.stringify(apart[view]!.take(key, 500, units))) differApart++;
    if (!expected.includes('true')) refused++;
  }
  t.ok(refused > 1000, `the keys were busy enough to be refused (${refused})`);
  t.equal(differ, 0, 'three views over one memory answer every take as one in-process limiter');
  t.ok(differApart > 1000, `three separate memories would not (${differApart} answers differ)`);
});

t.test('a log grows into the arena, and its block comes back when the log shrinks or idles', async (t) => {
  // logEntries 128: one block of MAX_ENTRIES, room for one key's full log at a time. Many slots, so that b
  // all but surely lands in a slot other than a's (reusing a's slot would free a's block too).
  const clock = fakeClock();
  const limiter = createSharedWindowLimiter(allocateSharedWindows({ maxKeys: 1000, logEntries: 128 }), { now: clock.now });
  t.equal(paced(limiter, clock, ['a'], 0)[0]!.refused, 0, 'a at 98%: never refused, with its log in the block');
  // a idles from 3000 on: b's log needs the block, which is taken back from a.
  t.equal(paced(limiter, clock, ['b'], 4500)[0]!.refused, 0, 'b at 98% once a idled a second: never refused');

  // While b keeps the block, c must fold its log in its slot: the limit holds, the 98% does not.
  const [b, c] = paced(limiter, clock, ['b', 'c'], 7500);
  t.equal(b!.refused, 0, 'b keeps its block');
  t.ok(c!.refused > 0, `c, with no block to grow into, is refused below its limit (${c!.refused} times)`);
  t.ok(c!.worst <= 1000, `and never over it (worst second ${c!.worst})`);

  // A key that slows down moves back into its slot and gives its block back while it still takes.
  const slow = fakeClock();
  const l2 = createSharedWindowLimiter(allocateSharedWindows({ maxKeys: 1000, logEntries: 128 }), { now: slow.now });
  t.equal(paced(l2, slow, ['d'], 0)[0]!.refused, 0);
  for (let at = 3000; at < 6000; at += 400) {
    slow.set(at);
    t.ok(l2.take('d', 1000).ok, `d, slow, at ${at}`);
  }
  t.equal(paced(l2, slow, ['e'], 6000)[0]!.refused, 0, 'e gets the block d gave back, 400 ms after its last take');
});

t.test('a full table gives a new key the least recently seen of its slots counting least: no key goes uncounted', async (t) => {
  const clock = fakeClock();
  let evicted = 0;
  // 4 keys: 5 slots, one probe run.
  const limiter = createSharedWindowLimiter(allocateSharedWindows({ maxKeys: 4 }), { now: clock.now, onEvict: () => void evicted++ });
  for (let k = 0; k < 5; k++) {
    clock.set(k);
    t.ok(limiter.take(`k${k}`, 1).ok, `k${k}`);
  }
  clock.set(10);
  for (let k = 1; k < 5; k++) t.notOk(limiter.take(`k${k}`, 1).ok, `k${k} limited (and seen again)`);
  t.equal(evicted, 0, 'nothing evicted yet');
  t.ok(limiter.take('x', 1).ok, "x takes k0's slot, the least recently seen");
  t.notOk(limiter.take('x', 1).ok, 'and is counted: limited at once');
  t.equal(evicted, 1, 'one eviction counted');
  for (let k = 1; k < 5; k++) t.notOk(limiter.take(`k${k}`, 1).ok, `k${k} kept its slot and its count`);
  t.ok(limiter.take('k0', 1).ok, 'k0 starts again: its count was the price of the full table');
  t.equal(evicted, 2, 'k0 took the least recently seen in turn (x)');
  clock.set(1010);
  t.ok(limiter.take('y', 1).ok, 'a second later y gets an idle slot');
  t.notOk(limiter.take('y', 1).ok, 'and is limited');
  t.equal(evicted, 2, 'an idle slot given is no eviction');
  t.equal(limiter.size, 5, 'slots were reused, none added');
});

t.test('memory is allocated once, bounded, and the options are checked', async (t) => {
  const bytes = (m: ReturnType<typeof allocateSharedWindows>): number => m.ints.byteLength + m.floats.byteLength;
  const keysOnly = bytes(allocateSharedWindows({ maxKeys: 10_000, logEntries: 0 }));
  t.ok(keysOnly <= 10_000 * 135 + 8192, `${keysOnly} bytes for 10,000 keys: 135 per key and a fixed header`);
  const withLogs = bytes(allocateSharedWindows({ maxKeys: 10_000, logEntries: 100_000 }));
  t.ok(withLogs - keysOnly <= 100_096 * 18, `${withLogs - keysOnly} bytes for 100,000 log entries: 18 per entry`);
  const defaults = bytes(allocateSharedWindows());
  t.ok(defaults <= 18.5e6, `${(defaults / 1e6).toFixed(1)} MB at the defaults`);

  const clock = fakeClock();
  const limiter = createSharedWindowLimiter(allocateSharedWindows({ maxKeys: 1000 }), { now: clock.now });
  for (let i = 0; i < 200_000; i++) {
    clock.set(i * 0.01);
    if (!limiter.take(`key-${i}`, 100).ok) t.fail(`key-${i} refused`);
  }
  t.ok(limiter.size <= 1250, `200,000 keys through a table for 1,000: ${limiter.size} slots used`);

  for (const maxKeys of [0, -1, 1.5, Number.NaN, 20_000_000]) {
    t.throws(() => allocateSharedWindows({ maxKeys }), { name: 'RangeError', message: /maxKeys/ }, `maxKeys ${maxKeys}`);
  }
  for (const logEntries of [-1, 1.5, Number.NaN]) {
    t.throws(() => allocateSharedWindows({ logEntries }), { name: 'RangeError', message: /logEntries/ }, `logEntries ${logEntries}`);
  }
  t.throws(() => createSharedWindowLimiter({} as never), TypeError, 'not a memory');
  t.throws(() => createSharedWindowLimiter(allocateSharedCounts({ maxKeys: 10 })), { message: /another kind/ }, 'the memory of counts');
  t.throws(() => createSharedWindowLimiter(allocateSharedWindows({ maxKeys: 10 }), { now: 5 as never }), TypeError, 'now');
});
