/**
 * The shape of one catalogue entry and the positional check every family shares. The families
 * (methods-eth.ts, methods-trace.ts, methods-txpool.ts) hold the rules; methods.ts puts them in one
 * catalogue and decides a call's fate.
 */
import { checkAddress, checkBlockReference, checkBlockTag, checkBoolean, checkHash, checkObject, type Check } from './param-types.js';

/** What a call's answer depends on besides its method and params. */
export interface CallContext {
  chainId: number;
  transport: 'http' | 'ws';
}

/** One positional parameter. Required unless `optional`; an optional one omitted or null takes `fill` upstream. */
export interface ParamRule {
  readonly name: string;
  readonly check: Check;
  readonly optional?: boolean;
  readonly fill?: unknown;
  /** Rewrites an accepted alternative spelling into the canonical one before the check. */
  readonly normalize?: (value: unknown) => unknown;
}

export interface MethodRule {
  /** Default RU cost when it differs from DEFAULT_RU_OTHER. */
  readonly ru?: number;
  readonly params: readonly ParamRule[];
  /** Subscriptions live on a connection, so over HTTP they are refused before any check. */
  readonly wsOnly?: boolean;
  /** Replaces the positional rules when the shape of the params depends on the first one. */
  readonly shape?: (params: unknown[]) => unknown[] | string;
  /** Answered by the gateway: returns the JSON text of `result`. */
  readonly answer?: (params: unknown[], ctx: CallContext) => string;
  /**
   * Heavy for the node whatever it costs in RU: a re-execution with a tracer (up to a whole block's), or a
   * mempool's whole contents. The keyless path denies these by default (public.methods.deny); default false.
   */
  readonly heavy?: boolean;
}

export const required = (name: string, check: Check, normalize?: (v: unknown) => unknown): ParamRule =>
  normalize === undefined ? { name, check } : { name, check, normalize };
export const optional = (name: string, check: Check, fill?: unknown): ParamRule =>
  fill === undefined ? { name, check, optional: true } : { name, check, optional: true, fill };

/** The parameters several families share, named as the messages name them. */
export const ADDRESS = required('address', checkAddress);
/** The block a state read or a simulation runs against; omitted means latest, whatever the node. */
export const STATE_BLOCK = optional('block', checkBlockReference, 'latest');
export const BLOCK = required('block', checkBlockTag);
export const BLOCK_HASH = required('blockHash', checkHash);
export const TX_HASH = required('transactionHash', checkHash);
export const FULL_TXS = optional('fullTransactions', checkBoolean, false);
export const STATE_OVERRIDE = optional('stateOverride', checkObject);
export const BLOCK_OVERRIDES = optional('blockOverrides', checkObject);
export const NONE: readonly ParamRule[] = [];

/** Returns the params to forward (the same array when nothing was filled or rewritten) or the refusal. */
export function checkPositional(method: string, rules: readonly ParamRule[], params: unknown[]): unknown[] | string {
  if (params.length > rules.length) {
    return rules.length === 0
      ? `${method} takes no parameters`
      : `${method} takes at most ${rules.length} parameter${rules.length === 1 ? '' : 's'}, got ${params.length}`;
  }
  let out: unknown[] | undefined;
  for (let i = 0; i < rules.length; i++) {
    const rule = rules[i]!;
    let value = params[i];
    if (value === undefined || value === null) {
      if (rule.optional !== true) return `missing '${rule.name}'`;
      if (rule.fill !== undefined) {
        out ??= params.slice();
        while (out.length < i) out.push(null);
        out[i] = rule.fill;
      }
      continue;
    }
    if (rule.normalize !== undefined) {
      const normalized = rule.normalize(value);
      if (normalized !== value) (out ??= params.slice())[i] = value = normalized;
    }
    const problem = rule.check(value, rule.name);
    if (problem !== undefined) return problem;
  }
  return out ?? params;
}
