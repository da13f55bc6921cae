// Rows measured in turns of short slices rather than one after another: the neighbours of a shared machine (and a
// virtual machine's host) come and go over tens of seconds, so rows measured seconds apart meet the same ones,
// where 10 s runs back to back a minute apart would not. Used by auth-refusals (kinds of key on one gateway) and
// tracing (one gateway switched between its rows by reloads). See bench/README.md (auth-refusals: Slices).
import { median } from './checks.mjs';
import { NOISY_PERCENT } from './measure.mjs';

/** Slices each row's measured time is cut into, at most: the rows take turns slice by slice. */
const SLICES = 5;

/** `list` rotated to start at its `shift`-th element (modulo its length). */
const rotated = (list, shift) => [...list.slice(shift % list.length), ...list.slice(0, shift % list.length)];

/**
 * Measures every row of `rows` in turn, slice by slice, with `measureSlice(row, ctx, label)` (lib/measure.mjs's
 * measure with the slice's `ctx`). Each turn starts at the next row (from `firstTurn`), so no row is always the
 * first. The first slice of each row has the warm-up; the first of each turn has the quiet wait, then 1 s of
 * warm-up, as the gateway may have stood idle through that wait. Resolves a Map of id → the row's slices combined.
 */
export async function measureInSlices({ rows, firstTurn, ctx, measureSlice }) {
  const { settings } = ctx;
  const slices = Math.max(1, Math.min(SLICES, settings.seconds));
  const sliceSeconds = Math.floor(settings.seconds / slices);
  const parts = new Map(rows.map((r) => [r.id, []]));
  for (let slice = 0; slice < slices; slice++) {
    for (const [turn, row] of rotated(rows, firstTurn + slice).entries()) {
      const sliceSettings = {
        ...settings,
        seconds: sliceSeconds,
        warmupSeconds: slice === 0 ? settings.warmupSeconds : turn === 0 ? Math.min(1, settings.warmupSeconds) : 0,
        quietWaitSeconds: turn === 0 ? settings.quietWaitSeconds : 0,
      };
      const label = `${row.label}, slice ${slice + 1}/${slices}`;
      parts.get(row.id).push(await measureSlice(row, { ...ctx, settings: sliceSettings }, label));
    }
  }
  return new Map(rows.map((r) => [r.id, combineSlices(r, parts.get(r.id))]));
}

const sum = (values) => values.reduce((a, b) => a + (b ?? 0), 0);
/** The median of the figures the slices have (a slice that failed its first check has none). */
const medianOf = (values) => {
  const known = values.filter((v) => v != null);
  return known.length ? median(known) : null;
};

/**
 * One run of a row from its slices: req/s and CPU per request over all of them, p50 and p99 the median
 * of the slices' (wrk reports percentiles, not its histogram), RSS the highest, the neighbours' CPU the
 * mean; every slice's errors kept. Each slice's figures stay in `slices`.
 */
function combineSlices({ id, label, url }, parts) {
  const requests = sum(parts.map((p) => p.requests));
  const seconds = sum(parts.map((p) => p.seconds));
  const cpuSeconds = sum(parts.map((p) => p.cpuSeconds));
  const mean = (field) => sum(parts.map((p) => p[field])) / parts.length;
  const run = {
    id,
    label,
    url,
    errors: parts.flatMap((p, i) => p.errors.map((e) => `slice ${i + 1}: ${e}`)),
    warnings: [],
    requests,
    seconds,
    rps: seconds > 0 ? requests / seconds : null,
    p50Ms: medianOf(parts.map((p) => p.p50Ms)),
    p99Ms: medianOf(parts.map((p) => p.p99Ms)),
    cpuSeconds,
    cpuUsPerRequest: requests > 0 ? (cpuSeconds * 1e6) / requests : null,
    maxRssMb: Math.max(...parts.map((p) => p.maxRssMb ?? 0)),
    otherCpuPercent: mean('otherCpuPercent'),
    stealPercent: mean('stealPercent'),
    slices: parts.map((p) => ({
      rps: p.rps ?? null,
      p50Ms: p.p50Ms ?? null,
      p99Ms: p.p99Ms ?? null,
      cpuUsPerRequest: p.cpuUsPerRequest ?? null,
      otherCpuPercent: p.otherCpuPercent ?? null,
    })),
    // Kept per round, for the CPU check's per-round ratios.
    roundFields: ['cpuUsPerRequest'],
  };
  if (run.otherCpuPercent > NOISY_PERCENT) run.warnings.push(`others used ${Math.round(run.otherCpuPercent)}% of a core`);
  if (run.stealPercent > NOISY_PERCENT) run.warnings.push(`steal ${Math.round(run.stealPercent)}% of a core`);
  return run;
}
