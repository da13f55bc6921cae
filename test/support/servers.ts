/**
 * Real PostgreSQL and Redis servers for the fleet-mode tests, each test file its own, on loopback in a
 * temporary directory, stopped in teardown. The binaries come from Debian's packages: the suite's `before`
 * script (test/setup/servers.ts) installs them when they are missing and makes one initdb'd cluster that
 * every test copies (initdb costs about a second; a copy, a tenth of that).
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { chownSync, cpSync, existsSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Where the before script leaves the template cluster (owned by `postgres` when the suite runs as root). */
export const PG_TEMPLATE = join(tmpdir(), `chaingate-pg-template-${process.getuid?.() ?? 0}`);
export const IS_ROOT = process.getuid?.() === 0;

/** The directory of PostgreSQL's server programs: Debian keeps them out of PATH, under /usr/lib/postgresql/N/bin. */
export function postgresBin(): string | null {
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return null;
  const versions = readdirSync(root)
    .filter((v) => existsSync(join(root, v, 'bin', 'postgres')))
    .sort((a, b) => Number(b) - Number(a));
  return versions.length === 0 ? null : join(root, versions[0]!, 'bin');
}

/** A TCP port free on loopback at this moment. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/** The `postgres` user's ids when root (PostgreSQL refuses to run as root), for spawn's `uid` and `gid`; else nothing. */
export function postgresUser(): { uid?: number; gid?: number } {
  if (!IS_ROOT) return {};
  const [uid, gid] = ['-u', '-g'].map((flag) => Number(execFileSync('id', [flag, 'postgres']).toString().trim()));
  return { uid: uid!, gid: gid! };
}

export interface TestServer {
  /** The URL a client connects with. */
  readonly url: string;
  readonly port: number;
  /** Stops the server (as a crash would with `kill: true`); its data stays for `start`. */
  stop(kill?: boolean): Promise<void>;
  /** Starts it again on the same port and data. */
  start(): Promise<void>;
}

interface Teardown {
  teardown(fn: () => unknown): void;
}

/** Servers still running: killed when the test process exits, even after a failure that skipped the teardowns. */
const running = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of running) child.kill('SIGKILL');
});

/** Starts a server process, known to the exit hook until it ends. */
function spawnServer(cmd: string, args: string[], options: Parameters<typeof spawn>[2]): ChildProcess {
  const child = spawn(cmd, args, options);
  running.add(child);
  child.once('exit', () => running.delete(child));
  return child;
}

function exited(child: ChildProcess): Promise<void> {
  return child.exitCode !== null || child.signalCode !== null ? Promise.resolve() : new Promise((r) => child.once('exit', () => r()));
}

async function waitUntil(ready: () => boolean, what: string, child: () => ChildProcess | null, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!ready()) {
    const c = child();
    if (c !== null && (c.exitCode !== null || c.signalCode !== null)) throw new Error(`${what} exited before it was ready`);
    if (Date.now() > deadline) throw new Error(`${what} was not ready within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * A PostgreSQL server of this test file's own, with database `chaingate` owned by user `chaingate`
 * (trust authentication on loopback): `url` is `postgres://chaingate@127.0.0.1:<port>/chaingate`.
 */
export async function startPostgres(t: Teardown): Promise<TestServer> {
  const bin = postgresBin();
  if (bin === null || !existsSync(join(PG_TEMPLATE, 'PG_VERSION'))) {
    throw new Error('no PostgreSQL template cluster: the test setup (test/setup/servers.ts) did not run or failed');
  }
  const dir = mkdtempSync(join(tmpdir(), 'chaingate-pg-'));
  const data = join(dir, 'data');
  cpSync(PG_TEMPLATE, data, { recursive: true });
  if (IS_ROOT) {
    const { uid, gid } = statSync(PG_TEMPLATE);
    chownSync(dir, uid, gid);
    execFileSync('chown', ['-R', `${uid}:${gid}`, data]);
  }
  const port = await freePort();
  let child: ChildProcess | null = null;
  let log = '';
  const start = async (): Promise<void> => {
    log = '';
    const args = [
      '-D',
      data,
      '-p',
      String(port),
      '-k',
      dir,
      '-c',
      'listen_addresses=127.0.0.1',
      '-c',
      'fsync=off',
      '-c',
      'synchronous_commit=off',
      '-c',
      'full_page_writes=off',
    ];
    const c = spawnServer(join(bin, 'postgres'), args, { stdio: ['ignore', 'ignore', 'pipe'], ...postgresUser() });
    child = c;
    c.stderr!.on('data', (b: Buffer) => {
      log += b.toString();
    });
    await waitUntil(
      () => log.includes('ready to accept connections'),
      `postgres on port ${port}`,
      () => child,
    ).catch((err) => {
      throw new Error(`${(err as Error).message}: ${log.slice(-2000)}`);
    });
  };
  const stop = async (kill = false): Promise<void> => {
    const c = child;
    if (c === null) return;
    child = null;
    // SIGINT: a fast shutdown (sessions ended, no checkpoint wait); SIGKILL: a crash.
    c.kill(kill ? 'SIGKILL' : 'SIGINT');
    await exited(c);
    // After a SIGKILL the backends linger until they notice the postmaster is gone, holding the port.
    if (kill) await new Promise((r) => setTimeout(r, 300));
  };
  await start();
  t.teardown(async () => {
    await stop();
    rmSync(dir, { recursive: true, force: true });
  });
  return { url: `postgres://chaingate@127.0.0.1:${port}/chaingate`, port, stop, start };
}

/**
 * A Redis server of this test file's own, nothing saved to disk: `url` is `redis://127.0.0.1:<port>/0`. With
 * `configFile`, it runs on the redis.conf that returns for its port and folder (written there) instead.
 */
export async function startRedis(
  t: Teardown,
  opts: { configFile?: (where: { port: number; dir: string }) => string } = {},
): Promise<TestServer> {
  const dir = mkdtempSync(join(tmpdir(), 'chaingate-redis-'));
  const port = await freePort();
  const conf = join(dir, 'redis.conf');
  if (opts.configFile) writeFileSync(conf, opts.configFile({ port, dir }));
  const args = opts.configFile ? [conf] : ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir];
  let child: ChildProcess | null = null;
  let out = '';
  const start = async (): Promise<void> => {
    out = '';
    const c = spawnServer('redis-server', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    child = c;
    // stderr too: a config redis-server refuses is said there.
    const heard = (b: Buffer): void => {
      out += b.toString();
    };
    c.stdout!.on('data', heard);
    c.stderr!.on('data', heard);
    await waitUntil(
      () => out.includes('Ready to accept connections'),
      `redis-server on port ${port}`,
      () => child,
    ).catch((err) => {
      throw new Error(`${(err as Error).message}: ${out.slice(-2000)}`);
    });
  };
  const stop = async (kill = false): Promise<void> => {
    const c = child;
    if (c === null) return;
    child = null;
    c.kill(kill ? 'SIGKILL' : 'SIGTERM');
    await exited(c);
  };
  await start();
  t.teardown(async () => {
    await stop();
    rmSync(dir, { recursive: true, force: true });
  });
  return { url: `redis://127.0.0.1:${port}/0`, port, stop, start };
}
