/**
 * Follows anvil's chain: slot n is block n, sealed into the beacon chain (`beacon-chain.ts`) in order,
 * so every slot has real beacon roots. Recent slots are kept in memory (a bounded window); older ones
 * are read from anvil when asked and matched to their sealed roots. The view polls anvil for its
 * latest block, seals what is new, and notices when anvil's chain no longer contains the cached head
 * (evm_revert, anvil_reset) and rebases on it, sealing the new branch.
 */
import type { BeaconChain, SlotBlock } from './beacon-chain.js';
import type { ExecutionBlock, ExecutionClient } from './execution-client.js';

export type { SlotBlock };

/** What a poll found, in chain order: a new canonical block, or a head that left the cached chain. */
export type ChainChange =
  | { readonly kind: 'block'; readonly block: SlotBlock }
  | { readonly kind: 'reorg'; readonly oldHead: SlotBlock; readonly newHead: SlotBlock; readonly depth: number };

export interface ChainView {
  genesis(): SlotBlock;
  head(): SlotBlock;
  /** False after a poll of anvil failed, until one succeeds. */
  executionOnline(): boolean;
  /** A cached slot, without asking anvil. */
  cached(slot: number): SlotBlock | undefined;
  /** The canonical block at `slot`, from the cache or anvil; undefined above the head. */
  blockAt(slot: number): Promise<SlotBlock | undefined>;
  /** Canonical blocks `from`..`to` (clamped to the head), in order. */
  blocksBetween(from: number, to: number): Promise<SlotBlock[]>;
  /** The canonical block whose beacon block root is `root`. */
  blockByRoot(root: string): Promise<SlotBlock | undefined>;
  /** The canonical slot whose beacon state root is `root`. */
  slotOfStateRoot(root: string): number | undefined;
  /** Median seconds between recent blocks, at least 1: the chain's own slot length. */
  secondsPerSlot(): number;
  /** Listeners run synchronously, in chain order, as each poll applies its changes. */
  onChange(listener: (change: ChainChange) => void): () => void;
  stop(): void;
}

export interface ChainViewOptions {
  client: ExecutionClient;
  chain: BeaconChain;
  pollMs: number;
  /** Slots kept in memory. */
  window: number;
}

/** Blocks read from anvil per request while catching up. */
const CHUNK = 256;

/** Whether `blocks` follow each other (and `after`, when given) by number and parent hash. */
function linked(blocks: readonly ExecutionBlock[], after: ExecutionBlock | undefined): boolean {
  return blocks.every((b, i) => {
    const prev = i === 0 ? after : blocks[i - 1];
    return prev === undefined || (b.parentHash.toLowerCase() === prev.hash.toLowerCase() && Number(b.number) === Number(prev.number) + 1);
  });
}

/** The view's state: the cached window of slots, the head, and the poll's timer and listeners. */
class ChainFollower implements ChainView {
  readonly opts: ChainViewOptions;
  readonly client: ExecutionClient;
  readonly chain: BeaconChain;
  /** Recent canonical slots, at most `window` of them. */
  readonly bySlot: Map<number, SlotBlock>;
  readonly listeners = new Set<(change: ChainChange) => void>();
  online = true;
  stopped = false;
  timer: NodeJS.Timeout | undefined = undefined;
  genesisBlock: SlotBlock;
  headBlock: SlotBlock;

  constructor(opts: ChainViewOptions, genesis: SlotBlock, bySlot: Map<number, SlotBlock>) {
    this.opts = opts;
    this.client = opts.client;
    this.chain = opts.chain;
    this.bySlot = bySlot;
    this.genesisBlock = genesis;
    this.headBlock = genesis;
  }

  genesis(): SlotBlock {
    return this.genesisBlock;
  }

  head(): SlotBlock {
    return this.headBlock;
  }

  executionOnline(): boolean {
    return this.online;
  }

  cached(slot: number): SlotBlock | undefined {
    return this.bySlot.get(slot);
  }

  async blockAt(slot: number): Promise<SlotBlock | undefined> {
    if (slot > this.headBlock.slot || slot < 0) return undefined;
    return this.bySlot.get(slot) ?? known(this, await this.client.block(slot));
  }

  async blocksBetween(from: number, to: number): Promise<SlotBlock[]> {
    const { bySlot } = this;
    const end = Math.min(to, this.headBlock.slot);
    const out: SlotBlock[] = [];
    for (let s = Math.max(0, from); s <= end; s++) {
      const hit = bySlot.get(s);
      if (hit) {
        out.push(hit);
        continue;
      }
      let last = s;
      while (last < end && !bySlot.has(last + 1)) last++;
      for (const e of await fetchRange(this, s, last)) {
        const b = known(this, e);
        if (b) out.push(b);
      }
      s = last;
    }
    return out;
  }

  async blockByRoot(root: string): Promise<SlotBlock | undefined> {
    const slot = this.chain.slotOfRoot(root);
    return slot === undefined ? undefined : this.blockAt(slot);
  }

  slotOfStateRoot(root: string): number | undefined {
    const slot = this.chain.slotOfStateRoot(root);
    return slot !== undefined && slot <= this.headBlock.slot ? slot : undefined;
  }

  secondsPerSlot(): number {
    const gaps: number[] = [];
    for (let s = this.headBlock.slot; s > 0 && gaps.length < 32; s--) {
      const b = this.bySlot.get(s);
      const parent = this.bySlot.get(s - 1);
      if (!b || !parent) break;
      gaps.push(b.timestamp - parent.timestamp);
    }
    gaps.sort((a, b) => a - b);
    return Math.max(1, gaps[Math.floor(gaps.length / 2)] ?? 1);
  }

  onChange(listener: (change: ChainChange) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
  }
}

const fetchRange = async (v: ChainFollower, from: number, to: number): Promise<ExecutionBlock[]> =>
  from > to ? [] : v.client.blocks(from, to);

const known = (v: ChainFollower, e: ExecutionBlock | undefined): SlotBlock | undefined => (e ? v.chain.known(e) : undefined);

function remember(bySlot: Map<number, SlotBlock>, window: number, b: SlotBlock): void {
  bySlot.set(b.slot, b);
  bySlot.delete(b.slot - window);
}

function forgetAbove(bySlot: Map<number, SlotBlock>, slot: number): void {
  for (const s of [...bySlot.keys()]) if (s > slot) bySlot.delete(s);
}

function emit(v: ChainFollower, change: ChainChange): void {
  for (const l of v.listeners) l(change);
}

/** Seals anvil's genesis block, the cache emptied: the chain starts over from it. */
async function startOver(client: ExecutionClient, chain: BeaconChain, bySlot: Map<number, SlotBlock>, window: number): Promise<SlotBlock> {
  const first = await client.block(0);
  if (!first) throw new Error('execution node has no genesis block');
  forgetAbove(bySlot, -1);
  const g = await chain.seal(first, undefined);
  remember(bySlot, window, g);
  return g;
}

/**
 * Seals anvil's blocks after the head up to `latest`, a chunk at a time, and returns them; `linked`
 * is false when a chunk does not follow the head (anvil moved while we read).
 */
async function catchUp(v: ChainFollower, latest: ExecutionBlock): Promise<{ linked: boolean; sealed: SlotBlock[] }> {
  const sealed: SlotBlock[] = [];
  const last = Number(latest.number);
  for (let from = v.headBlock.slot + 1; from <= last && !v.stopped; from += CHUNK) {
    const to = Math.min(last, from + CHUNK - 1);
    const chunk = to === last ? [...(await fetchRange(v, from, to - 1)), latest] : await fetchRange(v, from, to);
    if (chunk.length !== to - from + 1 || !linked(chunk, v.headBlock.execution)) return { linked: false, sealed };
    for (const e of chunk) {
      v.headBlock = await v.chain.seal(e, v.headBlock);
      remember(v.bySlot, v.opts.window, v.headBlock);
      sealed.push(v.headBlock);
    }
  }
  return { linked: true, sealed };
}

/** Anvil's chain no longer holds our head: find the newest slot both agree on and seal on from there. */
async function rebase(v: ChainFollower, latest: ExecutionBlock): Promise<void> {
  const oldHead = v.headBlock;
  const theirs = await fetchRange(v, Math.min(...v.bySlot.keys()), Math.min(Number(latest.number), oldHead.slot));
  let ancestor: SlotBlock | undefined;
  for (const e of theirs) {
    const mine = v.bySlot.get(Number(e.number));
    if (mine?.execution.hash.toLowerCase() === e.hash.toLowerCase()) ancestor = mine;
  }
  if (ancestor) {
    forgetAbove(v.bySlot, ancestor.slot);
    v.headBlock = ancestor;
  } else {
    // Nothing in common within the window (anvil_reset, or a reorg deeper than the window): seal anvil's chain over.
    v.genesisBlock = v.headBlock = await startOver(v.client, v.chain, v.bySlot, v.opts.window);
  }
  const { linked: whole, sealed } = await catchUp(v, latest);
  // Anvil moved again while we read: the next poll goes on from `head`.
  if (!whole) return;
  emit(v, { kind: 'reorg', oldHead, newHead: v.headBlock, depth: oldHead.slot - (ancestor?.slot ?? -1) });
  for (const b of sealed) emit(v, { kind: 'block', block: b });
}

async function pollOnce(v: ChainFollower): Promise<void> {
  const latest = await v.client.block('latest');
  if (!latest) throw new Error('execution node has no latest block');
  if (latest.hash.toLowerCase() === v.headBlock.execution.hash.toLowerCase()) return;
  if (Number(latest.number) > v.headBlock.slot) {
    const { linked: whole, sealed } = await catchUp(v, latest);
    for (const b of sealed) emit(v, { kind: 'block', block: b });
    if (whole) return;
  }
  await rebase(v, latest);
}

function schedule(v: ChainFollower): void {
  if (v.stopped) return;
  v.timer = setTimeout(() => {
    pollOnce(v)
      .then(
        () => (v.online = true),
        () => (v.online = false),
      )
      .finally(() => schedule(v));
  }, v.opts.pollMs);
}

export async function followChain(opts: ChainViewOptions): Promise<ChainView> {
  const bySlot = new Map<number, SlotBlock>();
  const view = new ChainFollower(opts, await startOver(opts.client, opts.chain, bySlot, opts.window), bySlot);
  const latestAtStart = await opts.client.block('latest');
  if (!latestAtStart) throw new Error('execution node has no latest block');
  await catchUp(view, latestAtStart);
  schedule(view);
  return view;
}
