import { keccak_256 } from '@noble/hashes/sha3.js';
import {
  callObjectCheck,
  checkBlockCount,
  checkFilter,
  checkRewardPercentiles,
  normalizeFilter,
  normalizeRewardPercentiles,
} from './param-objects.js';
import {
  checkAddress,
  checkBlockReference,
  checkBlockTag,
  checkBoolean,
  checkData,
  checkHash,
  checkHexId,
  checkObject,
  checkQuantity,
  type Check,
} from './param-types.js';

/** What a call's answer depends on besides its method and params. */
export interface CallContext {
  chainId: number;
  transport: 'http' | 'ws';
}

/** The verdict on one call: forward these (normalized) params, answer locally, or refuse. */
export type CallCheck =
  | { kind: 'forward'; params: unknown[] }
  | { kind: 'local'; resultJson: string }
  | { kind: 'error'; error: 'method_not_found' | 'invalid_params'; message: string };

/** RU cost of an allowed method that has no entry of its own in DEFAULT_RU. */
export const DEFAULT_RU_OTHER = 15;

/** One positional parameter. Required unless `optional`; an optional one omitted or null takes `fill` upstream. */
interface ParamRule {
  readonly name: string;
  readonly check: Check;
  readonly optional?: boolean;
  readonly fill?: unknown;
  /** Rewrites an accepted alternative spelling into the canonical one before the check. */
  readonly normalize?: (value: unknown) => unknown;
}

interface MethodRule {
  /** Default RU cost when it differs from DEFAULT_RU_OTHER. */
  readonly ru?: number;
  readonly params: readonly ParamRule[];
  /** Subscriptions live on a connection, so over HTTP they are refused before any check. */
  readonly wsOnly?: boolean;
  /** Replaces the positional rules when the shape of the params depends on the first one. */
  readonly shape?: (params: unknown[]) => unknown[] | string;
  /** Answered by the gateway: returns the JSON text of `result`. */
  readonly answer?: (params: unknown[], ctx: CallContext) => string;
}

const required = (name: string, check: Check, normalize?: (v: unknown) => unknown): ParamRule =>
  normalize === undefined ? { name, check } : { name, check, normalize };
const optional = (name: string, check: Check, fill?: unknown): ParamRule =>
  fill === undefined ? { name, check, optional: true } : { name, check, optional: true, fill };

const ADDRESS = required('address', checkAddress);
const STATE_BLOCK = optional('block', checkBlockReference, 'latest');
const BLOCK = required('block', checkBlockTag);
const BLOCK_HASH = required('blockHash', checkHash);
const TX_HASH = required('transactionHash', checkHash);
const FULL_TXS = optional('fullTransactions', checkBoolean, false);
const FILTER = required('filter', checkFilter, normalizeFilter);
const FILTER_ID = required('filterId', checkHexId);
const INDEX = required('index', checkQuantity);
const STATE_OVERRIDE = optional('stateOverride', checkObject);
const NONE: readonly ParamRule[] = [];

// Reached only once the name matched a SUBSCRIPTIONS key, so there is nothing left to check.
const SUBSCRIPTION_NAME = required('subscription', () => undefined);
const SUBSCRIPTIONS: ReadonlyMap<string, readonly ParamRule[]> = new Map([
  ['newHeads', [SUBSCRIPTION_NAME]],
  ['logs', [SUBSCRIPTION_NAME, { ...FILTER, optional: true }]],
  ['newPendingTransactions', [SUBSCRIPTION_NAME, optional('fullTransactions', checkBoolean)]],
]);

function shapeSubscription(params: unknown[]): unknown[] | string {
  const kind = params[0];
  if (kind === undefined || kind === null) return `missing 'subscription'`;
  const rules = typeof kind === 'string' ? SUBSCRIPTIONS.get(kind) : undefined;
  if (rules === undefined) return `'subscription' must be one of ${[...SUBSCRIPTIONS.keys()].join(', ')}`;
  return checkPositional(`eth_subscribe('${kind as string}')`, rules, params);
}

function answerChainId(_params: unknown[], ctx: CallContext): string {
  return `"0x${ctx.chainId.toString(16)}"`;
}

function answerSha3(params: unknown[]): string {
  const data = Buffer.from((params[0] as string).slice(2), 'hex');
  return `"0x${Buffer.from(keccak_256(data)).toString('hex')}"`;
}

/** The allowlist: every method the gateway serves, its parameters and its default RU cost. */
const METHODS: ReadonlyMap<string, MethodRule> = new Map<string, MethodRule>([
  ['eth_blockNumber', { ru: 10, params: NONE }],
  ['eth_chainId', { ru: 5, params: NONE, answer: answerChainId }],
  ['eth_getLogs', { ru: 50, params: [FILTER] }],
  [
    'eth_call',
    {
      ru: 20,
      params: [required('transaction', callObjectCheck(true)), STATE_BLOCK, STATE_OVERRIDE, optional('blockOverrides', checkObject)],
    },
  ],
  ['eth_estimateGas', { ru: 20, params: [required('transaction', callObjectCheck(false)), STATE_BLOCK, STATE_OVERRIDE] }],
  ['eth_getTransactionCount', { ru: 15, params: [ADDRESS, STATE_BLOCK] }],
  ['eth_getCode', { ru: 15, params: [ADDRESS, STATE_BLOCK] }],
  [
    'eth_feeHistory',
    {
      ru: 15,
      params: [
        required('blockCount', checkBlockCount),
        required('newestBlock', checkBlockTag),
        { ...optional('rewardPercentiles', checkRewardPercentiles), normalize: normalizeRewardPercentiles },
      ],
    },
  ],
  ['eth_getBlockByHash', { ru: 20, params: [BLOCK_HASH, FULL_TXS] }],
  ['eth_sendRawTransaction', { ru: 200, params: [required('signedTransaction', checkData)] }],
  ['eth_getTransactionReceipt', { ru: 15, params: [TX_HASH] }],
  ['web3_sha3', { ru: 15, params: [required('data', checkData)], answer: answerSha3 }],
  ['eth_newFilter', { ru: 15, params: [FILTER] }],
  ['eth_newPendingTransactionFilter', { ru: 15, params: [optional('fullTransactions', checkBoolean)] }],
  ['eth_getFilterChanges', { ru: 20, params: [FILTER_ID] }],
  ['eth_getFilterLogs', { ru: 50, params: [FILTER_ID] }],
  ['eth_maxPriorityFeePerGas', { ru: 10, params: NONE }],
  ['net_listening', { ru: 5, params: NONE }],
  ['eth_subscribe', { ru: 10, params: NONE, wsOnly: true, shape: shapeSubscription }],
  ['eth_unsubscribe', { params: [required('subscriptionId', checkHexId)], wsOnly: true }],
  ['eth_uninstallFilter', { params: [FILTER_ID] }],
  ['eth_newBlockFilter', { params: NONE }],
  ['eth_getBlockByNumber', { params: [BLOCK, FULL_TXS] }],
  ['eth_getBalance', { params: [ADDRESS, STATE_BLOCK] }],
  ['eth_gasPrice', { params: NONE }],
  ['eth_getTransactionByHash', { params: [TX_HASH] }],
  ['eth_getStorageAt', { params: [ADDRESS, required('slot', checkHexId), STATE_BLOCK] }],
  ['eth_syncing', { params: NONE }],
  ['net_version', { params: NONE }],
  ['web3_clientVersion', { params: NONE }],
  ['eth_getBlockReceipts', { params: [required('block', checkBlockReference)] }],
  ['eth_getBlockTransactionCountByNumber', { params: [BLOCK] }],
  ['eth_getBlockTransactionCountByHash', { params: [BLOCK_HASH] }],
  ['eth_getTransactionByBlockHashAndIndex', { params: [BLOCK_HASH, INDEX] }],
  ['eth_getTransactionByBlockNumberAndIndex', { params: [BLOCK, INDEX] }],
  ['eth_getUncleCountByBlockHash', { params: [BLOCK_HASH] }],
  ['eth_getUncleCountByBlockNumber', { params: [BLOCK] }],
  ['eth_blobBaseFee', { params: NONE }],
]);

/** Every method of the allowlist, in catalogue order (the API reference is checked against it). */
export const ALLOWED_METHODS: readonly string[] = Object.freeze([...METHODS.keys()]);

const ruTable: Record<string, number> = Object.create(null) as Record<string, number>;
for (const [method, rule] of METHODS) if (rule.ru !== undefined) ruTable[method] = rule.ru;

/** Method → default RU cost, for the methods whose cost differs from DEFAULT_RU_OTHER (null prototype). */
export const DEFAULT_RU: Readonly<Record<string, number>> = Object.freeze(ruTable);

export function isAllowedMethod(method: string): boolean {
  return METHODS.has(method);
}

/** Checks one call against the allowlist and its parameter rules; never forwards what it did not check. */
export function checkCall(method: string, params: unknown[], ctx: CallContext): CallCheck {
  const rule = METHODS.get(method);
  if (rule === undefined) {
    const shown = method.length > 64 ? `${method.slice(0, 64)}...` : method;
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

/** Returns the params to forward (the same array when nothing was filled or rewritten) or the refusal. */
function checkPositional(method: string, rules: readonly ParamRule[], params: unknown[]): unknown[] | string {
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
