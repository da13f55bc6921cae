/**
 * The main thread's side of its worker threads' links: what each worker is started with (worker-pool.ts
 * calls `start` at each start and restart) and whoever serves each concern's port on this side.
 */
import { randomBytes } from 'node:crypto';
import { MessageChannel } from 'node:worker_threads';
import type { Config } from '../config/schema.js';
import type { Logger, LogRecord } from '../log.js';
import type { RepeatedLog, RepeatedRecord } from '../repeated-log.js';
import type { WorkerStart } from './worker-pool.js';
import type { WorkerLink } from './worker-link.js';
import type { ChainRelayHost } from '../chain/relay.js';
import type { ChainRuntime } from '../chain/runtime.js';
import type { WriteMark } from '../chain/write-mark.js';
import type { SharedHeads } from '../chain/shared-heads.js';
import type { FeedsLog } from '../fanout/feeds.js';
import { serveFeedRelay } from '../fanout/feed-relay.js';
import { serveEventRelay } from '../fanout/event-relay.js';
import type { Tenancy } from '../pipeline/tenancy.js';

export interface WorkerLinksOptions {
  log: Logger;
  /** Extra CA certificates trusted for https upstreams (GatewayOptions.ca). */
  ca?: string | Buffer;
  /** The main thread's tenancy, whose shared parts each worker gets. */
  tenancy: Tenancy;
  /** The main thread's chains, whose upstream subscriptions and event streams the workers' clients share. */
  chains: ChainRelayHost;
  chainOf(slug: string): ChainRuntime | undefined;
  /** When a transaction last went through any thread. */
  writes: WriteMark;
  /** Each chain's served head, shared with every worker. */
  heads: SharedHeads;
  /** The main thread's logs of repeated conditions, by name (createForwardingRepeatedLog in the workers). */
  repeated: Record<string, RepeatedLog>;
  /** How many workers the process runs. */
  workers: number;
  /** The connection cap's memory (limits/connection-cap.ts), one count for every worker. */
  connections: SharedArrayBuffer;
  /** Where the relays log (a worker's subscriptions lost, and the like). */
  feedsLog: FeedsLog;
}

export interface WorkerLinks {
  /** A worker's data and ports, with the config in force and the main port it listens on. */
  start(config: Config, port: number): WorkerStart;
}

export function createWorkerLinks(opts: WorkerLinksOptions): WorkerLinks {
  const subscriptionSecret = randomBytes(32);
  return {
    start(config, port) {
      // The worker's log lines are written by this thread's log: one stream for the process.
      const log = new MessageChannel();
      log.port1.on('message', (r: LogRecord | RepeatedRecord) => {
        if ('repeated' in r) opts.repeated[r.repeated]?.report(r.key, r.msg, r.fields, r.detail);
        else opts.log[r.level](r.msg, r.fields);
      });
      log.port1.unref();
      const chains = new MessageChannel();
      opts.chains.attach(chains.port1);
      const feeds = new MessageChannel();
      // A port has no backpressure: each relay bounds what it queues for this worker (fanout/relay-backlog.ts).
      const maxBacklogBytes = config.server.worker_relay_max_bytes;
      serveFeedRelay(feeds.port1, (slug) => opts.chainOf(slug)?.feeds ?? null, { log: opts.feedsLog, maxBacklogBytes });
      feeds.port1.unref();
      const events = new MessageChannel();
      serveEventRelay(events.port1, (slug) => opts.chainOf(slug)?.events ?? null, { maxBacklogBytes });
      events.port1.unref();
      const tenancy = opts.tenancy.share();
      const link: Omit<WorkerLink, 'index'> = {
        subscriptionSecret,
        workers: opts.workers,
        writes: opts.writes.memory,
        heads: opts.heads.memory,
        connections: opts.connections,
        chains: chains.port2,
        feeds: feeds.port2,
        events: events.port2,
        tenancy: tenancy.shared,
      };
      return {
        data: { config, port, log: log.port2, link, ...(opts.ca !== undefined ? { ca: opts.ca } : {}) },
        transfer: [log.port2, chains.port2, feeds.port2, events.port2, ...tenancy.transfer],
      };
    },
  };
}
