/**
 * The devnet's validators: a fixed registry of VALIDATOR_COUNT keys, all active since genesis, with
 * committees, proposers and sync committees drawn deterministically per epoch (or per sync period),
 * so every endpoint that names a duty agrees with every other.
 */
import {
  EPOCHS_PER_SYNC_COMMITTEE_PERIOD,
  FAR_FUTURE_EPOCH,
  MAX_COMMITTEES_PER_SLOT,
  MAX_EFFECTIVE_BALANCE,
  SYNC_COMMITTEE_SIZE,
  TARGET_COMMITTEE_SIZE,
} from '@lodestar/params';
import type { phase0 } from '@lodestar/types';
import { VALIDATOR_COUNT } from './beacon-config.js';
import { derivedBytes, derivedPubkey, derivedShuffle } from './deterministic.js';
import { fromHex } from './hex.js';
import type { Epochs } from './epochs.js';

export interface Committee {
  readonly slot: number;
  readonly index: number;
  readonly validators: readonly number[];
}

/** The spec's validator statuses, and the four group names that match several of them. */
const STATUSES = [
  'pending_initialized',
  'pending_queued',
  'active_ongoing',
  'active_exiting',
  'active_slashed',
  'exited_unslashed',
  'exited_slashed',
  'withdrawal_possible',
  'withdrawal_done',
] as const;
const STATUS_GROUPS = ['pending', 'active', 'exited', 'withdrawal'] as const;

/** Every devnet validator's status: none is ever pending, exiting or slashed. */
export const VALIDATOR_STATUS = 'active_ongoing';

export function isKnownStatus(s: string): boolean {
  return (STATUSES as readonly string[]).includes(s) || (STATUS_GROUPS as readonly string[]).includes(s);
}

/** Whether a validator with `status` is selected by a `status` filter entry (exact or its group). */
export function statusMatches(filter: string, status: string): boolean {
  return filter === status || status.startsWith(filter + '_');
}

export interface ValidatorSet {
  readonly count: number;
  pubkey(index: number): string;
  /** The index of a known 0x pubkey (any case), else undefined. */
  indexOf(pubkey: string): number | undefined;
  /** Gwei: 32 ETH plus the rewards of `epoch` epochs. */
  balance(index: number, epoch: number): number;
  /** The validator's registry record, as a state holds it. */
  record(index: number): phase0.Validator;
  committeesPerSlot(): number;
  committees(epoch: number): Committee[];
  proposer(slot: number): number;
  /** The SYNC_COMMITTEE_SIZE members (with repeats if needed) of the period holding `epoch`. */
  syncCommittee(epoch: number): number[];
}

export function createValidatorSet(epochs: Epochs, count = VALIDATOR_COUNT): ValidatorSet {
  const pubkeys = Array.from({ length: count }, (_, i) => derivedPubkey('validator', i));
  const byPubkey = new Map(pubkeys.map((p, i) => [p, i]));
  const perSlot = Math.max(1, Math.min(MAX_COMMITTEES_PER_SLOT, Math.floor(count / epochs.slotsPerEpoch / TARGET_COMMITTEE_SIZE)));
  let memo: { epoch: number; committees: Committee[] } | undefined;

  function committees(epoch: number): Committee[] {
    if (memo?.epoch === epoch) return memo.committees;
    const order = derivedShuffle(count, 'committees', epoch);
    const total = epochs.slotsPerEpoch * perSlot;
    const out: Committee[] = [];
    for (let k = 0; k < total; k++) {
      out.push({
        slot: epochs.startSlot(epoch) + Math.floor(k / perSlot),
        index: k % perSlot,
        validators: order.slice(Math.floor((count * k) / total), Math.floor((count * (k + 1)) / total)),
      });
    }
    memo = { epoch, committees: out };
    return out;
  }

  return {
    count,
    pubkey: (index) => pubkeys[index] ?? '',
    indexOf: (pubkey) => byPubkey.get(pubkey.toLowerCase()),
    balance: (index, epoch) => MAX_EFFECTIVE_BALANCE + epoch * (10_000 + (index % 8) * 250),
    record: (index) => ({
      pubkey: fromHex(pubkeys[index] ?? ''),
      withdrawalCredentials: Buffer.concat([Buffer.from([1]), Buffer.alloc(11), derivedBytes(20, 'withdrawal', index)]),
      effectiveBalance: MAX_EFFECTIVE_BALANCE,
      slashed: false,
      activationEligibilityEpoch: 0,
      activationEpoch: 0,
      exitEpoch: FAR_FUTURE_EPOCH,
      withdrawableEpoch: FAR_FUTURE_EPOCH,
    }),
    committeesPerSlot: () => perSlot,
    committees,
    proposer: (slot) => derivedBytes(4, 'proposer', slot).readUInt32LE() % count,
    syncCommittee(epoch) {
      const order = derivedShuffle(count, 'sync', Math.floor(epoch / EPOCHS_PER_SYNC_COMMITTEE_PERIOD));
      return Array.from({ length: SYNC_COMMITTEE_SIZE }, (_, i) => order[i % count] ?? 0);
    },
  };
}
