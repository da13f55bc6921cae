/** Runs the built `chaingate serve` as its own process (for RSS and kill -9 tests); killed at teardown. */
import { type ChildProcess, spawn } from 'node:child_process';
import { appendFileSync, existsSync, readFileSync } from 'node:fs';
import { request } from 'node:http';
import { fileURLToPath } from 'node:url';
import type { Test } from 'tap';
import { logText } from './log-lines.js';

const main = fileURLToPath(new URL('../../dist/main.js', import.meta.url));

export interface Daemon {
  child: ChildProcess;
  /** The main listener's port, read from the daemon's "listening" log line. */
  port: number;
  /** The metrics listener's port, from its "metrics listening" line; undefined when metrics are off. */
  metricsPort: number | undefined;
  /** Everything the daemon has logged so far, each JSON line as logText renders it, then its stderr. */
  log(): string;
}

/**
 * Starts `chaingate serve --config configPath`, with `openFiles` as its open-files limit when given. A config without a `metrics` section gets
 * `metrics: { port: 0 }` appended: daemons of tests run side by side and would all take 9464. `nodeArgs`
 * go to node before the script (--inspect, for a test that pauses a worker as a debugger would); `bin`
 * runs that program instead of node on dist/main.js (with openFiles too; with nodeArgs, refused).
 */
export function startDaemon(
  t: Test,
  configPath: string,
  opts: { openFiles?: number; nodeArgs?: readonly string[]; bin?: string } = {},
): Promise<Daemon> {
  // `bin`: an installed chaingate command (the package tests), run as an operator runs it; it takes no node
  // flags, so nodeArgs with it are refused rather than dropped.
  if (opts.bin !== undefined && opts.nodeArgs !== undefined) throw new Error('startDaemon: nodeArgs go to node, which bin is not');
  if (opts.bin === undefined && !existsSync(main)) throw new Error('dist/main.js is missing: run npm run build (npm test does)');
  const text = readFileSync(configPath, 'utf8');
  if (!/^metrics:/m.test(text)) appendFileSync(configPath, '\nmetrics: { port: 0 }\n');
  const metricsOff = /^metrics:\s*\{\s*enabled:\s*false/m.test(text);
  const [cmd, args]: [string, readonly string[]] =
    opts.bin !== undefined
      ? [opts.bin, ['serve', '--config', configPath]]
      : [process.execPath, [...(opts.nodeArgs ?? []), main, 'serve', '--config', configPath]];
  // prlimit sets the open-files limit and execs the command: the child's pid is the daemon's.
  const child =
    opts.openFiles === undefined
      ? spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] })
      : spawn('prlimit', [`--nofile=${opts.openFiles}:${opts.openFiles}`, cmd, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  let log = '';
  let errors = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the daemon did not start:\n${log}${errors}`)), 15000);
    // A fatal error goes to stderr, not the log: kept beside it so a failed start says why.
    child.stderr!.on('data', (d: Buffer) => {
      errors += d.toString();
    });
    child.stdout!.on('data', (d: Buffer) => {
      log += d.toString();
      const m = /"address":"https?:\/\/[^:]+:(\d+)","msg":"listening"/.exec(log);
      const metrics = /"address":"http:\/\/[^:]+:(\d+)\/metrics","msg":"metrics listening"/.exec(log);
      if (m && (metrics || metricsOff)) {
        clearTimeout(timer);
        resolve({ child, port: Number(m[1]), metricsPort: metrics ? Number(metrics[1]) : undefined, log: () => asText(log, errors) });
      }
    });
  });
}

/** The JSON lines of `log` (whole ones) as logText renders them, then `errors` as they are. */
function asText(log: string, errors: string): string {
  const whole = log.slice(0, log.lastIndexOf('\n') + 1);
  const lines = whole.split('\n').filter((l) => l !== '');
  return lines.map((l) => (l.startsWith('{') ? logText(l) : l)).join('\n') + '\n' + errors;
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
