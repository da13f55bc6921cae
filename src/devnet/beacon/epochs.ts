/**
 * Slot and epoch arithmetic of the devnet's consensus layer: one slot per execution block, finality
 * a fixed two epochs behind the head (the head's epoch − 2 is finalized, − 1 justified), as a healthy
 * chain with every validator attesting would show.
 */
export interface Epochs {
  readonly slotsPerEpoch: number;
  epochOf(slot: number): number;
  startSlot(epoch: number): number;
  finalizedEpoch(headSlot: number): number;
  justifiedEpoch(headSlot: number): number;
  /** The slot whose block decides duties of `epoch` at `lookback` epochs earlier (the spec's dependent root), or 0. */
  dependentSlot(epoch: number, lookback: 0 | 1): number;
}

export function createEpochs(slotsPerEpoch: number): Epochs {
  const epochOf = (slot: number): number => Math.floor(slot / slotsPerEpoch);
  const startSlot = (epoch: number): number => epoch * slotsPerEpoch;
  return {
    slotsPerEpoch,
    epochOf,
    startSlot,
    finalizedEpoch: (headSlot) => Math.max(0, epochOf(headSlot) - 2),
    justifiedEpoch: (headSlot) => Math.max(0, epochOf(headSlot) - 1),
    dependentSlot: (epoch, lookback) => Math.max(0, startSlot(epoch - lookback) - 1),
  };
}
