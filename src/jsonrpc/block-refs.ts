/**
 * Where a call names the block it is about, what that asks of the node that answers it, and the call with its
 * moving tags written as the numbers the chain means by them (issue 32 §2, docs/consistency.md).
 *
 * Where a method's block sits is read once per method from its catalogue row's parameter rules
 * (MethodRow.blockSite): a parameter checked as a block number or tag (checkBlockTag) or as a block reference
 * (checkBlockReference: a number, a tag, a hash or an EIP-1898 object) is the call's block; a log filter's or a
 * trace filter's fromBlock, toBlock and blockHash are. A method that names no block but answers about the head
 * itself (MethodRule.atHead: eth_blockNumber, the fee estimates) reads at `latest`. Every other method names no
 * block (a hash names a transaction or a block, which no head tells a node has).
 */
import type { ParamRule } from './method-rule.js';
import { checkFilter } from './param-objects.js';
import { checkTraceFilter } from './param-trace.js';
import { checkBlockReference, checkBlockTag, isPlainObject } from './param-types.js';

/** Where a method's calls name their block. Made once per method and shared by its calls. */
export type BlockSite =
  /** params[at] is a block number, a tag, a hash or an EIP-1898 object; the checks fill an omitted optional one with `latest`. */
  | { readonly kind: 'param'; readonly at: number }
  /** params[at] is an eth_getLogs filter: an omitted end is `latest`; a blockHash names one block by hash. */
  | { readonly kind: 'logs'; readonly at: number }
  /** params[at] is a trace_filter filter: an omitted fromBlock is `earliest`, an omitted toBlock `latest`. */
  | { readonly kind: 'traces'; readonly at: number }
  /** No block parameter: the answer is about the head itself (`latest`). */
  | { readonly kind: 'head' };

const AT_HEAD: BlockSite = Object.freeze({ kind: 'head' });

/** Where a method with these parameter rules names its block; null when it names none. `atHead`: MethodRule.atHead. */
export function blockSiteOf(params: readonly ParamRule[], atHead: boolean): BlockSite | null {
  if (atHead) return AT_HEAD;
  for (let at = 0; at < params.length; at++) {
    const check = params[at]!.check;
    if (check === checkBlockTag || check === checkBlockReference) return Object.freeze({ kind: 'param', at });
    if (check === checkFilter) return Object.freeze({ kind: 'logs', at });
    if (check === checkTraceFilter) return Object.freeze({ kind: 'traces', at });
  }
  return null;
}

/** The blocks a chain means by its moving tags now (null: none known yet). Read only when a call names the tag. */
export interface TagBlocks {
  /** `latest` and `pending`: the head the chain serves. */
  latest(): number | null;
  safe(): number | null;
  finalized(): number | null;
}

const ZERO = 48; // '0'

/**
 * The lowest head a node must have reached to answer about one block reference (already checked), or null when
 * it asks none: a hash (any node may have it), `earliest`, a tag whose block is not known yet. An omitted one is
 * `latest`. No regular expression: this runs for every call on a chain of several nodes.
 */
function headForRef(ref: unknown, tags: TagBlocks): number | null {
  if (typeof ref === 'string') {
    // A 66-character reference is a hash (nodes read it so); any other starting 0x is a number.
    if (ref.length === 66) return null;
    if (ref.charCodeAt(0) === ZERO) return Number(ref);
    switch (ref) {
      case 'latest':
      case 'pending':
        return tags.latest();
      case 'safe':
        return tags.safe();
      case 'finalized':
        return tags.finalized();
      default:
        return null;
    }
  }
  if (ref === undefined || ref === null) return tags.latest();
  if (isPlainObject(ref)) return ref.blockHash != null ? null : headForRef(ref.blockNumber, tags);
  return null;
}

function higher(a: number | null, b: number | null): number | null {
  return a === null ? b : b === null || a >= b ? a : b;
}

/** The lowest head a node must have reached to answer a call (params checked) whose block sits at `site`; null: none. */
export function headForCall(site: BlockSite, params: readonly unknown[], tags: TagBlocks): number | null {
  switch (site.kind) {
    case 'head':
      return tags.latest();
    case 'param':
      return headForRef(params[site.at], tags);
    case 'logs':
    case 'traces': {
      const filter = params[site.at];
      if (!isPlainObject(filter) || filter.blockHash != null) return null;
      const from = filter.fromBlock == null && site.kind === 'traces' ? null : headForRef(filter.fromBlock, tags);
      return higher(from, headForRef(filter.toBlock, tags));
    }
  }
}

/** Which tags a chain writes as numbers: every moving one (consistency.rewrite_tags), or `safe` and `finalized` only. */
export type TagRewrite = 'all' | 'final';

const hex = (n: number): string => '0x' + n.toString(16);

/** The number to forward for a tag (an omitted reference is `latest`), or null to leave it as it is. */
function numberForTag(ref: unknown, tags: TagBlocks, which: TagRewrite): number | null {
  switch (ref) {
    case undefined:
    case null:
    case 'latest':
      return which === 'all' ? tags.latest() : null;
    case 'safe':
      return tags.safe();
    case 'finalized':
      return tags.finalized();
    default:
      // `pending` is not a block yet, `earliest` and numbers are fixed, a hash is no tag.
      return null;
  }
}

/** A block reference written at the chain's number, or undefined when it stays as it is. */
function rewrittenRef(ref: unknown, tags: TagBlocks, which: TagRewrite): unknown {
  if (isPlainObject(ref)) {
    if (ref.blockHash != null) return undefined;
    const n = numberForTag(ref.blockNumber, tags, which);
    return n === null ? undefined : { ...ref, blockNumber: hex(n) };
  }
  const n = numberForTag(ref, tags, which);
  return n === null ? undefined : hex(n);
}

/** A filter with its ends written at the chain's numbers, or undefined when neither changes. */
function rewrittenFilter(filter: unknown, traces: boolean, tags: TagBlocks, which: TagRewrite): unknown {
  if (!isPlainObject(filter) || filter.blockHash != null) return undefined;
  // trace_filter's omitted fromBlock is the genesis block: nothing to write.
  const from = traces && filter.fromBlock == null ? undefined : rewrittenRef(filter.fromBlock, tags, which);
  const to = rewrittenRef(filter.toBlock, tags, which);
  if (from === undefined && to === undefined) return undefined;
  return { ...filter, ...(from !== undefined ? { fromBlock: from } : {}), ...(to !== undefined ? { toBlock: to } : {}) };
}

/**
 * The params of a call (checked) with its tags written as the numbers the chain means by them (`latest` and an
 * omitted block as the served head under 'all'; `safe` and `finalized` as the chain's, when known), the omitted
 * argument appended; null when nothing changes (the caller then forwards the call as it came).
 */
export function rewriteTags(site: BlockSite, params: readonly unknown[], tags: TagBlocks, which: TagRewrite): unknown[] | null {
  let at: number;
  let value: unknown;
  switch (site.kind) {
    case 'head':
      return null;
    case 'param':
      at = site.at;
      value = rewrittenRef(params[at], tags, which);
      break;
    case 'logs':
    case 'traces':
      at = site.at;
      value = rewrittenFilter(params[at], site.kind === 'traces', tags, which);
      break;
  }
  if (value === undefined) return null;
  const out = params.slice();
  // Positions before an appended argument are nulls, which a node reads as omitted.
  while (out.length < at) out.push(null);
  out[at] = value;
  return out;
}
