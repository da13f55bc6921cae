/**
 * A chain's filters (ChainRuntime.filters): the registry of src/filters/filter-registry.ts and what feeds
 * it. Filters belong to the caller's limit key (`ep:<endpoint id>`, or `ip:<address>` on the public path);
 * pipeline/filter-calls.ts answers the six filter methods from them.
 *
 * The registry is fed with the chain's blocks while a block or log filter is open, and with pending
 * transaction hashes while a pending filter is: from the chain's upstream subscriptions when it has
 * WebSocket upstreams, otherwise from a poll of the latest block once a second. Without a pending
 * subscription, a pending filter reports the transactions sent through this gateway and those of
 * each new block (a node's pool cannot be seen over HTTP); each hash once.
 */
import type { FeedsLog } from '../fanout/feeds.js';
import { createFilterRegistry, type FilterRegistry } from '../filters/filter-registry.js';
import { isQuantity } from '../jsonrpc/param-types.js';
import { callUpstream, NodeRpcError } from '../upstreams/rpc-call.js';
import { FAILED_CHECK_REASON } from './answer-checks.js';
import { type BlockFollower, followBlocks, type PolledBlock } from './block-follower.js';
import { upstreamsInTurn } from './head.js';
import type { ChainRuntime } from './runtime.js';

/** One chain's filters and what feeds them. */
export interface ChainFilters {
  /** Filters open on the chain. */
  size(): number;
  /** Runs one filter call for `scope`: its result, a -32000 refusal, or a rejection when the chain could not be read. */
  call(scope: string, method: string, params: unknown[]): Promise<unknown>;
  /** True while a pending filter is open that no upstream subscription feeds: transactions sent through the gateway are its news. */
  takesSentTransactions(): boolean;
  /** A transaction the gateway forwarded: news for pending filters that no upstream subscription feeds. */
  notePendingTransaction(hash: string): void;
  /** Drops every filter and stops feeding them. */
  close(): void;
}

export interface ChainFiltersOptions {
  /** Open filters per limit key at most (config filters.max_per_key). */
  maxPerKey: number;
  /** A filter not polled this long is removed, in ms (config filters.idle_timeout_s). */
  idleTimeoutMs: number;
  /** The chain's log: a lost subscription that the block poll replaces. */
  log: FeedsLog;
  /** True once the gateway is stopping: the block poll stops then, before close() drops the filters. */
  stopping?: () => boolean;
}

/** What the filters read of their chain: the parts made before them. */
export type FilterSources = Pick<ChainRuntime, 'head' | 'feeds' | 'timeoutMs' | 'upstreams' | 'pickUpstream' | 'routes' | 'health'> &
  Partial<Pick<ChainRuntime, 'served' | 'checks'>>;

/** Pending transaction hashes remembered so that each is reported once. */
const RECENT_PENDING = 10_000;
/**
 * How long a filter poll waits for the upstream head subscription to deliver the head the node just
 * reported, in ms: a log filter reads no further than the heads delivered (see FilterRegistry.headSeen), and
 * a subscription is a few ms behind its node's HTTP. A stalled one costs each poll this once, then the
 * poll reads up to the heads delivered and the rest comes at the next poll.
 */
const HEAD_CATCH_UP_MS = 500;

/**
 * eth_getLogs for the filters, on the first upstream in turn that has the range (of those that serve
 * eth_getLogs: an upstream whose methods.deny names it is never asked): with several
 * upstreams, one that is behind the range's end (asked with eth_blockNumber first, on the same node)
 * is skipped, since its answer would leave out blocks the filter then counts as covered. A failure,
 * the node's own refusal included (a node that fell behind meanwhile refuses the range), moves to
 * the next upstream; when none answered, the first refusal is passed on, else the last failure. The logs are
 * checked against the blooms of the blocks the chain knows (answer-checks.ts): an answer that fails is a failure,
 * a suspect one is passed on only when no other upstream gives an answer that is not.
 */
async function getLogsInTurn(chain: FilterSources, filter: Record<string, unknown>): Promise<unknown[]> {
  const end = chain.upstreams.length > 1 && isQuantity(filter.toBlock) ? Number(filter.toBlock) : null;
  let failure: unknown = new Error('no upstream answered');
  let refusal: NodeRpcError | null = null;
  const check = chain.checks?.forLogs() ?? null;
  let suspect: unknown[] | null = null;
  for (const upstream of upstreamsInTurn(chain)) {
    if (!chain.routes.serves(chain.upstreams.indexOf(upstream), 'eth_getLogs')) continue;
    try {
      if (end !== null) {
        const head = await callUpstream(upstream, chain.timeoutMs, 'eth_blockNumber', []);
        if (typeof head !== 'string' || !(Number(head) >= end)) {
          failure = new Error(`every upstream is behind block ${end}`);
          continue;
        }
      }
      const logs = await callUpstream(upstream, chain.timeoutMs, 'eth_getLogs', [filter]);
      if (!Array.isArray(logs)) throw new Error('eth_getLogs did not answer a list');
      const verdict = check === null ? 'pass' : check.judgeLogs(filter, logs, chain.upstreams.indexOf(upstream));
      if (verdict === 'fail') throw new Error(FAILED_CHECK_REASON);
      if (verdict === 'suspect') {
        suspect = logs;
        continue;
      }
      return logs;
    } catch (err) {
      if (err instanceof NodeRpcError) refusal ??= err;
      else failure = err;
    }
  }
  if (suspect !== null) return suspect;
  throw refusal ?? failure;
}

/** Remembers the newest `capacity` strings; add() is false for one already held. */
function createRecentSet(capacity: number): { add(s: string): boolean; clear(): void } {
  const held = new Set<string>();
  return {
    add(s) {
      if (held.has(s)) return false;
      held.add(s);
      if (held.size > capacity) held.delete(held.values().next().value!);
      return true;
    },
    clear: () => held.clear(),
  };
}

/** One upstream subscription feeding the filters. */
class UpstreamFeed {
  /** Closes the subscription; null while none feeds (then the block poll does). */
  stop: (() => void) | null = null;
  /** A feed that was lost is not asked again until its filters are gone: the poll stands in. */
  lost = false;
}

/** The chain's filters, empty until a filter call; close() drops them and stops what fed them. */
export function createChainFilters(chain: FilterSources, opts: ChainFiltersOptions): ChainFilters {
  return new FedFilters(chain, opts);
}

/** The registry and its feeds, their state in fields: which feeds are open, lost, and who waits for a head. */
class FedFilters implements ChainFilters {
  /** A node's block number asked just before the current filter call: the filters' head. */
  private callHead: number | null = null;
  private wants = { heads: false, pending: false };
  /** The upstream subscriptions feeding the registry heads and pending transactions. */
  private readonly heads = new UpstreamFeed();
  private readonly pending = new UpstreamFeed();
  private follower: BlockFollower | null = null;
  /** Polls waiting for the head stream to reach a number (HEAD_CATCH_UP_MS at most). */
  private readonly headWaits = new Set<{ number: number; done(): void }>();
  private readonly pendingSeen = createRecentSet(RECENT_PENDING);
  private readonly registry: FilterRegistry;

  constructor(
    private readonly chain: FilterSources,
    private readonly opts: ChainFiltersOptions,
  ) {
    this.registry = createFilterRegistry({
      source: {
        head: () => this.callHead ?? chain.head.now(),
        getLogs: (filter) => getLogsInTurn(chain, filter),
      },
      maxPerScope: opts.maxPerKey,
      idleTimeoutMs: opts.idleTimeoutMs,
      onWantsChange: (now) => {
        this.wants = now;
        if (!now.heads) this.heads.lost = false;
        if (!now.pending) {
          this.pending.lost = false;
          this.pendingSeen.clear();
        }
        this.feed();
      },
    });
  }

  private log(msg: string, reason: string): void {
    this.opts.log('warn', msg, { reason });
  }

  private pushPending(hash: string): void {
    if (this.pendingSeen.add(hash)) this.registry.onPendingTransaction(hash);
  }

  /** A head as the newHeads subscription tells it. */
  private readonly headJson = (json: string): void => {
    const h = JSON.parse(json) as { number?: unknown; hash?: unknown };
    if (typeof h.number === 'string' && typeof h.hash === 'string') this.feedHead(Number(h.number), h.hash);
  };

  /** A transaction hash as the newPendingTransactions subscription tells it. */
  private readonly pendingJson = (json: string): void => {
    const hash = JSON.parse(json) as unknown;
    if (typeof hash === 'string') this.pushPending(hash);
  };

  private feedHead(number: number, hash: string): void {
    this.registry.onHead(number, hash);
    for (const w of this.headWaits) if (number >= w.number) w.done();
  }

  private onPolledBlock(block: PolledBlock): void {
    this.chain.head.note(block.number);
    if (this.wants.heads && this.heads.stop === null) this.feedHead(block.number, block.hash);
    if (this.wants.pending && this.pending.stop === null) for (const tx of block.transactions) this.pushPending(tx);
  }

  /** Opens or closes the subscriptions and the poll so that exactly what the registry wants is fed. */
  private feed(): void {
    this.feedOne(this.heads, this.wants.heads, 'newHeads', 'newHeads', this.headJson);
    this.feedOne(this.pending, this.wants.pending, 'newPendingTransactions', 'pending transaction', this.pendingJson);
    this.feedPoll();
  }

  /** Opens `feed`'s subscription to `topic` while `wanted` (unless it was lost), closes it once not. */
  private feedOne(
    feed: UpstreamFeed,
    wanted: boolean,
    topic: 'newHeads' | 'newPendingTransactions',
    what: string,
    notify: (json: string) => void,
  ): void {
    const feeds = this.chain.feeds;
    if (wanted && feed.stop === null && feeds !== null && !feed.lost) {
      let lost = false;
      const stop = feeds.subscribe(topic, undefined, {
        notify,
        lost: (reason) => {
          lost = true;
          this.log(`the filters' ${what} subscription was lost; polling blocks instead`, reason);
          feed.stop = null;
          feed.lost = true;
          this.feed();
        },
      });
      if (!lost) feed.stop = stop.remove;
    } else if (!wanted && feed.stop !== null) {
      feed.stop();
      feed.stop = null;
    }
  }

  /** The block poll runs while a wanted feed has no subscription. */
  private feedPoll(): void {
    const { chain, wants } = this;
    const poll = (wants.heads && this.heads.stop === null) || (wants.pending && this.pending.stop === null);
    if (poll && this.follower === null) {
      this.follower = followBlocks(chain, {
        from: this.callHead,
        onBlock: (block) => this.onPolledBlock(block),
        followsNewChain: (upstream, number) => {
          const index = chain.upstreams.indexOf(upstream);
          return index < 0 || chain.health.followsNewChain(index, number);
        },
        ...(this.opts.stopping !== undefined ? { stopped: this.opts.stopping } : {}),
        // A chain of several nodes shows no block above the head it serves (the newHeads feed holds them too).
        ...(chain.served !== undefined && chain.upstreams.length > 1 ? { ceiling: chain.served.now.bind(chain.served) } : {}),
      });
    } else if (!poll && this.follower !== null) {
      this.follower.stop();
      this.follower = null;
    }
  }

  /**
   * Resolves once the filters' head stream has delivered the head of this call (callHead), so a poll right
   * after a client saw a new block covers it: the block poll is asked at once; a subscription is waited
   * for, HEAD_CATCH_UP_MS at most.
   */
  private headsCaughtUp(): Promise<void> {
    const seen = this.registry.headSeen();
    const callHead = this.callHead;
    if (callHead === null || seen === null || seen >= callHead) return Promise.resolve();
    if (this.heads.stop === null && this.follower !== null) return this.follower.pollNow();
    const headWaits = this.headWaits;
    return new Promise((resolve) => {
      const wait = {
        number: callHead,
        done() {
          clearTimeout(timer);
          headWaits.delete(wait);
          resolve();
        },
      };
      const timer = setTimeout(wait.done, HEAD_CATCH_UP_MS);
      headWaits.add(wait);
    });
  }

  /**
   * The head as a node tells it now, so a poll right after a client saw a new block covers that block; never above
   * the served head of a chain of several nodes, whose heads the filters get no further than (so a poll does
   * not wait for a head the newHeads feed holds).
   */
  private async refreshHead(): Promise<void> {
    const { head, served, upstreams } = this.chain;
    const known = (await head.fresh()) ?? head.now();
    const ceiling = upstreams.length > 1 ? (served?.now() ?? null) : null;
    this.callHead = known === null || ceiling === null ? known : Math.min(known, ceiling);
  }

  size(): number {
    return this.registry.size();
  }

  async call(scope: string, method: string, params: unknown[]): Promise<unknown> {
    const registry = this.registry;
    const id = params[0] as string;
    switch (method) {
      case 'eth_newFilter':
        await this.refreshHead();
        return registry.newFilter(scope, params[0] as Record<string, unknown>);
      case 'eth_newBlockFilter':
        await this.refreshHead();
        return registry.newBlockFilter(scope);
      case 'eth_newPendingTransactionFilter':
        await this.refreshHead();
        return registry.newPendingTransactionFilter(scope);
      case 'eth_getFilterChanges':
        await this.refreshHead();
        await this.headsCaughtUp();
        return registry.getFilterChanges(scope, id);
      case 'eth_getFilterLogs':
        return registry.getFilterLogs(scope, id);
      case 'eth_uninstallFilter':
        return registry.uninstall(scope, id);
      default:
        throw new Error(`${method} is not a filter method`);
    }
  }

  takesSentTransactions(): boolean {
    return this.wants.pending && this.pending.stop === null;
  }

  notePendingTransaction(hash: string): void {
    if (this.wants.pending && this.pending.stop === null) this.pushPending(hash);
  }

  close(): void {
    this.registry.close();
    for (const w of this.headWaits) w.done();
  }
}
