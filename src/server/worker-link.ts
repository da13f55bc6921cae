/**
 * What a worker thread shares with the main thread besides its config: the shared memory and the ports of
 * each concern (server/worker-pool.ts hands them over in workerData; server/worker-thread.ts passes them
 * to startGateway).
 */
import type { MessagePort } from 'node:worker_threads';
import type { TenancyShare } from '../pipeline/tenancy.js';

export interface WorkerLink {
  /** The worker's number, from 1. */
  index: number;
  /** Keys, limits and balances shared with every thread. */
  tenancy: TenancyShare;
  /** The chains' probes and filters (chain/relay.ts). */
  chains: MessagePort;
  /** The chains' upstream subscriptions (fanout/feed-relay.ts). */
  feeds: MessagePort;
  /** The Beacon chains' upstream event streams (fanout/event-relay.ts). */
  events: MessagePort;
}
