/** Runs the built `chaingate serve` as its own process (for RSS and kill -9 tests); killed at teardown. */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Test } from 'tap';

const main = fileURLToPath(new URL('../../dist/main.js', import.meta.url));

export interface Daemon {
  child: ChildProcess;
  /** The main listener's port, read from the daemon's "listening" log line. */
  port: number;
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
        resolve({ child, port: Number(m[1]) });
      }
    });
  });
}
