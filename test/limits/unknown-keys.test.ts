// The unknown-key guard, in-process and over shared memory: one table of promises for both, then what the
// shared one adds. Real threads are in shared-threads.test.ts.
import t from 'tap';
import { allocateSharedUnknownKeys, createSharedUnknownKeyGuard } from '../../src/limits/shared-unknown-keys.js';
import { createUnknownKeyGuard, type UnknownKeyGuard } from '../../src/limits/unknown-keys.js';

interface GuardOptions {
  maxPerMinute?: number;
  now: () => number;
}

const IMPLEMENTATIONS: Array<{ name: string; make: (opts: GuardOptions) => UnknownKeyGuard }> = [
  { name: 'in-process', make: (opts) => createUnknownKeyGuard(opts) },
  { name: 'shared memory', make: (opts) => createSharedUnknownKeyGuard(allocateSharedUnknownKeys({ maxAddresses: 100 }), opts) },
];

/** How many of `n` unknown keys from `ip` the guard lets through (answered 401) before refusing (429). */
function passed(guard: UnknownKeyGuard, ip: string, n: number): number {
  let through = 0;
  for (let i = 0; i < n; i++) if (!guard.refuse(ip)) through++;
  return through;
}

for (const impl of IMPLEMENTATIONS) {
  t.test(impl.name, async (t) => {
    t.test('an address gets maxPerMinute unknown keys a minute, then 429 for the rest of the minute', async (t) => {
      let at = 120_000;
      const guard = impl.make({ now: () => at });
      t.equal(passed(guard, '192.0.2.1', 20), 20, 'the default: 20 a minute');
      t.equal(guard.refuse('192.0.2.1'), true, 'the 21st is refused');
      at = 179_999;
      t.equal(guard.refuse('192.0.2.1'), true, 'to the end of the minute');
      t.equal(passed(guard, '192.0.2.2', 25), 20, 'another address counts on its own');
      at = 180_000;
      t.equal(passed(guard, '192.0.2.1', 25), 20, 'the next minute starts again');
    });

    t.test('throttled tells whether an address is over the limit this minute, counting nothing', async (t) => {
      let at = 60_000;
      const guard = impl.make({ maxPerMinute: 3, now: () => at });
      t.equal(guard.throttled('192.0.2.9'), false, 'an address never seen');
      t.equal(passed(guard, '192.0.2.9', 3), 3);
      t.equal(guard.throttled('192.0.2.9'), true, 'at the limit: the next unknown key would be refused');
      for (let i = 0; i < 10; i++) guard.throttled('192.0.2.10');
      t.equal(passed(guard, '192.0.2.10', 3), 3, 'asking counted nothing');
      at = 120_000;
      t.equal(guard.throttled('192.0.2.9'), false, 'the next minute');
    });

    t.test('maxPerMinute is the option', async (t) => {
      const guard = impl.make({ maxPerMinute: 3, now: () => 0 });
      t.equal(passed(guard, '2001:db8::1', 10), 3);
    });
  });
}

t.test('shared memory: views over one memory count an address together', async (t) => {
  const memory = allocateSharedUnknownKeys({ maxAddresses: 100 });
  const now = (): number => 0;
  const views = [1, 2, 3].map(() => createSharedUnknownKeyGuard(memory, { now }));
  const apart = createSharedUnknownKeyGuard(allocateSharedUnknownKeys({ maxAddresses: 100 }), { now });
  t.equal(passed(views[0]!, '198.51.100.7', 8) + passed(views[1]!, '198.51.100.7', 8) + passed(views[2]!, '198.51.100.7', 8), 20);
  t.equal(passed(apart, '198.51.100.7', 8), 8, 'a guard over other memory has its own count');
});

t.test('shared memory: a full table counts a new address in the least recently seen slot of those counting least', async (t) => {
  let at = 0;
  let evicted = 0;
  // 2 addresses: 3 slots, one probe run.
  const guard = createSharedUnknownKeyGuard(allocateSharedUnknownKeys({ maxAddresses: 2 }), {
    maxPerMinute: 1,
    now: () => at,
    onEvict: () => void evicted++,
  });
  for (const ip of ['a', 'b', 'c']) {
    at++;
    t.equal(guard.refuse(ip), false, ip);
  }
  at++;
  t.equal(guard.refuse('a'), true, 'a refused (and seen again)');
  t.equal(passed(guard, 'd', 5), 1, "d takes b's slot and is counted");
  t.equal(evicted, 1);
  for (const ip of ['a', 'c']) t.equal(guard.refuse(ip), true, `${ip} still counted`);
  t.equal(guard.refuse('b'), false, 'b starts again');
  t.equal(evicted, 2, 'b took the least recently seen slot in turn');
  at = 60_000;
  t.equal(passed(guard, 'e', 5), 1, 'the next minute e gets an idle slot and is counted');
  t.equal(evicted, 2, 'an idle slot given is no eviction');
  t.throws(() => allocateSharedUnknownKeys({ maxAddresses: 0 }), { name: 'RangeError', message: /maxAddresses/ });
});
