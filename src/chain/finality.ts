/**
 * What `safe` and `finalized` mean on a chain (issue 32 §3): the execution blocks of the Beacon chain's
 * justified and finalized checkpoints when the chain names its beacon chain (chains.<slug>.beacon), else the
 * nodes' own `safe` and `finalized` blocks. The cache's "final" follows the finalized block.
 */

/** A block the gateway takes as safe or finalized. */
export interface FinalBlock {
  readonly number: number;
  /** 0x hash, lowercase. */
  readonly hash: string;
}

export interface ChainFinality {
  /** The finalized block, or null while none is known. */
  finalized(): FinalBlock | null;
  /** The safe block (the justified checkpoint's), or null while none is known. */
  safe(): FinalBlock | null;
  /** Stops its polls and streams (once, when the chain closes). */
  close(): void;
}

/** PLACEHOLDER for the integration branch: nothing known (the finality branch replaces it). */
export function createChainFinality(): ChainFinality {
  return { finalized: () => null, safe: () => null, close() {} };
}
