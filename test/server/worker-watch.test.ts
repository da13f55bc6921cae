/** The heartbeat watch of worker threads (server/worker-watch.ts), on a fake clock. */
import t from 'tap';
import { beater, createStallWatch, heapLimits } from '../../src/server/worker-watch.js';

t.test('a worker whose count has not moved for the stall time is reported once, with how long', async (t) => {
  let now = 0;
  const watch = createStallWatch(3, 1000, () => now);
  const beat = [1, 2, 3].map((i) => beater(watch.memory, i));
  for (const i of [1, 2, 3]) watch.arm(i);
  now = 999;
  t.same(watch.stalled(), [], 'not before the stall time');
  beat[0]!();
  beat[2]!();
  now = 1000;
  t.same(watch.stalled(), [{ index: 2, silentMs: 1000 }], 'the silent one at the stall time; those that beat are not');
  now = 1999;
  t.same(watch.stalled(), [], 'worker 1 and 3 beat at 999: their silence counts from when the watch saw it (1000)');
  now = 2000;
  t.same(
    watch.stalled(),
    [
      { index: 1, silentMs: 1000 },
      { index: 3, silentMs: 1000 },
    ],
    'then they are silent too; worker 2, reported, is not again',
  );
  now = 5000;
  t.same(watch.stalled(), [], 'reported workers are disarmed');
  watch.arm(2);
  now = 5999;
  t.same(watch.stalled(), []);
  now = 6000;
  t.same(watch.stalled(), [{ index: 2, silentMs: 1000 }], 'armed again (a new worker 2), it is watched again');
});

t.test('a disarmed worker is never reported; a worker not yet armed neither', async (t) => {
  let now = 0;
  const watch = createStallWatch(2, 500, () => now);
  watch.arm(1);
  watch.disarm(1);
  now = 10_000;
  t.same(watch.stalled(), []);
});

t.test('the heap limits: the soft one as configured, the hard one a quarter above plus 64 MiB', async (t) => {
  t.same(heapLimits(1024), { softBytes: 1024 * 2 ** 20, hardOldGenMb: 1344 });
  t.same(heapLimits(64), { softBytes: 64 * 2 ** 20, hardOldGenMb: 144 });
});
