// What a rate limit in shared memory costs a call, without HTTP: the CPU time of one take() of the
// in-memory limiter (limits/sliding-window.js, one thread) against the shared one every worker thread
// uses (limits/shared-window.js), on one key at a limit far above the load, as the proxy section's
// public path takes its client IP's window on every call. The proxy section's CPU per call is some
// 60 µs; this shows what of it sharing the limiter can be. Usage:
// `npm run build && taskset -c 0 node bench/shared-limits.mjs`.
import { median } from './lib/checks.mjs';

const DIST = new URL('../dist/', import.meta.url);
const { createSlidingWindowLimiter } = await import(new URL('limits/sliding-window.js', DIST));
const { allocateSharedWindows, createSharedWindowLimiter } = await import(new URL('limits/shared-window.js', DIST));

/** Takes per kind and round, and rounds; the kinds take turns, each round starting at the next. */
const TAKES = 1_000_000;
const ROUNDS = 15;
const LIMIT = 100_000_000;

const kinds = [
  ['one thread (workers: 1)', createSlidingWindowLimiter()],
  ['shared memory (workers: 2 or more)', createSharedWindowLimiter(allocateSharedWindows())],
];
const cpuUs = () => {
  const u = process.cpuUsage();
  return u.user + u.system;
};
const ns = new Map(kinds.map(([name]) => [name, []]));
for (let round = 0; round < ROUNDS; round++) {
  const shift = round % kinds.length;
  for (const [name, limiter] of [...kinds.slice(shift), ...kinds.slice(0, shift)]) {
    const start = cpuUs();
    for (let i = 0; i < TAKES; i++) limiter.take('ip:127.0.0.1', LIMIT);
    ns.get(name).push(((cpuUs() - start) * 1000) / TAKES);
  }
}
const width = Math.max(...kinds.map(([name]) => name.length));
process.stdout.write(`CPU per take() of one key, median of ${ROUNDS} rounds of ${TAKES.toLocaleString('en-US')} (min-max):\n`);
for (const [name, values] of ns) {
  const v = (x) => Math.round(x).toString();
  process.stdout.write(
    `  ${name.padEnd(width)}  ${v(median(values)).padStart(5)} ns  (${v(Math.min(...values))}-${v(Math.max(...values))})\n`,
  );
}
