/**
 * Allowed contracts: the addresses a call names, for the calls that name one, checked against an
 * endpoint's lower-cased set. Every address a call names must be allowed; a call of these methods that
 * names none is refused while the list is set, since it would reach every contract:
 * - `eth_getLogs`, `eth_newFilter` and `logs` subscriptions without `address` match every contract's logs,
 *   so the list would fence nothing (and a leaked key could read them all);
 * - a call object without `to` (eth_call, eth_estimateGas, ...) runs creation code, which can call any
 *   contract; a raw transaction without `to` deploys one.
 * Methods that name no contract (eth_blockNumber, eth_getTransactionReceipt, ...) are not fenced by it.
 * Beyond the calls the issue names, the methods that take the same call object (`debug_traceCall`,
 * `trace_call`, `eth_fillTransaction`), `eth_simulateV1`'s calls, `eth_getStorageValues`' accounts and
 * `trace_filter`'s `toAddress` are fenced as well: left open, they would read any contract through an
 * allowed key.
 */
import { rawTransactionTarget } from './raw-transaction.js';

/** Why an entry is not a contract address, or undefined when it is. */
export function contractEntryProblem(entry: string): string | undefined {
  return /^0x[0-9a-fA-F]{40}$/.test(entry) ? undefined : `'${entry}' is not an address (0x and 40 hex digits)`;
}

/** A call refused, with the client's message; undefined when allowed. */
export type ContractRefusal = string | undefined;

/** Options an operator sets for every endpoint. */
export interface ContractOptions {
  /** Whether `eth_getBalance` is fenced by the list too (config; default false: a balance is not a contract call). */
  balance: boolean;
}

/** The addresses a call names, from its params (NONE: a call of a fenced method that names none). */
type Extractor = (params: readonly unknown[]) => readonly unknown[];

const NONE: readonly unknown[] = Object.freeze([]);

const first: Extractor = (params) => (params[0] === undefined || params[0] === null ? NONE : [params[0]]);

/** `to` of the call object at params[0]. */
const callTarget: Extractor = (params) => {
  const call = params[0];
  if (!isObject(call) || call.to === undefined || call.to === null) return NONE;
  return [call.to];
};

/** `address` of a log filter: one address or a list of them; absent, null or an empty list is none. */
function filterAddresses(filter: unknown): readonly unknown[] {
  if (!isObject(filter)) return NONE;
  const address = filter.address;
  if (address === undefined || address === null) return NONE;
  return Array.isArray(address) ? address : [address];
}

const EXTRACTORS: ReadonlyMap<string, Extractor> = new Map<string, Extractor>([
  ['eth_call', callTarget],
  ['eth_estimateGas', callTarget],
  ['eth_createAccessList', callTarget],
  ['eth_fillTransaction', callTarget],
  ['debug_traceCall', callTarget],
  ['trace_call', callTarget],
  ['eth_getLogs', (params) => filterAddresses(params[0])],
  ['eth_newFilter', (params) => filterAddresses(params[0])],
  ['eth_getCode', first],
  ['eth_getStorageAt', first],
  ['eth_getProof', first],
  ['eth_getStorageValues', (params) => (isObject(params[0]) ? Object.keys(params[0]) : NONE)],
  ['eth_simulateV1', simulatedTargets],
  ['trace_filter', (params) => (isObject(params[0]) && Array.isArray(params[0].toAddress) ? params[0].toAddress : NONE)],
]);

function simulatedTargets(params: readonly unknown[]): readonly unknown[] {
  const options = params[0];
  if (!isObject(options) || !Array.isArray(options.blockStateCalls)) return NONE;
  const targets: unknown[] = [];
  for (const block of options.blockStateCalls) {
    if (!isObject(block) || !Array.isArray(block.calls)) continue;
    for (const call of block.calls) {
      // A call without `to` creates a contract, which can reach any other: it names none.
      if (!isObject(call) || call.to === undefined || call.to === null) return NONE;
      targets.push(call.to);
    }
  }
  return targets;
}

/** Whether the list fences `method` at all (under these options). */
export function fencesMethod(method: string, options: ContractOptions): boolean {
  return (
    EXTRACTORS.has(method) ||
    method === 'eth_sendRawTransaction' ||
    method === 'eth_subscribe' ||
    (options.balance && method === 'eth_getBalance')
  );
}

/**
 * Why a call is refused by the set of allowed addresses (lower-case), or undefined when it is allowed or
 * names no contract. A promise only for `eth_sendRawTransaction` while its decoder is still loading.
 */
export function refuseContracts(
  allowed: ReadonlySet<string>,
  method: string,
  params: readonly unknown[],
  options: ContractOptions,
): ContractRefusal | Promise<ContractRefusal> {
  let extract = EXTRACTORS.get(method);
  if (extract === undefined) {
    if (method === 'eth_sendRawTransaction') return refuseRawTransaction(allowed, params[0]);
    if (method === 'eth_subscribe') {
      if (params[0] !== 'logs') return undefined;
      extract = (p) => filterAddresses(p[1]);
    } else if (method === 'eth_getBalance' && options.balance) extract = first;
    else return undefined;
  }
  const named = extract(params);
  if (named.length === 0) return `${describe(method)} names no contract address; this key allows only calls to its listed contracts`;
  for (const address of named) {
    if (typeof address !== 'string' || !allowed.has(address.toLowerCase())) {
      return `${describe(method)}: contract ${String(address)} is not allowed for this key`;
    }
  }
  return undefined;
}

function describe(method: string): string {
  return method === 'eth_subscribe' ? 'eth_subscribe("logs")' : method;
}

function refuseRawTransaction(allowed: ReadonlySet<string>, raw: unknown): ContractRefusal | Promise<ContractRefusal> {
  const target = rawTransactionTarget(raw);
  return target instanceof Promise ? target.then((t) => judgeRaw(allowed, t)) : judgeRaw(allowed, target);
}

function judgeRaw(allowed: ReadonlySet<string>, target: string | null | Error): ContractRefusal {
  if (target instanceof Error) return `eth_sendRawTransaction: the transaction could not be decoded (${target.message})`;
  if (target === null) return 'eth_sendRawTransaction deploys a contract; this key allows only calls to its listed contracts';
  return allowed.has(target) ? undefined : `eth_sendRawTransaction: contract ${target} is not allowed for this key`;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
