/**
 * What failover reads of a whole answer without parsing it (or parsing only the few that may say so): a node
 * error meaning "not there yet", a `null` result, the head in an eth_blockNumber answer.
 */
import { mentionsError } from '../chain/attempts.js';

/** Node errors that mean the node has not seen the block asked about yet (geth, reth, erigon, nethermind, besu, anvil). */
const NOT_THERE_YET =
  /header not found|unknown block|block not found|could not be found|BlockOutOfRange|block height is \d+ but requested/i;

/** Whether a whole answer is a node error meaning "not there yet"; only answers holding an error are parsed. */
export function isNotThereYet(body: Buffer): boolean {
  if (!mentionsError(body)) return false;
  try {
    const answer = JSON.parse(body.toString()) as { error?: { message?: unknown } };
    const message = answer.error?.message;
    return typeof message === 'string' && NOT_THERE_YET.test(message);
  } catch {
    return false;
  }
}

const NULL_RESULT = Buffer.from('"result":null');

/**
 * Whether a whole answer's result is `null`. Such an answer is short: only one under 512 bytes (an id of up to
 * about 450 characters) is looked at, by a loop (see mentionsError).
 */
export function isNullResult(body: Buffer): boolean {
  const n = body.length;
  if (n > 512) return false;
  for (let i = 0; i < n; i++) if (body[i] === NULL_RESULT[0] && matchesAt(body, i, n, NULL_RESULT)) return true;
  return false;
}

function matchesAt(body: Buffer, i: number, n: number, text: Buffer): boolean {
  if (i + text.length > n) return false;
  for (let k = 1; k < text.length; k++) if (body[i + k] !== text[k]) return false;
  return true;
}

/** eth_blockNumber's answer with `head` (the served head), the reverse of headOf. */
export function headAnswer(idText: string, head: number): Buffer {
  return Buffer.from(`{"jsonrpc":"2.0","id":${idText},"result":"0x${head.toString(16)}"}`);
}

/** The head in a forwarded eth_blockNumber answer, or null. */
export function headOf(body: Buffer): number | null {
  try {
    const result = (JSON.parse(body.toString()) as { result?: unknown }).result;
    if (typeof result !== 'string' || !/^0x[0-9a-f]{1,13}$/i.test(result)) return null;
    return parseInt(result, 16);
  } catch {
    return null;
  }
}
