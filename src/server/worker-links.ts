/**
 * The main thread's side of its worker threads' links: what each worker is started with (worker-pool.ts
 * calls `start` at each start and restart) and whoever serves each concern's port on this side.
 */
import { MessageChannel } from 'node:worker_threads';
import type { Config } from '../config/schema.js';
import type { Logger, LogRecord } from '../log.js';
import type { WorkerStart } from './worker-pool.js';
import type { ChainRelayHost } from '../chain/relay.js';
import type { Tenancy } from '../pipeline/tenancy.js';

export interface WorkerLinksOptions {
  log: Logger;
  /** Extra CA certificates trusted for https upstreams (GatewayOptions.ca). */
  ca?: string | Buffer;
  /** The chains' side of each worker's chain port. */
  chains: ChainRelayHost;
  /** The main thread's tenancy, whose shared parts each worker gets. */
  tenancy: Tenancy;
}

export interface WorkerLinks {
  /** A worker's data and ports, with the config in force and the main port it listens on. */
  start(config: Config, port: number): WorkerStart;
}

export function createWorkerLinks(opts: WorkerLinksOptions): WorkerLinks {
  return {
    start(config, port) {
      // The worker's log lines are written by this thread's log: one stream for the process.
      const log = new MessageChannel();
      log.port1.on('message', (r: LogRecord) => opts.log[r.level](r.msg, r.fields));
      log.port1.unref();
      const chains = new MessageChannel();
      opts.chains.attach(chains.port1);
      return {
        data: {
          config,
          port,
          log: log.port2,
          link: { chains: chains.port2, tenancy: opts.tenancy.share() },
          ...(opts.ca !== undefined ? { ca: opts.ca } : {}),
        },
        transfer: [log.port2, chains.port2],
      };
    },
  };
}
