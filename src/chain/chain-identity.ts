/**
 * Whether each node of a chain serves that chain: an execution node's chain id must be the configured
 * chain_id; a beacon node's genesis (validators root, fork version, time) must be the one most of the chain's
 * nodes name (on a tie, the first configured of them). A node that names another chain is out of rotation
 * (reason 'wrong_chain', see health.ts) until it names the right one again; a node that answers without
 * naming one (it does not serve the call) is given no verdict and stays as it was judged.
 *
 * The check rides on the prober's probes (chain/runtime.ts), before the head read, whenever it is due: the
 * node was never checked, is out of rotation (failing or on another chain: so a node is checked again as it
 * comes back, before a head read can restore it), was last checked RECHECK_MS ago, or a reload asked
 * (recheckAll). A node on another chain is thus asked again at every probe of nodes out of rotation (1.5 s),
 * and is back within that once it serves the right chain. Each change of verdict is logged once and kept in
 * chaingate_upstream_wrong_chain.
 */
import type { ChainMetrics } from '../metrics/registry.js';
import type { HttpUpstream } from '../upstreams/http-client.js';
import type { ReadIdentity } from '../upstreams/identity-probe.js';
import type { ChainHealth } from '../upstreams/selection.js';

/** A node in rotation has what it serves checked again this often, in ms: a node repointed, resynced on
 *  another network or replaced behind its address leaves rotation within this. */
export const RECHECK_MS = 180_000;

export interface ChainIdentity {
  /** Whether node `index` is to be checked before its next head read. */
  due(index: number): boolean;
  /** Reads what node `index` serves and judges it (and, on a beacon chain, every node against the new
   *  majority); rejects when the node could not be asked (the probe then fails as a head read would). */
  check(index: number, timeoutMs: number, signal: AbortSignal): Promise<void>;
  /** Every node is checked again at its next probe (a reload: an address may now reach another node). */
  recheckAll(): void;
  /** What node `index` last said it serves (a decimal chain id, or a beacon genesis); null when not known. */
  served(index: number): string | null;
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
}

export function createChainIdentity(opts: ChainIdentityOptions): ChainIdentity {
  const { health, names } = opts;
  const recheckMs = opts.recheckMs ?? RECHECK_MS;
  const served: Array<string | null> = opts.upstreams.map(() => null);
  const checkedAt: Array<number | null> = opts.upstreams.map(() => null);
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

  return {
    due(index) {
      const at = checkedAt[index];
      const u = health.upstreams[index]!;
      return at === null || at === undefined || u.failing || u.wrongChain || health.now() - at >= recheckMs;
    },
    async check(index, timeoutMs, signal) {
      const identity = await opts.read(opts.upstreams[index]!, timeoutMs, signal);
      checkedAt[index] = health.now();
      if (identity === null) return;
      served[index] = identity;
      const want = expected();
      if (opts.chainId !== undefined) judge(index, want);
      else for (let i = 0; i < served.length; i++) judge(i, want);
    },
    recheckAll() {
      checkedAt.fill(null);
    },
    served: (index) => served[index] ?? null,
  };
}
