/**
 * Blocks, headers, execution payloads and attestations in the Beacon API's JSON shapes (Electra),
 * built from the followed execution blocks. Roots the devnet cannot compute (body roots, SSZ
 * transaction roots) are derived deterministically from the block hash.
 */
import { PRESET, VALIDATOR_COUNT } from './beacon-config.js';
import type { BeaconContext } from './beacon-ids.js';
import type { SlotBlock } from './chain-view.js';
import { bitvector, derivedRoot, derivedSignature, fullBitlist, ZERO_ROOT } from './deterministic.js';

const GRAFFITI = '0x' + Buffer.from('chaingate devnet').toString('hex').padEnd(64, '0');

const dec = (hex: string | undefined): string => BigInt(hex ?? '0x0').toString();

export interface Checkpoint {
  epoch: string;
  root: string;
}

async function rootAt(ctx: BeaconContext, slot: number): Promise<string> {
  return (ctx.view.cached(slot) ?? (await ctx.view.blockAt(slot)))?.root ?? ZERO_ROOT;
}

/** The checkpoint of `epoch`: its first slot's block root (every devnet slot has a block). */
export async function checkpoint(ctx: BeaconContext, epoch: number): Promise<Checkpoint> {
  return { epoch: String(epoch), root: await rootAt(ctx, ctx.epochs.startSlot(epoch)) };
}

/** Justification and finality as seen from a state at `slot`. */
export async function checkpointsAt(ctx: BeaconContext, slot: number): Promise<{ previous_justified: Checkpoint; current_justified: Checkpoint; finalized: Checkpoint }> {
  const finalized = await checkpoint(ctx, ctx.epochs.finalizedEpoch(slot));
  return { previous_justified: finalized, current_justified: await checkpoint(ctx, ctx.epochs.justifiedEpoch(slot)), finalized };
}

export function executionPayload(b: SlotBlock, transactions: readonly string[]): Record<string, unknown> {
  const e = b.execution;
  return {
    parent_hash: b.parentRoot,
    fee_recipient: e.miner.toLowerCase(),
    state_root: b.stateRoot,
    receipts_root: e.receiptsRoot.toLowerCase(),
    logs_bloom: e.logsBloom.toLowerCase(),
    prev_randao: (e.mixHash ?? ZERO_ROOT).toLowerCase(),
    block_number: String(b.slot),
    gas_limit: dec(e.gasLimit),
    gas_used: dec(e.gasUsed),
    timestamp: String(b.timestamp),
    extra_data: e.extraData.toLowerCase(),
    base_fee_per_gas: dec(e.baseFeePerGas),
    block_hash: b.root,
    transactions,
    withdrawals: (e.withdrawals ?? []).map((w) => ({
      index: dec(w.index), validator_index: dec(w.validatorIndex), address: w.address.toLowerCase(), amount: dec(w.amount),
    })),
    blob_gas_used: dec(e.blobGasUsed),
    excess_blob_gas: dec(e.excessBlobGas),
  };
}

export function executionPayloadHeader(b: SlotBlock): Record<string, unknown> {
  const { transactions: _t, withdrawals: _w, blob_gas_used, excess_blob_gas, ...rest } = executionPayload(b, []);
  return {
    ...rest,
    transactions_root: derivedRoot('transactions_root', b.root),
    withdrawals_root: derivedRoot('withdrawals_root', b.root),
    blob_gas_used,
    excess_blob_gas,
  };
}

export function headerMessage(ctx: BeaconContext, b: SlotBlock): Record<string, string> {
  return {
    slot: String(b.slot),
    proposer_index: String(ctx.validators.proposer(b.slot)),
    parent_root: b.parentRoot,
    state_root: b.stateRoot,
    body_root: derivedRoot('body_root', b.root),
  };
}

/** `/eth/v1/beacon/headers` items: every served block is canonical. */
export function headerEntry(ctx: BeaconContext, b: SlotBlock): Record<string, unknown> {
  return { root: b.root, canonical: true, header: { message: headerMessage(ctx, b), signature: derivedSignature('block', b.root) } };
}

/** AttestationData for `slot`; Electra names the committee in `committee_bits` and sets `index` to 0. */
export async function attestationData(ctx: BeaconContext, slot: number): Promise<Record<string, unknown>> {
  const { epochs } = ctx;
  // A slot not yet reached votes for the head, and its epoch's checkpoint is the head until the epoch starts.
  const headSlot = ctx.view.head().slot;
  const target = epochs.epochOf(slot);
  return {
    slot: String(slot),
    index: '0',
    beacon_block_root: await rootAt(ctx, Math.min(slot, headSlot)),
    source: await checkpoint(ctx, epochs.justifiedEpoch(slot)),
    target: { epoch: String(target), root: await rootAt(ctx, Math.min(epochs.startSlot(target), headSlot)) },
  };
}

/** One Electra attestation covering every committee of `slot`, everyone voting. */
export async function electraAttestation(ctx: BeaconContext, slot: number, onlyCommittee?: number): Promise<Record<string, unknown>> {
  const all = ctx.validators.committees(ctx.epochs.epochOf(slot)).filter((c) => c.slot === slot);
  const chosen = onlyCommittee === undefined ? all : all.filter((c) => c.index === onlyCommittee);
  const size = chosen.reduce((n, c) => n + c.validators.length, 0);
  return {
    aggregation_bits: fullBitlist(size),
    data: await attestationData(ctx, slot),
    signature: derivedSignature('attestation', slot, onlyCommittee ?? 'all'),
    committee_bits: bitvector(PRESET.MAX_COMMITTEES_PER_SLOT, chosen.map((c) => c.index)),
  };
}

/** Pre-Electra attestations of `slot`, one per committee, for the v1 (phase0-shaped) endpoints. */
export async function phase0Attestations(ctx: BeaconContext, slot: number, onlyCommittee?: number): Promise<Array<Record<string, unknown>>> {
  const data = await attestationData(ctx, slot);
  return ctx.validators
    .committees(ctx.epochs.epochOf(slot))
    .filter((c) => c.slot === slot && (onlyCommittee === undefined || c.index === onlyCommittee))
    .map((c) => ({
      aggregation_bits: fullBitlist(c.validators.length),
      data: { ...data, index: String(c.index) },
      signature: derivedSignature('attestation', slot, c.index),
    }));
}

/** An Electra BeaconBlock at `b`'s slot; the block at slot n carries the attestation for slot n − 1. */
export async function beaconBlock(ctx: BeaconContext, b: SlotBlock, transactions: readonly string[], randaoReveal?: string): Promise<Record<string, unknown>> {
  return {
    slot: String(b.slot),
    proposer_index: String(ctx.validators.proposer(b.slot)),
    parent_root: b.parentRoot,
    state_root: b.stateRoot,
    body: {
      randao_reveal: randaoReveal ?? derivedSignature('randao_reveal', b.slot),
      eth1_data: eth1Data(ctx),
      graffiti: GRAFFITI,
      proposer_slashings: [],
      attester_slashings: [],
      attestations: b.slot === 0 ? [] : [await electraAttestation(ctx, b.slot - 1)],
      deposits: [],
      voluntary_exits: [],
      sync_aggregate: {
        sync_committee_bits: bitvector(PRESET.SYNC_COMMITTEE_SIZE, Array.from({ length: b.slot === 0 ? 0 : PRESET.SYNC_COMMITTEE_SIZE }, (_, i) => i)),
        sync_committee_signature: b.slot === 0 ? '0xc0' + '00'.repeat(95) : derivedSignature('sync_aggregate', b.slot),
      },
      execution_payload: executionPayload(b, transactions),
      bls_to_execution_changes: [],
      blob_kzg_commitments: [],
      execution_requests: { deposits: [], withdrawals: [], consolidations: [] },
    },
  };
}

export function eth1Data(ctx: BeaconContext): Record<string, string> {
  return { deposit_root: derivedRoot('deposit_root'), deposit_count: String(VALIDATOR_COUNT), block_hash: ctx.view.genesis().root };
}
