/**
 * Gives a client back its own id in an upstream answer. The gateway sends nodes ids of its own; the
 * answer's top-level `id` value is swapped for the client's id text while the answer streams, so a
 * node writing `id` after a 50 MB `result` costs neither a buffer nor a second parse.
 *
 * Given the id the gateway sent, the same pass checks the answer is that call's: its top-level `id` has
 * exactly the bytes sent, and no second top-level `id` follows (a client's parser would read the last
 * one). A node or balancer that mixed up answers would otherwise hand one tenant another's answer. The
 * check reads the whole answer, nested values skipped by a tight loop (bench/history/2026-11-29.md).
 */
import { IdRewriteScan } from './id-rewrite-scan.js';

export interface IdRewriter {
  /**
   * Feeds the next chunk of the upstream answer and returns what to send the client, in order. Bytes
   * before the id are passed on as they are scanned and the original id's bytes are dropped, so
   * nothing is ever held. Returns [] once `invalid`.
   */
  push(chunk: Buffer): Buffer[];
  /** True once the top-level id value has been replaced; from then on push() passes chunks through unscanned. */
  readonly replaced: boolean;
  /**
   * True when the answer is not a JSON object, its top-level `id` is not a number, string or null,
   * or the object ended or broke before an id was found. Bytes already returned may have been sent:
   * the caller must treat the answer as failed (abort the client's response if it has begun).
   */
  readonly invalid: boolean;
  /** Byte length of the client's id minus that of the original one; 0 until `replaced`. Adjusts a Content-Length. */
  readonly delta: number;
  /**
   * Set with `invalid` when the id the gateway sent was given and the answer's top-level id is another, or a
   * second top-level id member follows it, or the object closes without one: the answer is not the call's.
   */
  readonly wrongId: boolean;
  /**
   * Whether the answer's top-level object has closed (only whitespace may follow). Known only when the id the
   * gateway sent was given (the scan then reads to the end); an answer that ends before is cut off.
   */
  readonly closed: boolean;
}

/**
 * A rewriter giving the client `clientIdText`. With `sentIdText` (the id the gateway sent the node) the answer
 * is also checked to be that call's (see above); without it, the scan stops at the id.
 */
export function createIdRewriter(clientIdText: string, sentIdText?: string): IdRewriter {
  return new IdRewriteScan(clientIdText, sentIdText);
}

/**
 * Whole-body form for small answers: the rewritten copy, or null when the body is invalid or has no id, or
 * (given `sentIdText`) is another call's or does not close.
 */
export function rewriteId(body: Buffer, clientIdText: string, sentIdText?: string): Buffer | null {
  const rewriter = createIdRewriter(clientIdText, sentIdText);
  const parts = rewriter.push(body);
  if (!rewriter.replaced || rewriter.invalid || (sentIdText !== undefined && !rewriter.closed)) return null;
  return parts.length === 1 ? parts[0]! : Buffer.concat(parts);
}
