/**
 * The fan-out section's own knobs, from the environment (the shared ones, cores, rounds and quiet
 * wait, come from settings.mjs). Bounded so that a typo cannot open more sockets than the bench can
 * hold nor run for an hour.
 */

/** Most subscribers in one run: the server's and the client processes' file limits must cover it. */
export const MAX_SUBSCRIBERS = 20_000;

function int(name, fallback, min, max, errors) {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max)
    errors.push(`${name} must be an integer from ${min} to ${max} (got '${raw}')`);
  return value;
}

function intList(name, fallback, min, max, errors) {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const values = raw.split(',').map((s) => Number(s.trim()));
  if (values.length === 0 || values.some((v) => !Number.isInteger(v) || v < min || v > max)) {
    errors.push(`${name} must be comma-separated integers from ${min} to ${max} (got '${raw}')`);
  }
  return values;
}

/** `{ settings }` or `{ errors }` naming each bad variable. `quick` is BENCH_QUICK. */
export function readFanoutSettings({ quick }) {
  const errors = [];
  const settings = {
    subscribers: intList('BENCH_WS_SUBSCRIBERS', [1_000, 10_000], 1, MAX_SUBSCRIBERS, errors),
    blocks: int('BENCH_WS_BLOCKS', quick ? 5 : 20, 1, 200, errors),
    warmupBlocks: int('BENCH_WS_WARMUP_BLOCKS', quick ? 1 : 2, 0, 20, errors),
    intervalMs: int('BENCH_WS_INTERVAL_MS', 500, 50, 10_000, errors),
    perProcess: int('BENCH_WS_PER_PROCESS', 2_500, 100, 10_000, errors),
    cpuProfDir: process.env.BENCH_WS_CPU_PROF || null,
  };
  return errors.length ? { errors } : { settings };
}
