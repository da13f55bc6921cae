/**
 * The nodes the operator has taken out of rotation (`chaingate upstream cordon`, POST /upstreams/cordon on the
 * metrics listener): a set kept by the gateway thread, outside any chain runtime and keyed by chain slug and node
 * name, so a reload that makes a chain's runtime anew finds its nodes cordoned as before (the runtime applies the
 * set when made and follows each change until it closes). The main thread's set is the one the operator changes;
 * each worker thread's is a copy the chain relay keeps equal to it (relay.ts). Not kept across a restart: a node
 * cordoned for maintenance is cordoned again, on purpose, by whoever restarts the gateway mid-maintenance.
 */

/** One cordoned node. */
export interface Cordoned {
  chain: string;
  node: string;
}

export type CordonListener = (chain: string, node: string, cordoned: boolean) => void;

export interface Cordons {
  /** Whether node `node` of chain `chain` is cordoned. */
  has(chain: string, node: string): boolean;
  /** Cordons (true) or uncordons the node; false when it already was so (nobody is told then). */
  set(chain: string, node: string, cordoned: boolean): boolean;
  /** Every node cordoned, in the order they were. */
  list(): Cordoned[];
  /** Tells `listener` of every change from now on; returns the undo. */
  watch(listener: CordonListener): () => void;
}

const keyOf = (chain: string, node: string): string => `${chain}\u0000${node}`;

export function createCordons(): Cordons {
  const held = new Map<string, Cordoned>();
  const listeners = new Set<CordonListener>();
  return {
    has: (chain, node) => held.has(keyOf(chain, node)),
    set(chain, node, cordoned) {
      const key = keyOf(chain, node);
      if (held.has(key) === cordoned) return false;
      if (cordoned) held.set(key, { chain, node });
      else held.delete(key);
      for (const l of [...listeners]) l(chain, node, cordoned);
      return true;
    },
    list: () => [...held.values()].map((c) => ({ ...c })),
    watch(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
}

/** What a chain runtime cordons by: its slug, its nodes' names and health (indices match). */
interface CordonTarget {
  slug: string;
  names: readonly string[];
  upstreams: readonly { setCordoned(cordoned: boolean): void }[];
}

/** Applies the set to a runtime made now, and each change after; returns the undo (the runtime closes). */
export function applyCordons(cordons: Cordons, target: CordonTarget): () => void {
  const { slug, names, upstreams } = target;
  names.forEach((name, i) => {
    if (cordons.has(slug, name)) upstreams[i]?.setCordoned(true);
  });
  return cordons.watch((chain, node, cordoned) => {
    if (chain !== slug) return;
    const i = names.indexOf(node);
    if (i >= 0) upstreams[i]?.setCordoned(cordoned);
  });
}
