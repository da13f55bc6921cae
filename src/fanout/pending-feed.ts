/**
 * The newPendingTransactions feed: notifications pass as the node sends them. Pending
 * transactions missed while the upstream was away cannot be asked for afterwards, so a new link
 * only subscribes again.
 */
import type { FeedHandler } from './feeds.js';

export function createPendingFeed(fullTransactions: boolean): FeedHandler {
  return {
    subscribeParams: fullTransactions ? ['newPendingTransactions', true] : ['newPendingTransactions'],
    live(result, _via, deliver) {
      deliver(result);
    },
    async resume() {},
  };
}
