/**
 * The method catalogue: every method the gateway serves, one row each with every trait (MethodRow: its
 * parameter rules, its default RU cost, whether the gateway answers it itself, whether it is safe to repeat,
 * shareable in flight, a filter call, cacheable and how, answered by a WebSocket connection, heavy, a state
 * read). The rules live by family (methods-eth.ts, methods-trace.ts, methods-txpool.ts); how a cacheable
 * answer is judged is cacheability.ts's; the methods that are refused for needing a node's keys or
 * administration are node-local.ts's.
 */
import type { CallContext } from './method-rule.js';
import { checkPositional, MethodRow } from './method-rule.js';
import { ETH_METHODS } from './methods-eth.js';
import { TRACE_METHODS } from './methods-trace.js';
import { TXPOOL_METHODS } from './methods-txpool.js';
import { nodeLocalReason } from './node-local.js';

export type { CallContext } from './method-rule.js';
export { MethodRow } from './method-rule.js';

/**
 * The verdict on one call: forward these (normalized) params, answer locally, or refuse. A call to forward
 * carries its catalogue row, which every later step reads its traits from (no other lookup by name).
 */
export type CallCheck =
  | { kind: 'forward'; params: unknown[]; row: MethodRow }
  | { kind: 'local'; resultJson: string }
  | { kind: 'error'; error: 'method_not_found' | 'node_local_method' | 'invalid_params'; message: string };

/** RU cost of an allowed method that has no entry of its own in DEFAULT_RU. */
export const DEFAULT_RU_OTHER = 15;

/** The allowlist: every method the gateway serves, with its row. */
const METHODS: ReadonlyMap<string, MethodRow> = new Map(
  [...ETH_METHODS, ...TRACE_METHODS, ...TXPOOL_METHODS].map(([name, rule]) => [name, new MethodRow(name, rule)] as const),
);

/** Every method of the allowlist, in catalogue order (the API reference is checked against it). */
export const ALLOWED_METHODS: readonly string[] = Object.freeze([...METHODS.keys()]);

const ruTable: Record<string, number> = Object.create(null) as Record<string, number>;
for (const [method, row] of METHODS) if (row.ru !== undefined) ruTable[method] = row.ru;

/** Method → default RU cost, for the methods whose cost differs from DEFAULT_RU_OTHER (null prototype). */
export const DEFAULT_RU: Readonly<Record<string, number>> = Object.freeze(ruTable);

/**
 * The heavy methods of the catalogue (MethodRule.heavy), in catalogue order: what the keyless path denies
 * unless the operator says otherwise (public.methods.deny).
 */
export const HEAVY_METHODS: readonly string[] = Object.freeze([...METHODS].filter(([, row]) => row.heavy).map(([m]) => m));

export function isAllowedMethod(method: string): boolean {
  return METHODS.has(method);
}

/**
 * The catalogue's row of `method`, or undefined for a method the gateway does not serve. For roads that start
 * from a name (startup constants, tests); a call checked by checkCall already carries its row.
 */
export function methodRow(method: string): MethodRow | undefined {
  return METHODS.get(method);
}

/** Checks one call against the allowlist and its parameter rules; never forwards what it did not check. */
export function checkCall(method: string, params: unknown[], ctx: CallContext): CallCheck {
  const row = METHODS.get(method);
  if (row === undefined) {
    const shown = method.length > 64 ? `${method.slice(0, 64)}...` : method;
    const nodeLocal = nodeLocalReason(method);
    if (nodeLocal !== undefined) return { kind: 'error', error: 'node_local_method', message: `${shown} is not served: ${nodeLocal}` };
    return { kind: 'error', error: 'method_not_found', message: `Method not found: ${shown} is not served by this gateway` };
  }
  if (row.wsOnly && ctx.transport !== 'ws') {
    return {
      kind: 'error',
      error: 'method_not_found',
      message: `${method} needs a WebSocket connection: open the same URL with wss:// (or ws://)`,
    };
  }
  const checked = row.shape !== undefined ? row.shape(params) : checkPositional(method, row.params, params);
  if (typeof checked === 'string') return { kind: 'error', error: 'invalid_params', message: `invalid params: ${checked}` };
  if (row.answer !== undefined) return { kind: 'local', resultJson: row.answer(checked, ctx) };
  return { kind: 'forward', params: checked, row };
}
