/**
 * A subscription that resumes (issue 35 §1): `eth_subscribe ["newHeads", {"fromBlock": "0x…"}]`, or a `logs`
 * filter with a numbered `fromBlock`, first gets what it missed from that block on, in order, then the live
 * notifications, with no gap and no duplicate. The subscription is registered on its topic before the replay
 * starts; the live notifications that come meanwhile are held in its buffer (subscriptions.ts notify) and sent
 * after the replay, those it already sent skipped, and a gap between the replay's end and the first live one
 * fetched first. Then the subscription joins the topic's live fan-out, and nothing of this file runs for it again.
 *
 * Heads come from the hub's memory of recent heads (recent-heads.ts), those it lacks fetched with
 * eth_getBlockByNumber; a resume point more than `subscriptions.replay_blocks` below the head is refused. Logs are
 * fetched with eth_getLogs, in windows of LOG_RANGE blocks, as the chain now is; a reorg during the replay reaches
 * the buffer as live ones do (`removed: true`, then the new branch's logs) and is sent as such. Before them, the
 * logs the filter's feed delivered live from `fromBlock` on (delivered-logs.ts) in blocks no longer on the chain (a
 * reorg while the client was away) are sent again with `removed: true`, in block order.
 */
import type { DeliveredBlock } from './delivered-logs.js';
import { DEEPEST_REORG } from '../upstreams/health.js';
import { fetchHeader, fetchHeaders, inWindows, toNewHead } from './head-feed.js';
import { hex, LOG_RANGE, parseMark } from './log-feed.js';
import { BALANCE_CLOSE, notificationFrame } from './notification.js';
import type { RecentHeads } from './recent-heads.js';
import type { SubscriberConn, Topic } from './subscriptions.js';
import { headOf } from './recent-heads.js';

/** Where a hub's replays get what its memory lacks. */
export interface ReplaySource {
  /** Blocks below the head a resume point may reach (subscriptions.replay_blocks). */
  readonly maxBlocks: number;
  /** Live results a subscription may hold while it replays, at most; default REPLAY_HELD_MAX. */
  readonly maxHeld?: number;
  /** JSON-RPC over one of the chain's nodes' HTTP: resolves with `result`, rejects on error. */
  call(method: string, params: unknown[]): Promise<unknown>;
}

/** A resume point read off eth_subscribe's params: the params of the live topic, and the block to resume from. */
export type ResumePoint = { live: unknown; from: number | null } | { refused: string };

/**
 * Live results one replaying subscription holds at most (a logs resume may start at any block, and its replay
 * take long): past it the subscription is closed (heldTooMany), the client resumes from a later block.
 */
export const REPLAY_HELD_MAX = 10_000;

/** The close reason of a subscription whose replay held more than `max` live results. */
export function heldTooMany(max: number): string {
  return `resume too far behind: over ${max} live results held during its replay; resume from a later block`;
}

const QUANTITY = /^0x(0|[1-9a-fA-F][0-9a-fA-F]{0,12})$/;

/**
 * The resume point of a newHeads (`{fromBlock}`) or logs (the filter's `fromBlock`) subscribe; `from` null when
 * there is none ('latest' and 'pending' say live from now, as nodes read them).
 */
export function resumePoint(kind: string, params: unknown): ResumePoint {
  if ((kind !== 'newHeads' && kind !== 'logs') || typeof params !== 'object' || params === null || !('fromBlock' in params))
    return { live: params, from: null };
  const { fromBlock, ...rest } = params as Record<string, unknown>;
  const live = kind === 'newHeads' ? undefined : rest;
  if (fromBlock === undefined || fromBlock === null || fromBlock === 'latest' || fromBlock === 'pending') return { live, from: null };
  if (typeof fromBlock !== 'string' || !QUANTITY.test(fromBlock))
    return { refused: `'fromBlock' of a ${kind} subscription must be a block number (hex quantity) to resume from, or 'latest'` };
  return { live, from: parseInt(fromBlock, 16) };
}

/** A subscription replaying: its connection and variant are reserved, but it is in no variant's set yet. */
export interface Resuming {
  readonly conn: SubscriberConn;
  readonly variant: number;
  readonly buffer: string[];
}

/**
 * Holds a live result for each subscription replaying; one that holds `max` already is closed (1008, heldTooMany):
 * a replay from far back does not hold the live results without bound.
 */
export function holdLive(resuming: Set<Resuming>, resultJson: string, max: number): void {
  for (const r of resuming) {
    if (r.buffer.length < max) r.buffer.push(resultJson);
    else r.conn.close(1008, heldTooMany(max));
  }
}

/** Ends the replay of `conn`'s subscription of `variant`, if it is one; whether it was. */
export function stopResuming(topic: Topic, conn: SubscriberConn, variant: number): boolean {
  if (topic.resuming === null) return false;
  for (const r of topic.resuming) {
    if (r.conn !== conn || r.variant !== variant) continue;
    topic.resuming.delete(r);
    if (topic.resuming.size === 0) topic.resuming = null;
    return true;
  }
  return false;
}

/** One replay in progress: what it sends through, and the live notifications held meanwhile. */
export interface Replay {
  readonly kind: 'newHeads' | 'logs';
  readonly from: number;
  /** The newest block when the subscription was registered: the replay reaches it, the buffer goes on from there. */
  readonly upTo: number;
  /** The logs filter without its fromBlock (logs only). */
  readonly filter: Record<string, unknown>;
  readonly source: ReplaySource;
  readonly heads: RecentHeads;
  /** Live results that came after the subscription was registered, oldest first. */
  readonly buffer: string[];
  /** Logs only: what the filter's feed delivered live from `from` on (Feeds.deliveredLogs); absent: nothing. */
  delivered?(): Promise<readonly DeliveredBlock[]>;
  /** Sends one result to the subscriber, charged as a live one; false once it can take no more (closed, gone). */
  send(json: string): boolean;
  /** null while the subscriber can take more now, else a promise settled once it drained (SubscriberConn.writable). */
  writable?(): Promise<void> | null;
}

/** Thrown to end a replay whose subscriber went away: nothing more to send. */
class Gone extends Error {}

/**
 * Sends one result, first waiting while the subscriber's socket holds what it has not read yet: a window of
 * eth_getLogs can hold more than the socket may queue (websocket.max_buffered_bytes, past which it is closed as a
 * slow consumer), so a replay goes no faster than the client reads.
 */
async function sendOrStop(r: Replay, json: string): Promise<void> {
  const wait = r.writable?.();
  if (wait) await wait;
  if (!r.send(json)) throw new Gone();
}

/**
 * The block a replay from `from` reaches: the newest head the memory holds (the live buffer goes on from there),
 * else a node's; refused for newHeads more than source.maxBlocks below it.
 */
export async function replayEnd(
  kind: 'newHeads' | 'logs',
  from: number,
  heads: RecentHeads,
  source: ReplaySource,
): Promise<{ upTo: number } | { ok: false; reason: string; invalid?: boolean }> {
  let upTo = heads.newest;
  if (upTo < 0) {
    try {
      upTo = Number(await source.call('eth_blockNumber', []));
    } catch (err) {
      return { ok: false, reason: `the chain's head could not be read: ${String(err).slice(0, 120)}` };
    }
    if (!Number.isSafeInteger(upTo)) return { ok: false, reason: 'eth_blockNumber did not answer a block number' };
  }
  const oldest = Math.max(0, upTo - source.maxBlocks + 1);
  if (kind === 'newHeads' && from < oldest) {
    const reason = `'fromBlock' is more than ${source.maxBlocks} blocks below the head ${hex(upTo)} (subscriptions.replay_blocks): newHeads resumes from ${hex(oldest)} at the oldest`;
    return { ok: false, invalid: true, reason };
  }
  return { upTo };
}

/** What sendReplayed charges through: the hub's pricing and payment (HubOptions). */
export interface ReplayMetering {
  ruPerMessage(bytes: number): number;
  charge(ownerId: number, endpointId: string, ru: number, deliveries: number): boolean;
}

/** One replayed notification to one subscriber, charged as a live one is; false when its owner cannot pay (closed 1008). */
export function sendReplayed(
  conn: { ownerId: number | null; endpointId: string | null; deliver(bytes: Buffer): void; close(code: number, reason: string): void },
  id: string,
  resultJson: string,
  metering: ReplayMetering,
): boolean {
  const bytes = Buffer.from(notificationFrame(id, resultJson));
  if (
    conn.ownerId !== null &&
    conn.endpointId !== null &&
    !metering.charge(conn.ownerId, conn.endpointId, metering.ruPerMessage(bytes.length), 1)
  ) {
    conn.close(BALANCE_CLOSE.code, BALANCE_CLOSE.reason);
    return false;
  }
  conn.deliver(bytes);
  return true;
}

/**
 * Sends the replay, then the buffer, then calls `goLive` in the turn the buffer went empty; a replay that cannot
 * fetch what it needs calls `fail` with a reason fit for a close (the client resumes again).
 */
export async function replayThen(r: Replay, goLive: () => void, fail: (reason: string) => void): Promise<void> {
  try {
    if (r.kind === 'newHeads') await replayHeads(r);
    else await replayLogs(r);
  } catch (err) {
    if (!(err instanceof Gone)) fail(`resume failed: ${String(err)}`.slice(0, 120));
    return;
  }
  goLive();
}

/** A pause between a replay's asks for a block its node does not have yet (fetchHeader). */
const pause = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Head `n` from the memory of heads, else from a node (head-feed.ts fetchHeader). */
async function headJson(r: Replay, n: number): Promise<{ hash: string; json: string }> {
  const remembered = r.heads.get(n);
  if (remembered !== undefined) return remembered;
  const block = await fetchHeader(n, { call: (method, params) => r.source.call(method, params), sleep: pause });
  return { hash: block.hash, json: JSON.stringify(toNewHead(block)) };
}

async function replayHeads(r: Replay): Promise<void> {
  const sent = new Map<number, string>();
  let last = r.from - 1;
  const sendRange = (from: number, to: number): Promise<void> =>
    fetchHeaders(
      from,
      to,
      (n) => headJson(r, n),
      async (heads, numbers) => {
        for (const [i, head] of heads.entries()) {
          await sendOrStop(r, head.json);
          sent.set(numbers[i]!, head.hash);
          last = numbers[i]!;
        }
      },
    );
  await sendRange(r.from, r.upTo);
  while (r.buffer.length > 0) {
    const json = r.buffer.shift()!;
    const head = headOf(json);
    if (head !== null) {
      // Sent by the replay already (the same number and hash): skipped; another hash there is a reorg, sent.
      if (head.number <= last && sent.get(head.number) === head.hash) continue;
      if (head.number > last + 1) await sendRange(last + 1, head.number - 1);
      sent.set(head.number, head.hash);
      last = head.number;
    }
    await sendOrStop(r, json);
  }
}

/** A log's block number and its identity (blockHash, logIndex, removed); null when it has none. */
function logOf(value: unknown): { block: number; key: string; removed: boolean } | null {
  const parsed = parseMark(value);
  if (parsed === null) return null;
  const { blockHash, logIndex, removed } = parsed.mark;
  return { block: parsed.blockNumber, key: `${blockHash.toLowerCase()}:${logIndex}:${removed}`, removed };
}

/** Block `n`'s hash on the chain now (lower case), from the memory of heads or a node; null past the chain's end. */
async function canonicalHash(r: Replay, n: number): Promise<string | null> {
  const remembered = r.heads.get(n);
  if (remembered !== undefined) return remembered.hash.toLowerCase();
  const block = (await r.source.call('eth_getBlockByNumber', [hex(n), false])) as Record<string, unknown> | null;
  if (block === null) return null;
  if (typeof block !== 'object' || typeof block.hash !== 'string') throw new Error(`block ${n} is not available from the node`);
  return block.hash.toLowerCase();
}

/**
 * Keeps a sent log's key, so the same log arriving live is not sent again: only for blocks a live one may still
 * come from (within DEEPEST_REORG of the replay's end), so a replay from far back holds no key per log it sent.
 */
function keep(r: Replay, keys: Set<string>, id: { block: number; key: string }): void {
  if (id.block >= r.upTo - DEEPEST_REORG) keys.add(id.key);
}

/**
 * Retracts what the feed delivered from `from` on in blocks the chain no longer has (`removed: true`, in block
 * order), each log once (its key in `keys`, so the same retraction arriving live is not sent again).
 */
async function retractReplaced(r: Replay, keys: Set<string>): Promise<void> {
  const blocks = (await r.delivered?.()) ?? [];
  if (blocks.length === 0) return;
  const numbers = [...new Set(blocks.map((b) => b.number))];
  const hashes = new Map<number, string | null>();
  await inWindows(
    numbers,
    (n) => canonicalHash(r, n),
    (found, window) => {
      for (let k = 0; k < window.length; k++) hashes.set(window[k]!, found[k]!);
    },
  );
  for (const block of blocks) {
    if (hashes.get(block.number) === block.hash) continue;
    for (const json of block.logs) {
      const log = { ...(JSON.parse(json) as Record<string, unknown>), removed: true };
      const id = logOf(log);
      if (id !== null && keys.has(id.key)) continue;
      await sendOrStop(r, JSON.stringify(log));
      if (id !== null) keep(r, keys, id);
    }
  }
}

async function replayLogs(r: Replay): Promise<void> {
  const keys = new Set<string>();
  await retractReplaced(r, keys);
  let last = r.from - 1;
  const sendRange = async (from: number, to: number): Promise<void> => {
    for (let start = from; start <= to; start += LOG_RANGE) {
      const end = Math.min(to, start + LOG_RANGE - 1);
      const logs = await r.source.call('eth_getLogs', [{ ...r.filter, fromBlock: hex(start), toBlock: hex(end) }]);
      if (!Array.isArray(logs)) throw new Error('eth_getLogs did not answer an array');
      for (const log of logs) {
        const id = logOf(log);
        if (id !== null && keys.has(id.key)) continue;
        await sendOrStop(r, JSON.stringify(log));
        if (id !== null) keep(r, keys, id);
      }
      last = end;
    }
  };
  await sendRange(r.from, r.upTo);
  while (r.buffer.length > 0) {
    const json = r.buffer.shift()!;
    const log = logOf(JSON.parse(json));
    if (log !== null) {
      if (keys.has(log.key)) continue;
      // Logs of the blocks between the replay's end and this one's (its own block's earlier logs included) may
      // have gone out live before the subscription was registered: fetched, those in the buffer then skipped.
      if (!log.removed && log.block > last) {
        await sendRange(last + 1, log.block);
        if (keys.has(log.key)) continue;
      }
      keep(r, keys, log);
    }
    await sendOrStop(r, json);
  }
}
