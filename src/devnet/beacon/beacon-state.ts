/**
 * The devnet's Electra BeaconState as a Lodestar tree (`ViewDU`), so its root is a real
 * `hashTreeRoot` and the next slot's state costs only the nodes that change. One function builds
 * every state: `advanceState` takes the state after slot `from` (or none, for a blank tree) to the
 * state after the block of slot `to`, whether `to` is the next slot or many slots on.
 */
import { subtreeFillToContents, zeroNode } from '@chainsafe/persistent-merkle-tree';
import { BitArray, VectorBasicType, VectorCompositeType, type CompositeViewDU } from '@chainsafe/ssz';
import {
  EPOCHS_PER_HISTORICAL_VECTOR,
  EPOCHS_PER_SYNC_COMMITTEE_PERIOD,
  JUSTIFICATION_BITS_LENGTH,
  SLOTS_PER_HISTORICAL_ROOT,
} from '@lodestar/params';
import { ssz, type altair, type electra } from '@lodestar/types';
import { CURRENT_FORK } from './beacon-config.js';
import { checkpointsAt, eth1Data, type ChainFacts } from './beacon-data.js';
import { derivedPubkey, derivedRoot } from './deterministic.js';
import { fromHex } from './hex.js';

export type StateTree = CompositeViewDU<typeof ssz.electra.BeaconState>;

const State = ssz.electra.BeaconState;
const F = State.fields;
const ZERO = new Uint8Array(32);
/** 2**64 − 1: no deposit request seen yet (the spec's UNSET_DEPOSIT_REQUESTS_START_INDEX). */
const UNSET_DEPOSIT_REQUESTS_START_INDEX = 2n ** 64n - 1n;

/** What a state reads beyond the block facts: genesis time and the canonical state roots sealed so far. */
export interface StateFacts extends ChainFacts {
  readonly genesisTime: number;
  stateRootAt(slot: number): Uint8Array;
}

/** The header of the block a state is the post-state of (its state_root stays zero in the state, as process_block leaves it). */
export interface BlockHead {
  slot: number;
  proposerIndex: number;
  parentRoot: Uint8Array;
  bodyRoot: Uint8Array;
}

/** The RANDAO mix at the end of `epoch`. */
export const randaoMix = (epoch: number): Uint8Array => fromHex(derivedRoot('randao_mix', epoch));

/** The sync committee of the period holding `epoch`. */
export function syncCommittee(f: ChainFacts, epoch: number): altair.SyncCommittee {
  return {
    pubkeys: f.validators.syncCommittee(epoch).map((i) => fromHex(f.validators.pubkey(i))),
    aggregatePubkey: fromHex(derivedPubkey('sync_committee_aggregate', Math.floor(epoch / EPOCHS_PER_SYNC_COMMITTEE_PERIOD))),
  };
}

/** The root of the validator registry, which the genesis state and `/beacon/genesis` name. */
export function genesisValidatorsRoot(f: ChainFacts): Uint8Array {
  return ssz.phase0.Validators.hashTreeRoot(Array.from({ length: f.validators.count }, (_, i) => f.validators.record(i)));
}

/**
 * Every field at its default. The large vectors (block and state roots, RANDAO mixes, slashings) are
 * shared all-zero subtrees whose roots are precomputed: built leaf by leaf, hashing them takes seconds.
 */
function blankState(): StateTree {
  const nodes = State.fieldsEntries.map(({ fieldType }) => {
    const zeroChunks =
      fieldType instanceof VectorBasicType || (fieldType instanceof VectorCompositeType && fieldType.elementType.fixedSize === 32);
    return zeroChunks ? zeroNode(fieldType.depth) : fieldType.value_toTree(fieldType.defaultValue() as never);
  });
  return State.getViewDU(subtreeFillToContents(nodes, State.depth));
}

function setGenesisFields(tree: StateTree, f: StateFacts): void {
  const records = Array.from({ length: f.validators.count }, (_, i) => f.validators.record(i));
  tree.genesisTime = f.genesisTime;
  tree.genesisValidatorsRoot = genesisValidatorsRoot(f);
  tree.fork = F.fork.toViewDU(CURRENT_FORK);
  tree.eth1Data = F.eth1Data.toViewDU(eth1Data(f));
  tree.eth1DepositIndex = f.validators.count;
  tree.validators = F.validators.toViewDU(records);
  tree.inactivityScores = F.inactivityScores.toViewDU(records.map(() => 0));
  tree.depositRequestsStartIndex = UNSET_DEPOSIT_REQUESTS_START_INDEX;
}

/** Balances, participation, justification and the RANDAO mixes of epochs (`fromEpoch`, `epoch`]; sync committees on a new period. */
function setEpochFields(tree: StateTree, f: StateFacts, fromEpoch: number, slot: number): void {
  const epoch = f.epochs.epochOf(slot);
  const indices = Array.from({ length: f.validators.count }, (_, i) => i);
  tree.balances = F.balances.toViewDU(indices.map((i) => f.validators.balance(i, epoch)));
  tree.previousEpochParticipation = F.previousEpochParticipation.toViewDU(indices.map(() => (epoch === 0 ? 0 : 7)));
  tree.currentEpochParticipation = F.currentEpochParticipation.toViewDU(indices.map(() => 7));
  const bits = BitArray.fromBitLen(JUSTIFICATION_BITS_LENGTH);
  if (epoch >= 1) bits.set(0, true);
  if (epoch >= 2) bits.set(1, true);
  tree.justificationBits = F.justificationBits.toViewDU(bits);
  const cp = checkpointsAt(f, slot);
  tree.previousJustifiedCheckpoint = F.previousJustifiedCheckpoint.toViewDU(cp.previousJustified);
  tree.currentJustifiedCheckpoint = F.currentJustifiedCheckpoint.toViewDU(cp.currentJustified);
  tree.finalizedCheckpoint = F.finalizedCheckpoint.toViewDU(cp.finalized);
  for (let e = Math.max(fromEpoch + 1, epoch - EPOCHS_PER_HISTORICAL_VECTOR + 1, 0); e <= epoch; e++)
    tree.randaoMixes.set(e % EPOCHS_PER_HISTORICAL_VECTOR, randaoMix(e));
  const period = (e: number): number => Math.floor(e / EPOCHS_PER_SYNC_COMMITTEE_PERIOD);
  if (fromEpoch < 0 || period(fromEpoch) !== period(epoch)) {
    tree.currentSyncCommittee = F.currentSyncCommittee.toViewDU(syncCommittee(f, epoch));
    tree.nextSyncCommittee = F.nextSyncCommittee.toViewDU(syncCommittee(f, epoch + EPOCHS_PER_SYNC_COMMITTEE_PERIOD));
  }
}

/**
 * The state after the block `head` over `payloadHeader`, from `base`, the state after slot `from`
 * (undefined with `from` −1: a blank tree gets the genesis fields). `base` is left untouched.
 * `f` must know the roots of every slot below `head.slot`.
 */
export function advanceState(
  base: StateTree | undefined,
  from: number,
  head: BlockHead,
  payloadHeader: electra.ExecutionPayloadHeader,
  f: StateFacts,
): StateTree {
  const to = head.slot;
  const tree = base ? base.clone() : blankState();
  if (!base) setGenesisFields(tree, f);
  // process_slot records each slot's roots as the next one starts.
  for (let s = Math.max(from, to - SLOTS_PER_HISTORICAL_ROOT, 0); s < to; s++) {
    tree.blockRoots.set(s % SLOTS_PER_HISTORICAL_ROOT, f.rootAt(s));
    tree.stateRoots.set(s % SLOTS_PER_HISTORICAL_ROOT, f.stateRootAt(s));
  }
  const fromEpoch = base ? f.epochs.epochOf(from) : -1;
  if (fromEpoch !== f.epochs.epochOf(to)) setEpochFields(tree, f, fromEpoch, to);
  tree.slot = to;
  tree.latestBlockHeader = F.latestBlockHeader.toViewDU({ ...head, stateRoot: ZERO });
  tree.latestExecutionPayloadHeader = F.latestExecutionPayloadHeader.toViewDU(payloadHeader);
  tree.commit();
  return tree;
}
