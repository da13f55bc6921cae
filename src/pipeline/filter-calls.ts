/**
 * The six filter methods, answered by the gateway from each chain's filter registry
 * (src/filters/filter-registry.ts), so a filter outlives the node it was made on. Filters belong to
 * the caller's limit key (`ep:<endpoint id>`, or `ip:<address>` on the public path).
 *
 * The registry is fed with the chain's blocks while a block or log filter is open, and with pending
 * transaction hashes while a pending filter is: from the chain's upstream subscriptions when it has
 * WebSocket upstreams, otherwise from a poll of the latest block once a second. Without a pending
 * subscription, a pending filter reports the transactions sent through this gateway and those of
 * each new block (a node's pool cannot be seen over HTTP); each hash once.
 */
import { rpcCustomErrorBody, rpcErrorBody } from '../errors.js';
import { createFilterRegistry, filterError, type FilterRegistry, isFilterError } from '../filters/filter-registry.js';
import { isQuantity } from '../jsonrpc/param-types.js';
import { type GatewayContext, gatewayState } from './context.js';
import type { ChainRuntime } from '../chain/runtime.js';
import { callUpstream, NodeRpcError } from '../upstreams/rpc-call.js';
import { type Caller, settleCall } from './admission.js';
import { chainHead, followBlocks, type PolledBlock, upstreamsInTurn } from './head.js';
import type { Local, PlannedAnswer } from './plan.js';

const FILTER_METHODS: ReadonlySet<string> = new Set([
  'eth_newFilter',
  'eth_newBlockFilter',
  'eth_newPendingTransactionFilter',
  'eth_getFilterChanges',
  'eth_getFilterLogs',
  'eth_uninstallFilter',
]);

/** True for the methods the gateway's filters answer (never forwarded). */
export function isFilterMethod(method: string): boolean {
  return FILTER_METHODS.has(method);
}

/** One chain's filters and what feeds them. */
export interface ChainFilters {
  readonly registry: FilterRegistry;
  /** Runs one filter call for `scope`: its result, a -32000 refusal, or a rejection when the chain could not be read. */
  call(scope: string, method: string, params: unknown[]): Promise<unknown>;
  /** A transaction the gateway forwarded: news for pending filters that no upstream subscription feeds. */
  notePendingTransaction(hash: string): void;
  /** Drops every filter and stops feeding them. */
  close(): void;
}

/** Pending transaction hashes remembered so that each is reported once. */
const RECENT_PENDING = 10_000;

const TOO_MANY = filterError('too many filters');

/** The chain's filters, made on the first filter call. */
export function filtersOf(ctx: GatewayContext, chain: ChainRuntime): ChainFilters {
  const all = gatewayState(ctx).filters;
  let filters = all.get(chain);
  if (filters === undefined) all.set(chain, (filters = createChainFilters(ctx, chain)));
  return filters;
}

/**
 * Answers one admitted filter call and settles its metering: a result or a node-like -32000 refusal
 * is charged; 'too many filters' (a limit) is not; a node's own error for the eth_getLogs behind a
 * poll is passed on, charged; an upstream failure is 502, refunded. Never rejects.
 */
export async function answerFilterCall(ctx: GatewayContext, chain: ChainRuntime, caller: Caller, call: Local): Promise<PlannedAnswer> {
  const t = ctx.tenancy;
  const charged = (answer: string): PlannedAnswer => {
    settleCall(t, caller, call.method, call.admission, { ok: true, bytes: answer.length });
    return { answer, outcome: 'ok' };
  };
  try {
    const r = await filtersOf(ctx, chain).call(caller.limitKey, call.method, call.params);
    if (isFilterError(r)) {
      const answer = rpcCustomErrorBody(r.code, call.idText, r.message);
      if (r !== TOO_MANY) return charged(answer);
      settleCall(t, caller, call.method, call.admission, { ok: false, status: r.code });
      return { answer, outcome: 'ok' };
    }
    return charged(`{"jsonrpc":"2.0","id":${call.idText},"result":${JSON.stringify(r)}}`);
  } catch (err) {
    if (err instanceof NodeRpcError) return charged(rpcCustomErrorBody(err.code, call.idText, err.message));
    ctx.log.warn('a filter call could not read the chain', {
      chain: chain.config.slug,
      method: call.method,
      reason: String((err as Error).message ?? err),
    });
    settleCall(t, caller, call.method, call.admission, { ok: false, status: 502 });
    return { answer: rpcErrorBody('upstream_error', call.idText), outcome: 'upstream_error' };
  }
}

/**
 * eth_getLogs for the filters, on the first upstream in turn that has the range: with several
 * upstreams, one that is behind the range's end (asked with eth_blockNumber first, on the same node)
 * is skipped, since its answer would leave out blocks the filter then counts as covered. A failure,
 * the node's own refusal included (a node that fell behind meanwhile refuses the range), moves to
 * the next upstream; when none answered, the first refusal is passed on, else the last failure.
 */
async function getLogsInTurn(chain: ChainRuntime, filter: Record<string, unknown>): Promise<unknown[]> {
  const end = chain.upstreams.length > 1 && isQuantity(filter.toBlock) ? Number(filter.toBlock) : null;
  let failure: unknown = new Error('no upstream answered');
  let refusal: NodeRpcError | null = null;
  for (const upstream of upstreamsInTurn(chain)) {
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
      return logs;
    } catch (err) {
      if (err instanceof NodeRpcError) refusal ??= err;
      else failure = err;
    }
  }
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

function createChainFilters(ctx: GatewayContext, chain: ChainRuntime): ChainFilters {
  const head = chainHead(chain);
  /** A node's block number asked just before the current filter call: the filters' head. */
  let callHead: number | null = null;
  let wants = { heads: false, pending: false };
  /** Upstream subscriptions feeding the registry; null while none does (then the block poll does). */
  let headsFeed: (() => void) | null = null;
  let pendingFeed: (() => void) | null = null;
  /** A feed that was lost is not asked again until its filters are gone: the poll stands in. */
  let headsFeedLost = false;
  let pendingFeedLost = false;
  let stopFollowing: (() => void) | null = null;
  const pendingSeen = createRecentSet(RECENT_PENDING);
  const log = (msg: string, reason: string): void => ctx.log.warn(msg, { chain: chain.config.slug, reason });

  const registry = createFilterRegistry({
    source: {
      head: () => callHead ?? head.now(),
      getLogs: (filter) => getLogsInTurn(chain, filter),
    },
    maxPerScope: ctx.config.filters.max_per_key,
    idleTimeoutMs: ctx.config.filters.idle_timeout_s * 1000,
    onWantsChange(now) {
      wants = now;
      if (!now.heads) headsFeedLost = false;
      if (!now.pending) {
        pendingFeedLost = false;
        pendingSeen.clear();
      }
      feed();
    },
  });

  function pushPending(hash: string): void {
    if (pendingSeen.add(hash)) registry.onPendingTransaction(hash);
  }

  function onPolledBlock(block: PolledBlock): void {
    head.note(block.number);
    if (wants.heads && headsFeed === null) registry.onHead(block.number, block.hash);
    if (wants.pending && pendingFeed === null) for (const tx of block.transactions) pushPending(tx);
  }

  /** Opens or closes the subscriptions and the poll so that exactly what the registry wants is fed. */
  function feed(): void {
    const feeds = chain.feeds;
    if (wants.heads && headsFeed === null && feeds !== null && !headsFeedLost) {
      let lost = false;
      const stop = feeds.subscribe('newHeads', undefined, {
        notify(json) {
          const h = JSON.parse(json) as { number?: unknown; hash?: unknown };
          if (typeof h.number === 'string' && typeof h.hash === 'string') registry.onHead(Number(h.number), h.hash);
        },
        lost(reason) {
          lost = true;
          log("the filters' newHeads subscription was lost; polling blocks instead", reason);
          headsFeed = null;
          headsFeedLost = true;
          feed();
        },
      });
      if (!lost) headsFeed = stop.remove;
    } else if (!wants.heads && headsFeed !== null) {
      headsFeed();
      headsFeed = null;
    }
    if (wants.pending && pendingFeed === null && feeds !== null && !pendingFeedLost) {
      let lost = false;
      const stop = feeds.subscribe('newPendingTransactions', undefined, {
        notify(json) {
          const hash = JSON.parse(json) as unknown;
          if (typeof hash === 'string') pushPending(hash);
        },
        lost(reason) {
          lost = true;
          log("the filters' pending transaction subscription was lost; polling blocks instead", reason);
          pendingFeed = null;
          pendingFeedLost = true;
          feed();
        },
      });
      if (!lost) pendingFeed = stop.remove;
    } else if (!wants.pending && pendingFeed !== null) {
      pendingFeed();
      pendingFeed = null;
    }
    const poll = (wants.heads && headsFeed === null) || (wants.pending && pendingFeed === null);
    if (poll && stopFollowing === null) {
      stopFollowing = followBlocks(chain, { from: callHead, onBlock: onPolledBlock, stopped: () => ctx.stopping });
    } else if (!poll && stopFollowing !== null) {
      stopFollowing();
      stopFollowing = null;
    }
  }

  /** The head as a node tells it now, so a poll right after a client saw a new block covers that block. */
  async function refreshHead(): Promise<void> {
    callHead = (await head.fresh()) ?? head.now();
  }

  return {
    registry,
    async call(scope, method, params): Promise<unknown> {
      const id = params[0] as string;
      switch (method) {
        case 'eth_newFilter':
          await refreshHead();
          return registry.newFilter(scope, params[0] as Record<string, unknown>);
        case 'eth_newBlockFilter':
          await refreshHead();
          return registry.newBlockFilter(scope);
        case 'eth_newPendingTransactionFilter':
          await refreshHead();
          return registry.newPendingTransactionFilter(scope);
        case 'eth_getFilterChanges':
          await refreshHead();
          return registry.getFilterChanges(scope, id);
        case 'eth_getFilterLogs':
          return registry.getFilterLogs(scope, id);
        case 'eth_uninstallFilter':
          return registry.uninstall(scope, id);
        default:
          throw new Error(`${method} is not a filter method`);
      }
    },
    notePendingTransaction(hash) {
      if (wants.pending && pendingFeed === null) pushPending(hash);
    },
    close() {
      registry.close();
    },
  };
}
