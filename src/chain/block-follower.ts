/**
 * Following a chain's blocks by polling, for its filters when no upstream subscription feeds them.
 */
import type { HttpUpstream } from '../upstreams/http-client.js';
import { DEEPEST_REORG } from '../upstreams/health.js';
import { callUpstream } from '../upstreams/rpc-call.js';
import { HEAD_CALL_TIMEOUT_MS, HEAD_POLL_MS } from './head.js';
import type { ChainRuntime } from './runtime.js';

/** A block as the gateway's filters need it. */
export interface PolledBlock {
  number: number;
  hash: string;
  parentHash: string;
  /** Its transactions' hashes. */
  transactions: string[];
}

export interface BlockFollowerOptions {
  /** The last block already known (its successors are news); null: the first block seen is the start, not news. */
  from: number | null;
  /** Each new block, in order; a block at a number delivered before replaces it (a reorg). */
  onBlock(block: PolledBlock): void;
  /** Checked before each poll: true stops the follower (the gateway is stopping). */
  stopped?(): boolean;
  /** Between polls, in ms (default HEAD_POLL_MS). */
  intervalMs?: number;
  /**
   * `upstream` reports `head`, below every block remembered: true when the chain follows it onto a new chain (a
   * reset, a resync; ChainHealth.followsNewChain), false when it is only behind. Default: followed (a lone node is
   * the chain).
   */
  followsNewChain?(upstream: HttpUpstream, head: number): boolean;
  /** The highest block to deliver (the chain's served head, chain/served-head.ts): a latest block above it is
   *  read at this number instead, and the rest comes at a later poll. Default: none (latest as it is). */
  ceiling?(): number | null;
}

/** A running follower. */
export interface BlockFollower {
  stop(): void;
  /**
   * Polls at once, or joins the poll under way: resolves when the blocks the node has now are delivered (or
   * the poll failed; the next interval asks again). For a reader that must not run ahead of the blocks delivered.
   */
  pollNow(): Promise<void>;
}

/** Blocks fetched in one poll at most: after a longer silence the oldest missed blocks are skipped. */
const MAX_BLOCKS_PER_POLL = 128;
/**
 * Deeper replaced blocks than this are not looked for; a head further back is a new chain or a node behind.
 * The same depth as the chain's health uses to tell them, so the two agree on what a new chain is.
 */
const REORG_DEPTH = DEEPEST_REORG;

function hex(n: number): string {
  return `0x${n.toString(16)}`;
}

function asBlock(v: unknown): PolledBlock | null {
  if (v === null || typeof v !== 'object') return null;
  const b = v as Record<string, unknown>;
  if (typeof b.number !== 'string' || typeof b.hash !== 'string' || typeof b.parentHash !== 'string') return null;
  const txs = Array.isArray(b.transactions) ? b.transactions.filter((x): x is string => typeof x === 'string') : [];
  return { number: Number(b.number), hash: b.hash, parentHash: b.parentHash, transactions: txs };
}

/**
 * Follows a chain's blocks without a subscription, by asking for eth_getBlockByNumber('latest')
 * every interval: for filters on a chain whose upstreams have no WebSocket, or whose feed was lost.
 * Every block after `from` is delivered once and in order: blocks mined between two polls are
 * fetched by number, and a block whose parent is not the one delivered at that height is a reorg,
 * so the replaced blocks are delivered again from the fork. One upstream is asked until it fails;
 * after a switch, numbers already delivered stay delivered (independent nodes' hashes differ). A latest block
 * below every one remembered is a new chain (a devnet reset, a resync) when the chain follows its node there
 * (`followsNewChain`): the follower starts over from it, delivered as a reorg would be, rather than wait for
 * the new chain to pass the old head; else the node is behind and another is asked at the next poll.
 */
export function followBlocks(chain: Pick<ChainRuntime, 'timeoutMs' | 'pickUpstream'>, opts: BlockFollowerOptions): BlockFollower {
  const timeoutMs = Math.min(chain.timeoutMs, HEAD_CALL_TIMEOUT_MS);
  /** Hashes delivered by number, from the current upstream only. */
  const delivered = new Map<number, string>();
  let top = opts.from;
  let upstream: HttpUpstream | null = null;
  let running: Promise<void> | null = null;
  let stopped = false;

  async function blockAt(tag: string): Promise<PolledBlock | null> {
    if (upstream === null) {
      upstream = chain.pickUpstream();
      delivered.clear();
    }
    const asked = upstream;
    try {
      return asBlock(await callUpstream(asked, timeoutMs, 'eth_getBlockByNumber', [tag, false]));
    } catch (err) {
      if (upstream === asked) upstream = null;
      throw err;
    }
  }

  function remember(block: PolledBlock): void {
    delivered.set(block.number, block.hash);
    delivered.delete(block.number - REORG_DEPTH - 1);
  }

  function poll(): Promise<void> {
    if (running !== null) return running;
    if (stopped) return Promise.resolve();
    if (opts.stopped?.() === true) {
      stop();
      return Promise.resolve();
    }
    running = pollOnce().finally(() => {
      running = null;
    });
    return running;
  }

  async function pollOnce(): Promise<void> {
    try {
      let latest = await blockAt('latest');
      const ceiling = opts.ceiling?.() ?? null;
      if (latest !== null && ceiling !== null && latest.number > ceiling) latest = await blockAt(hex(ceiling));
      if (latest === null || stopped || delivered.get(latest.number) === latest.hash) return;
      if (top === null) {
        top = latest.number;
        remember(latest);
        return;
      }
      if (top - latest.number > REORG_DEPTH) return wentBack(latest);
      // Down from the latest block to where it joins what was delivered (or to the last known number).
      const found = [latest];
      for (let cur = latest; found.length < MAX_BLOCKS_PER_POLL && cur.number > 0; ) {
        const n = cur.number - 1;
        if (n <= top) {
          const known = delivered.get(n);
          if (known === undefined || known === cur.parentHash || top - n >= REORG_DEPTH) break;
        }
        const parent = await blockAt(hex(n));
        if (parent === null || stopped) return;
        found.push(parent);
        cur = parent;
      }
      let reached = false;
      for (const block of found.reverse()) {
        // A number this upstream never showed but another did stays as it was delivered.
        const news = block.number > top || delivered.has(block.number);
        remember(block);
        if (news && !stopped) {
          opts.onBlock(block);
          reached = block === latest;
        }
      }
      if (!reached) return;
      // A reorg to a shorter chain: the numbers above its head are free again.
      for (let n = latest.number + 1; n <= top; n++) delivered.delete(n);
      top = latest.number;
    } catch {
      // Asked again at the next interval, of another upstream.
    }
  }

  /** A latest block below every one remembered: a new chain is followed from it; a node behind is left. */
  function wentBack(latest: PolledBlock): void {
    if (opts.followsNewChain?.(upstream!, latest.number) === false) {
      upstream = null;
      return;
    }
    delivered.clear();
    top = latest.number;
    remember(latest);
    opts.onBlock(latest);
  }

  const timer = setInterval(() => void poll(), opts.intervalMs ?? HEAD_POLL_MS);
  timer.unref();
  void poll();
  function stop(): void {
    stopped = true;
    clearInterval(timer);
  }
  return { stop, pollNow: poll };
}
