/**
 * What a thread's chains share with the other threads of the process: with worker threads, the main thread's
 * chains tell the workers' copies of them what they probe and serve them their filters; a worker's chains
 * follow the main thread's (chain/relay.ts), and its upstream subscriptions and event streams are the main
 * thread's, reached through relays.
 */
import { createHmac } from 'node:crypto';
import type { Config } from '../config/schema.js';
import type { ChainRuntimeOptions } from '../chain/runtime.js';
import { type ChainRelayClient, type ChainRelayHost, createChainRelayClient, createChainRelayHost } from '../chain/relay.js';
import type { ChainFilters } from '../chain/filters.js';
import type { WriteMark } from '../chain/write-mark.js';
import { connectFeedRelay, type FeedRelayClient } from '../fanout/remote-feeds.js';
import { connectEventRelay, type EventRelayClient } from '../fanout/event-relay.js';
import type { FeedsLog } from '../fanout/feeds.js';
import type { WorkerSide } from './worker-link.js';
import { type ThreadRole, unreachableRole } from './thread-role.js';

export type ThreadLinks =
  | { kind: 'alone' }
  | { kind: 'main'; host: ChainRelayHost; workers: number }
  | { kind: 'worker'; side: WorkerSide; client: ChainRelayClient; feeds: FeedRelayClient; events: EventRelayClient };

/** The links of a thread of this role; `filtersOf` serves the main thread's filters to its workers. */
export function threadLinks(role: ThreadRole, feedsLog: FeedsLog, filtersOf: (slug: string) => ChainFilters | undefined): ThreadLinks {
  switch (role.kind) {
    case 'alone':
      return { kind: 'alone' };
    case 'main':
      return { kind: 'main', host: createChainRelayHost(filtersOf), workers: role.workers };
    case 'worker':
      return {
        kind: 'worker',
        side: role.side,
        client: createChainRelayClient(role.side.chains),
        feeds: connectFeedRelay(role.side.feeds, { log: feedsLog }),
        events: connectEventRelay(role.side.events),
      };
    default:
      return unreachableRole(role);
  }
}

/** What chain `slug` shares with the other threads: the main thread's relays its probes, a worker's follows them. */
export function chainSharing(
  links: ThreadLinks,
  slug: string,
  inForce: Config,
  writes: WriteMark,
): Pick<ChainRuntimeOptions, 'relay' | 'replica' | 'writes' | 'poolShare'> {
  switch (links.kind) {
    case 'alone':
      return { writes };
    case 'main': {
      const host = links.host;
      return {
        writes,
        relay: {
          probes: host.observer(slug),
          feedHead: (i, h) => host.feedHead(slug, i, h),
          wrongChain: (i, w) => host.wrongChain(slug, i, w),
        },
      };
    }
    case 'worker': {
      const c = inForce.chains[slug]!;
      const { side, client } = links;
      return {
        writes,
        poolShare: side.workers,
        replica: {
          follow: (health) => client.follow(slug, health),
          filters: client.filters(slug),
          feeds: c.upstreams.some((u) => u.ws !== undefined) ? links.feeds.feeds(slug) : null,
          openEventLink: links.events.openLink(slug),
          subscriptionIdPrefix: (key) =>
            createHmac('sha256', side.subscriptionSecret).update(`${slug}\u0000${key}`).digest('hex').slice(0, 24),
        },
      };
    }
    default:
      return unreachableRole(links);
  }
}

/** Closes a worker's relays (the main thread's host closes with its chains). */
export function closeLinks(links: ThreadLinks): void {
  if (links.kind !== 'worker') return;
  links.client.close();
  links.feeds.close();
  links.events.close();
}
