/**
 * eth_simulateV1's payload (the spec's EthSimulatePayload): blocks of calls, each block with its own
 * block and state overrides. Each call is checked as eth_estimateGas's call object (no `to` is a
 * contract creation); the overrides are passed through as eth_call's are. How many blocks and calls a
 * node takes is its own limit (-38026), not checked here.
 */
import { callObjectCheck } from './param-objects.js';
import { arrayOf, checkBoolean, checkObject, isPlainObject, type Check } from './param-types.js';

const checkCalls = arrayOf(callObjectCheck(false), 'transaction call objects');

const checkBlockStateCall: Check = (v, name) => {
  if (!isPlainObject(v)) return `'${name}' must be a {blockOverrides?, stateOverrides?, calls?} object`;
  if (v.blockOverrides != null && !isPlainObject(v.blockOverrides)) return checkObject(v.blockOverrides, `${name}.blockOverrides`);
  if (v.stateOverrides != null && !isPlainObject(v.stateOverrides)) return checkObject(v.stateOverrides, `${name}.stateOverrides`);
  if (v.calls != null && checkCalls(v.calls, name) !== undefined) return checkCalls(v.calls, `${name}.calls`);
  return undefined;
};

const checkBlockStateCalls = arrayOf(checkBlockStateCall, '{blockOverrides?, stateOverrides?, calls?} objects');

const FLAGS = ['traceTransfers', 'validation', 'returnFullTransactions'] as const;

export const checkSimulatePayload: Check = (v, name) => {
  if (!isPlainObject(v)) return `'${name}' must be an object with 'blockStateCalls'`;
  if (v.blockStateCalls == null) return `missing '${name}.blockStateCalls'`;
  if (checkBlockStateCalls(v.blockStateCalls, name) !== undefined)
    return checkBlockStateCalls(v.blockStateCalls, `${name}.blockStateCalls`);
  for (const flag of FLAGS) {
    const value = v[flag];
    if (value != null && typeof value !== 'boolean') return checkBoolean(value, `${name}.${flag}`);
  }
  return undefined;
};
