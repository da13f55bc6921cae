import { spawn, spawnSync } from 'node:child_process';
import { closeSync, mkdirSync, openSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Every child the bench starts, so that any way out (normal end, error, Ctrl-C, SIGTERM) stops them:
 * a load test must never leave a server or a wrk running behind it.
 */
const live = new Set();

/** Characters of a child's log shown in error messages. */
const OUTPUT_SHOWN = 8 * 1024;

let logDir = null;

/** Children's stdout+stderr go to `<dir>/<name>.log`; a later child of the same name (next round) replaces it. */
export function setLogDir(dir) {
  mkdirSync(dir, { recursive: true });
  logDir = dir;
}

let pinning = spawnSync('taskset', ['-V']).status === 0;

/** false when taskset is missing or pinning was turned off (BENCH_PIN=0); processes then float. */
export function canPin() {
  return pinning;
}

export function disablePinning() {
  pinning = false;
}

/**
 * Starts `cmd` pinned to `core` (when pinning is on). taskset execs the command, so the pid is the
 * command's own. Output goes straight to a log file, not through a pipe: anvil prints a line per
 * request, and relaying it would put this process's CPU into the measurement. `uid` and `gid` run it
 * as another user (PostgreSQL refuses to run as root); `stopSignal` is what `stop()` sends first
 * (PostgreSQL's fast shutdown is SIGINT: on SIGTERM it would wait for its clients to leave).
 */
export function startProcess(name, cmd, args, { core, env, cwd, uid, gid, stopSignal = 'SIGTERM' } = {}) {
  if (!logDir) throw new Error('setLogDir() must be called before starting processes');
  const [file, argv] = core !== undefined && pinning ? ['taskset', ['-c', String(core), cmd, ...args]] : [cmd, args];
  const logPath = join(logDir, `${name.replace(/[^\w.-]+/g, '-')}.log`);
  const fd = openSync(logPath, 'w');
  const child = spawn(file, argv, { stdio: ['ignore', fd, fd], env: env ?? process.env, cwd, uid, gid });
  closeSync(fd);
  const output = () => {
    try {
      const text = readFileSync(logPath, 'utf8');
      return text.length > OUTPUT_SHOWN ? text.slice(-OUTPUT_SHOWN) : text;
    } catch {
      return '';
    }
  };
  const exitWatchers = new Set();

  let exitInfo = null;
  const exited = new Promise((resolve) => {
    child.on('exit', (code, signal) => {
      exitInfo = { code, signal };
      live.delete(handle);
      for (const w of exitWatchers) w();
      resolve(exitInfo);
    });
    child.on('error', (err) => {
      exitInfo = { code: null, signal: null, error: err };
      live.delete(handle);
      for (const w of exitWatchers) w();
      resolve(exitInfo);
    });
  });

  const handle = {
    name,
    get pid() {
      return child.pid;
    },
    exited,
    get exitInfo() {
      return exitInfo;
    },
    logPath,
    output,
    /** Resolves with the first match of `re` in the output; rejects when the child exits first or on timeout. */
    waitFor(re, timeoutMs = 15_000) {
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => done(new Error(`${name}: no ${re} within ${timeoutMs} ms; output:\n${tail(output())}`)), timeoutMs);
        const poll = setInterval(() => check(), 25);
        const check = () => {
          const text = output();
          const m = re.exec(text);
          if (m) return done(null, m);
          if (exitInfo) done(new Error(`${name} exited (${describeExit(exitInfo)}) before printing ${re}; output:\n${tail(text)}`));
        };
        const done = (err, m) => {
          clearTimeout(timer);
          clearInterval(poll);
          exitWatchers.delete(check);
          err ? reject(err) : resolve(m);
        };
        exitWatchers.add(check);
        check();
      });
    },
    /** `stopSignal` (SIGTERM), then SIGKILL when the child has not exited after `graceMs`. */
    async stop(graceMs = 3_000) {
      if (exitInfo) return exitInfo;
      child.kill(stopSignal);
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      const info = await exited;
      clearTimeout(timer);
      return info;
    },
  };
  live.add(handle);
  return handle;
}

export function describeExit(info) {
  if (info.error) return info.error.message;
  return info.signal ? `signal ${info.signal}` : `code ${info.code}`;
}

function tail(text, lines = 20) {
  return text.trimEnd().split('\n').slice(-lines).join('\n');
}

export async function stopAll() {
  await Promise.all([...live].map((p) => p.stop()));
}

/**
 * Installs the last-resort cleanup: on Ctrl-C or SIGTERM stop every child and exit 130/143; on a plain
 * exit (including a crash) SIGKILL whatever is still alive, as 'exit' handlers cannot wait.
 */
export function stopChildrenOnExit() {
  process.on('exit', () => {
    for (const p of live) {
      try {
        process.kill(p.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  });
  let stopping = false;
  for (const [signal, code] of [
    ['SIGINT', 130],
    ['SIGTERM', 143],
  ]) {
    process.on(signal, () => {
      if (stopping) process.exit(code);
      stopping = true;
      process.stderr.write(`\n${signal}: stopping ${live.size} child process(es)\n`);
      stopAll().finally(() => process.exit(code));
    });
  }
}

/** Moves this process (all its threads) to `core`, keeping the core of the server under test free. */
export function pinSelf(core) {
  if (!pinning) return;
  spawnSync('taskset', ['-a', '-pc', String(core), String(process.pid)]);
}

/** What `ready` resolves to; when it rejects, `proc` is stopped first and the error passed on. */
export async function stopOnFailure(proc, ready) {
  try {
    return await ready;
  } catch (err) {
    await proc.stop();
    throw err;
  }
}

/** `{ proc, pid, port, stop }` once a bench server prints `Listening on 127.0.0.1:PORT`. */
export async function announcedPort(proc) {
  const m = await proc.waitFor(/Listening on 127\.0\.0\.1:(\d+)/);
  return { proc, pid: proc.pid, port: Number(m[1]), stop: () => proc.stop() };
}
