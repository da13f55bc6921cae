/**
 * The logs feeds checked for completeness against each head (issue 35 §3): a node's logs subscription may
 * die or lag silently while its newHeads goes on. When head N+1 arrives, each live logs feed whose filter block
 * N's `logsBloom` says may match, and which delivered no log of block N, fetches block N's logs with
 * eth_getLogs (by its hash) and delivers those it had not: queued as a step of that feed, so they go out before
 * the logs that come after (the next head's). A block whose bloom matched by chance (blooms give false
 * positives) yields nothing and is not counted; one that yields logs is counted and logged with the node.
 *
 * On only when FeedsOptions.logChecks is given (the chain's feeds): the check holds the newHeads feed while any
 * logs feed exists, and drops it at the first head after the last logs feed went. Its work is per head and per
 * logs feed, never per notification.
 */
import { bloomOf, type BloomBits, filterMayMatch } from '../jsonrpc/logs-bloom.js';
import type { FeedHandler } from './feeds.js';
import { enqueue, holdFeed } from './feed-subscription.js';
import { type FeedsState, labelOf } from './feeds-state.js';
import type { LogFeed } from './log-feed.js';

interface CheckedHead {
  number: number;
  hash: string;
  bloom: Uint8Array | null;
}

/** Starts the check when a logs feed is made and it is not running (FeedsOptions.logChecks given). */
export function checkLogFeeds(state: FeedsState, makeHeadFeed: () => FeedHandler): void {
  if (state.opts.logChecks === undefined || state.logCheck !== null) return;
  let last: CheckedHead | null = null;
  const memo = new Map<string, BloomBits | null>();
  const check = {
    hold: null as ReturnType<typeof holdFeed> | null,
  };
  state.logCheck = check;
  check.hold = holdFeed(state, 'newHeads', 'newHeads', makeHeadFeed, {
    notify(json) {
      const head = JSON.parse(json) as Record<string, unknown>;
      const number = typeof head.number === 'string' ? parseInt(head.number, 16) : Number.NaN;
      if (!Number.isSafeInteger(number) || typeof head.hash !== 'string') return;
      const before = last;
      last = { number, hash: head.hash, bloom: bloomOf(head.logsBloom) };
      // A gap or a reorg is the log feeds' own to make up for (their resume and removed logs): only a block
      // followed by its next one is checked.
      if (!checkBlock(state, before, number, memo)) stop(state);
    },
    lost() {
      if (state.logCheck === check) state.logCheck = null;
    },
  });
}

/** Checks block `before` against every live logs feed now that head `number` came; false once no logs feed is left. */
function checkBlock(state: FeedsState, before: CheckedHead | null, number: number, memo: Map<string, BloomBits | null>): boolean {
  let logFeeds = 0;
  for (const feed of state.feeds.values()) {
    if (feed.kind !== 'logs' || feed.dropped) continue;
    logFeeds++;
    if (before === null || before.bloom === null || number !== before.number + 1) continue;
    const s = state.session;
    if (s === null || feed.sub?.session !== s.id || feed.readyIn !== s.id) continue;
    const handler = feed.handler as LogFeed;
    if (!handler.missed(before.number) || !filterMayMatch(before.bloom, handler.filter, memo)) continue;
    const block = before;
    enqueue(state, feed, s.id, async (deliver) => {
      // Live logs of the block queued before this step have run by now: only a block still without any is fetched.
      if (state.session !== s || !handler.missed(block.number)) return;
      const sent = await handler.backfill(block.hash, s.via, deliver);
      if (sent === 0) return;
      state.opts.logChecks!.backfilled();
      state.opts.log('warn', "logs subscription missed logs the block's bloom promised: fetched with eth_getLogs", {
        upstream: labelOf(state, s.node),
        block: block.number,
        logs: sent,
      });
    });
  }
  return logFeeds > 0;
}

function stop(state: FeedsState): void {
  const check = state.logCheck;
  state.logCheck = null;
  check?.hold?.remove();
}
