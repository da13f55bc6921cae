/**
 * A logs feed for one filter: every matching log once, across upstream losses. What a lost link
 * missed is fetched with eth_getLogs over the blocks not known complete, and whatever was already
 * delivered is recognised by (blockHash, logIndex, removed). `removed: true` logs of a reorg pass.
 *
 * A node on a new chain (a reset, a resync: its blocks more than DEEPEST_REORG below what the feed has
 * delivered or made up for, and the chain follows it, see FeedChain) is no reorg: the old chain's logs are
 * not retracted, the feed forgets them and goes on from the block where it noticed, so a later link loss is
 * made up for on the new chain. Logs of the new chain's blocks mined before that are not sent: the feed
 * cannot tell which of them its listeners already had.
 */
import { DEEPEST_REORG } from '../upstreams/health.js';
import { type BloomBits, filterMayMatch } from '../jsonrpc/logs-bloom.js';
import type { Deliver, FeedChain, FeedHandler, FeedsLog, NodeAccess } from './feeds.js';

/** A logs feed, with what the completeness check (log-completeness.ts) asks of it. */
export interface LogFeed extends FeedHandler {
  /**
   * Checks the blocks up to `n` not checked yet against their bloom (LogFeedOptions.completeness): one whose bloom
   * may match the filter and of which no log was delivered has its logs fetched and delivered.
   */
  checkUpTo(n: number, via: NodeAccess, deliver: Deliver): Promise<void>;
}

/** The recent blocks' blooms the completeness check reads, and where it reports a block it made up for. */
export interface LogCompleteness {
  /** Block `n`'s hash and bloom, once its head came; undefined before. */
  blockAt(n: number): { hash: string; bloom: Uint8Array | null } | undefined;
  /** `logs` logs of block `block` were missing from node `node`'s subscription and were fetched. */
  backfilled(node: number, block: number, logs: number): void;
}

export interface LogFeedOptions {
  log: FeedsLog;
  /** Whether the chain follows a node onto a new chain; default: always (a lone node is the chain). */
  chain?: FeedChain;
  /** The completeness check (log-completeness.ts); default: none. */
  completeness?: LogCompleteness;
}

/** Blocks below a live log's a completeness check looks back at most. */
const CHECK_DEPTH = 64;

/** Blocks one eth_getLogs call of a backfill (or a replay, replay.ts) covers at most (providers cap the range). */
export const LOG_RANGE = 2_000;
/** Blocks below the highest seen whose delivered logs are remembered for de-duplication. */
const REMEMBERED_BLOCKS = 256;

interface LogMark {
  blockHash: string;
  logIndex: number;
  removed: boolean;
  node: number;
}

function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (typeof value === 'object' && value !== null) {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/** The key of a normalized filter: equal filters give equal keys whatever their key order. */
export function logFilterKey(filter: unknown): string {
  return canonical(filter ?? {});
}

/** A log's block number and identity (blockHash, logIndex, removed); null when it lacks them. */
export function parseMark(value: unknown): { blockNumber: number; mark: Omit<LogMark, 'node'> } | null {
  if (typeof value !== 'object' || value === null) return null;
  const v = value as Record<string, unknown>;
  if (typeof v.blockNumber !== 'string' || typeof v.blockHash !== 'string' || typeof v.logIndex !== 'string') return null;
  const blockNumber = parseInt(v.blockNumber, 16);
  const logIndex = parseInt(v.logIndex, 16);
  if (!Number.isSafeInteger(blockNumber) || !Number.isSafeInteger(logIndex)) return null;
  return { blockNumber, mark: { blockHash: v.blockHash, logIndex, removed: v.removed === true } };
}

/** A block number as a hex quantity. */
export const hex = (n: number): string => `0x${n.toString(16)}`;

export function createLogFeed(filter: Record<string, unknown>, opts: LogFeedOptions): LogFeed {
  // eth_getLogs takes the same address and topics; the block range is the backfill's own.
  const rangeFilter: Record<string, unknown> = {};
  if (filter.address !== undefined) rangeFilter.address = filter.address;
  if (filter.topics !== undefined) rangeFilter.topics = filter.topics;
  /** The lowest block whose matching logs may not all have been delivered; null before the first subscription. */
  let resumeFrom: number | null = null;
  /** The first block after the feed's first subscription: blocks before it are not the listeners'. */
  let firstBlock: number | null = null;
  /** Blocks up to it were checked against their bloom, or need not be. */
  let checkedUpTo = -1;
  const memo = new Map<string, BloomBits | null>();
  const delivered = new Map<number, LogMark[]>();
  let highest = -1;

  function isDelivered(blockNumber: number, mark: Omit<LogMark, 'node'>, node: number): boolean {
    for (const m of delivered.get(blockNumber) ?? []) {
      if (m.logIndex !== mark.logIndex || m.removed !== mark.removed) continue;
      if (m.blockHash === mark.blockHash) return true;
      // Sent from another node before a switch: independent nodes need not agree on block hashes.
      if (m.node !== node) return true;
    }
    return false;
  }

  function remember(blockNumber: number, mark: LogMark): void {
    let marks = delivered.get(blockNumber);
    if (!marks) delivered.set(blockNumber, (marks = []));
    if (mark.removed) {
      // The retracted log is gone from the chain: a replacement at its index is a new log.
      for (let i = marks.length - 1; i >= 0; i--) if (!marks[i]!.removed && marks[i]!.blockHash === mark.blockHash) marks.splice(i, 1);
    }
    marks.push(mark);
    if (blockNumber > highest) highest = blockNumber;
    if (delivered.size > REMEMBERED_BLOCKS + 64) {
      for (const k of delivered.keys()) if (k < highest - REMEMBERED_BLOCKS) delivered.delete(k);
    }
  }

  /**
   * When `block` from `node` lies below what the feed remembers and the chain follows that node onto a new
   * chain, the feed forgets the old chain and takes `from` as the lowest block whose logs may not all have
   * been delivered.
   */
  function startsNewChain(block: number, node: number, from: number): void {
    const known = Math.max(highest, (resumeFrom ?? 0) - 1);
    if (known - block <= DEEPEST_REORG || (opts.chain !== undefined && !opts.chain.followsNewChain(node, block))) return;
    opts.log('info', `logs feed resumes on a new chain from block ${from}`, { node, last: known, block: from });
    delivered.clear();
    highest = -1;
    resumeFrom = from;
  }

  /** `parsed`: the log's mark when the caller read it already (live), so a log is parsed once. */
  function accept(log: unknown, node: number, deliver: Deliver, parsed = parseMark(log)): void {
    if (!parsed) {
      // Without block and index it cannot be matched against anything: pass it on as the node sent it.
      deliver(log);
      return;
    }
    const { blockNumber, mark } = parsed;
    startsNewChain(blockNumber, node, blockNumber);
    if (isDelivered(blockNumber, mark, node)) return;
    remember(blockNumber, { ...mark, node });
    deliver(log);
    // A node sends a subscription's logs in block order, so blocks below this one are complete.
    if (!mark.removed && resumeFrom !== null && blockNumber > resumeFrom) resumeFrom = blockNumber;
  }

  async function latestBlock(via: NodeAccess): Promise<number> {
    const latest = Number(await via.call('eth_blockNumber', []));
    if (!Number.isSafeInteger(latest)) throw new Error('eth_blockNumber did not answer a block number');
    return latest;
  }

  /** Fetches block `blockHash`'s matching logs and delivers those not delivered yet; how many. */
  async function backfill(blockHash: string, via: NodeAccess, deliver: Deliver): Promise<number> {
    const logs = await via.call('eth_getLogs', [{ ...rangeFilter, blockHash }]);
    if (!Array.isArray(logs)) throw new Error('eth_getLogs did not answer an array');
    let sent = 0;
    const counted: Deliver = (log) => {
      sent++;
      deliver(log);
    };
    for (const log of logs) accept(log, via.node, counted);
    return sent;
  }

  async function checkUpTo(n: number, via: NodeAccess, deliver: Deliver): Promise<void> {
    const c = opts.completeness;
    if (c === undefined || firstBlock === null) return;
    for (let b = Math.max(checkedUpTo + 1, firstBlock, n - CHECK_DEPTH + 1); b <= n; b++) {
      const block = c.blockAt(b);
      if (block === undefined) return; // Its head has not come yet: checked when it has.
      checkedUpTo = b;
      if (delivered.has(b) || block.bloom === null || !filterMayMatch(block.bloom, rangeFilter, memo)) continue;
      const sent = await backfill(block.hash, via, deliver);
      if (sent > 0) c.backfilled(via.node, b, sent);
    }
  }

  return {
    subscribeParams: ['logs', filter],
    checkUpTo,
    async prepare(via) {
      // Logs of blocks that exist before the subscription are not the listeners'.
      resumeFrom = (await latestBlock(via)) + 1;
      firstBlock = resumeFrom;
    },
    live(result, via, deliver) {
      // The first log of a block: the blocks before it are checked first, so what they missed goes out before it.
      if (opts.completeness !== undefined && firstBlock !== null) {
        const parsed = parseMark(result);
        const block = parsed?.blockNumber;
        if (block !== undefined && block - 1 > checkedUpTo)
          return checkUpTo(block - 1, via, deliver).then(() => accept(result, via.node, deliver, parsed));
        return accept(result, via.node, deliver, parsed);
      }
      accept(result, via.node, deliver);
    },
    async resume(via, deliver) {
      if (resumeFrom === null) return;
      const latest = await latestBlock(via);
      // Logs of the new chain's blocks that exist already are not made up for (see the top of this file).
      startsNewChain(latest, via.node, latest + 1);
      if (latest - resumeFrom + 1 > LOG_RANGE) {
        opts.log('info', 'logs backfill spans many blocks', { from: resumeFrom, to: latest, node: via.node });
      }
      for (let from = resumeFrom; from <= latest; from += LOG_RANGE) {
        const to = Math.min(latest, from + LOG_RANGE - 1);
        const logs = await via.call('eth_getLogs', [{ ...rangeFilter, fromBlock: hex(from), toBlock: hex(to) }]);
        if (!Array.isArray(logs)) throw new Error('eth_getLogs did not answer an array');
        for (const log of logs) accept(log, via.node, deliver);
        resumeFrom = Math.max(resumeFrom, to + 1);
      }
    },
  };
}
