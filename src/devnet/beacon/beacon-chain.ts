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

const ZERO_ROOT = (): string => toHex(new Uint8Array(32));

/** The sealed chain's state: the canonical entries and their indexes, the kept state trees, genesis. */
class SealedChain implements BeaconChain {
  readonly opts: BeaconChainOptions;
  readonly epochs: Epochs;
  readonly validators: ValidatorSet;
  readonly keepStates: number;
  readonly historySlots: number;
  /** Canonical entries by slot, from rootsFrom() to the tip, and slot 0. */
  readonly entries = new Map<number, Entry>();
  /** The newest sealed slot (-1 before genesis). */
  tip = -1;
  readonly slotByRoot = new Map<string, number>();
  readonly slotByStateRoot = new Map<string, number>();
  /** Recent state trees by slot; a tree counts only while its slot's canonical state root is its own. */
  readonly states = new Map<number, { stateRoot: string; tree: StateTree }>();
  genesisHash: Uint8Array = new Uint8Array(32);
  genesisTime = 0;

  constructor(opts: BeaconChainOptions, historySlots: number) {
    this.opts = opts;
    this.epochs = opts.epochs;
    this.validators = opts.validators;
    this.keepStates = opts.keepStates ?? 64;
    this.historySlots = historySlots;
  }

  async seal(exec: ExecutionBlock, parent: SlotBlock | undefined): Promise<SlotBlock> {
    const slot = Number(exec.number);
    if (parent === undefined ? slot !== 0 : slot !== parent.slot + 1 || !isCanonical(this, parent)) {
      throw new Error(`beacon chain: cannot seal block ${slot} on ${parent ? `canonical slot ${parent.slot}` : 'nothing'}`);
    }
    const transactions = await transactionsOf(this, exec);
    const base = parent ? await this.state(parent) : undefined;
    // Everything below is synchronous, so readers never see the index half moved to the new branch.
    if (parent === undefined) {
      this.genesisHash = fromHex(exec.hash);
      this.genesisTime = Number(exec.timestamp);
    }
    const f = factsAt(this, slot - 1);
    const parentRoot = parent?.root ?? ZERO_ROOT();
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
    if (parent === undefined) this.states.clear();
    truncate(this, slot);
    const entry: Entry = {
      execHash: exec.hash.toLowerCase(),
      root: toHex(root),
      stateRoot: toHex(stateRoot),
      bodyRoot: toHex(head.bodyRoot),
    };
    this.entries.set(slot, entry);
    this.tip = slot;
    this.slotByRoot.set(entry.root, slot);
    this.slotByStateRoot.set(entry.stateRoot, slot);
    this.states.set(slot, { stateRoot: entry.stateRoot, tree });
    prune(this);
    return slotBlock(this, entry, slot, exec);
  }

  known(exec: ExecutionBlock): SlotBlock | undefined {
    const slot = Number(exec.number);
    const e = served(this, slot) ? this.entries.get(slot) : undefined;
    return e?.execHash === exec.hash.toLowerCase() ? slotBlock(this, e, slot, exec) : undefined;
  }

  get facts(): ChainFacts {
    return factsAt(this, this.tip);
  }

  slotOfRoot(root: string): number | undefined {
    return servedOrNot(this, this.slotByRoot.get(root.toLowerCase()));
  }

  slotOfStateRoot(root: string): number | undefined {
    return servedOrNot(this, this.slotByStateRoot.get(root.toLowerCase()));
  }

  held(): { roots: number; indexed: number; states: number } {
    return { roots: this.entries.size, indexed: this.slotByRoot.size + this.slotByStateRoot.size, states: this.states.size };
  }

  async signedBlock(b: SlotBlock): Promise<electra.SignedBeaconBlock> {
    const f = factsAt(this, b.slot - 1);
    const body = blockBody(f, b.slot, executionPayload(b.execution, await transactionsOf(this, b.execution)));
    const message = {
      slot: b.slot,
      proposerIndex: this.validators.proposer(b.slot),
      parentRoot: fromHex(b.parentRoot),
      stateRoot: fromHex(b.stateRoot),
      body,
    };
    return { message, signature: fromHex(derivedSignature('block', b.root)) };
  }

  /** The state after canonical slot `b`: a kept tree, or the nearest kept one before it brought forward. */
  async state(b: SlotBlock): Promise<StateTree> {
    const kept = this.states.get(b.slot);
    if (kept?.stateRoot === b.stateRoot) return kept.tree;
    let from = -1;
    let base: StateTree | undefined;
    for (const [slot, s] of this.states) {
      if (slot < b.slot && slot > from && this.entries.get(slot)?.stateRoot === s.stateRoot) {
        from = slot;
        base = s.tree;
      }
    }
    const payload = executionPayload(b.execution, await transactionsOf(this, b.execution));
    const f = factsAt(this, b.slot - 1);
    const head = headOf(f, b.slot, b.parentRoot, blockBody(f, b.slot, payload));
    const tree = advanceState(base, from, head, executionPayloadHeader(payload), f);
    const root = toHex(tree.hashTreeRoot());
    if (root !== b.stateRoot) throw new Error(`beacon chain: state of slot ${b.slot} rebuilt as ${root}, sealed as ${b.stateRoot}`);
    return tree;
  }
}

/**
 * Facts as seen from `tipSlot`: roots at or below it, later slots clamped to it. Below genesis every
 * root is zero, as the genesis state's checkpoints are.
 */
function factsAt(c: SealedChain, tipSlot: number): StateFacts {
  const root = (slot: number, field: 'root' | 'stateRoot'): Uint8Array => {
    if (tipSlot < 0) return new Uint8Array(32);
    const e = c.entries.get(Math.max(0, Math.min(slot, tipSlot)));
    if (!e) throw new Error(`beacon chain: slot ${slot} is not sealed`);
    return fromHex(e[field]);
  };
  return {
    epochs: c.epochs,
    validators: c.validators,
    genesisHash: c.genesisHash,
    genesisTime: c.genesisTime,
    rootAt: (slot) => root(slot, 'root'),
    stateRootAt: (slot) => root(slot, 'stateRoot'),
  };
}

const transactionsOf = async (c: SealedChain, exec: ExecutionBlock): Promise<string[]> =>
  exec.transactions.length === 0 ? [] : c.opts.rawTransactions(exec.transactions);

function headOf(f: ChainFacts, slot: number, parentRoot: string, body: electra.BeaconBlockBody): BlockHead {
  return {
    slot,
    proposerIndex: f.validators.proposer(slot),
    parentRoot: fromHex(parentRoot),
    bodyRoot: ssz.electra.BeaconBlockBody.hashTreeRoot(body),
  };
}

function isCanonical(c: SealedChain, b: SlotBlock): boolean {
  return c.entries.get(b.slot)?.root === b.root;
}

/** The oldest slot served besides genesis. */
const servedFrom = (c: SealedChain): number => Math.max(1, c.tip - c.historySlots + 1);
/** The first kept state a rebuild of the oldest slot served may start from. */
const checkpointFrom = (c: SealedChain): number => Math.floor(servedFrom(c) / CHECKPOINT_SLOTS) * CHECKPOINT_SLOTS;
/** The oldest slot whose roots are kept: what a rebuild from checkpointFrom and the checkpoints of the oldest slot served read. */
const rootsFrom = (c: SealedChain): number => Math.max(1, Math.min(checkpointFrom(c), servedFrom(c) - 3 * c.epochs.slotsPerEpoch));
const served = (c: SealedChain, slot: number): boolean => slot === 0 || slot >= servedFrom(c);
const servedOrNot = (c: SealedChain, slot: number | undefined): number | undefined =>
  slot !== undefined && served(c, slot) ? slot : undefined;

function forget(c: SealedChain, slot: number): void {
  const e = c.entries.get(slot);
  if (e === undefined) return;
  c.entries.delete(slot);
  c.slotByRoot.delete(e.root);
  c.slotByStateRoot.delete(e.stateRoot);
}

/** Drops the slots from `length` on (a new branch is sealed from there). */
function truncate(c: SealedChain, length: number): void {
  for (const slot of [...c.entries.keys()]) if (slot >= length) forget(c, slot);
  c.tip = Math.min(c.tip, length - 1);
}

/**
 * After sealing the tip: forgets the roots and state trees that no served slot needs any more. The slots
 * kept are genesis and one unbroken run up to the tip, so the oldest are dropped from rootsFrom down.
 */
function prune(c: SealedChain): void {
  for (let slot = rootsFrom(c) - 1; slot > 0 && c.entries.has(slot); slot--) forget(c, slot);
  const recent = c.tip - c.keepStates;
  for (const slot of c.states.keys()) {
    // The genesis state stays: every rebuild can start from it.
    const checkpoint = slot % CHECKPOINT_SLOTS === 0 && slot >= checkpointFrom(c);
    if (slot !== 0 && slot <= recent && !checkpoint) c.states.delete(slot);
  }
}

function slotBlock(c: SealedChain, e: Entry, slot: number, exec: ExecutionBlock): SlotBlock {
  return {
    slot,
    root: e.root,
    parentRoot: slot === 0 ? ZERO_ROOT() : (c.entries.get(slot - 1)?.root ?? ''),
    stateRoot: e.stateRoot,
    bodyRoot: e.bodyRoot,
    timestamp: Number(exec.timestamp),
    execution: exec,
  };
}

export function createBeaconChain(opts: BeaconChainOptions): BeaconChain {
  const historySlots = opts.historySlots ?? SLOTS_PER_HISTORICAL_ROOT;
  if (!Number.isSafeInteger(historySlots) || historySlots < 1) throw new RangeError('historySlots must be a positive integer');
  return new SealedChain(opts, historySlots);
}
