/**
 * The devnet's beacon chain over anvil's: each execution block, in order, is sealed into the beacon
 * block of its slot, whose body carries it as the execution payload and whose state and block roots
 * are Lodestar `hashTreeRoot`s of exactly what the node serves. So a block's parent_root is its
 * parent's real root, a state's block_roots are real, and a client can check any root it is given.
 *
 * The chain serves the newest `historySlots` slots and genesis, as a pruning node does: an older slot or
 * root is not found (404). What that needs is kept and no more, so memory stays bounded however long the
 * devnet runs: the canonical roots (a few hundred bytes a slot) from a few epochs below the oldest slot
 * served (its checkpoints read them), the state trees of recent slots, one state every CHECKPOINT_SLOTS
 * slots of the history and the genesis state; an older state is rebuilt from the nearest kept one below it.
 */
import { SLOTS_PER_HISTORICAL_ROOT } from '@lodestar/params';
import { ssz, type electra } from '@lodestar/types';
import { blockBody, executionPayload, executionPayloadHeader, type ChainFacts } from './beacon-data.js';
import { advanceState, type BlockHead, type StateFacts, type StateTree } from './beacon-state.js';
import { derivedSignature } from './deterministic.js';
import type { Epochs } from './epochs.js';
import type { ExecutionBlock } from './execution-client.js';
import { fromHex, toHex } from './hex.js';
import type { ValidatorSet } from './validator-set.js';

/** One slot of the devnet's beacon chain: its roots (0x hex, lowercase) and the execution block it carries. */
export interface SlotBlock {
  readonly slot: number;
  readonly root: string;
  readonly parentRoot: string;
  readonly stateRoot: string;
  readonly bodyRoot: string;
  /** Unix seconds. */
  readonly timestamp: number;
  readonly execution: ExecutionBlock;
}

export interface BeaconChain {
  /**
   * Seals `exec` as the block of its slot on top of `parent` (none for block 0, which starts the chain
   * over), making that branch canonical from `parent` on.
   */
  seal(exec: ExecutionBlock, parent: SlotBlock | undefined): Promise<SlotBlock>;
  /** `exec` as the canonical slot it was sealed as; undefined when it was not sealed or not on the canonical branch. */
  known(exec: ExecutionBlock): SlotBlock | undefined;
  /** Facts for builders that read the canonical chain up to its newest sealed slot. */
  readonly facts: ChainFacts;
  /** The served slot whose block root is `root`. */
  slotOfRoot(root: string): number | undefined;
  /** The served slot whose state root is `root`. */
  slotOfStateRoot(root: string): number | undefined;
  /** What the chain holds now: slots with roots, roots indexed, state trees (to show memory stays bounded). */
  held(): { roots: number; indexed: number; states: number };
  /** The signed block of `b` as it was sealed. */
  signedBlock(b: SlotBlock): Promise<electra.SignedBeaconBlock>;
  /** The state after `b`. */
  state(b: SlotBlock): Promise<StateTree>;
}

export interface BeaconChainOptions {
  epochs: Epochs;
  validators: ValidatorSet;
  /** Raw signed transactions for execution transaction hashes, in order. */
  rawTransactions(hashes: readonly string[]): Promise<string[]>;
  /** How many recent state trees are kept; older states are rebuilt. Default 64. */
  keepStates?: number;
  /**
   * The newest slots served (with genesis); older ones are not found. Default SLOTS_PER_HISTORICAL_ROOT (8192
   * with the mainnet preset): as far back as a state's own block_roots reach.
   */
  historySlots?: number;
}

/** A state tree is kept every this many slots of the history served, so a rebuild starts at most this far back. */
export const CHECKPOINT_SLOTS = 256;

interface Entry {
  execHash: string;
  root: string;
  stateRoot: string;
  bodyRoot: string;
}

export function createBeaconChain(opts: BeaconChainOptions): BeaconChain {
  const { epochs, validators } = opts;
  const keepStates = opts.keepStates ?? 64;
  const historySlots = opts.historySlots ?? SLOTS_PER_HISTORICAL_ROOT;
  if (!Number.isSafeInteger(historySlots) || historySlots < 1) throw new RangeError('historySlots must be a positive integer');
  /** Canonical entries by slot, from rootsFrom() to the tip, and slot 0. */
  const entries = new Map<number, Entry>();
  /** The newest sealed slot (-1 before genesis). */
  let tip = -1;
  const slotByRoot = new Map<string, number>();
  const slotByStateRoot = new Map<string, number>();
  /** Recent state trees by slot; a tree counts only while its slot's canonical state root is its own. */
  const states = new Map<number, { stateRoot: string; tree: StateTree }>();
  let genesisHash: Uint8Array = new Uint8Array(32);
  let genesisTime = 0;

  /**
   * Facts as seen from `tipSlot`: roots at or below it, later slots clamped to it. Below genesis every
   * root is zero, as the genesis state's checkpoints are.
   */
  function factsAt(tipSlot: number): StateFacts {
    const root = (slot: number, field: 'root' | 'stateRoot'): Uint8Array => {
      if (tipSlot < 0) return new Uint8Array(32);
      const e = entries.get(Math.max(0, Math.min(slot, tipSlot)));
      if (!e) throw new Error(`beacon chain: slot ${slot} is not sealed`);
      return fromHex(e[field]);
    };
    return {
      epochs,
      validators,
      genesisHash,
      genesisTime,
      rootAt: (slot) => root(slot, 'root'),
      stateRootAt: (slot) => root(slot, 'stateRoot'),
    };
  }

  const transactionsOf = async (exec: ExecutionBlock): Promise<string[]> =>
    exec.transactions.length === 0 ? [] : opts.rawTransactions(exec.transactions);

  function headOf(f: ChainFacts, slot: number, parentRoot: string, body: electra.BeaconBlockBody): BlockHead {
    return {
      slot,
      proposerIndex: f.validators.proposer(slot),
      parentRoot: fromHex(parentRoot),
      bodyRoot: ssz.electra.BeaconBlockBody.hashTreeRoot(body),
    };
  }

  function isCanonical(b: SlotBlock): boolean {
    return entries.get(b.slot)?.root === b.root;
  }

  /** The state after canonical slot `b`: a kept tree, or the nearest kept one before it brought forward. */
  async function stateOf(b: SlotBlock): Promise<StateTree> {
    const kept = states.get(b.slot);
    if (kept?.stateRoot === b.stateRoot) return kept.tree;
    let from = -1;
    let base: StateTree | undefined;
    for (const [slot, s] of states) {
      if (slot < b.slot && slot > from && entries.get(slot)?.stateRoot === s.stateRoot) {
        from = slot;
        base = s.tree;
      }
    }
    const payload = executionPayload(b.execution, await transactionsOf(b.execution));
    const f = factsAt(b.slot - 1);
    const head = headOf(f, b.slot, b.parentRoot, blockBody(f, b.slot, payload));
    const tree = advanceState(base, from, head, executionPayloadHeader(payload), f);
    const root = toHex(tree.hashTreeRoot());
    if (root !== b.stateRoot) throw new Error(`beacon chain: state of slot ${b.slot} rebuilt as ${root}, sealed as ${b.stateRoot}`);
    return tree;
  }

  /** The oldest slot served besides genesis. */
  const servedFrom = (): number => Math.max(1, tip - historySlots + 1);
  /** The first kept state a rebuild of the oldest slot served may start from. */
  const checkpointFrom = (): number => Math.floor(servedFrom() / CHECKPOINT_SLOTS) * CHECKPOINT_SLOTS;
  /** The oldest slot whose roots are kept: what a rebuild from checkpointFrom and the checkpoints of the oldest slot served read. */
  const rootsFrom = (): number => Math.max(1, Math.min(checkpointFrom(), servedFrom() - 3 * epochs.slotsPerEpoch));
  const served = (slot: number): boolean => slot === 0 || slot >= servedFrom();
  const servedOrNot = (slot: number | undefined): number | undefined => (slot !== undefined && served(slot) ? slot : undefined);

  function forget(slot: number): void {
    const e = entries.get(slot);
    if (e === undefined) return;
    entries.delete(slot);
    slotByRoot.delete(e.root);
    slotByStateRoot.delete(e.stateRoot);
  }

  /** Drops the slots from `length` on (a new branch is sealed from there). */
  function truncate(length: number): void {
    for (const slot of [...entries.keys()]) if (slot >= length) forget(slot);
    tip = Math.min(tip, length - 1);
  }

  /**
   * After sealing the tip: forgets the roots and state trees that no served slot needs any more. The slots
   * kept are genesis and one unbroken run up to the tip, so the oldest are dropped from rootsFrom down.
   */
  function prune(): void {
    for (let slot = rootsFrom() - 1; slot > 0 && entries.has(slot); slot--) forget(slot);
    const recent = tip - keepStates;
    for (const slot of states.keys()) {
      // The genesis state stays: every rebuild can start from it.
      const checkpoint = slot % CHECKPOINT_SLOTS === 0 && slot >= checkpointFrom();
      if (slot !== 0 && slot <= recent && !checkpoint) states.delete(slot);
    }
  }

  function slotBlock(e: Entry, slot: number, exec: ExecutionBlock): SlotBlock {
    return {
      slot,
      root: e.root,
      parentRoot: slot === 0 ? toHex(new Uint8Array(32)) : (entries.get(slot - 1)?.root ?? ''),
      stateRoot: e.stateRoot,
      bodyRoot: e.bodyRoot,
      timestamp: Number(exec.timestamp),
      execution: exec,
    };
  }

  return {
    async seal(exec, parent) {
      const slot = Number(exec.number);
      if (parent === undefined ? slot !== 0 : slot !== parent.slot + 1 || !isCanonical(parent)) {
        throw new Error(`beacon chain: cannot seal block ${slot} on ${parent ? `canonical slot ${parent.slot}` : 'nothing'}`);
      }
      const transactions = await transactionsOf(exec);
      const base = parent ? await stateOf(parent) : undefined;
      // Everything below is synchronous, so readers never see the index half moved to the new branch.
      if (parent === undefined) {
        genesisHash = fromHex(exec.hash);
        genesisTime = Number(exec.timestamp);
      }
      const f = factsAt(slot - 1);
      const parentRoot = parent?.root ?? toHex(new Uint8Array(32));
      const payload = executionPayload(exec, transactions);
      const body = blockBody(f, slot, payload);
      const head = headOf(f, slot, parentRoot, body);
      const tree = advanceState(base, parent?.slot ?? -1, head, executionPayloadHeader(payload), f);
      const stateRoot = tree.hashTreeRoot();
      const root = ssz.electra.BeaconBlock.hashTreeRoot({
        slot,
        proposerIndex: head.proposerIndex,
        parentRoot: head.parentRoot,
        stateRoot,
        body,
      });
      if (parent === undefined) states.clear();
      truncate(slot);
      const entry: Entry = {
        execHash: exec.hash.toLowerCase(),
        root: toHex(root),
        stateRoot: toHex(stateRoot),
        bodyRoot: toHex(head.bodyRoot),
      };
      entries.set(slot, entry);
      tip = slot;
      slotByRoot.set(entry.root, slot);
      slotByStateRoot.set(entry.stateRoot, slot);
      states.set(slot, { stateRoot: entry.stateRoot, tree });
      prune();
      return slotBlock(entry, slot, exec);
    },
    known(exec) {
      const slot = Number(exec.number);
      const e = served(slot) ? entries.get(slot) : undefined;
      return e?.execHash === exec.hash.toLowerCase() ? slotBlock(e, slot, exec) : undefined;
    },
    get facts() {
      return factsAt(tip);
    },
    slotOfRoot: (root) => servedOrNot(slotByRoot.get(root.toLowerCase())),
    slotOfStateRoot: (root) => servedOrNot(slotByStateRoot.get(root.toLowerCase())),
    held: () => ({ roots: entries.size, indexed: slotByRoot.size + slotByStateRoot.size, states: states.size }),
    async signedBlock(b) {
      const f = factsAt(b.slot - 1);
      const body = blockBody(f, b.slot, executionPayload(b.execution, await transactionsOf(b.execution)));
      const message = {
        slot: b.slot,
        proposerIndex: validators.proposer(b.slot),
        parentRoot: fromHex(b.parentRoot),
        stateRoot: fromHex(b.stateRoot),
        body,
      };
      return { message, signature: fromHex(derivedSignature('block', b.root)) };
    },
    state: stateOf,
  };
}
