/**
 * What a worker thread's copy of a chain takes from the main thread's runtime of it, over one port per
 * worker: the prober's reports (one prober per chain for the process; each worker's health hears every
 * probe, and counts its own calls' outcomes itself), a node's cooldown after it answered one worker 429 (told
 * to every worker, so none sends it a call meanwhile), the nodes the operator cordoned (cordons.ts: each worker's
 * set is kept equal to the main thread's, told to a worker as it attaches), what the `auto` nodes were found to
 * serve (capabilities.ts), and the filters, which live on the main thread only so
 * that a filter made through one worker is read through any other.
 */
import type { MessagePort } from 'node:worker_threads';
import { filterError, type FilterErrorMessage, isFilterError } from '../filters/filter-registry.js';
import type { ProbeObserver } from '../upstreams/prober.js';
import { NodeRpcError } from '../upstreams/rpc-call.js';
import type { ChainHealth } from '../upstreams/selection.js';
import type { Found } from './capabilities.js';
import type { Cordons } from './cordons.js';
import type { ChainFilters } from './filters.js';
import type { FinalityReading, PolledFinality } from './finality.js';
import { errorText } from '../log.js';

/** To a worker: a probe report about node `index` of `chain` (told to every worker), the chain's safe and finalized
 *  blocks, or a filter call's answer. */
type ToWorker =
  | { kind: 'finality'; chain: string; held: FinalityReading }
  | { kind: 'started'; chain: string; index: number }
  | { kind: 'reported'; chain: string; index: number; head: number | null; latencyMs: number; hung: boolean }
  | { kind: 'feedHead'; chain: string; index: number; head: number }
  | { kind: 'wrongChain'; chain: string; index: number; wrong: boolean }
  | { kind: 'cordon'; chain: string; node: string; cordoned: boolean }
  | { kind: 'found'; chain: string; node: string; found: Found }
  | Cooldown
  | FilterReply;

/** Node `index` of `chain` answered a worker 429 and gets no call for `ms` (upstreams/node-budget.ts): told to the
 *  main thread, which tells every worker, so no worker sends it a call meanwhile. */
type Cooldown = { kind: 'cooldown'; chain: string; index: number; ms: number };

/** The main thread's answer to a worker's filter call `reply`. */
type FilterReply =
  | { kind: 'result'; reply: number; result: unknown }
  | { kind: 'refusal'; reply: number; refusal: FilterErrorMessage }
  | { kind: 'rpcError'; reply: number; rpcError: { code: number; message: string } }
  | { kind: 'failure'; reply: number; failure: string };

type ToMain =
  | { kind: 'call'; call: number; chain: string; scope: string; method: string; params: unknown[] }
  | { kind: 'pending'; chain: string; pending: string }
  | Cooldown;

/** The main thread's side: its chains' probe reports to every worker, and the workers' filter calls. */
export interface ChainRelayHost {
  /** Serves one worker's port until it closes (the worker stopped or died). */
  attach(port: MessagePort): void;
  /** What the prober of chain `slug` tells its health, told to every worker (ProberOptions.observer). */
  observer(slug: string): ProbeObserver;
  /** A feed heard node `index` of `slug` report `head` (live, or gone back: ChainHealth.followsNewChain), told to
   *  every worker, whose copy counts it as that node's head. */
  feedHead(slug: string, index: number, head: number): void;
  /** Node `index` of `slug` serves another chain (or its own), told to every worker (UpstreamHealth.reportWrongChain). */
  wrongChain(slug: string, index: number, wrong: boolean): void;
  /**
   * Where a new runtime of chain `slug` tells its safe and finalized blocks (chain/finality.ts), told to every
   * worker and to each one that attaches later. Only the newest runtime of a slug is heard: one a reload retired
   * (it serves the clients left on it a while) may be about another chain, and a worker never takes blocks back.
   */
  finality(slug: string): (held: FinalityReading) => void;
  /** Node `node` of `slug` was found to serve `found` (capabilities.ts), told to every worker and to each one that
   *  attaches later. */
  found(slug: string, node: string, found: Found): void;
}

export function createChainRelayHost(filtersOf: (slug: string) => ChainFilters | undefined, cordons?: Cordons): ChainRelayHost {
  const ports = new Set<MessagePort>();
  const broadcast = (m: ToWorker): void => {
    for (const p of ports) p.postMessage(m);
  };
  // Lives as long as the process's main thread: the host is never made twice.
  cordons?.watch((chain, node, cordoned) => broadcast({ kind: 'cordon', chain, node, cordoned }));
  /** The last blocks told of each chain, for a worker that attaches after (started again). */
  const finality = new Map<string, FinalityReading>();
  /** The newest runtime of each chain, by the count of those made. */
  const newest = new Map<string, number>();
  /** The last finding about each node, by chain and node name, for a worker that attaches after. */
  const founds = new Map<string, Map<string, Found>>();
  return {
    attach(port) {
      ports.add(port);
      for (const [chain, held] of finality) port.postMessage({ kind: 'finality', chain, held } satisfies ToWorker);
      for (const [chain, nodes] of founds)
        for (const [node, found] of nodes) port.postMessage({ kind: 'found', chain, node, found } satisfies ToWorker);
      for (const c of cordons?.list() ?? [])
        port.postMessage({ kind: 'cordon', chain: c.chain, node: c.node, cordoned: true } satisfies ToWorker);
      port.on('close', () => ports.delete(port));
      port.on('message', (m: ToMain) => {
        if (m.kind === 'cooldown') {
          broadcast(m);
          return;
        }
        const filters = filtersOf(m.chain);
        if (m.kind === 'pending') {
          filters?.notePendingTransaction(m.pending);
          return;
        }
        const id = m.call;
        if (filters === undefined) {
          port.postMessage({ kind: 'failure', reply: id, failure: `chain '${m.chain}' is not configured` } satisfies ToWorker);
          return;
        }
        filters.call(m.scope, m.method, m.params).then(
          (r) =>
            port.postMessage(
              (isFilterError(r)
                ? { kind: 'refusal', reply: id, refusal: r.message }
                : { kind: 'result', reply: id, result: r }) satisfies ToWorker,
            ),
          (err: unknown) =>
            port.postMessage(
              (err instanceof NodeRpcError
                ? { kind: 'rpcError', reply: id, rpcError: { code: err.code, message: err.message } }
                : { kind: 'failure', reply: id, failure: errorText(err) }) satisfies ToWorker,
            ),
        );
      });
      port.unref();
    },
    observer: (slug) => ({
      started: (index) => broadcast({ kind: 'started', chain: slug, index }),
      reported: (index, head, latencyMs, hung) => broadcast({ kind: 'reported', chain: slug, index, head, latencyMs, hung }),
    }),
    feedHead: (slug, index, head) => broadcast({ kind: 'feedHead', chain: slug, index, head }),
    wrongChain: (slug, index, wrong) => broadcast({ kind: 'wrongChain', chain: slug, index, wrong }),
    found(slug, node, found) {
      let nodes = founds.get(slug);
      if (nodes === undefined) founds.set(slug, (nodes = new Map()));
      nodes.set(node, found);
      broadcast({ kind: 'found', chain: slug, node, found });
    },
    finality(slug) {
      const made = (newest.get(slug) ?? 0) + 1;
      newest.set(slug, made);
      finality.delete(slug);
      return (held) => {
        if (newest.get(slug) !== made) return;
        finality.set(slug, held);
        broadcast({ kind: 'finality', chain: slug, held });
      };
    },
  };
}

/** A worker's side: its chains' health follows the main prober, and their filters are the main thread's. */
export interface ChainRelayClient {
  /** Has `health` (the worker's copy of chain `slug`) hear the main thread's probes, `finality` its safe and
   *  finalized blocks, and `found` its findings of what each node serves (the last ones at once); returns the undo. */
  follow(
    slug: string,
    health: ChainHealth,
    finality?: Pick<PolledFinality, 'hear'>,
    found?: (node: string, found: Found) => void,
  ): () => void;
  /** Chain `slug`'s filters, held on the main thread. */
  filters(slug: string): ChainFilters;
  close(): void;
}

/** `cordons`: the worker thread's set, kept equal to the main thread's. */
export function createChainRelayClient(port: MessagePort, cordons?: Cordons): ChainRelayClient {
  const followers = new Map<string, ChainHealth>();
  const finalities = new Map<string, Pick<PolledFinality, 'hear'>>();
  /** The findings told of each chain's nodes (kept for a copy made later, by a reload), and who hears them. */
  const founds = new Map<string, Map<string, Found>>();
  const finders = new Map<string, (node: string, found: Found) => void>();
  /** Blocks told before the chain's copy followed (the main thread tells them as the worker attaches). */
  const early = new Map<string, FinalityReading>();
  const waiting: Waiting = new Map();
  let nextId = 1;
  port.on('message', (m: ToWorker) => {
    switch (m.kind) {
      case 'result':
      case 'refusal':
      case 'rpcError':
      case 'failure':
        settleReply(waiting, m);
        return;
      case 'finality': {
        const finality = finalities.get(m.chain);
        if (finality !== undefined) finality.hear(m.held);
        else early.set(m.chain, m.held);
        return;
      }
      case 'cordon':
        cordons?.set(m.chain, m.node, m.cordoned);
        return;
      case 'found': {
        let nodes = founds.get(m.chain);
        if (nodes === undefined) founds.set(m.chain, (nodes = new Map()));
        nodes.set(m.node, m.found);
        finders.get(m.chain)?.(m.node, m.found);
        return;
      }
      case 'cooldown':
        followers.get(m.chain)?.coolDown(m.index, m.ms, true);
        return;
      case 'started':
      case 'reported':
      case 'feedHead':
      case 'wrongChain': {
        const health = followers.get(m.chain);
        if (health !== undefined) hearProbe(health, m);
        return;
      }
      default: {
        const never: never = m;
        throw new Error(`unknown relay message ${JSON.stringify(never)}`);
      }
    }
  });
  // Only calls in flight keep a worker alive; the probe reports alone do not.
  port.unref();
  const send = (m: ToMain): void => port.postMessage(m);
  return {
    follow(slug, health, finality, found) {
      followers.set(slug, health);
      if (found !== undefined) {
        finders.set(slug, found);
        for (const [node, f] of founds.get(slug) ?? []) found(node, f);
      }
      health.shareCooldowns((index, ms) => send({ kind: 'cooldown', chain: slug, index, ms }));
      if (finality !== undefined) {
        finalities.set(slug, finality);
        const told = early.get(slug);
        early.delete(slug);
        if (told !== undefined) finality.hear(told);
      }
      return () => {
        health.shareCooldowns(null);
        if (followers.get(slug) === health) followers.delete(slug);
        if (finalities.get(slug) === finality) finalities.delete(slug);
        if (found !== undefined && finders.get(slug) === found) finders.delete(slug);
      };
    },
    filters: (slug) => ({
      size: () => 0,
      call: (scope, method, params) =>
        new Promise((resolve, reject) => {
          const id = nextId++;
          waiting.set(id, { resolve, reject });
          send({ kind: 'call', call: id, chain: slug, scope, method, params });
        }),
      // Every sent transaction is told: only the main thread knows whether a pending filter waits for it.
      takesSentTransactions: () => true,
      notePendingTransaction: (hash) => send({ kind: 'pending', chain: slug, pending: hash }),
      close() {},
    }),
    close() {
      for (const w of waiting.values()) w.reject(new Error('the gateway is stopping'));
      waiting.clear();
      port.close();
    },
  };
}

type Waiting = Map<number, { resolve(v: unknown): void; reject(e: unknown): void }>;

/** Settles the worker's filter call that `m` answers (none when it was already given up). */
function settleReply(waiting: Waiting, m: FilterReply): void {
  const w = waiting.get(m.reply);
  waiting.delete(m.reply);
  if (w === undefined) return;
  switch (m.kind) {
    case 'result':
      w.resolve(m.result);
      return;
    case 'refusal':
      w.resolve(filterError(m.refusal));
      return;
    case 'rpcError':
      w.reject(new NodeRpcError(m.rpcError.code, m.rpcError.message));
      return;
    case 'failure':
      w.reject(new Error(m.failure));
      return;
    default: {
      const never: never = m;
      throw new Error(`unknown filter reply ${JSON.stringify(never)}`);
    }
  }
}

/** The worker's copy of a chain hears one of the main prober's reports (an unknown node index is ignored). */
function hearProbe(
  health: ChainHealth,
  m: Exclude<ToWorker, FilterReply | Cooldown | { kind: 'finality' } | { kind: 'cordon' } | { kind: 'found' }>,
): void {
  switch (m.kind) {
    case 'started': {
      const u = health.upstreams[m.index];
      if (u !== undefined) u.probeSince = health.now();
      return;
    }
    case 'reported': {
      const u = health.upstreams[m.index];
      if (u === undefined) return;
      u.probeSince = null;
      u.reportProbe(m.head, m.latencyMs, m.hung);
      return;
    }
    case 'wrongChain':
      health.upstreams[m.index]?.reportWrongChain(m.wrong);
      return;
    case 'feedHead':
      if (health.upstreams[m.index] !== undefined) health.followsNewChain(m.index, m.head);
      return;
    default: {
      const never: never = m;
      throw new Error(`unknown probe report ${JSON.stringify(never)}`);
    }
  }
}
