// The servers a fleet shares, as the fleet section runs them: a PostgreSQL cluster made for the round
// (initdb) and a Redis, each on loopback on a port of its own, in a folder of its own, stopped and
// removed at the end. The binaries are Debian's (`apt-get install postgresql redis-server`), as the
// tests' (test/support/servers.ts, which the bench does not import: it runs built code and .mjs only).
import { execFileSync, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './net.mjs';
import { startProcess, stopOnFailure } from './processes.mjs';

const IS_ROOT = process.getuid?.() === 0;

/** The directory of PostgreSQL's server programs (Debian keeps them under /usr/lib/postgresql/N/bin), or null. */
export function postgresBin() {
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return null;
  const versions = readdirSync(root)
    .filter((v) => existsSync(join(root, v, 'bin', 'postgres')))
    .sort((a, b) => Number(b) - Number(a));
  return versions.length === 0 ? null : join(root, versions[0], 'bin');
}

/** true when `redis-server` runs. */
export function hasRedis() {
  return !spawnSync('redis-server', ['--version']).error;
}

/** The `postgres` user's ids when the bench runs as root (PostgreSQL refuses root), for spawn; else nothing. */
function postgresUser() {
  if (!IS_ROOT) return {};
  const [uid, gid] = ['-u', '-g'].map((flag) => Number(execFileSync('id', [flag, 'postgres']).toString().trim()));
  return { uid, gid };
}

/** Folders of servers still running, removed on any way out (the run's own folder is removed by run.mjs). */
const folders = new Set();
process.on('exit', () => {
  for (const dir of folders) rmSync(dir, { recursive: true, force: true });
});

/**
 * A folder of its own under the system's temporary directory, not under the run's: that one is private to
 * this user (0700), and PostgreSQL, run as `postgres` when the bench runs as root, must reach its data.
 */
function serverFolder(prefix, owner) {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  folders.add(dir);
  if (owner.uid !== undefined) chownSync(dir, owner.uid, owner.gid);
  return dir;
}

const removeFolder = (dir) => {
  rmSync(dir, { recursive: true, force: true });
  folders.delete(dir);
};

/**
 * A fresh PostgreSQL cluster on `core` (initdb, trust on loopback, superuser `chaingate`), with
 * PostgreSQL's own defaults otherwise (fsync on: it writes as a production one does, off the request
 * path). Resolves `{ proc, pid, port, url, stop }` once it accepts connections; `url` names the
 * database `postgres` that initdb makes. Throws with what failed.
 */
export async function startPostgres({ name = 'postgres', core }) {
  const bin = postgresBin();
  if (!bin) throw new Error('PostgreSQL is not installed (apt-get install postgresql)');
  const user = postgresUser();
  const dir = serverFolder('chaingate-bench-pg-', user);
  const data = join(dir, 'data');
  const init = spawnSync(join(bin, 'initdb'), ['-D', data, '-A', 'trust', '-U', 'chaingate', '-E', 'UTF8', '--no-sync'], {
    encoding: 'utf8',
    ...user,
  });
  if (init.status !== 0) {
    removeFolder(dir);
    throw new Error(`initdb failed: ${init.stderr || init.error?.message}`);
  }
  const port = await freePort();
  const args = ['-D', data, '-p', String(port), '-k', dir, '-c', 'listen_addresses=127.0.0.1'];
  const proc = startProcess(name, join(bin, 'postgres'), args, { core, ...user, stopSignal: 'SIGINT' });
  const stop = async () => {
    await proc.stop();
    removeFolder(dir);
  };
  await stopOnFailure({ stop }, proc.waitFor(/ready to accept connections/));
  return { proc, pid: proc.pid, port, url: `postgres://chaingate@127.0.0.1:${port}/postgres`, stop };
}

/** A Redis on `core`, nothing saved to disk; resolves `{ proc, pid, port, url, stop }` once it accepts connections. */
export async function startRedis({ name = 'redis', core }) {
  const dir = serverFolder('chaingate-bench-redis-', {});
  const port = await freePort();
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir];
  const proc = startProcess(name, 'redis-server', args, { core });
  const stop = async () => {
    await proc.stop();
    removeFolder(dir);
  };
  await stopOnFailure({ stop }, proc.waitFor(/Ready to accept connections/));
  return { proc, pid: proc.pid, port, url: `redis://127.0.0.1:${port}/0`, stop };
}
