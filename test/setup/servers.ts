/**
 * Run by tap once before the test files (package.json `tap.before`): gets the servers the fleet-mode tests
 * talk to, the browser the dashboard's test drives, the proxies the TLS guide's test runs and the .deb's
 * checker. PostgreSQL, Redis, Chromium, nginx, Caddy and lintian come from Debian's
 * packages, installed with apt-get when they are missing and the suite runs as root (on a machine where it
 * does not, install `postgresql`, `redis-server`, `chromium`, `nginx`, `caddy` and `lintian` first). Then one PostgreSQL cluster is made, with user and database `chaingate`, for every test to copy.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CHROMIUM } from '../support/browser.js';
import { freePort, IS_ROOT, PG_TEMPLATE, postgresBin, postgresUser } from '../support/servers.js';

function onPath(cmd: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' }).status === 0;
}

function aptInstall(packages: string[]): void {
  if (!IS_ROOT)
    throw new Error(`the tests need the Debian packages ${packages.join(', ')}: install them (apt-get install ${packages.join(' ')})`);
  process.stderr.write(`test setup: installing ${packages.join(', ')} with apt-get\n`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  const install = (): number | null =>
    spawnSync('apt-get', ['install', '-y', '-q', '--no-install-recommends', ...packages], { stdio: ['ignore', 'ignore', 'inherit'], env })
      .status;
  // The package lists a fresh machine has may be stale: update only when the first try fails.
  if (install() === 0) return;
  execFileSync('apt-get', ['update', '-q'], { stdio: ['ignore', 'ignore', 'inherit'], env });
  if (install() !== 0) throw new Error(`apt-get install ${packages.join(' ')} failed`);
}

const missing = [
  ...(postgresBin() === null ? ['postgresql'] : []),
  ...(onPath('redis-server') ? [] : ['redis-server']),
  ...(existsSync(CHROMIUM) ? [] : ['chromium']),
  // The TLS guide's proxies (test/docs/tls-guide.test.ts): nginx is in /usr/sbin, off a user's PATH.
  ...(onPath('nginx') || existsSync('/usr/sbin/nginx') ? [] : ['nginx']),
  ...(onPath('caddy') ? [] : ['caddy']),
  // The package test's check of the .deb (test/package/install.test.ts).
  ...(onPath('lintian') ? [] : ['lintian']),
];
if (missing.length > 0) aptInstall(missing);
// Debian's redis-server, nginx and caddy packages start system-wide servers (6379; 80 and 443); the tests start
// their own on free ports.

async function makeTemplate(): Promise<void> {
  const bin = postgresBin();
  if (bin === null) throw new Error('PostgreSQL is installed but its server programs were not found under /usr/lib/postgresql');
  const work = mkdtempSync(join(tmpdir(), 'chaingate-pg-init-'));
  const data = join(work, 'data');
  if (IS_ROOT) execFileSync('chown', ['postgres:postgres', work]);
  const user = postgresUser();
  const run = (args: string[]): void => {
    execFileSync(args[0]!, args.slice(1), { stdio: ['ignore', 'ignore', 'inherit'], ...user });
  };
  run([join(bin, 'initdb'), '-D', data, '-A', 'trust', '-U', 'postgres', '-E', 'UTF8', '--no-sync']);
  await startAndSeed(bin, work, data, run);
}

async function startAndSeed(bin: string, work: string, data: string, run: (args: string[]) => void): Promise<void> {
  const port = await freePort();
  run([join(bin, 'pg_ctl'), '-D', data, '-o', `-p ${port} -k ${work} -c listen_addresses=''`, '-w', '-s', 'start']);
  try {
    const psql = (sql: string): void =>
      run(['psql', '-h', work, '-p', String(port), '-U', 'postgres', '-q', '-v', 'ON_ERROR_STOP=1', '-c', sql]);
    psql('CREATE ROLE chaingate LOGIN');
    psql('CREATE DATABASE chaingate OWNER chaingate');
  } finally {
    run([join(bin, 'pg_ctl'), '-D', data, '-w', '-s', '-m', 'fast', 'stop']);
  }
  // Renamed into place last, so a setup that failed halfway leaves no template behind.
  rmSync(PG_TEMPLATE, { recursive: true, force: true });
  renameSync(data, PG_TEMPLATE);
  rmSync(work, { recursive: true, force: true });
}

if (!existsSync(join(PG_TEMPLATE, 'PG_VERSION'))) await makeTemplate();
