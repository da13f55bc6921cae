/**
 * A daemon killed with SIGKILL in the middle of metering: on reopening, the file holds the debits of
 * exactly one committed flush, with their usage rows, and the ledger invariant holds for every owner,
 * even with an operator topping up from another connection meanwhile.
 */
import t from 'tap';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { openStore } from '../../src/store/open.js';
import { addOwner, invariantGaps, tempDbPath } from '../store/temp-store.js';

const child = fileURLToPath(new URL('./fixtures/meter-child.ts', import.meta.url));

t.test('SIGKILL during metering loses at most the last flush interval, never the invariant', async (t) => {
  const path = tempDbPath(t);
  const cli = openStore(path);
  t.teardown(() => cli.close());
  const owners = [addOwner(cli.db, 400_000), addOwner(cli.db, 300_000), addOwner(cli.db, 2_000)];

  const proc = spawn(process.execPath, [...process.execArgv, child, path, ...owners.map(String)], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  proc.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
  const exited = new Promise<NodeJS.Signals | null>((resolve) => proc.on('exit', (_code, signal) => resolve(signal)));

  // The operator tops up while the child meters.
  let topUps = 0;
  const topUp = setInterval(() => {
    const owner = owners[topUps++ % owners.length]!;
    cli.db
      .transaction(() => {
        cli.db.prepare('INSERT INTO credits (owner_id, ru, at) VALUES (?, 500, 0)').run(owner);
        cli.db.prepare('UPDATE owners SET ru_balance = ru_balance + 500 WHERE id = ?').run(owner);
      })
      .immediate();
  }, 15);

  const deadline = Date.now() + 30_000;
  while ((out.match(/^flushed /gm) ?? []).length < 12 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  // Kill at an arbitrary moment, not just after a flush.
  await new Promise((r) => setTimeout(r, 7 + Math.floor(Math.random() * 20)));
  proc.kill('SIGKILL');
  t.equal(await exited, 'SIGKILL');
  clearInterval(topUp);

  const lines = out.trim().split('\n');
  const flushing = lines.filter((l) => l.startsWith('flushing ')).map((l) => Number(l.split(' ')[1]));
  const flushed = lines.filter((l) => l.startsWith('flushed ')).map((l) => Number(l.split(' ')[1]));
  t.ok(flushed.length >= 12, `${flushed.length} flushes committed before the kill`);
  t.ok(topUps > 5, `${topUps} top-ups meanwhile`);

  const store = openStore(path);
  t.teardown(() => store.close());
  t.same(
    invariantGaps(store.db).filter((g) => g.gap !== 0),
    [],
    'credits − usage = balance, for every owner',
  );
  const stored = store.db
    .prepare(`
    SELECT coalesce(sum(ru), 0) FROM usage_minute WHERE status = 0`)
    .pluck()
    .get() as number;
  const lastFlushed = flushed[flushed.length - 1]!;
  const lastFlushing = flushing[flushing.length - 1]!;
  // What is stored is what one flush carried: the last one reported, or the one cut short by the kill.
  t.ok(
    stored === lastFlushed || stored === lastFlushing,
    `stored ${stored} RU; last flush committed ${lastFlushed}, last begun ${lastFlushing}`,
  );
  t.ok(flushing.includes(stored), 'exactly the total of one flush, no partial one');
});
