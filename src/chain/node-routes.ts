/**
 * Which of a chain's nodes may take a call, from what each upstream declares (config upstreams[].methods.deny
 * and upstreams[].archive):
 * - a call goes only to a node that serves its method; when none in rotation does, it fails as with no node
 *   in rotation (502, refunded);
 * - a state read (jsonrpc/state-reads.ts) about a block more than state_history_blocks below the head goes
 *   to an archive node that serves it whenever one is in rotation, else to any node that serves it, whose own
 *   error then passes through. A block named by hash is old unless the gateway knows its number (the head
 *   its newHeads feed heard last). A read at a tag, or while no head is known, is recent.
 *
 * The choices are made once per method (on its first call) and shared by every call; a chain whose upstreams
 * declare nothing makes none at all, and each call on it gets null (any node) without a lookup. A node whose
 * config leaves them to `auto` (chain/capabilities.ts) starts as a full node that serves every method; each
 * finding (update()) replaces what it declares, and the choices are made again from the next call on.
 *
 * And at what block (issue 32 §2, docs/consistency.md), from where the method names its block (MethodRow.blockSite,
 * jsonrpc/block-refs.ts) and the chain's meaning of its tags (`latest` and `pending`: the served head; `safe` and
 * `finalized`: the chain's finality):
 * - headFor: the lowest head a node must have reached to take the call: the served head for `latest`, `pending`,
 *   an omitted block or a method about the head; N for block N; the safe or finalized block's number (none while
 *   unknown); none for `earliest`, a hash, or a method that names no block. Never any on a chain of one node,
 *   where there is no other node to choose, so it costs nothing there.
 * - rewrite: the params with `latest` (and an omitted block) written as the served head's number and `safe` and
 *   `finalized` as the chain's when consistency.rewrite_tags is on, so every node answers about the same block;
 *   `safe` and `finalized` alone on a chain that names its beacon chain (chains.<slug>.beacon), whose finality is
 *   the Beacon chain's and not the execution nodes' own.
 */
import type { UpstreamConfig } from '../config/schema.js';
import { headForCall, rewriteTags, type TagBlocks, type TagRewrite } from '../jsonrpc/block-refs.js';
import type { MethodRow } from '../jsonrpc/method-rule.js';
import { matchesAny } from '../jsonrpc/method-patterns.js';
import { isStateRead, stateBlockOf } from '../jsonrpc/state-reads.js';
import type { NodeChoice } from '../upstreams/selection.js';

export interface NodeRoutes {
  /** The nodes that may take this call (its params already checked); null: any node in rotation. */
  nodesFor(method: string, params: readonly unknown[]): NodeChoice | null;
  /** Node `index` was found to keep old state or not (`archive`), or not to serve `deny`'s methods: the choices are
   *  made anew (capabilities.ts). */
  update(index: number, found: { archive?: boolean; deny?: readonly string[] }): void;
  /** Whether node `index` serves `method` at all (its methods.deny). */
  serves(index: number, method: string): boolean;
  /** The lowest head a node must have reached to take this call (params checked); null: any head (see above). */
  headFor(row: MethodRow, params: readonly unknown[]): number | null;
  /** Whether rewrite() may change a call on this chain (rewrite_tags, or a beacon chain named): else it is never called. */
  readonly rewrites: boolean;
  /** The params to forward instead, tags written as the chain's numbers (see above); null: forward them as they are. */
  rewrite(row: MethodRow, params: readonly unknown[]): unknown[] | null;
}

export interface NodeRoutesOptions {
  /** Blocks below the head whose state every node keeps (config chains.<slug>.state_history_blocks). */
  stateHistoryBlocks: number;
  /** The chain's head now, or null while none is known (ChainHead.now). */
  head(): number | null;
  /** The number of a block the gateway knows by its hash, else null. */
  blockNumberOf(hash: string): number | null;
  /** The blocks the chain means by its tags now: the served head, its safe and finalized blocks. */
  tags: TagBlocks;
  /** Which tags are forwarded as numbers: 'all' (consistency.rewrite_tags), 'final' (a beacon chain named), null none. */
  rewriteTags: TagRewrite | null;
}

/** A method's choices: for a call about a recent block (or none), and for a state read about an old one. */
interface MethodRoute {
  readonly recent: NodeChoice | null;
  readonly old: NodeChoice | null;
}

export function createNodeRoutes(upstreams: readonly UpstreamConfig[], opts: NodeRoutesOptions): NodeRoutes {
  // What each node serves now: as configured, then as found out (update()).
  const archives = upstreams.map((u) => u.archive);
  const denies: (readonly string[])[] = upstreams.map((u) => u.methods.deny);
  const isDeclared = (): boolean => archives.some(Boolean) || denies.some((d) => d.length > 0);
  let declared = isDeclared();
  const routes = new Map<string, MethodRoute>();

  function routeOf(method: string): MethodRoute {
    let route = routes.get(method);
    if (route !== undefined) return route;
    const serves = denies.map((deny) => !matchesAny(deny, method));
    const recent: NodeChoice | null = serves.every(Boolean) ? null : Object.freeze({ serves: Object.freeze(serves), prefer: null });
    const archive = archives.map((a, i) => a && serves[i]!);
    const old: NodeChoice | null =
      isStateRead(method) && archive.some(Boolean)
        ? Object.freeze({ serves: recent?.serves ?? null, prefer: Object.freeze(archive) })
        : recent;
    route = { recent, old };
    routes.set(method, route);
    return route;
  }

  /** Whether a state read is about a block older than the state every node keeps. */
  function aboutOldState(method: string, params: readonly unknown[]): boolean {
    const block = stateBlockOf(method, params);
    if (block === null) return false;
    const number = typeof block === 'number' ? block : opts.blockNumberOf(block);
    if (number === null) return true;
    const head = opts.head();
    return head !== null && number < head - opts.stateHistoryBlocks;
  }

  const tags = opts.tags;
  const single = upstreams.length === 1;
  const rewriteWhich = opts.rewriteTags;

  return {
    rewrites: rewriteWhich !== null,
    headFor(row, params) {
      const site = row.blockSite;
      return single || site === null ? null : headForCall(site, params, tags);
    },
    rewrite(row, params) {
      const site = row.blockSite;
      return rewriteWhich === null || site === null ? null : rewriteTags(site, params, tags, rewriteWhich);
    },
    nodesFor(method, params) {
      if (!declared) return null;
      const route = routeOf(method);
      return route.old !== route.recent && aboutOldState(method, params) ? route.old : route.recent;
    },
    update(index, found) {
      if (index < 0 || index >= upstreams.length) return;
      if (found.archive !== undefined) archives[index] = found.archive;
      if (found.deny !== undefined) denies[index] = [...upstreams[index]!.methods.deny, ...found.deny];
      declared = isDeclared();
      routes.clear();
    },
    serves(index, method) {
      return !declared || routeOf(method).recent?.serves?.[index] !== false;
    },
  };
}
