/**
 * What a thread of the gateway process is, decided once at start (startGateway) and read by an exhaustive
 * switch wherever the roles differ, so a new role fails to compile until every part handles it.
 */
import type { Config } from '../config/schema.js';
import type { WorkerSide } from './worker-link.js';
import { workerCount } from './worker-pool.js';

export type ThreadRole =
  /** One thread serves everything: the default, and every instance of a fleet. */
  | { kind: 'alone' }
  /**
   * The main thread of a gateway with worker threads: it serves no client itself (its workers do, worker-pool.ts)
   * and keeps what must exist once (the ledger's writer, the probes, the upstream subscriptions, the listeners
   * of management and metrics).
   */
  | { kind: 'main'; workers: number }
  /** A worker thread (worker-thread.ts): it serves clients on the main port and shares the rest with the main thread. */
  | { kind: 'worker'; side: WorkerSide };

/**
 * The role of a gateway started with `worker` (set in a worker thread) or not. An instance of a fleet runs one
 * thread (config checks refuse more): its limits and RU are shared through Redis and PostgreSQL.
 */
export function threadRole(config: Config, worker: WorkerSide | undefined): ThreadRole {
  if (worker !== undefined) return { kind: 'worker', side: worker };
  if (config.cluster !== undefined) return { kind: 'alone' };
  const workers = workerCount(config.server.workers);
  return workers > 1 ? { kind: 'main', workers } : { kind: 'alone' };
}

/** The worker threads this thread starts (1 when it starts none). */
export function workersStarted(role: ThreadRole): number {
  return role.kind === 'main' ? role.workers : 1;
}

export function unreachableRole(role: never): never {
  throw new Error(`unknown thread role ${JSON.stringify(role)}`);
}
