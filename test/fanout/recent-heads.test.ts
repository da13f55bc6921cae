/**
 * recent-heads.ts: the memory of heads keeps `max` blocks below the newest, also when heads jump ahead (the
 * window shared with log-completeness.ts, keepFrom).
 */
import t from 'tap';
import type { FeedSource } from '../../src/fanout/subscriptions.js';
import { keepFrom, RecentHeads } from '../../src/fanout/recent-heads.js';

const hex = (n: number): string => `0x${n.toString(16)}`;

/** A newHeads feed the test drives: `push` sends one head to the listener. */
function fakeFeed() {
  let notify: ((json: string) => void) | null = null;
  const feeds = {
    subscribe(_kind: unknown, _params: unknown, listener: { notify(json: string): void }) {
      notify = listener.notify;
      return { remove() {}, live: () => true, whenLive: async () => null };
    },
  } as unknown as FeedSource;
  return { feeds, push: (n: number) => notify!(JSON.stringify({ number: hex(n), hash: `0xa${n}` })) };
}

const held = (heads: RecentHeads, from: number, to: number): number[] => {
  const out: number[] = [];
  for (let n = from; n <= to; n++) if (heads.get(n) !== undefined) out.push(n);
  return out;
};

t.test('heads that follow on: the window slides one block at a time', async (t) => {
  const { feeds, push } = fakeFeed();
  const heads = new RecentHeads(3);
  heads.listen(feeds);
  for (let n = 1; n <= 10; n++) push(n);
  t.same(held(heads, 0, 10), [7, 8, 9, 10], 'the newest and 3 below it');
});

t.test('heads that jump ahead: every block below the window is dropped', async (t) => {
  const { feeds, push } = fakeFeed();
  const heads = new RecentHeads(3);
  heads.listen(feeds);
  for (let n = 1; n <= 4; n++) push(n);
  push(6);
  t.same(held(heads, 0, 10), [3, 4, 6], 'a jump of two: 1 and 2 out');
  push(100);
  t.same(held(heads, 0, 100), [100], 'a jump past the window: nothing older kept');
  push(101);
  push(102);
  t.same(held(heads, 0, 110), [100, 101, 102]);
});

t.test('keepFrom: the numbers below `lowest` go, the search stops at the first kept', async (t) => {
  const m = new Map<number, string>([3, 4, 5, 9, 10].map((n) => [n, 'x']));
  keepFrom(m, 9);
  t.same([...m.keys()], [9, 10]);
  const small = new Map<number, string>([[1, 'a']]);
  keepFrom(small, 2);
  t.same([...small.keys()], [], 'the block just below the window goes');
});

t.test('a reorg keeps the numbers in ascending order: later jumps still prune everything below', async (t) => {
  const { feeds, push } = fakeFeed();
  const heads = new RecentHeads(3);
  heads.listen(feeds);
  for (let n = 1; n <= 6; n++) push(n);
  push(5);
  push(6);
  push(20);
  t.same(held(heads, 0, 20), [20]);
});
