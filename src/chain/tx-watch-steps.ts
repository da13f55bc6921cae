/**
 * One look at a watched transaction (tx-watch.ts) on a new served head, in this order, each step only when the
 * one before taught nothing:
 * 1. its receipt (a node in rotation): included, with its block;
 * 2. `watch_blocks` heads since it was first looked at: dropped;
 * 3. at most once per RESEND_EVERY_BLOCKS heads: its sender's nonce at `latest` past its own means another
 *    transaction of that sender and nonce was included (replaced; the replacing hash is looked for in the blocks
 *    since the last look); else each node a broadcast would go to is asked for it (eth_getTransactionByHash)
 *    and, when none holds it, pending or mined, it is sent again to each (chain/attempts.ts fanOutNodes).
 * A node that fails a step teaches nothing: the look ends, and the next head looks again.
 */
import { errorText } from '../log.js';
import { callUpstream } from '../upstreams/rpc-call.js';
import { fanOutNodes, NodeAttempt, settleCallError } from './attempts.js';
import type { TxStatus, TxWatchOptions, Watched } from './tx-watch.js';

/** A look at the pools (and a send when none holds it) at most once per this many heads. */
export const RESEND_EVERY_BLOCKS = 3;
const BY_HASH = 'eth_getTransactionByHash';
const SEND = 'eth_sendRawTransaction';
/** Blocks searched for the replacing transaction at most (the heads since the last look: a few). */
const REPLACEMENT_SEARCH_BLOCKS = 16;

type Decode = (raw: string) => { from: string | null; nonce: number };
let decoding: Promise<Decode> | undefined;

/** The sender and nonce of a signed transaction, decoded with ethers (loaded at the first need). */
async function senderOf(raw: string): Promise<{ from: string; nonce: number } | null> {
  decoding ??= import('ethers/transaction').then((m) => (r: string) => m.Transaction.from(r));
  try {
    const tx = (await decoding)(raw);
    return tx.from === null ? null : { from: tx.from.toLowerCase(), nonce: tx.nonce };
  } catch {
    return null;
  }
}

/** What `e` became on head `head`; null when it is still pending (or nothing could be told). */
export async function lookAt(opts: TxWatchOptions, e: Watched, head: number): Promise<TxStatus | null> {
  if (e.since === null) {
    e.since = head;
    e.pooledAt = head;
  }
  try {
    const receipt = (await opts.chain.call('eth_getTransactionReceipt', [e.hash])) as { blockNumber?: unknown; blockHash?: unknown } | null;
    if (receipt !== null && typeof receipt.blockNumber === 'string' && typeof receipt.blockHash === 'string')
      return { status: 'included', hash: e.hash, blockNumber: receipt.blockNumber, blockHash: receipt.blockHash };
    if (head - e.since >= opts.bounds.watch_blocks) return { status: 'dropped', hash: e.hash };
    if (head - e.pooledAt < RESEND_EVERY_BLOCKS) return null;
    // The nonce was last seen below the transaction's at the last look; before the first, its first head may hold it.
    const lastLook = e.pooledAt === e.since ? e.since - 1 : e.pooledAt;
    e.pooledAt = head;
    if (e.sender === undefined) e.sender = await senderOf(e.raw);
    if (e.sender !== null) {
      const count = await opts.chain.call('eth_getTransactionCount', [e.sender.from, 'latest']);
      // Its own inclusion since the receipt was asked moves the nonce too.
      if (
        typeof count === 'string' &&
        Number(count) > e.sender.nonce &&
        (await opts.chain.call('eth_getTransactionReceipt', [e.hash])) === null
      ) {
        return { status: 'replaced', hash: e.hash, replacedBy: await replacement(opts, e.sender, lastLook, head) };
      }
    }
    if (!(await inNoPool(opts, e.hash))) return null;
    sendAgain(opts, e);
    return null;
  } catch (err) {
    opts.log('info', 'a watched transaction could not be looked at', { hash: e.hash, error: errorText(err).slice(0, 200) });
    return null;
  }
}

/**
 * True when every node asked that answered said it has no such transaction (and at least one answered): the nodes
 * a transaction's broadcast would ask (chain/attempts.ts fanOutNodes: in rotation, serving the method, with room).
 */
async function inNoPool(opts: TxWatchOptions, hash: string): Promise<boolean> {
  const { chain } = opts;
  const nodes = fanOutNodes(chain.health, chain.routes.nodesFor(BY_HASH, [hash])) ?? [];
  const answers = await Promise.allSettled(nodes.map((i) => countedCall(chain, i, BY_HASH, [hash])));
  let answered = 0;
  for (const a of answers) {
    if (a.status === 'rejected') continue;
    if (a.value !== null) return false;
    answered++;
  }
  return answered > 0;
}

/**
 * Sends the transaction again to the nodes its broadcast would go to (pipeline/broadcast.ts: in rotation, serving
 * eth_sendRawTransaction, with room in their budget); a node's refusal ("already known", "nonce too low") is the
 * next look's news.
 */
function sendAgain(opts: TxWatchOptions, e: Watched): void {
  const { chain } = opts;
  const nodes = fanOutNodes(chain.health, chain.routes.nodesFor(SEND, [e.raw])) ?? [];
  opts.log('info', 'a watched transaction is in no pool: sent again', { hash: e.hash, nodes: nodes.length });
  for (const i of nodes) void countedCall(chain, i, SEND, [e.raw]).catch(() => {});
}

/** One call to node `i`, counted in its health as every attempt is (NodeAttempt; a node's error object is an answer). */
async function countedCall(chain: TxWatchOptions['chain'], i: number, method: string, params: unknown[]): Promise<unknown> {
  const attempt = new NodeAttempt(chain.health, i);
  try {
    const result = await callUpstream(chain.upstreams[i]!, chain.timeoutMs, method, params);
    attempt.settle('ok');
    return result;
  } catch (err) {
    settleCallError(attempt, err);
    throw err;
  }
}

/** The hash of the included transaction of `sender` and its nonce, looked for in blocks after `from` up to `to`. */
async function replacement(
  opts: TxWatchOptions,
  sender: { from: string; nonce: number },
  from: number,
  to: number,
): Promise<string | null> {
  for (let n = to; n > from && n > to - REPLACEMENT_SEARCH_BLOCKS; n--) {
    const block = (await opts.chain.call('eth_getBlockByNumber', [`0x${n.toString(16)}`, true])) as {
      transactions?: Array<{ from?: string; nonce?: string; hash?: string }>;
    } | null;
    for (const tx of block?.transactions ?? []) {
      if (tx.from?.toLowerCase() === sender.from && Number(tx.nonce) === sender.nonce && typeof tx.hash === 'string')
        return tx.hash.toLowerCase();
    }
  }
  return null;
}
