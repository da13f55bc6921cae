/** The figure a run's rounds are ranked by: req/s, or the one its `rankBy` names (a section without req/s). */
const rankOf = (r) => (r.rankBy ? r[r.rankBy] : r.rps) ?? null;

/**
 * Merges the runs of several rounds of one section into one run per target. Rounds interleave the
 * targets, so a slow minute on a shared machine hits all of them rather than one; each target is then
 * represented by its median round (by req/s, or by the figure its runs name in `rankBy`), whole, so
 * its p50/p99/CPU stay those of one real run. A run's `roundFields` are kept for each round too.
 * RSS is the highest seen in any round. Errors of any round stay on the merged run: they are never
 * averaged away.
 */
export function mergeRounds(rounds) {
  if (rounds.length === 1) return rounds[0];
  const ids = [...new Set(rounds.flat().map((r) => r.id))];
  return ids.map((id) => {
    const all = rounds.map((runs) => runs.find((r) => r.id === id)).filter(Boolean);
    const usable = all.filter((r) => !r.skipped && r.errors.length === 0 && rankOf(r) != null).sort((a, b) => rankOf(a) - rankOf(b));
    const base = usable.length ? usable[Math.floor((usable.length - 1) / 2)] : all[0];
    const merged = {
      ...base,
      rounds: all.map((r) => ({
        rps: r.rps ?? null,
        p50Ms: r.p50Ms ?? null,
        p99Ms: r.p99Ms ?? null,
        maxRssMb: r.maxRssMb ?? null,
        errors: r.errors.length,
        warnings: r.warnings ?? [],
        ...(r.rankBy ? { rank: rankOf(r) } : {}),
        ...Object.fromEntries((r.roundFields ?? []).map((k) => [k, r[k] ?? null])),
      })),
      errors: all.flatMap((r, i) => r.errors.map((e) => `round ${i + 1}: ${e}`)),
      warnings: all.flatMap((r, i) => (r.warnings ?? []).map((w) => `r${i + 1} ${w}`)),
    };
    const rss = all.map((r) => r.maxRssMb).filter((v) => v != null);
    if (rss.length) merged.maxRssMb = Math.max(...rss);
    return merged;
  });
}

/**
 * `compute` applied round by round to the rounds of `runs` (merged runs of one section), skipping
 * rounds where any of them failed: ratios of runs measured minutes apart in the same round, which
 * the medians of each target do not pair. Empty when there was a single round.
 */
export function perRound(runs, compute) {
  const counts = runs.map((r) => r.rounds?.length ?? 0);
  const n = Math.min(...counts);
  const values = [];
  for (let i = 0; i < n; i++) {
    const round = runs.map((r) => r.rounds[i]);
    if (round.some((r) => r.errors > 0 || (r.rank !== undefined ? r.rank : r.rps) == null)) continue;
    values.push(compute(...round));
  }
  return values;
}

/**
 * `rows` in the order round `round` (1, 2, …) measures them: as given in odd rounds, reversed in even ones.
 * Rows whose ratio is judged run back to back, and on a machine whose load drifts the one measured second
 * would otherwise always meet the later minute; taking turns, each side goes first in half the rounds.
 */
export function inTurn(rows, round) {
  return round % 2 === 0 ? [...rows].reverse() : rows;
}
