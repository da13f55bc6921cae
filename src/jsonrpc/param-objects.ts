import {
  arrayOf,
  checkAddress,
  checkBlockTag,
  checkData,
  checkHash,
  checkHexId,
  checkQuantity,
  isAddress,
  isBlockTag,
  isData,
  isHash,
  isPlainObject,
  isQuantity,
  type Check,
} from './param-types.js';

/*
 * The object parameters: the transaction call object, the log filter, eth_feeHistory's
 * arguments and the storage slots of eth_getProof and eth_getStorageValues. Known fields are checked; unknown fields pass through untouched, since nodes keep
 * adding them (authorizationList, blobs, ...) and refusing them would break newer clients.
 * A null field means absent, as it does to the nodes.
 */

const checkStorageKeys = arrayOf(checkHash, '32-byte hex storage keys');
const checkHashes = arrayOf(checkHash, '32-byte hex hashes');

const checkAccessListEntry: Check = (v, name) => {
  if (!isPlainObject(v)) return `'${name}' must be an {address, storageKeys} object`;
  if (!isAddress(v.address)) return checkAddress(v.address, `${name}.address`);
  return checkStorageKeys(v.storageKeys, name) === undefined ? undefined : checkStorageKeys(v.storageKeys, `${name}.storageKeys`);
};
const checkAccessList = arrayOf(checkAccessListEntry, '{address, storageKeys} objects');

/**
 * The transaction object of eth_call (`requireTarget`) and eth_estimateGas. eth_call needs `to`
 * unless `data`/`input` is given, which simulates a contract creation.
 */
export function callObjectCheck(requireTarget: boolean): Check {
  return (v, name) => {
    if (!isPlainObject(v)) return `'${name}' must be a transaction call object`;
    // Walks the members present rather than probing every known field: call objects are small.
    for (const field in v) {
      const value = v[field];
      if (value == null) continue;
      switch (field) {
        case 'from':
        case 'to':
          if (!isAddress(value)) return checkAddress(value, `${name}.${field}`);
          break;
        case 'gas':
        case 'gasPrice':
        case 'maxFeePerGas':
        case 'maxPriorityFeePerGas':
        case 'maxFeePerBlobGas':
        case 'value':
        case 'nonce':
        case 'type':
        case 'chainId':
          if (!isQuantity(value)) return checkQuantity(value, `${name}.${field}`);
          break;
        case 'data':
        case 'input':
          if (!isData(value)) return checkData(value, `${name}.${field}`);
          break;
        case 'accessList':
          if (checkAccessList(value, name) !== undefined) return checkAccessList(value, `${name}.accessList`);
          break;
        case 'blobVersionedHashes':
          if (checkHashes(value, name) !== undefined) return checkHashes(value, `${name}.blobVersionedHashes`);
          break;
      }
    }
    if (requireTarget && v.to == null && v.data == null && v.input == null) {
      return `missing '${name}.to' (needed unless 'data' or 'input' deploys code)`;
    }
    return undefined;
  };
}

function isTopicAlternative(v: unknown): boolean {
  return v === null || isHash(v);
}

function isTopicPosition(v: unknown): boolean {
  if (v === null || isHash(v)) return true;
  if (!Array.isArray(v)) return false;
  for (let i = 0; i < v.length; i++) if (!isTopicAlternative(v[i])) return false;
  return true;
}

function isAddressFilter(v: unknown): boolean {
  if (isAddress(v)) return true;
  if (!Array.isArray(v)) return false;
  for (let i = 0; i < v.length; i++) if (!isAddress(v[i])) return false;
  return true;
}

/** The log filter of eth_getLogs, eth_newFilter and the `logs` subscription. */
export const checkFilter: Check = (v, name) => {
  if (!isPlainObject(v)) return `'${name}' must be a filter object`;
  if (v.fromBlock != null && !isBlockTag(v.fromBlock)) return checkBlockTag(v.fromBlock, `${name}.fromBlock`);
  if (v.toBlock != null && !isBlockTag(v.toBlock)) return checkBlockTag(v.toBlock, `${name}.toBlock`);
  if (v.blockHash != null) {
    if (!isHash(v.blockHash)) return checkHash(v.blockHash, `${name}.blockHash`);
    if (v.fromBlock != null || v.toBlock != null) {
      return `'${name}.blockHash' cannot be combined with '${name}.fromBlock' or '${name}.toBlock'`;
    }
  }
  if (v.address != null && !isAddressFilter(v.address)) {
    return `'${name}.address' must be a 20-byte hex address or an array of them`;
  }
  if (v.topics != null) {
    const topics = v.topics;
    if (!Array.isArray(topics)) return `'${name}.topics' must be an array`;
    for (let i = 0; i < topics.length; i++) {
      if (!isTopicPosition(topics[i])) {
        return `'${name}.topics[${i}]' must be null, a 32-byte hex topic or an array of topics and nulls`;
      }
    }
  }
  return undefined;
};

/** The spec's sample form: `topics` as one topic string means a filter on the first topic. */
export function normalizeFilter(v: unknown): unknown {
  return isPlainObject(v) && typeof v.topics === 'string' ? { ...v, topics: [v.topics] } : v;
}

export const checkRewardPercentiles: Check = (v, name) => {
  if (Array.isArray(v)) {
    let previous = 0;
    let i = 0;
    for (; i < v.length; i++) {
      const p: unknown = v[i];
      if (typeof p !== 'number' || p < previous || p > 100) break;
      previous = p;
    }
    if (i === v.length) return undefined;
  }
  return `'${name}' must be an array of numbers from 0 to 100 in non-decreasing order`;
};

/** The spec's sample form: `rewardPercentiles` as a string holding a bracketed list, "[25, 75]". */
export function normalizeRewardPercentiles(v: unknown): unknown {
  if (typeof v !== 'string') return v;
  try {
    const parsed: unknown = JSON.parse(v);
    return Array.isArray(parsed) ? parsed : v;
  } catch {
    return v;
  }
}

/** Storage slots as eth_getStorageAt takes them: up to 32 bytes, leading zeros allowed (the spec's bytesMax32). */
export const checkStorageSlots = arrayOf(checkHexId, '0x-prefixed hex storage slots');

/** eth_getStorageValues' requests: an object from addresses to arrays of storage slots. */
export const checkStorageRequests: Check = (v, name) => {
  if (!isPlainObject(v)) return `'${name}' must be an object from addresses to arrays of storage slots`;
  for (const address in v) {
    // Cast: the guard would narrow the key to never below, where its text is still wanted.
    if (!isAddress(address as unknown)) {
      const shown = address.length > 64 ? `${address.slice(0, 64)}...` : address;
      return `'${name}' keys must be 20-byte 0x-prefixed hex addresses, not ${JSON.stringify(shown)}`;
    }
    if (checkStorageSlots(v[address], name) !== undefined) return checkStorageSlots(v[address], `${name}.${address}`);
  }
  return undefined;
};
