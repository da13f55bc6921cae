/**
 * Follows anvil's chain: slot n is block n, the block root is the block hash and the state root the
 * block's stateRoot. Recent slots are kept in memory (a bounded window); older ones are read from
 * anvil when asked. The view polls anvil for its latest block, appends what is new, and notices when
 * anvil's chain no longer contains the cached head (evm_revert, anvil_reset) and rebases on it.
 */
import type { ExecutionBlock, ExecutionClient } from './execution-client.js';

/** One slot of the devnet's beacon chain, backed by the execution block of the same number. */
export interface SlotBlock {
  readonly slot: number;
  readonly root: string;
  readonly parentRoot: string;
  readonly stateRoot: string;
  /** Unix seconds. */
  readonly timestamp: number;
  readonly execution: ExecutionBlock;
}

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
  blockByRoot(root: string): Promise<SlotBlock | undefined>;
  /** The newest cached slot whose state root is `root` (anvil repeats a state root across empty blocks). */
  slotOfStateRoot(root: string): number | undefined;
  /** Median seconds between recent blocks, at least 1: the chain's own slot length. */
  secondsPerSlot(): number;
  /** Listeners run synchronously, in chain order, as each poll applies its changes. */
  onChange(listener: (change: ChainChange) => void): () => void;
  stop(): void;
}

export interface ChainViewOptions {
  client: ExecutionClient;
  pollMs: number;
  /** Slots kept in memory. */
  window: number;
  /** Slots read into the cache at start, so checkpoints and dependent roots are at hand. */
  backfill: number;
}

export function toSlotBlock(b: ExecutionBlock): SlotBlock {
  return {
    slot: Number(b.number),
    root: b.hash.toLowerCase(),
    parentRoot: b.parentHash.toLowerCase(),
    stateRoot: b.stateRoot.toLowerCase(),
    timestamp: Number(b.timestamp),
    execution: b,
  };
}

function linked(blocks: SlotBlock[], after: SlotBlock | undefined): boolean {
  return blocks.every((b, i) => {
    const prev = i === 0 ? after : blocks[i - 1];
    return prev === undefined || (b.parentRoot === prev.root && b.slot === prev.slot + 1);
  });
}

export async function followChain(opts: ChainViewOptions): Promise<ChainView> {
  const { client } = opts;
  const bySlot = new Map<number, SlotBlock>();
  const byRoot = new Map<string, number>();
  const byStateRoot = new Map<string, number>();
  const listeners = new Set<(change: ChainChange) => void>();
  let online = true;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;

  const fetchRange = async (from: number, to: number): Promise<SlotBlock[]> =>
    from > to ? [] : (await client.blocks(from, to)).map(toSlotBlock);

  const first = await client.block(0);
  const latest = await client.block('latest');
  if (!first || !latest) throw new Error('execution node has no genesis or latest block');
  let genesis = toSlotBlock(first);
  let head = toSlotBlock(latest);

  function remember(b: SlotBlock): void {
    bySlot.set(b.slot, b);
    byRoot.set(b.root, b.slot);
    byStateRoot.set(b.stateRoot, b.slot);
    const oldest = b.slot - opts.window;
    const evicted = bySlot.get(oldest);
    if (evicted) {
      bySlot.delete(oldest);
      byRoot.delete(evicted.root);
      if (byStateRoot.get(evicted.stateRoot) === oldest) byStateRoot.delete(evicted.stateRoot);
    }
  }

  /** Drops cached slots above `slot` and rebuilds the indexes from what is left. */
  function forgetAbove(slot: number): void {
    for (const s of [...bySlot.keys()]) if (s > slot) bySlot.delete(s);
    byRoot.clear();
    byStateRoot.clear();
    for (const s of [...bySlot.keys()].sort((a, b) => a - b)) {
      const b = bySlot.get(s);
      if (b) {
        byRoot.set(b.root, s);
        byStateRoot.set(b.stateRoot, s);
      }
    }
  }

  const emit = (change: ChainChange): void => {
    for (const l of listeners) l(change);
  };

  function appendAndEmit(blocks: SlotBlock[]): void {
    for (const b of blocks) {
      remember(b);
      head = b;
      emit({ kind: 'block', block: b });
    }
  }

  for (const b of await fetchRange(Math.max(0, head.slot - opts.backfill), head.slot - 1)) remember(b);
  remember(head);

  /** Anvil's chain no longer holds our head: find the newest slot both agree on and continue from there. */
  async function rebase(latestBlock: SlotBlock): Promise<void> {
    const oldHead = head;
    const low = Math.min(...bySlot.keys());
    const theirs = await fetchRange(low, Math.min(latestBlock.slot, oldHead.slot));
    let ancestor = -1;
    for (const b of theirs) if (bySlot.get(b.slot)?.root === b.root) ancestor = b.slot;
    let fresh: SlotBlock[];
    let base: SlotBlock | undefined;
    if (ancestor >= 0 && latestBlock.slot - ancestor <= opts.window) {
      forgetAbove(ancestor);
      base = bySlot.get(ancestor);
      fresh = ancestor === latestBlock.slot ? [] : [...(await fetchRange(ancestor + 1, latestBlock.slot - 1)), latestBlock];
    } else {
      // Nothing in common within the window (anvil_reset), or too far to fill: start the cache over.
      forgetAbove(-1);
      const g = ancestor < 0 ? await client.block(0) : undefined;
      if (g) genesis = toSlotBlock(g);
      fresh = [...(await fetchRange(Math.max(0, latestBlock.slot - opts.window + 1), latestBlock.slot - 1)), latestBlock];
    }
    head = base ?? genesis;
    // Anvil moved again while we read: the next poll starts from `head`.
    if (!linked(fresh, base)) return;
    emit({ kind: 'reorg', oldHead, newHead: fresh[fresh.length - 1] ?? head, depth: oldHead.slot - ancestor });
    appendAndEmit(fresh);
  }

  async function pollOnce(): Promise<void> {
    const raw = await client.block('latest');
    if (!raw) throw new Error('execution node has no latest block');
    const latestBlock = toSlotBlock(raw);
    if (latestBlock.root === head.root) return;
    if (latestBlock.slot > head.slot) {
      const from = Math.max(head.slot + 1, latestBlock.slot - opts.window + 1);
      const fresh = [...(await fetchRange(from, latestBlock.slot - 1)), latestBlock];
      if (from > head.slot + 1 && linked(fresh, undefined)) {
        // Further ahead than the window holds: keep only the newest slots.
        forgetAbove(-1);
        appendAndEmit(fresh);
        return;
      }
      if (linked(fresh, head)) {
        appendAndEmit(fresh);
        return;
      }
    }
    await rebase(latestBlock);
  }

  const schedule = (): void => {
    if (stopped) return;
    timer = setTimeout(() => {
      pollOnce()
        .then(
          () => (online = true),
          () => (online = false),
        )
        .finally(schedule);
    }, opts.pollMs);
  };
  schedule();

  return {
    genesis: () => genesis,
    head: () => head,
    executionOnline: () => online,
    cached: (slot) => bySlot.get(slot),
    async blockAt(slot) {
      if (slot > head.slot || slot < 0) return undefined;
      const hit = bySlot.get(slot);
      if (hit) return hit;
      const b = await client.block(slot);
      return b ? toSlotBlock(b) : undefined;
    },
    async blocksBetween(from, to) {
      const end = Math.min(to, head.slot);
      const out: SlotBlock[] = [];
      for (let s = Math.max(0, from); s <= end; s++) {
        const hit = bySlot.get(s);
        if (hit) {
          out.push(hit);
          continue;
        }
        let last = s;
        while (last < end && !bySlot.has(last + 1)) last++;
        out.push(...(await fetchRange(s, last)));
        s = last;
      }
      return out;
    },
    async blockByRoot(root) {
      const key = root.toLowerCase();
      const slot = byRoot.get(key);
      if (slot !== undefined) return bySlot.get(slot);
      const b = await client.blockByHash(key);
      if (!b) return undefined;
      const found = toSlotBlock(b);
      return found.slot <= head.slot ? found : undefined;
    },
    slotOfStateRoot: (root) => byStateRoot.get(root.toLowerCase()),
    secondsPerSlot() {
      const gaps: number[] = [];
      for (let s = head.slot; s > 0 && gaps.length < 32; s--) {
        const b = bySlot.get(s);
        const parent = bySlot.get(s - 1);
        if (!b || !parent) break;
        gaps.push(b.timestamp - parent.timestamp);
      }
      gaps.sort((a, b) => a - b);
      return Math.max(1, gaps[Math.floor(gaps.length / 2)] ?? 1);
    },
    onChange(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
    },
  };
}
