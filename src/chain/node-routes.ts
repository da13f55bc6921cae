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
 * declare nothing makes none at all, and each call on it gets null (any node) without a lookup.
 */
import type { UpstreamConfig } from '../config/schema.js';
import { matchesAny } from '../jsonrpc/method-patterns.js';
import { isStateRead, stateBlockOf } from '../jsonrpc/state-reads.js';
import type { NodeChoice } from '../upstreams/selection.js';

export interface NodeRoutes {
  /** The nodes that may take this call (its params already checked); null: any node in rotation. */
  nodesFor(method: string, params: readonly unknown[]): NodeChoice | null;
  /** Whether node `index` serves `method` at all (its methods.deny). */
  serves(index: number, method: string): boolean;
}

export interface NodeRoutesOptions {
  /** Blocks below the head whose state every node keeps (config chains.<slug>.state_history_blocks). */
  stateHistoryBlocks: number;
  /** The chain's head now, or null while none is known (ChainHead.now). */
  head(): number | null;
  /** The number of a block the gateway knows by its hash, else null. */
  blockNumberOf(hash: string): number | null;
}

/** A method's choices: for a call about a recent block (or none), and for a state read about an old one. */
interface MethodRoute {
  readonly recent: NodeChoice | null;
  readonly old: NodeChoice | null;
}

export function createNodeRoutes(upstreams: readonly UpstreamConfig[], opts: NodeRoutesOptions): NodeRoutes {
  const declared = upstreams.some((u) => u.archive || u.methods.deny.length > 0);
  const routes = new Map<string, MethodRoute>();

  function routeOf(method: string): MethodRoute {
    let route = routes.get(method);
    if (route !== undefined) return route;
    const serves = upstreams.map((u) => !matchesAny(u.methods.deny, method));
    const recent: NodeChoice | null = serves.every(Boolean) ? null : Object.freeze({ serves: Object.freeze(serves), prefer: null });
    const archive = upstreams.map((u, i) => u.archive && serves[i]!);
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

  return {
    nodesFor(method, params) {
      if (!declared) return null;
      const route = routeOf(method);
      return route.old !== route.recent && aboutOldState(method, params) ? route.old : route.recent;
    },
    serves(index, method) {
      return !declared || routeOf(method).recent?.serves?.[index] !== false;
    },
  };
}
