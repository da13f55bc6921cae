/**
 * Node tiers (config upstreams[].tier): among the nodes a call may go to, only those of the lowest tier present
 * are drawn from (selection.ts), so a higher tier gets a call only while no node of a lower one can take it.
 */

/**
 * Keeps, in place, the nodes of candidates[0, count) whose tier is the lowest among them; returns how many. Order
 * is kept; nothing is made.
 */
export function keepLowestTier(candidates: number[], count: number, tiers: readonly number[]): number {
  let lowest = Infinity;
  for (let k = 0; k < count; k++) lowest = Math.min(lowest, tiers[candidates[k]!]!);
  let kept = 0;
  for (let k = 0; k < count; k++) {
    const i = candidates[k]!;
    if (tiers[i] === lowest) candidates[kept++] = i;
  }
  return kept;
}

/** The tiers selection needs: null when every node is at tier 0 (the default), so the tier step is skipped. */
export function tiersOf(tiers: readonly number[] | undefined): readonly number[] | null {
  return tiers?.some((tier) => tier !== 0) ? tiers : null;
}
