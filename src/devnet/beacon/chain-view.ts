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

export async function followChain(opts: ChainViewOptions): Promise<ChainView> {
  const { client, chain } = opts;
  const bySlot = new Map<number, SlotBlock>();
  const listeners = new Set<(change: ChainChange) => void>();
  let online = true;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;

  const fetchRange = async (from: number, to: number): Promise<ExecutionBlock[]> => (from > to ? [] : client.blocks(from, to));

  function remember(b: SlotBlock): void {
    bySlot.set(b.slot, b);
    bySlot.delete(b.slot - opts.window);
  }

  function forgetAbove(slot: number): void {
    for (const s of [...bySlot.keys()]) if (s > slot) bySlot.delete(s);
  }

  const emit = (change: ChainChange): void => {
    for (const l of listeners) l(change);
  };

  async function startOver(): Promise<SlotBlock> {
    const first = await client.block(0);
    if (!first) throw new Error('execution node has no genesis block');
    forgetAbove(-1);
    const g = await chain.seal(first, undefined);
    remember(g);
    return g;
  }

  let genesis = await startOver();
  let head = genesis;

  /**
   * Seals anvil's blocks after the head up to `latest`, a chunk at a time, and returns them; `linked`
   * is false when a chunk does not follow the head (anvil moved while we read).
   */
  async function catchUp(latest: ExecutionBlock): Promise<{ linked: boolean; sealed: SlotBlock[] }> {
    const sealed: SlotBlock[] = [];
    const last = Number(latest.number);
    for (let from = head.slot + 1; from <= last && !stopped; from += CHUNK) {
      const to = Math.min(last, from + CHUNK - 1);
      const chunk = to === last ? [...(await fetchRange(from, to - 1)), latest] : await fetchRange(from, to);
      if (chunk.length !== to - from + 1 || !linked(chunk, head.execution)) return { linked: false, sealed };
      for (const e of chunk) {
        head = await chain.seal(e, head);
        remember(head);
        sealed.push(head);
      }
    }
    return { linked: true, sealed };
  }

  const latestAtStart = await client.block('latest');
  if (!latestAtStart) throw new Error('execution node has no latest block');
  await catchUp(latestAtStart);

  /** Anvil's chain no longer holds our head: find the newest slot both agree on and seal on from there. */
  async function rebase(latest: ExecutionBlock): Promise<void> {
    const oldHead = head;
    const theirs = await fetchRange(Math.min(...bySlot.keys()), Math.min(Number(latest.number), oldHead.slot));
    let ancestor: SlotBlock | undefined;
    for (const e of theirs) {
      const mine = bySlot.get(Number(e.number));
      if (mine?.execution.hash.toLowerCase() === e.hash.toLowerCase()) ancestor = mine;
    }
    if (ancestor) {
      forgetAbove(ancestor.slot);
      head = ancestor;
    } else {
      // Nothing in common within the window (anvil_reset, or a reorg deeper than the window): seal anvil's chain over.
      genesis = head = await startOver();
    }
    const { linked: whole, sealed } = await catchUp(latest);
    // Anvil moved again while we read: the next poll goes on from `head`.
    if (!whole) return;
    emit({ kind: 'reorg', oldHead, newHead: head, depth: oldHead.slot - (ancestor?.slot ?? -1) });
    for (const b of sealed) emit({ kind: 'block', block: b });
  }

  async function pollOnce(): Promise<void> {
    const latest = await client.block('latest');
    if (!latest) throw new Error('execution node has no latest block');
    if (latest.hash.toLowerCase() === head.execution.hash.toLowerCase()) return;
    if (Number(latest.number) > head.slot) {
      const { linked: whole, sealed } = await catchUp(latest);
      for (const b of sealed) emit({ kind: 'block', block: b });
      if (whole) return;
    }
    await rebase(latest);
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

  const known = (e: ExecutionBlock | undefined): SlotBlock | undefined => (e ? chain.known(e) : undefined);

  async function blockAt(slot: number): Promise<SlotBlock | undefined> {
    if (slot > head.slot || slot < 0) return undefined;
    return bySlot.get(slot) ?? known(await client.block(slot));
  }

  return {
    genesis: () => genesis,
    head: () => head,
    executionOnline: () => online,
    cached: (slot) => bySlot.get(slot),
    blockAt,
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
        for (const e of await fetchRange(s, last)) {
          const b = known(e);
          if (b) out.push(b);
        }
        s = last;
      }
      return out;
    },
    async blockByRoot(root) {
      const slot = chain.slotOfRoot(root);
      return slot === undefined ? undefined : blockAt(slot);
    },
    slotOfStateRoot(root) {
      const slot = chain.slotOfStateRoot(root);
      return slot !== undefined && slot <= head.slot ? slot : undefined;
    },
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
