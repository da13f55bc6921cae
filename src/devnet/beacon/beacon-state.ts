/**
 * The Electra BeaconState of a devnet slot, for `/eth/v2/debug/beacon/states/{state_id}` in JSON and
 * SSZ, and the pieces of it other endpoints serve on their own (randao mixes, sync committees).
 */
import { currentFork, PRESET } from './beacon-config.js';
import { checkpointsAt, eth1Data, executionPayloadHeader } from './beacon-data.js';
import type { BeaconContext } from './beacon-ids.js';
import type { SlotBlock } from './chain-view.js';
import { derivedPubkey, derivedRoot, ZERO_ROOT } from './deterministic.js';

/** The RANDAO mix at the end of `epoch`. */
export const randaoMix = (epoch: number): string => derivedRoot('randao_mix', epoch);

export function genesisValidatorsRoot(ctx: BeaconContext): string {
  return derivedRoot('genesis_validators_root', ctx.validators.count, ctx.view.genesis().root);
}

export function syncCommitteeJson(ctx: BeaconContext, epoch: number): { pubkeys: string[]; aggregate_pubkey: string } {
  const period = Math.floor(epoch / PRESET.EPOCHS_PER_SYNC_COMMITTEE_PERIOD);
  return {
    pubkeys: ctx.validators.syncCommittee(epoch).map((i) => ctx.validators.pubkey(i)),
    aggregate_pubkey: derivedPubkey('sync_committee_aggregate', period),
  };
}

/** `length` entries for the slots (or epochs) before `upTo`, at index `n % length`, zero where there is none. */
function ring<T>(length: number, upTo: number, valueAt: (n: number) => T | undefined, zero: T): T[] {
  const out = Array.from({ length }, () => zero);
  for (let n = Math.max(0, upTo - length); n < upTo; n++) {
    const v = valueAt(n);
    if (v !== undefined) out[n % length] = v;
  }
  return out;
}

export async function beaconStateJson(ctx: BeaconContext, b: SlotBlock): Promise<Record<string, unknown>> {
  const { epochs, validators } = ctx;
  const epoch = epochs.epochOf(b.slot);
  const history = await ctx.view.blocksBetween(Math.max(0, b.slot - PRESET.SLOTS_PER_HISTORICAL_ROOT), b.slot - 1);
  const bySlot = new Map(history.map((h) => [h.slot, h]));
  const cp = await checkpointsAt(ctx, b.slot);
  const indices = Array.from({ length: validators.count }, (_, i) => i);
  return {
    genesis_time: String(ctx.view.genesis().timestamp),
    genesis_validators_root: genesisValidatorsRoot(ctx),
    slot: String(b.slot),
    fork: currentFork(),
    // The state of slot n holds its own block's header with state_root still zero, as the spec's process_block leaves it.
    latest_block_header: {
      slot: String(b.slot),
      proposer_index: String(validators.proposer(b.slot)),
      parent_root: b.parentRoot,
      state_root: ZERO_ROOT,
      body_root: derivedRoot('body_root', b.root),
    },
    block_roots: ring(PRESET.SLOTS_PER_HISTORICAL_ROOT, b.slot, (s) => bySlot.get(s)?.root, ZERO_ROOT),
    state_roots: ring(PRESET.SLOTS_PER_HISTORICAL_ROOT, b.slot, (s) => bySlot.get(s)?.stateRoot, ZERO_ROOT),
    historical_roots: [],
    eth1_data: eth1Data(ctx),
    eth1_data_votes: [],
    eth1_deposit_index: String(validators.count),
    validators: indices.map((i) => validators.record(i)),
    balances: indices.map((i) => validators.balance(i, epoch)),
    randao_mixes: ring(PRESET.EPOCHS_PER_HISTORICAL_VECTOR, epoch + 1, randaoMix, ZERO_ROOT),
    slashings: Array.from({ length: PRESET.EPOCHS_PER_SLASHINGS_VECTOR }, () => '0'),
    previous_epoch_participation: indices.map(() => (epoch === 0 ? '0' : '7')),
    current_epoch_participation: indices.map(() => '7'),
    justification_bits: epoch >= 2 ? '0x03' : epoch === 1 ? '0x01' : '0x00',
    previous_justified_checkpoint: cp.previous_justified,
    current_justified_checkpoint: cp.current_justified,
    finalized_checkpoint: cp.finalized,
    inactivity_scores: indices.map(() => '0'),
    current_sync_committee: syncCommitteeJson(ctx, epoch),
    next_sync_committee: syncCommitteeJson(ctx, epoch + PRESET.EPOCHS_PER_SYNC_COMMITTEE_PERIOD),
    latest_execution_payload_header: executionPayloadHeader(b),
    next_withdrawal_index: '0',
    next_withdrawal_validator_index: '0',
    historical_summaries: [],
    // 2**64 - 1: no deposit request seen yet.
    deposit_requests_start_index: '18446744073709551615',
    deposit_balance_to_consume: '0',
    exit_balance_to_consume: '0',
    earliest_exit_epoch: '0',
    consolidation_balance_to_consume: '0',
    earliest_consolidation_epoch: '0',
    pending_deposits: [],
    pending_partial_withdrawals: [],
    pending_consolidations: [],
  };
}
