/**
 * A chain's head as the pipeline sees it, for the cache's finality test, the eth_getLogs range limit
 * and the gateway's filters. Sources, best first: the health tracker's best healthy head (when the
 * chain has one), the newHeads feed (while it runs), and last an eth_blockNumber of the gateway's own,
 * asked at most once a second and only when a head is wanted, so a chain without WebSocket upstreams
 * still has a head and an idle chain costs its nodes nothing.
 */
import { performance } from 'node:perf_hooks';
import type { ChainRuntime } from '../chain/runtime.js';
import type { HttpUpstream } from '../upstreams/http-client.js';
import { readEvmHead } from '../upstreams/head-probe.js';
import { callUpstream } from '../upstreams/rpc-call.js';

/** How long a polled head is used before the next look asks a node again. */
export const HEAD_POLL_MS = 1000; // ms
/** One head poll may take this long at most: a hung node must not leave the head unknown for the call timeout. */
const HEAD_CALL_TIMEOUT_MS = 5000; // ms

export interface ChainHead {
  /**
   * The best head known now, or null while none is. Never waits: a polled head older than
   * HEAD_POLL_MS is returned as it is and a new poll starts behind it.
   */
  now(): number | null;
  /**
   * Asks a node for its block number now (one call at a time, shared by concurrent callers; the
   * next upstream is tried when one fails) and resolves with the best head known after it: the
   * higher of that answer and now(). Never rejects; null when no node answered and no head is known.
   */
  fresh(): Promise<number | null>;
  /** A head learned elsewhere (a forwarded eth_blockNumber, the filters' block poll). */
  note(number: number): void;
}

/** The health tracker's view, when the chain has one (it is added to ChainRuntime by the health work). */
interface WithHealth {
  health?: { bestHead?: () => number | null };
}

const heads = new WeakMap<ChainRuntime, ChainHead>();

/** The chain's head tracker, made on first use. */
export function chainHead(chain: ChainRuntime): ChainHead {
  let head = heads.get(chain);
  if (head === undefined) heads.set(chain, (head = createChainHead(chain)));
  return head;
}

/** The best head known now for `chain` (see ChainHead.now). */
export function headOf(chain: ChainRuntime): number | null {
  return chainHead(chain).now();
}

/**
 * The upstreams to try for a call the gateway makes itself: the chain's pick first (its choice of a
 * healthy node), then the others in configured order, so one dead node never fails the call.
 */
export function upstreamsInTurn(chain: ChainRuntime): HttpUpstream[] {
  const first = chain.pickUpstream();
  return [first, ...chain.upstreams.filter((u) => u !== first)];
}

function createChainHead(chain: ChainRuntime): ChainHead {
  let polled: number | null = null;
  /** When the last poll started, answered or not: a dead chain is asked once a second too, not once a call. */
  let askedAt = -Infinity;
  /** The poll on its way, and the one that follows it for callers who came after it started. */
  let running: Promise<unknown> | null = null;
  let queued: Promise<unknown> | null = null;

  /** The health tracker's or the feed's head; null when neither knows one. */
  function tracked(): number | null {
    return (chain as WithHealth).health?.bestHead?.() ?? chain.feeds?.head()?.number ?? null;
  }

  function note(number: number): void {
    polled = number;
    askedAt = performance.now();
  }

  async function ask(): Promise<void> {
    askedAt = performance.now();
    for (const upstream of upstreamsInTurn(chain)) {
      try {
        // Read as the prober reads heads: an answer over a few KB is not a head and is dropped unread.
        note(await readEvmHead(upstream, Math.min(chain.timeoutMs, HEAD_CALL_TIMEOUT_MS), new AbortController().signal));
        return;
      } catch {
        // The next upstream; with none left the head stays as it was.
      }
    }
  }

  /**
   * A poll that starts no earlier than this call: a caller that has just seen a new block (a receipt)
   * must not be answered by a poll sent before it. Callers arriving while one runs share the next.
   */
  function askAfterNow(): Promise<unknown> {
    if (running === null) {
      running = ask().finally(() => {
        running = null;
      });
      return running;
    }
    queued ??= running.then(() => {
      queued = null;
      return askAfterNow();
    });
    return queued;
  }

  function fresh(): Promise<number | null> {
    return askAfterNow().then(() => {
      const now = tracked();
      if (now === null || polled === null) return now ?? polled;
      return Math.max(now, polled);
    });
  }

  return {
    now() {
      const now = tracked();
      if (now !== null) return now;
      if (running === null && performance.now() - askedAt >= HEAD_POLL_MS) void askAfterNow();
      return polled;
    },
    fresh,
    note,
  };
}

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
}

/** Blocks fetched in one poll at most: after a longer silence the oldest missed blocks are skipped. */
const MAX_BLOCKS_PER_POLL = 128;
/** Deeper replaced blocks than this are not looked for. */
const REORG_DEPTH = 64;

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
 * after a switch, numbers already delivered stay delivered (independent nodes' hashes differ).
 * Returns the function that stops it.
 */
export function followBlocks(chain: ChainRuntime, opts: BlockFollowerOptions): () => void {
  const timeoutMs = Math.min(chain.timeoutMs, HEAD_CALL_TIMEOUT_MS);
  /** Hashes delivered by number, from the current upstream only. */
  const delivered = new Map<number, string>();
  let top = opts.from;
  let upstream: HttpUpstream | null = null;
  let busy = false;
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

  async function poll(): Promise<void> {
    if (busy || stopped) return;
    if (opts.stopped?.() === true) {
      stop();
      return;
    }
    busy = true;
    try {
      const latest = await blockAt('latest');
      if (latest === null || stopped || delivered.get(latest.number) === latest.hash) return;
      if (top === null) {
        top = latest.number;
        remember(latest);
        return;
      }
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
    } finally {
      busy = false;
    }
  }

  const timer = setInterval(() => void poll(), opts.intervalMs ?? HEAD_POLL_MS);
  timer.unref();
  void poll();
  function stop(): void {
    stopped = true;
    clearInterval(timer);
  }
  return stop;
}
