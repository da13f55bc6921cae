/**
 * A chain's head as the pipeline sees it (ChainRuntime.head, made once with the chain), for the cache's
 * finality test, the eth_getLogs range limit and the chain's filters. Sources, best first: the health
 * tracker's best healthy head, the newHeads feed (while it runs), and last an eth_blockNumber of the
 * gateway's own, asked at most once a second and only when a head is wanted, so a chain without WebSocket
 * upstreams still has a head and an idle chain costs its nodes nothing.
 */
import { performance } from 'node:perf_hooks';
import type { HttpUpstream } from '../upstreams/http-client.js';
import { readEvmHead } from '../upstreams/head-probe.js';
import type { ChainRuntime } from './runtime.js';

/** How long a polled head is used before the next look asks a node again. */
export const HEAD_POLL_MS = 1000; // ms
/** One head poll may take this long at most: a hung node must not leave the head unknown for the call timeout. */
export const HEAD_CALL_TIMEOUT_MS = 5000; // ms

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

/**
 * The upstreams to try for a call the gateway makes itself: the chain's pick first (its choice of a
 * healthy node), then the others in configured order, so one dead node never fails the call.
 */
export function upstreamsInTurn(chain: Pick<ChainRuntime, 'upstreams' | 'pickUpstream'>): HttpUpstream[] {
  const first = chain.pickUpstream();
  return [first, ...chain.upstreams.filter((u) => u !== first)];
}

/** What the head is read from: the parts of its chain made before it. */
export type HeadSources = Pick<ChainRuntime, 'health' | 'feeds' | 'timeoutMs' | 'upstreams' | 'pickUpstream'>;

/** The chain's head tracker (createChainRuntime makes one per chain). */
export function createChainHead(chain: HeadSources): ChainHead {
  let polled: number | null = null;
  /** When the last poll started, answered or not: a dead chain is asked once a second too, not once a call. */
  let askedAt = -Infinity;
  /** The poll on its way, and the one that follows it for callers who came after it started. */
  let running: Promise<unknown> | null = null;
  let queued: Promise<unknown> | null = null;

  /** The health tracker's or the feed's head; null when neither knows one. */
  function tracked(): number | null {
    return chain.health.bestHead() ?? chain.feeds?.head()?.number ?? null;
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
