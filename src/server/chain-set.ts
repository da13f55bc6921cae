/**
 * The gateway's chains as a reload changes them. A chain the new config adds is made and started; one it
 * removes has its clients closed and is stopped; one whose section changed is made anew for every request
 * from now on, while the old runtime stays, retired, for the WebSockets and event streams that were open
 * on it (their subscriptions and streams keep receiving from it) and stops once the last of them leaves.
 * A chain whose section is unchanged keeps its runtime, its sockets and its state; which chain its nodes
 * serve is checked again at their next probe.
 */
import type { ChainRuntime } from '../chain/runtime.js';
import type { ChainConfig } from '../config/schema.js';

/** How often retired runtimes are looked at for clients left, in ms. */
const RETIRED_CHECK_MS = 1_000;

export interface ChainSetParts {
  /** Makes a chain's runtime (not yet probing). */
  make(config: ChainConfig): ChainRuntime;
  /** Starts a new runtime's health checks and first probe. */
  start(chain: ChainRuntime): void;
  /** Closes the WebSockets and event streams of a chain the config no longer has. */
  closeClients(chain: ChainRuntime): void;
  /** Whether some client still uses a runtime (a WebSocket on it, an event stream of its hub). */
  inUse(chain: ChainRuntime): boolean;
  /** Called when a chain is gone for good (its metrics series are dropped). */
  removed(slug: string): void;
}

export interface ChainSet {
  /** The chains requests go to, by slug (GatewayContext.chains). */
  readonly live: Map<string, ChainRuntime>;
  /** Applies a new config's chains; returns the slugs added, removed and changed. */
  apply(next: Readonly<Record<string, ChainConfig>>): { added: string[]; removed: string[]; changed: string[] };
  /** Runtimes still serving clients of a section that changed. */
  retired(): number;
  /** Stops every runtime, live and retired. */
  closeAll(): void;
}

/** A section as compared: two that read the same are the same chain and keep their runtime. */
const same = (a: ChainConfig, b: ChainConfig): boolean => JSON.stringify(a) === JSON.stringify(b);

export function createChainSet(configs: Readonly<Record<string, ChainConfig>>, parts: ChainSetParts): ChainSet {
  const live = new Map<string, ChainRuntime>();
  for (const c of Object.values(configs)) live.set(c.slug, parts.make(c));
  const retired = new Set<ChainRuntime>();
  let timer: ReturnType<typeof setInterval> | null = null;

  function sweep(): void {
    for (const chain of retired) {
      if (parts.inUse(chain)) continue;
      retired.delete(chain);
      chain.close();
    }
    if (retired.size === 0 && timer !== null) {
      clearInterval(timer);
      timer = null;
    }
  }

  function retire(chain: ChainRuntime): void {
    retired.add(chain);
    if (timer === null) {
      timer = setInterval(sweep, RETIRED_CHECK_MS);
      timer.unref();
    }
    sweep();
  }

  return {
    live,
    apply(next) {
      const added: string[] = [];
      const removed: string[] = [];
      const changed: string[] = [];
      for (const [slug, chain] of [...live]) {
        if (next[slug] !== undefined) continue;
        live.delete(slug);
        parts.closeClients(chain);
        chain.close();
        parts.removed(slug);
        removed.push(slug);
      }
      for (const c of Object.values(next)) {
        const old = live.get(c.slug);
        if (old !== undefined && same(old.config, c)) {
          // Its nodes' addresses may now reach other nodes: what they serve is checked again.
          old.identity.recheckAll();
          continue;
        }
        const chain = parts.make(c);
        live.set(c.slug, chain);
        parts.start(chain);
        if (old === undefined) added.push(c.slug);
        else {
          changed.push(c.slug);
          retire(old);
        }
      }
      return { added, removed, changed };
    },
    retired: () => retired.size,
    closeAll() {
      if (timer !== null) clearInterval(timer);
      timer = null;
      for (const chain of [...live.values(), ...retired]) chain.close();
      retired.clear();
    },
  };
}
