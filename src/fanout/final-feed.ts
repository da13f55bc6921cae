/**
 * The newFinalizedHeads and newSafeHeads feeds (docs/decisions.md says why those names): each block once it
 * became finalized (or safe), in order, with no gap: when the chain's finalized block jumps by a whole epoch,
 * every block between is fetched and sent, oldest first.
 *
 * What is finalized or safe is the chain's finality (chain/finality.ts): the Beacon chain's finalized and
 * justified checkpoints when the chain names its beacon chain, else the nodes' own `finalized` and `safe`
 * blocks, read every few seconds by the thread that probes the chain. The feed looks at it on each head of an
 * upstream newHeads subscription of its own (finality can move only when a block comes), and after a lost link
 * (resume), so it needs no timer and shares the feeds' reconnects, outage clock and relay to worker threads.
 *
 * Where it starts: at the block the chain holds as finalized when the feed is made (or, when none is known yet,
 * at the first one learned): a subscriber gets the blocks that become final after it subscribed, as newHeads
 * gives the heads after it. A block's header is fetched from the feed's node and sent only when the fetched top
 * block has the hash finality names; a node that disagrees is asked again at the next head.
 */
import type { Deliver, FeedHandler, FeedsLog, NodeAccess } from './feeds.js';
import { fetchHeader, fetchHeaders, toNewHead } from './head-feed.js';

/** A block the chain takes as finalized or safe. */
export interface FinalMark {
  readonly number: number;
  readonly hash: string;
}

/** The chain's finality as the feeds read it (chain/finality.ts ChainFinality). */
export interface FinalityView {
  finalized(): FinalMark | null;
  safe(): FinalMark | null;
}

export interface FinalFeedOptions {
  finality: FinalityView;
  /** Most blocks one catch-up fetches; a wider jump skips its oldest blocks (logged). */
  maxBackfillBlocks: number;
  log: FeedsLog;
}

class FinalState {
  /** The last block number sent (or the start); null until the chain knows a block of the tag. */
  sent: number | null = null;

  constructor(
    readonly tag: 'finalized' | 'safe',
    readonly opts: FinalFeedOptions,
  ) {}
}

export function createFinalFeed(tag: 'finalized' | 'safe', opts: FinalFeedOptions): FeedHandler {
  const state = new FinalState(tag, opts);
  return {
    subscribeParams: ['newHeads'],
    live: (_head, via, deliver) => catchUp(state, via, deliver),
    resume: async (via, deliver) => catchUp(state, via, deliver),
  };
}

/** Sends every block from the one after the last sent up to the chain's block of the tag; nothing when it has not moved. */
function catchUp(state: FinalState, via: NodeAccess, deliver: Deliver): Promise<void> | undefined {
  const finality = state.opts.finality;
  const block = state.tag === 'finalized' ? finality.finalized() : finality.safe();
  if (block === null) return undefined;
  if (state.sent === null) {
    state.sent = block.number;
    return undefined;
  }
  if (block.number <= state.sent) return undefined;
  return send(state, block, via, deliver);
}

async function send(state: FinalState, top: FinalMark, via: NodeAccess, deliver: Deliver): Promise<void> {
  const { maxBackfillBlocks, log } = state.opts;
  let from = state.sent! + 1;
  if (top.number - from + 1 > maxBackfillBlocks) {
    log('warn', `${state.tag} block jumped further than the backfill limit: oldest blocks skipped`, {
      from,
      to: top.number,
      limit: maxBackfillBlocks,
    });
    from = top.number - maxBackfillBlocks + 1;
  }
  const headers: Array<Record<string, unknown>> = [];
  await fetchHeaders(
    from,
    top.number,
    (n) => fetchHeader(n, via),
    (window) => void headers.push(...window),
  );
  // Sent only as the chain that finality names: a node on another branch is asked again at the next head.
  const last = headers[headers.length - 1]!;
  if (String(last.hash).toLowerCase() !== top.hash) return;
  for (const header of headers) deliver(toNewHead(header));
  state.sent = top.number;
}
