/**
 * The logs feeds checked for completeness against each head (issue 35 §3): a node's logs subscription may die or
 * lag silently while its newHeads goes on. Each logs feed checks every block after its first subscription against
 * the block's `logsBloom` (log-feed.ts checkUpTo): a block whose bloom says the filter may match and of which the
 * feed delivered no log has its logs fetched with eth_getLogs (by the block's hash) and delivered. A block is
 * checked when the feed's first live log of a later block comes (in that log's step, so what was missed goes out
 * before it) or, for a block followed by no log at all, when the next head comes (a step queued on the feed).
 * A block whose bloom matched by chance (blooms give false positives) yields nothing and is not counted; one that
 * yields logs is counted and logged with the node.
 *
 * On only when FeedsOptions.logChecks is given (the chain's feeds): this file holds the newHeads feed while any
 * logs feed exists, keeping the last CHECK_BLOCKS heads' hashes and blooms. The check ends when the last logs
 * feed is dropped (feed-subscription.ts endLogCheck), or, when the node refused the last one (which ends no
 * check), at the next head (checkBefore finds no logs feed). Its work is per head and per logs feed; a log costs
 * one comparison.
 */
import { bloomOf } from '../jsonrpc/logs-bloom.js';
import { enqueue, holdFeed } from './feed-subscription.js';
import type { FeedHandler } from './feeds.js';
import { type FeedsState, labelOf } from './feeds-state.js';
import type { LogCompleteness, LogFeed } from './log-feed.js';
import { headOf, keepFrom } from './recent-heads.js';

/** Heads whose hash and bloom are kept. */
const CHECK_BLOCKS = 128;

/** What logs feeds read of the check (LogFeedOptions.completeness); undefined when FeedsOptions.logChecks is not given. */
export function logCompleteness(state: FeedsState): LogCompleteness | undefined {
  const checks = state.opts.logChecks;
  if (checks === undefined) return undefined;
  return {
    blockAt: (n) => state.logCheck?.blocks.get(n),
    backfilled(node, block, logs) {
      checks.backfilled();
      state.opts.log('warn', "logs subscription missed logs the block's bloom promised: fetched with eth_getLogs", {
        upstream: labelOf(state, node),
        block,
        logs,
      });
    },
  };
}

/** Starts the check, if it is on and not running: called when a logs feed is subscribed to. */
export function checkLogFeeds(state: FeedsState, makeHeadFeed: () => FeedHandler): void {
  if (state.opts.logChecks === undefined || state.logCheck !== null) return;
  const check: NonNullable<FeedsState['logCheck']> = { hold: null, blocks: new Map() };
  state.logCheck = check;
  check.hold = holdFeed(state, 'newHeads', 'newHeads', makeHeadFeed, {
    notify(json) {
      const head = headOf(json);
      if (head === null) return;
      const { number } = head;
      // A number new to the map below those it holds (the feed went onto a lower chain): what it holds above is
      // another chain's, dropped so the numbers stay in ascending order for keepFrom (and are refilled as it climbs).
      if (!check.blocks.has(number)) for (const n of check.blocks.keys()) if (n > number) check.blocks.delete(n);
      check.blocks.set(number, { hash: head.hash, bloom: bloomOf(head.logsBloom) });
      keepFrom(check.blocks, number - CHECK_BLOCKS + 1);
      if (!checkBefore(state, number)) stop(state);
    },
    lost() {
      if (state.logCheck === check) state.logCheck = null;
    },
  });
}

/** Head `number` came: each live logs feed checks the blocks before it; false once no logs feed is left. */
function checkBefore(state: FeedsState, number: number): boolean {
  let logFeeds = 0;
  const s = state.session;
  for (const feed of state.feeds.values()) {
    if (feed.kind !== 'logs' || feed.dropped) continue;
    logFeeds++;
    if (s === null || feed.sub?.session !== s.id || feed.readyIn !== s.id) continue;
    const handler = feed.handler as LogFeed;
    enqueue(state, feed, s.id, (deliver) => (state.session === s ? handler.checkUpTo(number - 1, s.via, deliver) : undefined));
  }
  return logFeeds > 0;
}

function stop(state: FeedsState): void {
  const check = state.logCheck;
  state.logCheck = null;
  check?.hold?.remove();
}
