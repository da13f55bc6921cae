/**
 * What a worker thread shares with the main thread besides its config: the shared memory and the ports of
 * each concern (server/worker-pool.ts hands them over in workerData; server/worker-thread.ts passes them
 * to startGateway).
 */
import type { MessagePort } from 'node:worker_threads';
import type { TenancyShare } from '../pipeline/tenancy.js';
import type { RepeatedRecord } from '../repeated-log.js';

export interface WorkerLink {
  /** The worker's number, from 1. */
  index: number;
  /** How many workers the process runs (each keeps this share of the response cache's budget). */
  workers: number;
  /** Keys, limits and balances shared with every thread. */
  tenancy: TenancyShare;
  /** The process's secret for subscription ids, so every worker gives a topic the same ids. */
  subscriptionSecret: Uint8Array;
  /** When a transaction last went through any thread (chain/write-mark.ts). */
  writes: SharedArrayBuffer;
  /** Each chain's served head, read by every thread (chain/shared-heads.ts). */
  heads: SharedArrayBuffer;
  /** The cap on client connections, counted by every worker (limits/connection-cap.ts). */
  connections: SharedArrayBuffer;
  /** The chains' probes and filters (chain/relay.ts). */
  chains: MessagePort;
  /** The chains' upstream subscriptions (fanout/feed-relay.ts). */
  feeds: MessagePort;
  /** The Beacon chains' upstream event streams (fanout/event-relay.ts). */
  events: MessagePort;
}

/** A worker's side of its link: the shared data, and where its repeated conditions go. */
export interface WorkerSide extends WorkerLink {
  /** Hands an occurrence of a repeated condition (upstream failures, 5xx answers) to the main thread. */
  forward(record: RepeatedRecord): void;
}
