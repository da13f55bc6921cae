/**
 * What a chain serves of the catalogue and at what price, as its config section says: `methods.allow`,
 * when given, limits the chain to its patterns, `methods.deny` removes, and deny wins; `ru` prices methods
 * on this chain over the gateway's `ru` section. Made once with the chain (a reload that changes the
 * section makes the chain anew).
 */
import type { ChainConfig } from '../config/schema.js';
import { matchesAny } from '../jsonrpc/method-patterns.js';

/** A chain's own RU prices (config chains.<slug>.ru), read on every metered call. */
export interface ChainPrices {
  /** Method → RU on this chain, over ru.methods and the built-in costs. */
  readonly costs: ReadonlyMap<string, number>;
  /** RU of a method without a cost of its own (built-in or ru.methods) on this chain; undefined: ru.default. */
  readonly default: number | undefined;
}

export interface ChainMethodPolicy {
  /** Why the chain does not serve `method`, a method of the catalogue, as the client reads it; undefined when it does. */
  refusal(method: string): string | undefined;
  /** The chain's own prices; null when its section sets none (every method costs what it costs everywhere). */
  readonly prices: ChainPrices | null;
}

export function createChainMethodPolicy(config: Pick<ChainConfig, 'slug' | 'methods' | 'ru'>): ChainMethodPolicy {
  const { allow, deny } = config.methods;
  const restricted = allow !== undefined || deny.length > 0;
  const costs = Object.entries(config.ru.methods);
  const prices = costs.length === 0 && config.ru.default === undefined ? null : { costs: new Map(costs), default: config.ru.default };
  return {
    refusal(method) {
      if (!restricted) return undefined;
      if (matchesAny(deny, method) || (allow !== undefined && !matchesAny(allow, method)))
        return `Method not found: ${method} is not served on chain '${config.slug}'`;
      return undefined;
    },
    prices,
  };
}
