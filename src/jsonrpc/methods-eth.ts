/**
 * The execution API's `eth_*`, `net_*` and `web3_*` methods (ethereum/execution-apis), with the
 * subscription methods and the ones the spec has dropped but clients still call (uncle counts,
 * net_listening, web3_*). The spec's signing and key-holding methods are refused in node-local.ts,
 * except `eth_accounts`, answered `[]` here: the gateway holds no accounts, and an empty list is what
 * wallets and libraries expect from a node without keys.
 */
import { keccak_256 } from '@noble/hashes/sha3.js';
import {
  ADDRESS,
  BLOCK,
  BLOCK_HASH,
  BLOCK_OVERRIDES,
  type CallContext,
  checkPositional,
  FULL_TXS,
  type MethodRule,
  NONE,
  optional,
  type ParamRule,
  required,
  STATE_BLOCK,
  STATE_OVERRIDE,
  TX_HASH,
} from './method-rule.js';
import {
  callObjectCheck,
  checkFilter,
  checkRewardPercentiles,
  checkStorageRequests,
  checkStorageSlots,
  normalizeFilter,
  normalizeRewardPercentiles,
} from './param-objects.js';
import { checkSimulatePayload } from './param-simulate.js';
import {
  checkBlockReference,
  checkBlockTag,
  checkBoolean,
  checkCount,
  checkData,
  checkHexId,
  checkQuantity,
  isBlockTag,
  isPlainObject,
} from './param-types.js';

const FILTER = required('filter', checkFilter, normalizeFilter);
const FILTER_ID = required('filterId', checkHexId);
const INDEX = required('index', checkQuantity);
const CALL = required('transaction', callObjectCheck(true));
/** A transaction to estimate, fill or simulate: without `to` it deploys code, so nothing is required. */
const ANY_CALL = required('transaction', callObjectCheck(false));

// Reached only once the name matched a SUBSCRIPTIONS key, so there is nothing left to check.
const SUBSCRIPTION_NAME = required('subscription', () => undefined);
/** newHeads' resume point, `{"fromBlock": "0x…"}` (fanout/replay.ts reads it; 'latest' is no resume). */
const RESUME = optional('resume', (v, name) =>
  isPlainObject(v) && Object.keys(v).every((k) => k === 'fromBlock') && (v.fromBlock == null || isBlockTag(v.fromBlock))
    ? undefined
    : `'${name}' must be an object {"fromBlock": block number}`,
);
const SUBSCRIPTIONS: ReadonlyMap<string, readonly ParamRule[]> = new Map([
  ['newHeads', [SUBSCRIPTION_NAME, RESUME]],
  ['logs', [SUBSCRIPTION_NAME, { ...FILTER, optional: true }]],
  ['newPendingTransactions', [SUBSCRIPTION_NAME, optional('fullTransactions', checkBoolean)]],
  ['newFinalizedHeads', [SUBSCRIPTION_NAME]],
  ['newSafeHeads', [SUBSCRIPTION_NAME]],
  ['transactionStatus', [SUBSCRIPTION_NAME, TX_HASH]],
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

/**
 * A filter call that makes, polls or removes a filter: answered by the gateway's filters, and never sent twice
 * nor shared, since each changes the filter (a poll consumes the changes it returns).
 */
const FILTER_CHANGE = { filter: true, repeatable: false, shareable: false } as const;
/** A subscription call: the connection's own (it lives on one connection), answered from its subscriptions. */
const SUBSCRIPTION_CALL = { wsOnly: true, wsLocal: true, shareable: false } as const;

/** A fixed answer: the gateway's own, true of it whatever the node (see docs/decisions.md). */
const fixed =
  (resultJson: string): MethodRule['answer'] =>
  () =>
    resultJson;

export const ETH_METHODS: ReadonlyArray<readonly [string, MethodRule]> = [
  ['eth_blockNumber', { ru: 10, params: NONE, atHead: true }],
  ['eth_chainId', { ru: 5, params: NONE, answer: answerChainId }],
  ['eth_getLogs', { ru: 50, params: [FILTER], cache: 'filter', answerCheck: 'logs' }],
  ['eth_call', { ru: 20, params: [CALL, STATE_BLOCK, STATE_OVERRIDE, BLOCK_OVERRIDES], stateBlockAt: 1 }],
  ['eth_estimateGas', { ru: 20, params: [ANY_CALL, STATE_BLOCK, STATE_OVERRIDE], stateBlockAt: 1 }],
  ['eth_getTransactionCount', { ru: 15, params: [ADDRESS, STATE_BLOCK], stateBlockAt: 1 }],
  ['eth_getCode', { ru: 15, params: [ADDRESS, STATE_BLOCK], stateBlockAt: 1 }],
  [
    'eth_feeHistory',
    {
      ru: 15,
      params: [
        required('blockCount', checkCount),
        required('newestBlock', checkBlockTag),
        { ...optional('rewardPercentiles', checkRewardPercentiles), normalize: normalizeRewardPercentiles },
      ],
    },
  ],
  [
    'eth_getBlockByHash',
    { ru: 20, params: [BLOCK_HASH, FULL_TXS], cache: 'hash-param', nullIfMissing: true, answerCheck: 'block-by-hash' },
  ],
  // A transaction: never re-sent (broadcast.ts sends it once to each node, all at once), never shared.
  ['eth_sendRawTransaction', { ru: 200, params: [required('signedTransaction', checkData)], repeatable: false, shareable: false }],
  // The gateway's own: the watch of a transaction sent through it (chain/tx-watch.ts), free, down the filters' road.
  ['chaingate_getTransactionStatus', { ru: 0, params: [TX_HASH], filter: true }],
  ['eth_getTransactionReceipt', { ru: 15, params: [TX_HASH], cache: 'hash-param', nullIfMissing: true, answerCheck: 'receipts' }],
  ['web3_sha3', { ru: 15, params: [required('data', checkData)], answer: answerSha3 }],
  ['eth_newFilter', { ru: 15, params: [FILTER], ...FILTER_CHANGE }],
  ['eth_newPendingTransactionFilter', { ru: 15, params: [optional('fullTransactions', checkBoolean)], ...FILTER_CHANGE }],
  ['eth_getFilterChanges', { ru: 20, params: [FILTER_ID], ...FILTER_CHANGE }],
  // Reading a filter's logs changes nothing, so it may be repeated; the filter is one client's, so never shared.
  ['eth_getFilterLogs', { ru: 50, params: [FILTER_ID], filter: true, shareable: false }],
  ['eth_maxPriorityFeePerGas', { ru: 10, params: NONE, atHead: true }],
  ['net_listening', { ru: 5, params: NONE }],
  ['eth_subscribe', { ru: 10, params: NONE, shape: shapeSubscription, ...SUBSCRIPTION_CALL }],
  ['eth_unsubscribe', { params: [required('subscriptionId', checkHexId)], ...SUBSCRIPTION_CALL }],
  ['eth_uninstallFilter', { params: [FILTER_ID], ...FILTER_CHANGE }],
  ['eth_newBlockFilter', { params: NONE, ...FILTER_CHANGE }],
  ['eth_getBlockByNumber', { params: [BLOCK, FULL_TXS], cache: 'number-param', nullIfMissing: true, answerCheck: 'block-by-number' }],
  ['eth_getBalance', { params: [ADDRESS, STATE_BLOCK], stateBlockAt: 1 }],
  ['eth_gasPrice', { params: NONE, atHead: true }],
  ['eth_getTransactionByHash', { params: [TX_HASH], cache: 'hash-param', nullIfMissing: true }],
  ['eth_getStorageAt', { params: [ADDRESS, required('slot', checkHexId), STATE_BLOCK], stateBlockAt: 2 }],
  ['eth_syncing', { params: NONE }],
  ['net_version', { params: NONE, cache: 'chain' }],
  ['web3_clientVersion', { params: NONE }],
  [
    'eth_getBlockReceipts',
    { params: [required('block', checkBlockReference)], cache: 'reference-param', nullIfMissing: true, answerCheck: 'receipts' },
  ],
  ['eth_getBlockTransactionCountByNumber', { params: [BLOCK], cache: 'number-param', nullIfMissing: true }],
  // Never cached: its answer is a bare count, so neither the params nor the answer tell the block's number,
  // and without it finality cannot be judged.
  ['eth_getBlockTransactionCountByHash', { params: [BLOCK_HASH], nullIfMissing: true }],
  ['eth_getTransactionByBlockHashAndIndex', { params: [BLOCK_HASH, INDEX], cache: 'hash-param', nullIfMissing: true }],
  ['eth_getTransactionByBlockNumberAndIndex', { params: [BLOCK, INDEX], cache: 'number-param', nullIfMissing: true }],
  ['eth_getUncleCountByBlockHash', { params: [BLOCK_HASH], nullIfMissing: true }],
  ['eth_getUncleCountByBlockNumber', { params: [BLOCK], nullIfMissing: true }],
  ['eth_blobBaseFee', { params: NONE, atHead: true }],
  // State reads and simulations priced like eth_call: each runs the EVM or walks the state trie.
  ['eth_getProof', { ru: 20, params: [ADDRESS, required('storageKeys', checkStorageSlots), STATE_BLOCK], stateBlockAt: 2 }],
  ['eth_getStorageValues', { ru: 20, params: [required('requests', checkStorageRequests), STATE_BLOCK] }],
  ['eth_createAccessList', { ru: 20, params: [ANY_CALL, STATE_BLOCK, STATE_OVERRIDE], stateBlockAt: 1 }],
  ['eth_fillTransaction', { ru: 20, params: [ANY_CALL] }],
  // A payload may hold many blocks of calls: five times eth_call, still a fraction of a trace. A state read
  // too, as a simulation at a block.
  ['eth_simulateV1', { ru: 100, params: [required('payload', checkSimulatePayload), STATE_BLOCK], stateBlockAt: 1 }],
  ['eth_getBlockAccessList', { ru: 20, params: [required('block', checkBlockReference)], cache: 'reference-param' }],
  ['eth_baseFee', { ru: 10, params: NONE, atHead: true }],
  ['eth_config', { params: NONE }],
  ['eth_capabilities', { params: NONE }],
  // Answered by the gateway, never forwarded: a node's accounts and mining are its own.
  ['eth_accounts', { ru: 5, params: NONE, answer: fixed('[]') }],
  ['eth_mining', { ru: 5, params: NONE, answer: fixed('false') }],
  ['eth_hashrate', { ru: 5, params: NONE, answer: fixed('"0x0"') }],
];
