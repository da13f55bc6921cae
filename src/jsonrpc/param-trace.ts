/**
 * The tracing parameters: geth's trace config (debug_trace*), and the OpenEthereum-style trace types
 * and trace filter (trace_*, served by Erigon, Nethermind and Reth). As with the other objects, known
 * fields are checked, unknown ones pass through (each client adds its own: geth's `overrides`,
 * Erigon's `borTraceEnabled`), and a null field means absent. Which tracers exist (a
 * built-in name or a JavaScript expression) is the node's business; only the shape is checked here.
 */
import {
  checkAddress,
  checkBlockTag,
  checkBoolean,
  checkCount,
  checkObject,
  checkQuantity,
  checkString,
  isPlainObject,
  type Check,
  arrayOf,
} from './param-types.js';

const checkNonNegativeInteger: Check = (v, name) =>
  typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 ? undefined : `'${name}' must be a non-negative integer`;

/** The checks of geth's TraceConfig fields (the struct logger's switches included), by field. */
const TRACE_CONFIG_FIELDS: ReadonlyMap<string, Check> = new Map<string, Check>([
  ['tracer', checkString],
  ['tracerConfig', checkObject],
  // A Go duration ("5s"); a wrong unit is the node's refusal to make.
  ['timeout', checkString],
  ['reexec', checkNonNegativeInteger],
  ['limit', checkNonNegativeInteger],
  ['disableStorage', checkBoolean],
  ['disableStack', checkBoolean],
  ['enableMemory', checkBoolean],
  ['enableReturnData', checkBoolean],
  ['debug', checkBoolean],
]);

/** debug_traceCall's TraceCallConfig: a TraceConfig with the overrides of eth_call and the index to trace up to. */
const TRACE_CALL_CONFIG_FIELDS: ReadonlyMap<string, Check> = new Map<string, Check>([
  ...TRACE_CONFIG_FIELDS,
  ['stateOverrides', checkObject],
  ['blockOverrides', checkObject],
  ['txIndex', checkQuantity],
]);

function objectWith(fields: ReadonlyMap<string, Check>, what: string): Check {
  return (v, name) => {
    if (!isPlainObject(v)) return `'${name}' must be ${what}`;
    // Walks the members present rather than probing every known field: these objects are small.
    for (const field in v) {
      const value = v[field];
      if (value == null) continue;
      const check = fields.get(field);
      if (check !== undefined && check(value, name) !== undefined) return check(value, `${name}.${field}`);
    }
    return undefined;
  };
}

/** The options of debug_traceTransaction and debug_traceBlockBy*. */
export const checkTraceConfig = objectWith(TRACE_CONFIG_FIELDS, 'a trace config object');

/** The options of debug_traceCall. */
export const checkTraceCallConfig = objectWith(TRACE_CALL_CONFIG_FIELDS, 'a trace config object');

const TRACE_TYPES: ReadonlySet<unknown> = new Set(['trace', 'vmTrace', 'stateDiff']);

/** trace_call's and trace_replay*'s list of what to return: any of trace, vmTrace, stateDiff. */
export const checkTraceTypes: Check = arrayOf(
  (v, name) => (TRACE_TYPES.has(v) ? undefined : `'${name}' must be one of trace, vmTrace, stateDiff`),
  'trace types (trace, vmTrace, stateDiff)',
);

const checkAddresses = arrayOf(checkAddress, '20-byte hex addresses');

const TRACE_FILTER_FIELDS: ReadonlyMap<string, Check> = new Map<string, Check>([
  ['fromBlock', checkBlockTag],
  ['toBlock', checkBlockTag],
  ['fromAddress', checkAddresses],
  ['toAddress', checkAddresses],
  // Paging: Erigon and Reth read plain integers, Nethermind also hex.
  ['after', checkCount],
  ['count', checkCount],
  ['mode', (v, name) => (v === 'union' || v === 'intersection' ? undefined : `'${name}' must be union or intersection`)],
]);

/** trace_filter's filter. */
export const checkTraceFilter = objectWith(TRACE_FILTER_FIELDS, 'a trace filter object');
