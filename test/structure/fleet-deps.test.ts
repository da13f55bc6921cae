/**
 * A gateway on one machine never talks to Redis or PostgreSQL, so it does not load their clients: ioredis
 * and node-postgres (with their dependencies, ~10 MB of heap) would sit in every thread's heap, three
 * copies with two workers. The fleet loads them when it opens (fleet-tenancy.ts, fleet-limiter.ts,
 * pg-open.ts). What the daemon's entry and a worker's script import is checked in a fresh process.
 */
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import t from 'tap';

const ROOT = join(import.meta.dirname, '..', '..');

/** The packages under node_modules that importing `modules` (paths under src/) loaded, in a fresh process. */
function packagesLoadedBy(modules: string[]): string[] {
  const script = `
    import { createRequire } from 'node:module';
    for (const m of ${JSON.stringify(modules)}) await import(new URL(m, 'file://${ROOT}/').href);
    const files = Object.keys(createRequire(import.meta.url)('module')._cache);
    const names = files.map((f) => /node_modules\\/((?:@[^/]+\\/)?[^/]+)/.exec(f)?.[1]).filter(Boolean);
    process.stdout.write(JSON.stringify([...new Set(names)]));
  `;
  const out = execFileSync(process.execPath, ['--import=tsx', '--input-type=module', '-e', script], { cwd: ROOT, encoding: 'utf8' });
  return JSON.parse(out) as string[];
}

t.test('the server and the CLI load neither ioredis nor pg until a fleet opens', async (t) => {
  const loaded = packagesLoadedBy(['src/server/app.ts', 'src/cli/store-copy.ts', 'src/cli/tenancy.ts']);
  // The import did run, and the check sees CommonJS packages: the one machine's store client is there.
  t.ok(loaded.includes('better-sqlite3'), `better-sqlite3 loaded (${loaded.join(', ')})`);
  t.notOk(loaded.includes('ioredis'), 'ioredis not loaded');
  t.notOk(loaded.includes('pg'), 'pg not loaded');
});
