// Open connections per key: the in-process ConnectionCounts and the shared-memory one under one table of
// promises, then what the shared one adds. Real threads are in shared-threads.test.ts.
import t from 'tap';
import { allocateSharedCounts, createSharedCounts } from '../../src/limits/shared-counts.js';
import { type ConnectionCounts, createConnectionCounts } from '../../src/pipeline/stream-limits.js';

const IMPLEMENTATIONS: Array<{ name: string; make: () => ConnectionCounts }> = [
  { name: 'in-process', make: createConnectionCounts },
  { name: 'shared memory', make: () => createSharedCounts(allocateSharedCounts({ maxKeys: 100 })) },
];

for (const impl of IMPLEMENTATIONS) {
  t.test(`${impl.name}: open, close and count per key`, async (t) => {
    const counts = impl.make();
    t.equal(counts.count('ep:1'), 0, 'nothing open');
    counts.open('ep:1');
    counts.open('ep:1');
    counts.open('ip:192.0.2.1');
    t.equal(counts.count('ep:1'), 2);
    t.equal(counts.count('ip:192.0.2.1'), 1);
    counts.close('ep:1');
    t.equal(counts.count('ep:1'), 1);
    counts.close('ep:1');
    counts.close('ep:1');
    t.equal(counts.count('ep:1'), 0, 'a close too many leaves 0');
    counts.open('ep:1');
    t.equal(counts.count('ep:1'), 1, 'and does not eat the next open');
    counts.close('never-opened');
    t.equal(counts.count('never-opened'), 0);
  });
}

t.test('shared memory: views over one memory count together; tryOpen checks and opens in one step', async (t) => {
  const memory = allocateSharedCounts({ maxKeys: 100 });
  const [a, b] = [createSharedCounts(memory), createSharedCounts(memory)];
  a.open('ep:7');
  b.open('ep:7');
  t.equal(a.count('ep:7'), 2);
  t.equal(b.tryOpen('ep:7', 3), true, 'third of 3');
  t.equal(a.tryOpen('ep:7', 3), false, 'fourth of 3 refused');
  t.equal(b.count('ep:7'), 3, 'a refused tryOpen opens nothing');
  a.close('ep:7');
  t.equal(b.tryOpen('ep:7', 3), true, 'room again after a close');
  t.equal(a.tryOpen('ep:8', 0), false, 'max 0 opens nothing');
  t.equal(a.count('ep:8'), 0);
});

t.test(
  'shared memory: a key with nothing open gives its slot up; a full table evicts the least recently seen of those with fewest open',
  async (t) => {
    let at = 0;
    let evicted = 0;
    // 2 keys: 3 slots, one probe run.
    const counts = createSharedCounts(allocateSharedCounts({ maxKeys: 2 }), { now: () => at, onEvict: () => void evicted++ });
    for (const key of ['a', 'b', 'c']) {
      at++;
      counts.open(key);
    }
    at++;
    t.equal(counts.count('a'), 1, 'a seen again');
    t.equal(counts.tryOpen('d', 1), true, 'd takes the least recently seen slot (b)');
    t.equal(counts.tryOpen('d', 1), false, 'and is counted');
    t.equal(evicted, 1);
    t.equal(counts.count('b'), 0, 'b starts again');
    counts.close('b');
    t.equal(counts.count('d') + counts.count('a') + counts.count('c'), 3, "b's close finds no slot and lowers no one's count");
    counts.close('a');
    t.equal(counts.tryOpen('e', 1), true, 'a closed its last: e takes its slot');
    t.equal(evicted, 1, 'an idle slot given is no eviction');
    t.equal(counts.tryOpen('e', 1), false, 'and is counted');
    t.equal(counts.count('c') + counts.count('d'), 2, 'the others kept their counts');
    t.throws(() => allocateSharedCounts({ maxKeys: -3 }), { name: 'RangeError', message: /maxKeys/ });
  },
);
