/**
 * The method catalogue: every method the gateway serves, its parameter rules, its default RU cost and
 * whether the gateway answers it itself. The rules live by family (methods-eth.ts, methods-trace.ts,
 * methods-txpool.ts); which answers may be cached is cacheability.ts's; the methods that are refused
 * for needing a node's keys or administration are node-local.ts's.
 */
import type { CallContext, MethodRule } from './method-rule.js';
import { checkPositional } from './method-rule.js';
import { ETH_METHODS } from './methods-eth.js';
import { TRACE_METHODS } from './methods-trace.js';
import { TXPOOL_METHODS } from './methods-txpool.js';
import { nodeLocalReason } from './node-local.js';

export type { CallContext } from './method-rule.js';

/** The verdict on one call: forward these (normalized) params, answer locally, or refuse. */
export type CallCheck =
  | { kind: 'forward'; params: unknown[] }
  | { kind: 'local'; resultJson: string }
  | { kind: 'error'; error: 'method_not_found' | 'node_local_method' | 'invalid_params'; message: string };

/** RU cost of an allowed method that has no entry of its own in DEFAULT_RU. */
export const DEFAULT_RU_OTHER = 15;

/** The allowlist: every method the gateway serves, its parameters and its default RU cost. */
const METHODS: ReadonlyMap<string, MethodRule> = new Map<string, MethodRule>([...ETH_METHODS, ...TRACE_METHODS, ...TXPOOL_METHODS]);

/** Every method of the allowlist, in catalogue order (the API reference is checked against it). */
export const ALLOWED_METHODS: readonly string[] = Object.freeze([...METHODS.keys()]);

const ruTable: Record<string, number> = Object.create(null) as Record<string, number>;
for (const [method, rule] of METHODS) if (rule.ru !== undefined) ruTable[method] = rule.ru;

/** Method → default RU cost, for the methods whose cost differs from DEFAULT_RU_OTHER (null prototype). */
export const DEFAULT_RU: Readonly<Record<string, number>> = Object.freeze(ruTable);

/**
 * The heavy methods of the catalogue (MethodRule.heavy), in catalogue order: what the keyless path denies
 * unless the operator says otherwise (public.methods.deny).
 */
export const HEAVY_METHODS: readonly string[] = Object.freeze([...METHODS].filter(([, rule]) => rule.heavy === true).map(([m]) => m));

export function isAllowedMethod(method: string): boolean {
  return METHODS.has(method);
}

/** Checks one call against the allowlist and its parameter rules; never forwards what it did not check. */
export function checkCall(method: string, params: unknown[], ctx: CallContext): CallCheck {
  const rule = METHODS.get(method);
  if (rule === undefined) {
    const shown = method.length > 64 ? `${method.slice(0, 64)}...` : method;
    const nodeLocal = nodeLocalReason(method);
    if (nodeLocal !== undefined) return { kind: 'error', error: 'node_local_method', message: `${shown} is not served: ${nodeLocal}` };
    return { kind: 'error', error: 'method_not_found', message: `Method not found: ${shown} is not served by this gateway` };
  }
  if (rule.wsOnly === true && ctx.transport !== 'ws') {
    return {
      kind: 'error',
      error: 'method_not_found',
      message: `${method} needs a WebSocket connection: open the same URL with wss:// (or ws://)`,
    };
  }
  const checked = rule.shape !== undefined ? rule.shape(params) : checkPositional(method, rule.params, params);
  if (typeof checked === 'string') return { kind: 'error', error: 'invalid_params', message: `invalid params: ${checked}` };
  if (rule.answer !== undefined) return { kind: 'local', resultJson: rule.answer(checked, ctx) };
  return { kind: 'forward', params: checked };
}
