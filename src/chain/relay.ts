/**
 * What a worker thread's copy of a chain takes from the main thread's runtime of it, over one port per
 * worker: the prober's reports (one prober per chain for the process; each worker's health hears every
 * probe, and counts its own calls' outcomes itself), and the filters, which live on the main thread only so
 * that a filter made through one worker is read through any other.
 */
import type { MessagePort } from 'node:worker_threads';
import { filterError, type FilterErrorMessage, isFilterError } from '../filters/filter-registry.js';
import type { ProbeObserver } from '../upstreams/prober.js';
import { NodeRpcError } from '../upstreams/rpc-call.js';
import type { ChainHealth } from '../upstreams/selection.js';
import type { ChainFilters } from './filters.js';
import { errorText } from '../log.js';

type ToWorker =
  | { chain: string; started: number }
  | { chain: string; reported: number; head: number | null; latencyMs: number; hung: boolean }
  | { chain: string; feedHead: number; head: number }
  | { chain: string; wrongChain: number; wrong: boolean }
  | { reply: number; result: unknown }
  | { reply: number; refusal: FilterErrorMessage }
  | { reply: number; rpcError: { code: number; message: string } }
  | { reply: number; failure: string };

type ToMain = { call: number; chain: string; scope: string; method: string; params: unknown[] } | { chain: string; pending: string };

/** The main thread's side: its chains' probe reports to every worker, and the workers' filter calls. */
export interface ChainRelayHost {
  /** Serves one worker's port until it closes (the worker stopped or died). */
  attach(port: MessagePort): void;
  /** What the prober of chain `slug` tells its health, told to every worker (ProberOptions.observer). */
  observer(slug: string): ProbeObserver;
  /** A feed heard node `index` of `slug` report `head` (ChainHealth.followsNewChain), told to every worker. */
  feedHead(slug: string, index: number, head: number): void;
  /** Node `index` of `slug` serves another chain (or its own), told to every worker (UpstreamHealth.reportWrongChain). */
  wrongChain(slug: string, index: number, wrong: boolean): void;
}

export function createChainRelayHost(filtersOf: (slug: string) => ChainFilters | undefined): ChainRelayHost {
  const ports = new Set<MessagePort>();
  const broadcast = (m: ToWorker): void => {
    for (const p of ports) p.postMessage(m);
  };
  return {
    attach(port) {
      ports.add(port);
      port.on('close', () => ports.delete(port));
      port.on('message', (m: ToMain) => {
        const filters = filtersOf(m.chain);
        if (!('call' in m)) {
          filters?.notePendingTransaction(m.pending);
          return;
        }
        const id = m.call;
        if (filters === undefined) {
          port.postMessage({ reply: id, failure: `chain '${m.chain}' is not configured` } satisfies ToWorker);
          return;
        }
        filters.call(m.scope, m.method, m.params).then(
          (r) => port.postMessage((isFilterError(r) ? { reply: id, refusal: r.message } : { reply: id, result: r }) satisfies ToWorker),
          (err: unknown) =>
            port.postMessage(
              (err instanceof NodeRpcError
                ? { reply: id, rpcError: { code: err.code, message: err.message } }
                : { reply: id, failure: errorText(err) }) satisfies ToWorker,
            ),
        );
      });
      port.unref();
    },
    observer: (slug) => ({
      started: (index) => broadcast({ chain: slug, started: index }),
      reported: (index, head, latencyMs, hung) => broadcast({ chain: slug, reported: index, head, latencyMs, hung }),
    }),
    feedHead: (slug, index, head) => broadcast({ chain: slug, feedHead: index, head }),
    wrongChain: (slug, index, wrong) => broadcast({ chain: slug, wrongChain: index, wrong }),
  };
}

/** A worker's side: its chains' health follows the main prober, and their filters are the main thread's. */
export interface ChainRelayClient {
  /** Has `health` (the worker's copy of chain `slug`) hear the main thread's probes; returns the undo. */
  follow(slug: string, health: ChainHealth): () => void;
  /** Chain `slug`'s filters, held on the main thread. */
  filters(slug: string): ChainFilters;
  close(): void;
}

export function createChainRelayClient(port: MessagePort): ChainRelayClient {
  const followers = new Map<string, ChainHealth>();
  const waiting = new Map<number, { resolve(v: unknown): void; reject(e: unknown): void }>();
  let nextId = 1;
  port.on('message', (m: ToWorker) => {
    if ('reply' in m) {
      const w = waiting.get(m.reply);
      waiting.delete(m.reply);
      if (w === undefined) return;
      if ('result' in m) w.resolve(m.result);
      else if ('refusal' in m) w.resolve(filterError(m.refusal));
      else if ('rpcError' in m) w.reject(new NodeRpcError(m.rpcError.code, m.rpcError.message));
      else w.reject(new Error(m.failure));
      return;
    }
    const health = followers.get(m.chain);
    if (health === undefined) return;
    if ('started' in m) {
      const u = health.upstreams[m.started];
      if (u !== undefined) u.probeSince = health.now();
    } else if ('reported' in m) {
      const u = health.upstreams[m.reported];
      if (u === undefined) return;
      u.probeSince = null;
      u.reportProbe(m.head, m.latencyMs, m.hung);
    } else if ('wrongChain' in m) health.upstreams[m.wrongChain]?.reportWrongChain(m.wrong);
    else if (health.upstreams[m.feedHead] !== undefined) health.followsNewChain(m.feedHead, m.head);
  });
  // Only calls in flight keep a worker alive; the probe reports alone do not.
  port.unref();
  const send = (m: ToMain): void => port.postMessage(m);
  return {
    follow(slug, health) {
      followers.set(slug, health);
      return () => {
        if (followers.get(slug) === health) followers.delete(slug);
      };
    },
    filters: (slug) => ({
      size: () => 0,
      call: (scope, method, params) =>
        new Promise((resolve, reject) => {
          const id = nextId++;
          waiting.set(id, { resolve, reject });
          send({ call: id, chain: slug, scope, method, params });
        }),
      // Every sent transaction is told: only the main thread knows whether a pending filter waits for it.
      takesSentTransactions: () => true,
      notePendingTransaction: (hash) => send({ chain: slug, pending: hash }),
      close() {},
    }),
    close() {
      for (const w of waiting.values()) w.reject(new Error('the gateway is stopping'));
      waiting.clear();
      port.close();
    },
  };
}
