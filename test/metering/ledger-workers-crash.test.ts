/**
 * A daemon with worker threads killed with SIGKILL in the middle of metering: on reopening, the file
 * holds every debit the workers had shipped before the last flush that committed, with its usage
 * rows, and the ledger invariant holds for every owner, with an operator topping up meanwhile.
 */
import t from 'tap';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { openStore } from '../../src/store/open.js';
import { addOwner, invariantGaps, tempDbPath } from '../store/temp-store.js';

const child = fileURLToPath(new URL('./fixtures/meter-workers-child.ts', import.meta.url));

t.test('SIGKILL with workers loses at most what was shipped after the last flush, never the invariant', async (t) => {
  const path = tempDbPath(t);
  const cli = openStore(path);
  t.teardown(() => cli.close());
  const owners = [addOwner(cli.db, 400_000), addOwner(cli.db, 300_000), addOwner(cli.db, 2_000)];

  const proc = spawn(process.execPath, [...process.execArgv, child, path, ...owners.map(String)], { stdio: ['ignore', 'pipe', 'inherit'] });
  t.teardown(() => proc.kill('SIGKILL'));
  let out = '';
  proc.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
  const exited = new Promise<NodeJS.Signals | null>((resolve) => proc.on('exit', (_code, signal) => resolve(signal)));

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
  t.teardown(() => clearInterval(topUp));

  // Enough flushes that carried what the workers shipped, then a kill at an arbitrary moment.
  const flushedTotals = (): number[] => (out.match(/^flushed \d+$/gm) ?? []).map((l) => Number(l.split(' ')[1]));
  const deadline = Date.now() + 60_000;
  while (flushedTotals().filter((n) => n > 0).length < 12 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  await new Promise((r) => setTimeout(r, 7 + Math.floor(Math.random() * 20)));
  proc.kill('SIGKILL');
  t.equal(await exited, 'SIGKILL');
  clearInterval(topUp);

  const flushed = flushedTotals();
  const lastFlushed = flushed[flushed.length - 1]!;
  t.ok(flushed.filter((n) => n > 0).length >= 12, `${flushed.length} flushes committed before the kill`);
  t.ok(topUps > 5, `${topUps} top-ups meanwhile`);

  const store = openStore(path);
  t.teardown(() => store.close());
  t.same(
    invariantGaps(store.db).filter((g) => g.gap !== 0),
    [],
    'credits − usage = balance, for every owner',
  );
  const stored = store.db.prepare('SELECT coalesce(sum(ru), 0) FROM usage_minute WHERE status = 0').pluck().get() as number;
  t.ok(stored >= lastFlushed, `stored ${stored} RU; the workers had shipped ${lastFlushed} before the last committed flush`);
});
