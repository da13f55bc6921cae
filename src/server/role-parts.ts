/**
 * The one object a thread's role is built into (startGateway): what a thread of that role has and the others
 * have not. With worker threads, the main thread's chains tell the workers' copies of them what they probe and
 * serve them their filters, and the main thread runs the workers; a worker's chains follow the main thread's
 * (chain/relay.ts), and its upstream subscriptions and event streams are the main thread's, reached through
 * relays.
 */
import { createHmac } from 'node:crypto';
import type { Config } from '../config/schema.js';
import type { ChainRuntimeOptions } from '../chain/runtime.js';
import { type ChainRelayClient, type ChainRelayHost, createChainRelayClient, createChainRelayHost } from '../chain/relay.js';
import type { Cordons } from '../chain/cordons.js';
import type { ChainFilters } from '../chain/filters.js';
import type { WriteMark } from '../chain/write-mark.js';
import { connectFeedRelay, type FeedRelayClient } from '../fanout/remote-feeds.js';
import { connectEventRelay, type EventRelayClient } from '../fanout/event-relay.js';
import type { FeedsLog } from '../fanout/feeds.js';
import type { WorkerSide } from './worker-link.js';
import { type ThreadRole, unreachableRole } from './thread-role.js';
import type { WorkerPool } from './worker-pool.js';

export type RoleParts =
  /** One thread serves everything: the default, and every instance of a fleet. */
  | { kind: 'alone' }
  /** The main thread of workers: the host of its chains' relays, and its worker threads once started. */
  | { kind: 'main'; workers: number; host: ChainRelayHost; pool: WorkerPool | null }
  /** A worker thread: what it shares with the main thread, and the relays its chains follow. */
  | { kind: 'worker'; side: WorkerSide; client: ChainRelayClient; feeds: FeedRelayClient; events: EventRelayClient };

/** The parts of a thread of this role; `filtersOf` serves the main thread's filters to its workers, and the main
 *  thread's `cordons` are told to them (a worker's are kept equal to them). */
export function roleParts(
  role: ThreadRole,
  feedsLog: FeedsLog,
  filtersOf: (slug: string) => ChainFilters | undefined,
  cordons: Cordons,
): RoleParts {
  switch (role.kind) {
    case 'alone':
      return { kind: 'alone' };
    case 'main':
      return { kind: 'main', workers: role.workers, host: createChainRelayHost(filtersOf, cordons), pool: null };
    case 'worker':
      return {
        kind: 'worker',
        side: role.side,
        client: createChainRelayClient(role.side.chains, cordons),
        feeds: connectFeedRelay(role.side.feeds, { log: feedsLog }),
        events: connectEventRelay(role.side.events),
      };
    default:
      return unreachableRole(role);
  }
}

/** What chain `slug` shares with the other threads: the main thread's relays its probes, a worker's follows them. */
export function chainSharing(
  role: RoleParts,
  slug: string,
  inForce: Config,
  writes: WriteMark,
): Pick<ChainRuntimeOptions, 'relay' | 'replica' | 'writes' | 'poolShare'> {
  switch (role.kind) {
    case 'alone':
      return { writes };
    case 'main': {
      const host = role.host;
      return {
        writes,
        relay: {
          probes: host.observer(slug),
          feedHead: (i, h) => host.feedHead(slug, i, h),
          wrongChain: (i, w) => host.wrongChain(slug, i, w),
          finality: host.finality(slug),
          found: (node, found) => host.found(slug, node, found),
        },
      };
    }
    case 'worker': {
      const c = inForce.chains[slug]!;
      const { side, client } = role;
      return {
        writes,
        poolShare: side.workers,
        replica: {
          follow: (health, finality, found) => client.follow(slug, health, finality, found),
          filters: client.filters(slug),
          feeds: c.upstreams.some((u) => u.ws !== undefined) ? role.feeds.feeds(slug) : null,
          openEventLink: role.events.openLink(slug),
          subscriptionIdPrefix: (key) =>
            createHmac('sha256', side.subscriptionSecret).update(`${slug}\u0000${key}`).digest('hex').slice(0, 24),
        },
      };
    }
    default:
      return unreachableRole(role);
  }
}

/** Closes a worker's relays (the main thread's host closes with its chains). */
export function closeRoleParts(role: RoleParts): void {
  if (role.kind !== 'worker') return;
  role.client.close();
  role.feeds.close();
  role.events.close();
}

/** The worker threads: the main thread's once started, none in another role. */
export function workerPool(role: RoleParts): WorkerPool | null {
  return role.kind === 'main' ? role.pool : null;
}
