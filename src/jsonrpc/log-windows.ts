/**
 * An eth_getLogs range cut into block windows (pipeline/split-logs.ts makes the calls): how many windows cover
 * it, the filter of each, and the one answer made of their results in window order, put together from their
 * bytes without parsing a log.
 */

const LBRACK = 0x5b;
const RBRACK = 0x5d;
const WS = new Uint8Array(256);
for (const c of [0x20, 0x09, 0x0a, 0x0d]) WS[c] = 1;

const quantity = (n: number): string => '0x' + n.toString(16);

/** How many windows of at most `size` blocks cover `from`..`to`; a reversed range is one window, the node's to answer. */
export function windowCount(from: number, to: number, size: number): number {
  return to < from ? 1 : Math.floor((to - from) / size) + 1;
}

/**
 * The filter of window `i` of `from`..`to`: `filter` (its address and topics) over that window's blocks, as
 * quantities, so it is the same call, with the same cache key, as a client asking for that window alone.
 */
export function windowFilter(filter: Record<string, unknown>, from: number, to: number, size: number, i: number): Record<string, unknown> {
  const first = from + i * size;
  const last = to < from ? to : Math.min(to, first + size - 1);
  return { ...filter, fromBlock: quantity(first), toBlock: quantity(last) };
}

/**
 * The bytes between the brackets of a JSON array (a window's `result`), whitespace at either end left out: empty
 * for an empty array, null when `result` is not an array.
 */
export function arrayItems(result: Buffer): Buffer | null {
  let start = 0;
  let end = result.length;
  while (start < end && WS[result[start]!] === 1) start++;
  while (end > start && WS[result[end - 1]!] === 1) end--;
  if (end - start < 2 || result[start] !== LBRACK || result[end - 1] !== RBRACK) return null;
  start++;
  end--;
  while (start < end && WS[result[start]!] === 1) start++;
  while (end > start && WS[result[end - 1]!] === 1) end--;
  return result.subarray(start, end);
}

/** The answer `{"jsonrpc":"2.0","id":<idText>,"result":[...]}` holding every window's items in window order. */
export function mergedLogsAnswer(idText: string, items: readonly Buffer[]): Buffer {
  const parts: Buffer[] = [Buffer.from(`{"jsonrpc":"2.0","id":${idText},"result":[`)];
  for (const piece of items) {
    if (piece.length === 0) continue;
    if (parts.length > 1) parts.push(COMMA);
    parts.push(piece);
  }
  parts.push(CLOSE);
  return Buffer.concat(parts);
}

const COMMA = Buffer.from(',');
const CLOSE = Buffer.from(']}');
