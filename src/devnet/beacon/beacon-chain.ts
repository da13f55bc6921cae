/**
 * The devnet's beacon chain over anvil's: each execution block, in order, is sealed into the beacon
 * block of its slot, whose body carries it as the execution payload and whose state and block roots
 * are Lodestar `hashTreeRoot`s of exactly what the node serves. So a block's parent_root is its
 * parent's real root, a state's block_roots are real, and a client can check any root it is given.
 *
 * The canonical roots of every sealed slot are kept (a few hundred bytes a slot), so ids of any age
 * resolve; state trees are kept for recent slots, and an older state is rebuilt from the nearest
 * kept one (the genesis state at worst).
 */
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
  slotOfRoot(root: string): number | undefined;
  slotOfStateRoot(root: string): number | undefined;
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
}

interface Entry {
  execHash: string;
  root: string;
  stateRoot: string;
  bodyRoot: string;
}

export function createBeaconChain(opts: BeaconChainOptions): BeaconChain {
  const { epochs, validators } = opts;
  const keepStates = opts.keepStates ?? 64;
  /** Canonical entries by slot, from 0 to the tip. */
  const entries: Entry[] = [];
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
      const e = entries[Math.max(0, Math.min(slot, tipSlot))];
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
    return entries[b.slot]?.root === b.root;
  }

  /** The state after canonical slot `b`: a kept tree, or the nearest kept one before it brought forward. */
  async function stateOf(b: SlotBlock): Promise<StateTree> {
    const kept = states.get(b.slot);
    if (kept?.stateRoot === b.stateRoot) return kept.tree;
    let from = -1;
    let base: StateTree | undefined;
    for (const [slot, s] of states) {
      if (slot < b.slot && slot > from && entries[slot]?.stateRoot === s.stateRoot) {
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

  function truncate(length: number): void {
    for (const e of entries.slice(length)) {
      slotByRoot.delete(e.root);
      slotByStateRoot.delete(e.stateRoot);
    }
    if (entries.length > length) entries.length = length;
  }

  function slotBlock(e: Entry, slot: number, exec: ExecutionBlock): SlotBlock {
    return {
      slot,
      root: e.root,
      parentRoot: slot === 0 ? toHex(new Uint8Array(32)) : (entries[slot - 1]?.root ?? ''),
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
      entries.push(entry);
      slotByRoot.set(entry.root, slot);
      slotByStateRoot.set(entry.stateRoot, slot);
      states.set(slot, { stateRoot: entry.stateRoot, tree });
      // The genesis state stays: every rebuild can start from it.
      if (slot - keepStates > 0) states.delete(slot - keepStates);
      return slotBlock(entry, slot, exec);
    },
    known(exec) {
      const slot = Number(exec.number);
      const e = entries[slot];
      return e?.execHash === exec.hash.toLowerCase() ? slotBlock(e, slot, exec) : undefined;
    },
    get facts() {
      return factsAt(entries.length - 1);
    },
    slotOfRoot: (root) => slotByRoot.get(root.toLowerCase()),
    slotOfStateRoot: (root) => slotByStateRoot.get(root.toLowerCase()),
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
