import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { resolve } from 'node:path';

/**
 * The bench's knobs, from the environment, checked before anything starts. Durations are whole
 * seconds or minutes (`10s`, `1m`), capped so that a typo cannot start an hour-long load test.
 */
const MAX_SECONDS = 600;

function seconds(name, fallback, errors) {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const m = /^(\d+)(s|m)?$/.exec(raw.trim());
  const value = m ? Number(m[1]) * (m[2] === 'm' ? 60 : 1) : NaN;
  if (!(value >= 0 && value <= MAX_SECONDS))
    errors.push(`${name} must be a duration like 10s or 1m, at most ${MAX_SECONDS}s (got '${raw}')`);
  return value;
}

/** The integer in env `name` (`fallback` when unset); out of [min, max] adds a message to `errors`. */
export function int(name, fallback, min, max, errors) {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max)
    errors.push(`${name} must be an integer from ${min} to ${max} (got '${raw}')`);
  return value;
}

function flag(name) {
  const raw = process.env[name];
  return raw !== undefined && raw !== '' && raw !== '0' && raw.toLowerCase() !== 'false';
}

/**
 * The cores this process may run on before it pins itself (`Cpus_allowed_list`, taskset's `-c` format):
 * where an unpinned row's processes go, so that they float as they would with no taskset at all.
 */
function allowedCores() {
  try {
    const m = /^Cpus_allowed_list:\s*(\S+)$/m.exec(readFileSync('/proc/self/status', 'utf8'));
    if (m) return m[1];
  } catch {
    // not Linux: every core
  }
  return `0-${cpus().length - 1}`;
}

/** BENCH_CPU_PROF as an absolute path; a folder that already holds files is refused, so profiles of two runs never mix. */
function cpuProfDir(errors) {
  const raw = process.env.BENCH_CPU_PROF?.trim();
  if (!raw) return null;
  const dir = resolve(raw);
  if (existsSync(dir) && readdirSync(dir).length) errors.push(`BENCH_CPU_PROF: ${dir} is not empty; name a new or empty folder`);
  return dir;
}

/** `{ settings }` or `{ errors }` naming each bad variable. */
export function readSettings() {
  const errors = [];
  const quick = flag('BENCH_QUICK');
  const settings = {
    quick,
    seconds: seconds('BENCH_DURATION', quick ? 3 : 10, errors),
    warmupSeconds: seconds('BENCH_WARMUP', quick ? 1 : 2, errors),
    rounds: int('BENCH_ROUNDS', 1, 1, 20, errors),
    quietWaitSeconds: seconds('BENCH_QUIET_WAIT', quick ? 5 : 20, errors),
    connections: int('BENCH_CONNECTIONS', 64, 1, 10_000, errors),
    threads: int('BENCH_THREADS', 1, 1, 64, errors),
    serverCore: int('BENCH_SERVER_CORE', 0, 0, 1023, errors),
    loadCore: int('BENCH_LOAD_CORE', 1, 0, 1023, errors),
    pin: process.env.BENCH_PIN === undefined ? true : flag('BENCH_PIN'),
    anvilQuiet: flag('BENCH_ANVIL_QUIET'),
    strict: flag('BENCH_STRICT'),
    sections: (process.env.BENCH_SECTIONS ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
    out: process.env.BENCH_OUT || null,
    baseline: process.env.BENCH_BASELINE?.trim() || null,
    cpuProfDir: cpuProfDir(errors),
  };
  // Servers with two workers (chaingate's threads, nginx's processes) get both cores, the load's too.
  settings.spreadCores = `${settings.serverCore},${settings.loadCore}`;
  // http-proxy's two-worker rows against nginx's two processes: server, upstream and wrk all float.
  settings.unpinnedCores = allowedCores();
  if (settings.seconds === 0) errors.push('BENCH_DURATION must be more than 0s');
  if (settings.connections < settings.threads)
    errors.push('BENCH_CONNECTIONS must be at least BENCH_THREADS (wrk needs a connection per thread)');
  return errors.length ? { errors } : { settings };
}
