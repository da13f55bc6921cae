/**
 * The head a chain serves (issue 32 §1): the highest block that enough nodes in rotation have reached
 * (consistency.min_nodes, default a majority of the nodes in rotation, at least 1), never lower than a head it
 * already served unless every node went back (a reorg or a reset, logged). eth_blockNumber, newHeads and the
 * block filters follow it; a read at `latest` goes only to a node that has reached it.
 */
import type { ChainHealth } from '../upstreams/selection.js';

export interface ServedHead {
  /** The head served now, or null while none is known. */
  now(): number | null;
}

/** PLACEHOLDER for the integration branch: the best head, as before (the served-head branch replaces it). */
export function createServedHead(health: Pick<ChainHealth, 'bestHead'>): ServedHead {
  return { now: () => health.bestHead() };
}
