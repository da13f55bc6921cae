/** Runs the built `chaingate serve` as its own process (for RSS and kill -9 tests); killed at teardown. */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { request } from 'node:http';
import { fileURLToPath } from 'node:url';
import type { Test } from 'tap';

const main = fileURLToPath(new URL('../../dist/main.js', import.meta.url));

export interface Daemon {
  child: ChildProcess;
  /** The main listener's port, read from the daemon's "listening" log line. */
  port: number;
  /** Everything the daemon has logged (its stderr) so far. */
  log(): string;
}

export function startDaemon(t: Test, configPath: string): Promise<Daemon> {
  if (!existsSync(main)) throw new Error('dist/main.js is missing: run npm run build (npm test does)');
  const child = spawn(process.execPath, [main, 'serve', '--config', configPath], { stdio: ['ignore', 'ignore', 'pipe'] });
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  let log = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the daemon did not start:\n${log}`)), 15000);
    child.stderr!.on('data', (d: Buffer) => {
      log += d.toString();
      const m = /listening address=https?:\/\/[^:]+:(\d+)/.exec(log);
      if (m) {
        clearTimeout(timer);
        resolve({ child, port: Number(m[1]), log: () => log });
      }
    });
  });
}

/** Kills the daemon (SIGKILL) unless it has exited, and resolves once it has. */
export function stopDaemon(d: Daemon): Promise<void> {
  if (d.child.exitCode !== null || d.child.signalCode !== null) return Promise.resolve();
  const exited = new Promise<void>((r) => d.child.once('exit', () => r()));
  d.child.kill('SIGKILL');
  return exited;
}

/**
 * A keep-alive loop of eth_chainId POSTs until `until()`; resolves with the answers that came back
 * 200. `onAnswer` hears every status, in order.
 */
export function hammer(url: string, until: () => boolean, onAnswer: (status: number) => void = () => {}): Promise<number> {
  return new Promise((resolve) => {
    let ok = 0;
    const once = (): void => {
      if (until()) return resolve(ok);
      const req = request(url, { method: 'POST', headers: { 'content-type': 'application/json' } }, (res) => {
        res.resume();
        res.on('end', () => {
          if (res.statusCode === 200) ok++;
          onAnswer(res.statusCode ?? 0);
          once();
        });
      });
      req.on('error', () => resolve(ok));
      req.end('{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}');
    };
    once();
  });
}
