/**
 * The devnet's blocks, payloads and attestations as Lodestar values (`@lodestar/types`), built from
 * the followed execution blocks and the canonical roots sealed so far. Routes serialize them to JSON
 * or SSZ with the same types, and roots are their `hashTreeRoot`s. Signatures and RANDAO values are
 * deterministic stand-ins: the devnet holds no keys.
 */
import { BitArray } from '@chainsafe/ssz';
import { MAX_COMMITTEES_PER_SLOT, SYNC_COMMITTEE_SIZE } from '@lodestar/params';
import { ssz, type electra, type phase0 } from '@lodestar/types';
import { VALIDATOR_COUNT } from './beacon-config.js';
import type { Epochs } from './epochs.js';
import type { ExecutionBlock } from './execution-client.js';
import { derivedRoot, derivedSignature } from './deterministic.js';
import { fromHex } from './hex.js';
import type { ValidatorSet } from './validator-set.js';

const GRAFFITI = Buffer.from('chaingate devnet'.padEnd(32, '\0'));

/** What every builder reads: epoch arithmetic, the validators, and the canonical roots sealed so far. */
export interface ChainFacts {
  readonly epochs: Epochs;
  readonly validators: ValidatorSet;
  /** The canonical beacon block root of `slot`, or of the newest sealed slot when `slot` is past it. */
  rootAt(slot: number): Uint8Array;
  /** anvil's block 0 hash: the eth1_data block hash of every block and state. */
  readonly genesisHash: Uint8Array;
}

const num = (hex: string | undefined): number => Number(BigInt(hex ?? '0x0'));
const big = (hex: string | undefined): bigint => BigInt(hex ?? '0x0');

/** The checkpoint of `epoch`: its first slot's block root (every devnet slot has a block). */
export function checkpoint(f: ChainFacts, epoch: number): phase0.Checkpoint {
  return { epoch, root: f.rootAt(f.epochs.startSlot(epoch)) };
}

/** Justification and finality as seen from a state at `slot`: finalized is epoch − 2, justified epoch − 1. */
export function checkpointsAt(
  f: ChainFacts,
  slot: number,
): { previousJustified: phase0.Checkpoint; currentJustified: phase0.Checkpoint; finalized: phase0.Checkpoint } {
  const finalized = checkpoint(f, f.epochs.finalizedEpoch(slot));
  return { previousJustified: finalized, currentJustified: checkpoint(f, f.epochs.justifiedEpoch(slot)), finalized };
}

/** The execution payload of `e`, its transactions given raw (anvil lists only their hashes). */
export function executionPayload(e: ExecutionBlock, transactions: readonly string[]): electra.ExecutionPayload {
  return {
    parentHash: fromHex(e.parentHash),
    feeRecipient: fromHex(e.miner),
    stateRoot: fromHex(e.stateRoot),
    receiptsRoot: fromHex(e.receiptsRoot),
    logsBloom: fromHex(e.logsBloom),
    prevRandao: fromHex(e.mixHash ?? '0x' + '00'.repeat(32)),
    blockNumber: num(e.number),
    gasLimit: num(e.gasLimit),
    gasUsed: num(e.gasUsed),
    timestamp: num(e.timestamp),
    extraData: fromHex(e.extraData),
    baseFeePerGas: big(e.baseFeePerGas),
    blockHash: fromHex(e.hash),
    transactions: transactions.map(fromHex),
    withdrawals: (e.withdrawals ?? []).map((w) => ({
      index: num(w.index),
      validatorIndex: num(w.validatorIndex),
      address: fromHex(w.address),
      amount: big(w.amount),
    })),
    blobGasUsed: big(e.blobGasUsed),
    excessBlobGas: big(e.excessBlobGas),
  };
}

/** The payload's header, as a state keeps it: the lists replaced by their roots. */
export function executionPayloadHeader(p: electra.ExecutionPayload): electra.ExecutionPayloadHeader {
  const { transactions, withdrawals, ...rest } = p;
  return {
    ...rest,
    transactionsRoot: ssz.bellatrix.Transactions.hashTreeRoot(transactions),
    withdrawalsRoot: ssz.capella.Withdrawals.hashTreeRoot(withdrawals),
  };
}

/** AttestationData for `slot`; a slot past the newest sealed one votes for that one. Electra sets `index` to 0. */
export function attestationData(f: ChainFacts, slot: number): phase0.AttestationData {
  const { epochs } = f;
  const target = epochs.epochOf(slot);
  return {
    slot,
    index: 0,
    beaconBlockRoot: f.rootAt(slot),
    source: checkpoint(f, epochs.justifiedEpoch(slot)),
    target: { epoch: target, root: f.rootAt(epochs.startSlot(target)) },
  };
}

const allSet = (n: number): BitArray => BitArray.fromBoolArray(Array.from({ length: n }, () => true));

function committeesOf(f: ChainFacts, slot: number, onlyCommittee: number | undefined) {
  return f.validators
    .committees(f.epochs.epochOf(slot))
    .filter((c) => c.slot === slot && (onlyCommittee === undefined || c.index === onlyCommittee));
}

/** One Electra attestation covering the committees of `slot` (or just one), everyone voting. */
export function electraAttestation(f: ChainFacts, slot: number, onlyCommittee?: number): electra.Attestation {
  const chosen = committeesOf(f, slot, onlyCommittee);
  const committeeBits = BitArray.fromBitLen(MAX_COMMITTEES_PER_SLOT);
  for (const c of chosen) committeeBits.set(c.index, true);
  return {
    aggregationBits: allSet(chosen.reduce((n, c) => n + c.validators.length, 0)),
    data: attestationData(f, slot),
    signature: fromHex(derivedSignature('attestation', slot, onlyCommittee ?? 'all')),
    committeeBits,
  };
}

/** Pre-Electra attestations of `slot`, one per committee, for the v1 (phase0-shaped) endpoints. */
export function phase0Attestations(f: ChainFacts, slot: number, onlyCommittee?: number): phase0.Attestation[] {
  const data = attestationData(f, slot);
  return committeesOf(f, slot, onlyCommittee).map((c) => ({
    aggregationBits: allSet(c.validators.length),
    data: { ...data, index: c.index },
    signature: fromHex(derivedSignature('attestation', slot, c.index)),
  }));
}

export function eth1Data(f: ChainFacts): phase0.Eth1Data {
  return { depositRoot: fromHex(derivedRoot('deposit_root')), depositCount: BigInt(VALIDATOR_COUNT), blockHash: f.genesisHash };
}

/** The Electra body of the block at `slot` over `payload`; the block at slot n carries the attestation for slot n − 1. */
export function blockBody(
  f: ChainFacts,
  slot: number,
  payload: electra.ExecutionPayload,
  randaoReveal?: Uint8Array,
): electra.BeaconBlockBody {
  const syncBits = BitArray.fromBitLen(SYNC_COMMITTEE_SIZE);
  if (slot > 0) for (let i = 0; i < SYNC_COMMITTEE_SIZE; i++) syncBits.set(i, true);
  return {
    randaoReveal: randaoReveal ?? fromHex(derivedSignature('randao_reveal', slot)),
    eth1Data: eth1Data(f),
    graffiti: GRAFFITI,
    proposerSlashings: [],
    attesterSlashings: [],
    attestations: slot === 0 ? [] : [electraAttestation(f, slot - 1)],
    deposits: [],
    voluntaryExits: [],
    syncAggregate: {
      syncCommitteeBits: syncBits,
      // The infinity point: the aggregate of no signatures, as a block without sync participation carries.
      syncCommitteeSignature: slot === 0 ? fromHex('0xc0' + '00'.repeat(95)) : fromHex(derivedSignature('sync_aggregate', slot)),
    },
    executionPayload: payload,
    blsToExecutionChanges: [],
    blobKzgCommitments: [],
    executionRequests: { deposits: [], withdrawals: [], consolidations: [] },
  };
}
