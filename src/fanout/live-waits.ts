import type { Timers } from '../upstreams/ws-link.js';

/**
 * Callers waiting for a feed's upstream subscription to open (a new eth_subscribe while the chain's link is
 * down or being opened). A wait ends well when the subscription opens, and in failure when its time is up,
 * when every upstream node has failed a link since it began, or when the feed is lost or refused: so a client
 * is told at once instead of being handed a subscription that may never deliver.
 */
export interface LiveWaits<F> {
  /** Resolves with null once `feed`'s upstream subscription is open, else with why not (fit for a client). */
  wait(feed: F, ms: number): Promise<string | null>;
  /** `feed`'s upstream subscription opened. */
  opened(feed: F): void;
  /** A link to node `node` closed before serving (refused, unreachable, dropped while subscribing). */
  nodeFailed(node: number): void;
  /** Ends the waits of `feed` (of every feed when undefined) with `reason`. */
  fail(feed: F | undefined, reason: string): void;
}

interface Wait<F> {
  feed: F;
  failedNodes: Set<number>;
  timer: unknown;
  settle(outcome: string | null): void;
}

export function createLiveWaits<F>(nodeCount: number, timers: Timers): LiveWaits<F> {
  const waits = new Set<Wait<F>>();

  function end(w: Wait<F>, outcome: string | null): void {
    if (!waits.delete(w)) return;
    timers.clearTimeout(w.timer);
    w.settle(outcome);
  }

  return {
    wait(feed, ms) {
      return new Promise((settle) => {
        const w: Wait<F> = { feed, failedNodes: new Set(), timer: null, settle };
        waits.add(w);
        w.timer = timers.setTimeout(() => end(w, `no upstream subscription within ${ms / 1000} s`), ms);
      });
    },
    opened(feed) {
      for (const w of waits) if (w.feed === feed) end(w, null);
    },
    nodeFailed(node) {
      const reason =
        nodeCount === 1 ? 'the upstream WebSocket could not be reached' : `none of the ${nodeCount} upstream WebSockets could be reached`;
      for (const w of waits) {
        w.failedNodes.add(node);
        if (w.failedNodes.size >= nodeCount) end(w, reason);
      }
    },
    fail(feed, reason) {
      for (const w of waits) if (feed === undefined || w.feed === feed) end(w, reason);
    },
  };
}
