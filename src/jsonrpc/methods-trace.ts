/**
 * The tracing methods: geth's `debug_trace*` (also served by Erigon, Nethermind, Reth and anvil) and
 * the OpenEthereum-style `trace_*` served by Erigon, Nethermind and Reth.
 *
 * Prices. A trace re-executes transactions with a tracer attached, so hosted providers price it at
 * many times a read, and a whole block at many times one transaction. NodeReal: 280 CU for
 * debug_traceTransaction and debug_traceCall, 1,800 for a block's debug trace, against 20 for
 * eth_call. Gelato: 170 for each debug trace against 26 for eth_call. RPC Fast: 26 for
 * trace_transaction, 75 for trace_call and trace_filter, 2,800 for trace_replayTransaction, against
 * 25 for eth_call. Here, against eth_call's 20: a transaction's or a call's debug trace (struct logs
 * or a named tracer's) 200 (10x), a block's 1,000 (50x); the OpenEthereum-style call traces, lighter
 * than struct logs, 100 for one transaction or call and 500 for a block or a filtered range; the
 * replays, which add state diffs and VM traces on request, twice that. A large trace also pays per
 * started MiB of answer, as every answer does.
 *
 * Every one is heavy: a node re-executes for it, up to a whole block's transactions, whatever the caller pays,
 * so the keyless path does not serve them unless the operator says so (public.methods.deny).
 */
import {
  BLOCK,
  BLOCK_HASH,
  BLOCK_OVERRIDES,
  type MethodRule,
  optional,
  required,
  STATE_BLOCK,
  STATE_OVERRIDE,
  TX_HASH,
} from './method-rule.js';
import { callObjectCheck } from './param-objects.js';
import { checkTraceCallConfig, checkTraceConfig, checkTraceFilter, checkTraceTypes } from './param-trace.js';
import { checkBlockReference } from './param-types.js';

const CALL = required('transaction', callObjectCheck(true));
const TRACE_CONFIG = optional('traceConfig', checkTraceConfig);
const TRACE_TYPES = required('traceTypes', checkTraceTypes);
/** trace_block's block: a number or tag (Erigon, Nethermind), or a hash or EIP-1898 object (Reth). */
const TRACED_BLOCK = required('block', checkBlockReference);

export const TRACE_METHODS: ReadonlyArray<readonly [string, MethodRule]> = [
  // A final block's traces are as fixed as its receipts (errors, a trace timeout among them, are never kept), so
  // the block traces are cacheable. By hash they are kept only when the answer tells the block as a hex number,
  // which a trace list does not: trace_* entries carry it as a plain JSON number, a debug trace not at all. So
  // the traces of one transaction and debug_traceBlockByHash are never cached: nothing tells their block.
  ['debug_traceTransaction', { ru: 200, heavy: true, params: [TX_HASH, TRACE_CONFIG] }],
  // A call trace at a block is a state read.
  [
    'debug_traceCall',
    { ru: 200, heavy: true, params: [CALL, STATE_BLOCK, optional('traceConfig', checkTraceCallConfig)], stateBlockAt: 1 },
  ],
  ['debug_traceBlockByNumber', { ru: 1000, heavy: true, params: [BLOCK, TRACE_CONFIG], cache: 'number-param' }],
  ['debug_traceBlockByHash', { ru: 1000, heavy: true, params: [BLOCK_HASH, TRACE_CONFIG] }],
  ['trace_transaction', { ru: 100, heavy: true, params: [TX_HASH] }],
  ['trace_call', { ru: 100, heavy: true, params: [CALL, TRACE_TYPES, STATE_BLOCK, STATE_OVERRIDE, BLOCK_OVERRIDES], stateBlockAt: 2 }],
  ['trace_block', { ru: 500, heavy: true, params: [TRACED_BLOCK], cache: 'reference-param' }],
  // Its fromBlock/toBlock read as eth_getLogs's range does.
  ['trace_filter', { ru: 500, heavy: true, params: [required('filter', checkTraceFilter)], cache: 'filter' }],
  ['trace_replayTransaction', { ru: 200, heavy: true, params: [TX_HASH, TRACE_TYPES] }],
  ['trace_replayBlockTransactions', { ru: 1000, heavy: true, params: [TRACED_BLOCK, TRACE_TYPES], cache: 'reference-param' }],
];
