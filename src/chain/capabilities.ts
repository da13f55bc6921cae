/**
 * What a node serves, found out instead of declared (config upstreams[].archive: auto, methods: auto;
 * docs/failover.md#capabilities-found-out-auto): whether it keeps old state, and which of the debug_, trace_ and
 * txpool_ method groups it answers. The main thread asks at start and every CAPABILITY_RECHECK_MS; each finding
 * that changes goes to the chain's routes (node-routes.ts update()) and, through the chain relay, to every worker's.
 *
 * Each question is one cheap call. An answer the probe cannot read (no answer, a timeout, an error that says
 * nothing of the question) leaves the last finding as it was: a node that is down says nothing of what it serves.
 */
import { NodeRpcError } from '../upstreams/rpc-call.js';

/** How often each node's capabilities are asked again, in ms (5 minutes): a node resynced or reconfigured shows. */
export const CAPABILITY_RECHECK_MS = 5 * 60_000;

/** A node's finding: each field only for what the node's config leaves to `auto` (absent: nothing found yet). */
export interface Found {
  /** It answers state reads at old blocks. */
  archive?: boolean;
  /** Patterns of the method groups it does not serve (e.g. ['debug_*']); [] when it serves them all. */
  deny?: string[];
}

/** One call to the node: resolves with the result, rejects with a NodeRpcError for its error object. */
export type NodeCall = (method: string, params: unknown[]) => Promise<unknown>;

const ZERO_ADDRESS = `0x${'0'.repeat(40)}`;
const ZERO_HASH = `0x${'0'.repeat(64)}`;

/** Errors of a node that no longer holds the state asked for (geth, erigon, nethermind, besu, reth, providers). */
const PRUNED =
  /missing trie node|state (is )?not available|state histor|historical state|pruned|header not found|required historical state|not an archive|state at block .* is (pruned|unavailable)/i;
/** Errors that say the method is not served. */
const NOT_FOUND = /method not found|does not exist|not available|not supported|unsupported method|is not enabled|not allowed/i;

/** The groups asked about: the pattern denied when the node does not serve it, and the cheap call that tells. */
const GROUPS: ReadonlyArray<{ deny: string; method: string; params: unknown[] }> = [
  { deny: 'txpool_*', method: 'txpool_status', params: [] },
  { deny: 'trace_*', method: 'trace_transaction', params: [ZERO_HASH] },
  { deny: 'debug_*', method: 'debug_traceTransaction', params: [ZERO_HASH] },
];

/**
 * Whether the node keeps old state: its balance answer about block `block` (an old one), or null when the probe
 * cannot tell.
 */
export async function probeArchive(call: NodeCall, block: number): Promise<boolean | null> {
  try {
    await call('eth_getBalance', [ZERO_ADDRESS, `0x${block.toString(16)}`]);
    return true;
  } catch (err) {
    return err instanceof NodeRpcError && PRUNED.test(err.message) ? false : null;
  }
}

/** Whether the node serves a method: false for "method not found", null when the probe cannot tell. */
async function serves(call: NodeCall, method: string, params: unknown[]): Promise<boolean | null> {
  try {
    await call(method, params);
    return true;
  } catch (err) {
    if (!(err instanceof NodeRpcError)) return null;
    return !(err.code === -32601 || NOT_FOUND.test(err.message));
  }
}

/** The method groups the node does not serve, as deny patterns; null when one group could not be told. */
export async function probeMethodGroups(call: NodeCall): Promise<string[] | null> {
  const answers = await Promise.all(GROUPS.map((g) => serves(call, g.method, g.params)));
  if (answers.some((a) => a === null)) return null;
  return GROUPS.filter((_, i) => answers[i] === false).map((g) => g.deny);
}

/** The old block an archive probe reads: block 1, when the head is far enough above it that a full node lost it. */
export function oldBlock(head: number | null, stateHistoryBlocks: number): number | null {
  return head !== null && head - 1 > stateHistoryBlocks ? 1 : null;
}

/** What the watch reads of the chain's nodes. */
export interface CapabilityWatchOptions {
  /** Each node's config flags (indices match the chain's upstreams). */
  nodes: ReadonlyArray<{ archive_auto: boolean; methods_auto: boolean }>;
  /** A call to node `index`. */
  call(index: number, method: string, params: unknown[]): Promise<unknown>;
  /** The chain's head now, null while unknown. */
  head(): number | null;
  stateHistoryBlocks: number;
  /** A node's finding changed (the first one included). */
  onFound(index: number, found: Found): void;
  /** Default CAPABILITY_RECHECK_MS. */
  recheckMs?: number;
  /** How soon the first round runs when the head is not known yet, in ms; default 1_000. */
  retryMs?: number;
}

/** Asks every `auto` node now (once a head is known) and every recheckMs; returns the stop. */
export function watchCapabilities(opts: CapabilityWatchOptions): () => void {
  const last = opts.nodes.map((): Found => ({}));
  let timer: ReturnType<typeof setTimeout> | null = null;
  let stopped = false;

  async function askNode(i: number): Promise<void> {
    const n = opts.nodes[i]!;
    const call: NodeCall = (method, params) => opts.call(i, method, params);
    const found: Found = { ...last[i] };
    if (n.archive_auto) {
      const block = oldBlock(opts.head(), opts.stateHistoryBlocks);
      // A chain younger than the state every node keeps: every node serves its old state.
      const archive = block === null ? true : await probeArchive(call, block);
      if (archive !== null) found.archive = archive;
    }
    if (n.methods_auto) {
      const deny = await probeMethodGroups(call);
      if (deny !== null) found.deny = deny;
    }
    if (stopped || JSON.stringify(found) === JSON.stringify(last[i])) return;
    last[i] = found;
    opts.onFound(i, found);
  }

  async function round(): Promise<void> {
    timer = null;
    const waitForHead = opts.nodes.some((n) => n.archive_auto) && opts.head() === null;
    if (!waitForHead) await Promise.all(opts.nodes.map((n, i) => (n.archive_auto || n.methods_auto ? askNode(i) : undefined)));
    if (stopped) return;
    timer = setTimeout(() => void round(), waitForHead ? (opts.retryMs ?? 1_000) : (opts.recheckMs ?? CAPABILITY_RECHECK_MS));
    timer.unref?.();
  }

  if (opts.nodes.some((n) => n.archive_auto || n.methods_auto)) void round();
  return () => {
    stopped = true;
    if (timer !== null) clearTimeout(timer);
  };
}
