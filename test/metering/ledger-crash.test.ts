/**
 * A daemon killed with SIGKILL in the middle of metering, with one thread or with worker threads
 * shipping to the main thread's writer: on reopening, the ledger invariant holds for every owner, even
 * with an operator topping up from another connection meanwhile, and the file holds what the flushes
 * that committed carried: with one thread exactly one flush's total; with workers, at least every
 * debit they had shipped before the last flush that committed.
 */
import t, { type Test } from 'tap';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { openStore } from '../../src/store/open.js';
import { addOwner, invariantGaps, tempDbPath, topUp } from '../store/temp-store.js';

interface Child {
  title: string;
  /** Meters until killed. argv: database path, owner ids. It prints `flushing <n>` before each flush and `flushed <n>` once committed. */
  script: string;
  /** Enough committed flushes seen to kill it. */
  enough(flushed: number[]): boolean;
  /** What the file must hold after the kill: `stored` RU of successful calls. */
  check(t: Test, stored: number, flushing: number[], flushed: number[]): void;
}

const children: Child[] = [
  {
    title: 'SIGKILL during metering loses at most the last flush interval, never the invariant',
    script: 'meter-child.ts', // `n`: RU settled so far
    enough: (flushed) => flushed.length >= 12,
    check(t, stored, flushing, flushed) {
      const lastFlushed = flushed[flushed.length - 1]!;
      const lastFlushing = flushing[flushing.length - 1]!;
      // What is stored is what one flush carried: the last one reported, or the one cut short by the kill.
      t.ok(
        stored === lastFlushed || stored === lastFlushing,
        `stored ${stored} RU; last flush committed ${lastFlushed}, last begun ${lastFlushing}`,
      );
      t.ok(flushing.includes(stored), 'exactly the total of one flush, no partial one');
    },
  },
  {
    title: 'SIGKILL with workers loses at most what was shipped after the last flush, never the invariant',
    script: 'meter-workers-child.ts', // `n`: RU the workers had shipped
    // Flushes that carried something: the workers take a moment to start.
    enough: (flushed) => flushed.filter((n) => n > 0).length >= 12,
    check(t, stored, _flushing, flushed) {
      const lastFlushed = flushed[flushed.length - 1]!;
      t.ok(stored >= lastFlushed, `stored ${stored} RU; the workers had shipped ${lastFlushed} before the last committed flush`);
    },
  },
];

for (const child of children) {
  t.test(child.title, async (t) => {
    const path = tempDbPath(t);
    const cli = openStore(path);
    t.teardown(() => cli.close());
    const owners = [addOwner(cli.db, 400_000), addOwner(cli.db, 300_000), addOwner(cli.db, 2_000)];

    const script = fileURLToPath(new URL(`./fixtures/${child.script}`, import.meta.url));
    const proc = spawn(process.execPath, [...process.execArgv, script, path, ...owners.map(String)], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    t.teardown(() => proc.kill('SIGKILL'));
    let out = '';
    proc.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
    let gone = false;
    const exited = new Promise<NodeJS.Signals | null>((resolve) =>
      proc.on('exit', (_code, signal) => {
        gone = true;
        resolve(signal);
      }),
    );
    const numbers = (word: string): number[] => (out.match(new RegExp(`^${word} \\d+$`, 'gm')) ?? []).map((l) => Number(l.split(' ')[1]));

    // The operator tops up while the child meters.
    let topUps = 0;
    const topping = setInterval(() => topUp(cli.db, owners[topUps++ % owners.length]!, 500), 15);
    t.teardown(() => clearInterval(topping));

    const deadline = Date.now() + 60_000;
    // A child that died on its own (its error is on stderr) fails the test at once, not at the deadline.
    while (!gone && !child.enough(numbers('flushed')) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    // Kill at an arbitrary moment, not just after a flush.
    await new Promise((r) => setTimeout(r, 7 + Math.floor(Math.random() * 20)));
    proc.kill('SIGKILL');
    t.equal(await exited, 'SIGKILL');
    clearInterval(topping);

    const flushed = numbers('flushed');
    t.ok(child.enough(flushed), `${flushed.length} flushes committed before the kill`);
    t.ok(topUps > 5, `${topUps} top-ups meanwhile`);

    const store = openStore(path);
    t.teardown(() => store.close());
    t.same(
      invariantGaps(store.db).filter((g) => g.gap !== 0),
      [],
      'credits − usage = balance, for every owner',
    );
    const stored = store.db.prepare('SELECT coalesce(sum(ru), 0) FROM usage_minute WHERE status = 0').pluck().get() as number;
    child.check(t, stored, numbers('flushing'), flushed);
  });
}
