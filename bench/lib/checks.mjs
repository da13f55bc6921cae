// How every section judges a target: one shape of check, so the report reads them all alike.
import { perRound } from './rounds.mjs';

/** A run whose figures can be trusted: measured (not skipped), without errors, with a req/s. */
export const usableRun = (r) => r && !r.skipped && r.errors.length === 0 && r.rps != null;

/**
 * The check function of a section whose runs are `usable` when their figures can be trusted (usableRun unless
 * the section's runs have other figures):
 * `check(name, inputs, compute, target, passes)` gives `{ name, value, target, status }` with status
 * PASS/FAIL, or SKIP when an input run is missing or skipped and ERROR when one is unusable, never PASS.
 * Without `passes` the value is a figure reported beside its goal (`target`), not judged: INFO.
 * With several rounds, `value` is the median of the values computed round by round (`rounds`, listed
 * too as a measure of how far to trust it): a ratio pairs the two sides of one round, run back to back,
 * never the median of one side with that of the other, which may come from rounds minutes apart.
 */
export function checkerFor(usable = usableRun) {
  return function check(name, inputs, compute, target, passes) {
    const skipped = inputs.findIndex((r) => !r || r.skipped);
    if (skipped >= 0) return { name, value: null, target, status: 'SKIP', note: inputs[skipped]?.skipped ?? 'not run' };
    const broken = inputs.filter((r) => !usable(r));
    if (broken.length) return { name, value: null, target, status: 'ERROR', note: `errors in: ${broken.map((r) => r.label).join(', ')}` };
    const rounds = perRound(inputs, compute);
    const value = rounds.length > 1 ? median(rounds) : compute(...inputs);
    const status = passes === undefined ? 'INFO' : passes(value) ? 'PASS' : 'FAIL';
    return { name, value, target, status, ...(rounds.length > 1 ? { rounds } : {}) };
  };
}

/** The median of `values` (numbers, at least one). */
export function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/**
 * This build's run against BENCH_BASELINE's (`baseline`, missing without it: SKIP), both measured alike: CPU per
 * call at most `cpuAtMost`, and req/s at least `rpsAtLeast`, or only reported without it. The checks are named
 * `CPU per call <what>` and `req/s <what>` (e.g. `this build / baseline, single-node chain`).
 */
export function versusBaseline(check, { what, run, baseline, cpuAtMost, rpsAtLeast }) {
  const sides = [run, baseline ?? { skipped: 'no BENCH_BASELINE' }];
  return [
    check(
      `CPU per call ${what}`,
      sides,
      (c, b) => c.cpuUsPerRequest / b.cpuUsPerRequest,
      `≤ ${cpuAtMost}`,
      (v) => v <= cpuAtMost,
    ),
    rpsAtLeast === undefined
      ? check(`req/s ${what}`, sides, (c, b) => c.rps / b.rps, 'reported')
      : check(
          `req/s ${what}`,
          sides,
          (c, b) => c.rps / b.rps,
          `≥ ${rpsAtLeast}`,
          (v) => v >= rpsAtLeast,
        ),
  ];
}
