/**
 * The newHeads feed: every block number once and in order, across upstream losses and node
 * switches. A head already sent is sent again only when the same node now reports another hash
 * for its number (a reorg), or a head whose parent is not the one sent below it (a node that sends
 * only its new tip after a reorg: the replaced heads are fetched and sent again first); after a switch,
 * numbers already sent stay sent, because independent nodes need not agree on hashes. Missing numbers
 * are fetched over HTTP and sent first.
 *
 * A head below every head remembered (more than DEEPEST_REORG below the last one sent) is no reorg: its node
 * is on a new chain (a devnet reset, a resync from scratch) or far behind. The feed asks the chain which
 * (FeedChain): when the chain follows the node onto its new chain, the feed forgets the old one and goes on from
 * that head, without a backfill and without sending anything again; otherwise that node's heads are dropped
 * until they pass the last one sent, and the lag rule moves the feed to a node in rotation.
 *
 * On a chain of several nodes the feed never runs ahead of the head the chain serves (HeadFeedOptions.servedHead,
 * chain/served-head.ts): a head above it is held, in order, and sent once the served head reaches it (release),
 * so a client never gets a head eth_blockNumber does not answer yet; nothing is sent twice and nothing skipped.
 * Heads held when a reorg replaces them are dropped unsent. Each live head is told to the chain first
 * (FeedChain.heard) so the served head counts it: a head is never held for want of its own report. While
 * no head is served yet (the first reports of a start) nothing is held.
 */
import { DEEPEST_REORG } from '../upstreams/health.js';
import type { Deliver, FeedChain, FeedHandler, FeedsLog, NodeAccess, ServedHeadView } from './feeds.js';
import { hex } from './log-feed.js';

/** A head by number and hash. */
export interface HeadMark {
  number: number;
  hash: string;
}

export interface HeadFeed extends FeedHandler {
  /** The latest head delivered, or null before the first. */
  head(): HeadMark | null;
  /** Sends the heads held that the served head has now reached, in order (the served head moved); whether some
   *  are still held after. */
  release(deliver: Deliver): boolean;
}

export interface HeadFeedOptions {
  /** Most heads one backfill fetches; a wider gap skips its oldest blocks. */
  maxBackfillBlocks: number;
  log: FeedsLog;
  /** Whether the chain follows a node onto a new chain; default: always (a lone node is the chain). */
  chain?: FeedChain;
  /** The head the chain serves: heads above it are held until it reaches them. Default: none held (one node). */
  servedHead?: ServedHeadView;
}

/** Block fields that are not part of a header; eth_subscribe newHeads carries none of them. */
const NOT_HEADER = new Set(['transactions', 'uncles', 'size', 'totalDifficulty']);
/** Heads remembered by number, for duplicate and reorg checks: deeper reorgs are not expected. */
const REMEMBERED = DEEPEST_REORG;
/** Heads held above the served head at most; past it the oldest is sent anyway. A served head this far behind
 *  the feed's node cannot last (the nodes behind lag out of rotation), so this only bounds the memory. */
const MOST_HELD = DEEPEST_REORG;
/** Block reads in flight at once during a backfill or a replay's (inWindows). */
const FETCH_WINDOW = 8;
/** A node's HTTP may lag its WebSocket by a moment: a missing block is asked for again this many times. */
const NOT_YET_RETRIES = 3;
const NOT_YET_DELAY_MS = 250; // ms

type Header = Record<string, unknown> & { number: string; hash: string };

/** A block from eth_getBlockByNumber (or a live head) in the newHeads shape: its header fields, hash included. */
export function toNewHead(block: Record<string, unknown>): Record<string, unknown> {
  const head: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(block)) if (!NOT_HEADER.has(k)) head[k] = v;
  return head;
}

function asHeader(value: unknown): Header | null {
  if (typeof value !== 'object' || value === null) return null;
  const v = value as Record<string, unknown>;
  if (typeof v.hash !== 'string' || typeof v.number !== 'string' || !/^0x[0-9a-fA-F]{1,13}$/.test(v.number)) return null;
  return v as Header;
}

/** One newHeads feed's state, in fields; its steps are the functions below, which take it. */
class HeadState {
  readonly opts: HeadFeedOptions;
  last: HeadMark | null;
  /** By number: the hash sent (or, after a switch, seen) and the node that reported it. */
  readonly seen: Map<number, { hash: string; node: number }>;
  /** The node whose heads below the remembered ones are being dropped, so that is logged once per spell. */
  behind: number | null;
  /** Heads taken in (`last` is the newest) but not sent yet, oldest first: above the served head. */
  held: Array<{ number: number; header: Header }>;
  /** The latest head sent. */
  sent: HeadMark | null;

  constructor(opts: HeadFeedOptions) {
    this.opts = opts;
    this.last = null;
    this.seen = new Map();
    this.behind = null;
    this.held = [];
    this.sent = null;
  }
}

/** Takes a head in: remembered as sent (later heads are judged against it), and sent once the served head allows. */
function emit(feed: HeadState, header: Header, node: number, deliver: Deliver): void {
  const number = parseInt(header.number, 16);
  const seen = feed.seen;
  if (feed.last !== null && number <= feed.last.number) {
    // A reorg: what was remembered above it belongs to the abandoned branch, and so do the heads held there.
    for (const k of seen.keys()) if (k > number) seen.delete(k);
    feed.held = feed.held.filter((h) => h.number < number);
  }
  feed.last = { number, hash: header.hash };
  seen.set(number, { hash: header.hash, node });
  seen.delete(number - REMEMBERED);
  feed.held.push({ number, header });
  release(feed, deliver);
}

/** Sends the held heads the served head has reached (all of them without one), oldest first; whether some are
 *  still held. */
function release(feed: HeadState, deliver: Deliver): boolean {
  const held = feed.held;
  const served = feed.opts.servedHead?.now() ?? null;
  let sent = 0;
  while (sent < held.length && (served === null || held[sent]!.number <= served || held.length - sent > MOST_HELD)) sent++;
  for (const { number, header } of held.splice(0, sent)) {
    feed.sent = { number, hash: header.hash };
    deliver(toNewHead(header));
  }
  return held.length > 0;
}

/** What fetchHeader needs of a node: its HTTP, and a pause between asks. */
export type HeaderSource = Pick<NodeAccess, 'call' | 'sleep'>;

/** Block `n`'s header from the node; a block it does not have yet (its HTTP lags its WebSocket) asked again. */
export async function fetchHeader(n: number, via: HeaderSource): Promise<Header> {
  for (let attempt = 0; ; attempt++) {
    const block = asHeader(await via.call('eth_getBlockByNumber', [hex(n), false]));
    if (block && parseInt(block.number, 16) === n) return block;
    if (attempt >= NOT_YET_RETRIES) throw new Error(`block ${n} is not available from the node`);
    await via.sleep(NOT_YET_DELAY_MS);
  }
}

/** Sends heads `from`..`to` fetched from the node, in order. */
async function fill(feed: HeadState, from: number, to: number, via: NodeAccess, deliver: Deliver): Promise<void> {
  const { maxBackfillBlocks } = feed.opts;
  if (to - from + 1 > maxBackfillBlocks) {
    feed.opts.log('warn', 'head gap wider than the backfill limit: oldest heads skipped', { from, to, limit: maxBackfillBlocks });
    from = to - maxBackfillBlocks + 1;
  }
  await fetchHeaders(
    from,
    to,
    (n) => fetchHeader(n, via),
    (headers) => {
      for (const header of headers) emit(feed, header, via.node, deliver);
    },
  );
}

/**
 * Blocks `from`..`to` fetched FETCH_WINDOW at a time with `fetch` (fetchHeader, or a replay's memory of heads
 * first): `take` gets each window's results in order, the numbers beside them, before the next is asked for.
 */
export async function fetchHeaders<H>(
  from: number,
  to: number,
  fetch: (n: number) => Promise<H>,
  take: (headers: H[], numbers: number[]) => void | Promise<void>,
): Promise<void> {
  const numbers: number[] = [];
  for (let n = from; n <= to; n++) numbers.push(n);
  await inWindows(numbers, fetch, take);
}

/** `fetch` of each of `numbers`, FETCH_WINDOW at once: `take` gets each window's results in order, before the next. */
export async function inWindows<H>(
  numbers: readonly number[],
  fetch: (n: number) => Promise<H>,
  take: (results: H[], numbers: number[]) => void | Promise<void>,
): Promise<void> {
  for (let i = 0; i < numbers.length; i += FETCH_WINDOW) {
    const window = numbers.slice(i, i + FETCH_WINDOW);
    await take(await Promise.all(window.map(fetch)), window);
  }
}

/**
 * A head below every one remembered: the chain says whether its node is on a new chain the chain follows
 * (then the feed starts over from it) or behind the chain (then it is dropped).
 */
function wentBack(feed: HeadState, header: Header, number: number, via: NodeAccess, deliver: Deliver): void {
  const { opts } = feed;
  const from = feed.last!.number;
  if (opts.chain !== undefined && !opts.chain.followsNewChain(via.node, number)) {
    if (feed.behind !== via.node) {
      feed.behind = via.node;
      opts.log('warn', `newHeads feed drops the heads of a node that went back from ${from} to ${number}: the chain is ahead of it`, {
        node: via.node,
        from,
        head: number,
      });
    }
    return;
  }
  feed.behind = null;
  opts.log('info', `newHeads feed resumes on a new chain from head ${number}`, { node: via.node, from, head: number });
  feed.seen.clear();
  feed.held = [];
  feed.last = null;
  feed.sent = null;
  emit(feed, header, via.node, deliver);
}

/**
 * The lowest number from which the heads sent and the node's chain differ, at or below `from`: walks back
 * while the head sent at `from - 1` came from this node and its chain now holds another block there
 * (`parentHash`, the hash at `from - 1` when the caller knows it; else asked of the node). Heads sent
 * from another node are not compared: independent nodes need not agree on hashes.
 */
async function forkFrom(feed: HeadState, from: number, via: NodeAccess, parentHash?: string): Promise<number> {
  let known = parentHash;
  for (let depth = 0; depth < REMEMBERED && from > 0; depth++) {
    const before = feed.seen.get(from - 1);
    if (!before || before.node !== via.node) break;
    const hash = known ?? asHeader(await via.call('eth_getBlockByNumber', [hex(from - 1), false]))?.hash;
    known = undefined;
    // A block the node's HTTP does not have (yet) is no sign of a reorg: the walk stops rather than send
    // heads again that may not have changed. A later head off the branch sent walks again.
    if (hash === undefined || hash === before.hash) break;
    from--;
  }
  return from;
}

/**
 * A head whose branch may not be the one sent below it: after a gap (heads the link missed may have been
 * a reorg), or with a parent other than the head sent at the number below (a node that sends only its
 * new tip after a reorg). The heads from the fork up are fetched and sent first, then this one.
 */
async function onBranch(feed: HeadState, header: Header, number: number, via: NodeAccess, deliver: Deliver): Promise<void> {
  const lastNumber = feed.last!.number;
  const parent = typeof header.parentHash === 'string' ? header.parentHash : undefined;
  const from = number > lastNumber + 1 ? await forkFrom(feed, lastNumber + 1, via) : await forkFrom(feed, number, via, parent);
  if (from <= lastNumber)
    feed.opts.log('info', 'reorg: heads sent again from the fork', { node: via.node, depth: lastNumber - from + 1, head: from });
  if (from < number) await fill(feed, from, number - 1, via, deliver);
  emit(feed, header, via.node, deliver);
}

/** Whether the head sent at `number - 1` came from `via`'s node and is not `header`'s parent. */
function parentReplaced(feed: HeadState, header: Header, number: number, via: NodeAccess): boolean {
  const below = feed.seen.get(number - 1);
  return below !== undefined && below.node === via.node && typeof header.parentHash === 'string' && below.hash !== header.parentHash;
}

function accept(feed: HeadState, header: Header, via: NodeAccess, deliver: Deliver): void | Promise<void> {
  const last = feed.last;
  if (last === null) return emit(feed, header, via.node, deliver);
  const number = parseInt(header.number, 16);
  if (number <= last.number) {
    const before = last.number - number < REMEMBERED ? feed.seen.get(number) : undefined;
    if (before === undefined) return wentBack(feed, header, number, via, deliver);
    if (before.node !== via.node) {
      // After a switch: already sent from another node. Remembering this node's hash lets a
      // later reorg on this node through.
      feed.seen.set(number, { hash: header.hash, node: via.node });
      return;
    }
    if (before.hash === header.hash) return; // The same head again.
    if (parentReplaced(feed, header, number, via)) return onBranch(feed, header, number, via, deliver);
    feed.opts.log('info', 'reorg: heads sent again from the fork', { node: via.node, depth: last.number - number + 1, head: number });
    return emit(feed, header, via.node, deliver);
  }
  feed.behind = null;
  if (number > last.number + 1 || parentReplaced(feed, header, number, via)) return onBranch(feed, header, number, via, deliver);
  return emit(feed, header, via.node, deliver);
}

/** The upstream subscription was (re)opened on `via`'s node: sends what was missed since the last head sent. */
async function resume(feed: HeadState, via: NodeAccess, deliver: Deliver): Promise<void> {
  const last = feed.last;
  if (last === null) return;
  const latest = Number(await via.call('eth_blockNumber', []));
  if (!Number.isSafeInteger(latest)) throw new Error('eth_blockNumber did not answer a block number');
  // Below every head remembered: nothing to walk back to, and no backfill (see wentBack).
  if (latest < last.number && (last.number - latest >= REMEMBERED || !feed.seen.has(latest))) {
    return accept(feed, await fetchHeader(latest, via), via, deliver);
  }
  // Heads sent above the node's own head are gone from it (or not there yet): the walk starts below them.
  // Back on the same node: a reorg while away may have replaced heads already sent. Walk back
  // to where its chain and what was sent agree; everything above is sent again.
  const from = await forkFrom(feed, Math.min(last.number, latest) + 1, via);
  if (from > latest) return;
  if (from <= last.number)
    feed.opts.log('info', 'reorg while away: heads sent again from the fork', {
      node: via.node,
      depth: last.number - from + 1,
      head: from,
    });
  await fill(feed, from, latest, via, deliver);
}

export function createHeadFeed(opts: HeadFeedOptions): HeadFeed {
  const feed = new HeadState(opts);
  return {
    subscribeParams: ['newHeads'],
    live(result, via, deliver) {
      const header = asHeader(result);
      if (!header) {
        opts.log('warn', 'upstream sent a head without number or hash: dropped', { node: via.node });
        return;
      }
      opts.chain?.heard?.(via.node, parseInt(header.number, 16));
      return accept(feed, header, via, deliver);
    },
    resume: (via, deliver) => resume(feed, via, deliver),
    head() {
      const sent = feed.sent;
      return sent === null ? null : { ...sent };
    },
    release: (deliver) => release(feed, deliver),
  };
}
