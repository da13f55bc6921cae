import { spawn, spawnSync } from 'node:child_process';

/**
 * Every child the bench starts, so that any way out (normal end, error, Ctrl-C, SIGTERM) stops them:
 * a load test must never leave a server or a wrk running behind it.
 */
const live = new Set();

/** Bytes of a child's output kept for error messages; older output is dropped. */
const OUTPUT_KEEP = 64 * 1024;

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
 * command's own. stdout and stderr are drained into one buffer: a child blocked on a full pipe would
 * stall in the middle of a measurement.
 */
export function startProcess(name, cmd, args, { core, env, cwd } = {}) {
  const [file, argv] = core !== undefined && pinning ? ['taskset', ['-c', String(core), cmd, ...args]] : [cmd, args];
  const child = spawn(file, argv, { stdio: ['ignore', 'pipe', 'pipe'], env: env ?? process.env, cwd });
  let output = '';
  const lineWaiters = new Set();
  const onData = (chunk) => {
    output += chunk.toString('utf8');
    if (output.length > OUTPUT_KEEP) output = output.slice(-OUTPUT_KEEP);
    for (const w of lineWaiters) w();
  };
  child.stdout.on('data', onData);
  child.stderr.on('data', onData);

  let exitInfo = null;
  const exited = new Promise((resolve) => {
    child.on('exit', (code, signal) => {
      exitInfo = { code, signal };
      live.delete(handle);
      for (const w of lineWaiters) w();
      resolve(exitInfo);
    });
    child.on('error', (err) => {
      exitInfo = { code: null, signal: null, error: err };
      live.delete(handle);
      for (const w of lineWaiters) w();
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
    output: () => output,
    /** Resolves with the first match of `re` in the output; rejects when the child exits first or on timeout. */
    waitFor(re, timeoutMs = 15_000) {
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => done(new Error(`${name}: no ${re} within ${timeoutMs} ms; output:\n${tail(output)}`)), timeoutMs);
        const check = () => {
          const m = re.exec(output);
          if (m) return done(null, m);
          if (exitInfo) done(new Error(`${name} exited (${describeExit(exitInfo)}) before printing ${re}; output:\n${tail(output)}`));
        };
        const done = (err, m) => {
          clearTimeout(timer);
          lineWaiters.delete(check);
          err ? reject(err) : resolve(m);
        };
        lineWaiters.add(check);
        check();
      });
    },
    /** SIGTERM, then SIGKILL when the child has not exited after `graceMs`. */
    async stop(graceMs = 3_000) {
      if (exitInfo) return exitInfo;
      child.kill('SIGTERM');
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
  for (const [signal, code] of [['SIGINT', 130], ['SIGTERM', 143]]) {
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
