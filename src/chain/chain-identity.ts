/**
 * Whether each node of a chain serves that chain: an execution node's chain id must be the configured
 * chain_id; a beacon node's genesis (validators root, fork version, time) must be the one most of the chain's
 * nodes name (on a tie, the first configured of them). A node that names another chain is out of rotation
 * (reason 'wrong_chain', see health.ts) until it names the right one again; a node that answers without
 * naming one (it does not serve the call) is given no verdict and stays as it was judged.
 *
 * The check is a task of its own beside the prober's head reads (chain/node-probes.ts), started at a probe whenever it
 * is due: the node was never checked, is out of rotation (failing or on another chain), was last checked
 * RECHECK_MS ago, or a reload asked (recheckAll). It has its own timeout (CHECK_TIMEOUT_MS) and never counts as a
 * probe, so a slow node's head read keeps the whole probe timeout: a check that fails or runs out gives no verdict
 * and the node keeps its standing. The one wait: a failing node whose head read succeeds comes back only once a
 * check started since it began failing has answered (admit), so a node back from failing on another chain is
 * judged before its head can restore it. A node on another chain is asked again at every probe of nodes out of
 * rotation (1.5 s), and is back within that once it serves the right chain. Each change of verdict is logged
 * once and kept in chaingate_upstream_wrong_chain.
 */
import type { ChainMetrics } from '../metrics/registry.js';
import type { HttpUpstream } from '../upstreams/http-client.js';
import type { ReadIdentity } from '../upstreams/identity-probe.js';
import type { ChainHealth } from '../upstreams/selection.js';

/** A node in rotation has what it serves checked again this often, in ms: a node repointed, resynced on
 *  another network or replaced behind its address leaves rotation within this. */
export const RECHECK_MS = 180_000;

/** A check unanswered this long gives no verdict, in ms: far past the head probe's timeout, so a node slow to
 *  answer (but answering) is still judged, and well under RECHECK_MS. */
export const CHECK_TIMEOUT_MS = 10_000;

export interface ChainIdentity {
  /** Whether node `index` is to be checked at its next probe (and no check of it is in flight). */
  due(index: number): boolean;
  /** Reads what node `index` serves and judges it (and, on a beacon chain, every node against the new
   *  majority), unless a check of it is in flight; resolves when the check settles. Never rejects: a node that
   *  cannot be asked, or does not answer within the check's timeout, is given no verdict. */
  check(index: number): Promise<void>;
  /** Resolves when failing node `index` may come back: it is not failing, or the newest check of it answered and
   *  started since it began failing (else a check is made, or the one in flight awaited). Rejects when that
   *  check gives no answer or `signal` aborts first (the probe then fails as a head read would). */
  admit(index: number, signal: AbortSignal): Promise<void>;
  /** Every node is checked again at its next probe (a reload: an address may now reach another node). */
  recheckAll(): void;
  /** What node `index` last said it serves (a decimal chain id, or a beacon genesis); null when not known. */
  served(index: number): string | null;
  /** Aborts the checks in flight; their results are ignored (the chain closes). */
  close(): void;
}

export interface ChainIdentityOptions {
  /** The configured chain id of an evm chain; undefined for a beacon chain (judged by majority). */
  chainId: number | undefined;
  health: ChainHealth;
  upstreams: readonly HttpUpstream[];
  /** The upstreams' configured names, for the log and metrics (indices match). */
  names: readonly string[];
  read: ReadIdentity;
  metrics: ChainMetrics;
  /** Where each change of verdict is logged. */
  log?: (level: 'info' | 'warn', msg: string, fields: Record<string, string | number>) => void;
  /** Told of every verdict (the worker threads' copies of the chain hear it, chain/relay.ts). */
  onVerdict?(index: number, wrong: boolean): void;
  /** Overrides RECHECK_MS (tests). */
  recheckMs?: number;
  /** Overrides CHECK_TIMEOUT_MS (tests). */
  checkTimeoutMs?: number;
}

export function createChainIdentity(opts: ChainIdentityOptions): ChainIdentity {
  const { health, names } = opts;
  const recheckMs = opts.recheckMs ?? RECHECK_MS;
  const served: Array<string | null> = opts.upstreams.map(() => null);
  const checkedAt: Array<number | null> = opts.upstreams.map(() => null);
  // When the newest settled check of each node started, if it answered (null if it failed or none settled).
  const answeredFrom: Array<number | null> = opts.upstreams.map(() => null);
  const inFlight: Array<Promise<void> | null> = opts.upstreams.map(() => null);
  const startedAt: number[] = opts.upstreams.map(() => 0);
  const checkTimeoutMs = opts.checkTimeoutMs ?? CHECK_TIMEOUT_MS;
  const closing = new AbortController();
  // Bumped by recheckAll: a check that started before a reload does not count as the check it asks for.
  let generation = 0;
  const gauges = names.map((name) => opts.metrics.upstream(name).wrongChain);
  for (const g of gauges) g.set(0);

  /** The identity every node must serve: the configured chain id, or the beacon nodes' majority. */
  function expected(): string | null {
    if (opts.chainId !== undefined) return String(opts.chainId);
    const counts = new Map<string, number>();
    let best: string | null = null;
    for (const s of served) {
      if (s === null) continue;
      const n = (counts.get(s) ?? 0) + 1;
      counts.set(s, n);
      // Strictly more: on a tie the identity reached first (the first configured node's) stays.
      if (best === null || n > counts.get(best)!) best = s;
    }
    return best;
  }

  function judge(index: number, want: string | null): void {
    const s = served[index];
    const wrong = s !== null && s !== undefined && want !== null && s !== want;
    const u = health.upstreams[index]!;
    opts.onVerdict?.(index, wrong);
    if (wrong === u.wrongChain) return;
    u.reportWrongChain(wrong);
    gauges[index]!.set(wrong ? 1 : 0);
    const fields = { upstream: names[index]!, expected: want ?? '', served: s ?? '' };
    if (wrong) opts.log?.('warn', 'upstream serves another chain: out of rotation until it serves this one', fields);
    else opts.log?.('info', 'upstream serves this chain again', fields);
  }

  function check(index: number): Promise<void> {
    const running = inFlight[index];
    if (running != null) return running;
    const from = health.now();
    const asked = generation;
    startedAt[index] = from;
    const run = opts.read(opts.upstreams[index]!, checkTimeoutMs, closing.signal).then(
      (identity) => {
        inFlight[index] = null;
        if (closing.signal.aborted) return;
        if (asked === generation) checkedAt[index] = health.now();
        answeredFrom[index] = from;
        if (identity === null) return;
        served[index] = identity;
        const want = expected();
        if (opts.chainId !== undefined) judge(index, want);
        else for (let i = 0; i < served.length; i++) judge(i, want);
      },
      () => {
        inFlight[index] = null;
        answeredFrom[index] = null;
      },
    );
    inFlight[index] = run;
    return run;
  }

  /** Whether node `index` may come back from failing: it is not failing, or a check since then answered. */
  function known(index: number): boolean {
    const since = health.upstreams[index]!.failingSince;
    const from = answeredFrom[index];
    return since === null || (from != null && from >= since);
  }

  return {
    due(index) {
      if (inFlight[index] != null) return false;
      const at = checkedAt[index];
      const u = health.upstreams[index]!;
      return at === null || at === undefined || u.failing || u.wrongChain || health.now() - at >= recheckMs;
    },
    check,
    async admit(index, signal) {
      if (known(index)) return;
      // A check in flight that started before the node failed says nothing of it now: one more is made after it.
      const stale = inFlight[index] != null && startedAt[index]! < health.upstreams[index]!.failingSince!;
      await untilAborted(check(index), signal);
      if (stale && !known(index)) await untilAborted(check(index), signal);
      if (!known(index)) throw new Error('the chain the node serves is not known since it failed');
    },
    recheckAll() {
      generation++;
      checkedAt.fill(null);
    },
    served: (index) => served[index] ?? null,
    close() {
      closing.abort();
    },
  };
}

/** `work`, or a rejection as soon as `signal` aborts (the work itself goes on). */
function untilAborted(work: Promise<void>, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.reject(new Error('aborted'));
  return new Promise((resolve, reject) => {
    const onAbort = (): void => reject(new Error('aborted'));
    signal.addEventListener('abort', onAbort, { once: true });
    void work.then(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    });
  });
}
