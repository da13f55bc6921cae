// How every section judges a target: one shape of check, so the report reads them all alike.
import { perRound } from './rounds.mjs';

/**
 * The check function of a section whose runs are `usable` when their figures can be trusted:
 * `check(name, inputs, compute, target, passes)` gives `{ name, value, target, status }` with status
 * PASS/FAIL, or SKIP when an input run is missing or skipped and ERROR when one is unusable, never PASS.
 * With several rounds, `value` is computed on each input's median round and `rounds` lists the value
 * within each round, as a measure of how far to trust it.
 */
export function checkerFor(usable) {
  return function check(name, inputs, compute, target, passes) {
    const skipped = inputs.findIndex((r) => !r || r.skipped);
    if (skipped >= 0) return { name, value: null, target, status: 'SKIP', note: inputs[skipped]?.skipped ?? 'not run' };
    const broken = inputs.filter((r) => !usable(r));
    if (broken.length) return { name, value: null, target, status: 'ERROR', note: `errors in: ${broken.map((r) => r.label).join(', ')}` };
    const value = compute(...inputs);
    const rounds = perRound(inputs, compute);
    return { name, value, target, status: passes(value) ? 'PASS' : 'FAIL', ...(rounds.length > 1 ? { rounds } : {}) };
  };
}
