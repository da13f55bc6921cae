/**
 * The eth_getLogs block-range limit (config `chains.<slug>.max_logs_block_range`, default 10000): a
 * query over a wider range makes a node scan that many blocks' bloom filters and can hold it for
 * seconds, so it is refused before it is forwarded.
 */
import { isQuantity } from './param-types.js';

/** Tags that name the head or a block near it; counted as the head, the widest they can reach. */
const HEAD_TAGS: ReadonlySet<unknown> = new Set(['latest', 'safe', 'finalized', 'pending']);

/** The block number an end of the range names; undefined when it needs the head and the head is unknown. */
function endOf(value: unknown, head: bigint | undefined): bigint | undefined {
  if (value == null || HEAD_TAGS.has(value)) return head;
  if (value === 'earliest') return 0n;
  // BigInt: a 256-bit quantity must neither lose precision nor print as an exponent in the message.
  if (isQuantity(value)) return BigInt(value);
  return undefined;
}

/**
 * Why an eth_getLogs `filter` (already validated) is refused for its range, or undefined when it may
 * go on. The range is `toBlock - fromBlock + 1`; an omitted end counts as the head. A blockHash query
 * is one block. When the head is unknown and an end needs it the call goes on (fail-open): the node's
 * own limits still apply, and refusing every tagged query during a head outage would be worse.
 */
export function checkLogRange(
  filter: Record<string, unknown>,
  head: number | null,
  maxRange: number,
  chainSlug: string,
  method = 'eth_getLogs',
): string | undefined {
  const span = filter.blockHash != null ? 1n : rangeOf(filter, head === null ? undefined : BigInt(head));
  if (span === undefined || span <= BigInt(maxRange)) return undefined;
  return `${method} block range of ${span} blocks is larger than the limit of ${maxRange} ` + `(chains.${chainSlug}.max_logs_block_range)`;
}

/**
 * The same for trace_filter, whose omitted `fromBlock` is the genesis block (as Erigon, Nethermind and Reth
 * read it), not the head: a filter without one asks for the traces of the whole chain.
 */
export function checkTraceRange(
  filter: Record<string, unknown>,
  head: number | null,
  maxRange: number,
  chainSlug: string,
): string | undefined {
  const ends = { fromBlock: filter.fromBlock ?? 'earliest', toBlock: filter.toBlock ?? 'latest' };
  return checkLogRange(ends, head, maxRange, chainSlug, 'trace_filter');
}

function rangeOf(filter: Record<string, unknown>, head: bigint | undefined): bigint | undefined {
  const ends = endsOf(filter, head);
  return ends === undefined ? undefined : ends.to - ends.from + 1n;
}

function endsOf(filter: Record<string, unknown>, head: bigint | undefined): { from: bigint; to: bigint } | undefined {
  const from = endOf(filter.fromBlock, head);
  const to = endOf(filter.toBlock, head);
  return from === undefined || to === undefined ? undefined : { from, to };
}

/**
 * The first and last block of an eth_getLogs `filter`'s range (not a blockHash query) as checkLogRange counts
 * them: an omitted end and every head tag as `head`, `earliest` as 0; undefined when an end needs the head and
 * it is unknown.
 */
export function logRangeOf(filter: Record<string, unknown>, head: number | null): { from: bigint; to: bigint } | undefined {
  return endsOf(filter, head === null ? undefined : BigInt(head));
}
