import type { ResponseMeta } from './respond.js';
import type { HttpResponse } from './uws.js';

/**
 * Reads a request body up to `maxBytes`. uWS hands chunks that are valid only during the callback, so
 * each is copied; a single-chunk body (the usual JSON-RPC call) costs one copy and no concat. The whole
 * body read clears `meta.bodyPending`, so its answer keeps the connection.
 *
 * `onTooLarge` fires once the body passes the limit (a chunked body is cut there); no chunk after it is
 * kept, and reading the socket stops there (paused): the refusal, written while the body is pending,
 * closes the connection (respond.ts), so a client sending on never has more than the limit read. The
 * caller has already refused a declared Content-Length over the limit.
 */
export function readBody(
  res: HttpResponse,
  meta: ResponseMeta,
  maxBytes: number,
  onBody: (body: Buffer) => void,
  onTooLarge: () => void,
): void {
  let chunks: Buffer[] | undefined;
  let first: Buffer | undefined;
  let size = 0;
  let refused = false;
  res.onData((ab, isLast) => {
    if (refused) return;
    size += ab.byteLength;
    if (size > maxBytes) {
      refused = true;
      chunks = undefined;
      first = undefined;
      res.pause();
      onTooLarge();
      return;
    }
    if (ab.byteLength > 0) {
      const copy = Buffer.allocUnsafe(ab.byteLength);
      copy.set(new Uint8Array(ab));
      if (first === undefined) first = copy;
      else (chunks ??= [first]).push(copy);
    }
    if (isLast) {
      meta.bodyPending = false;
      onBody(chunks ? Buffer.concat(chunks, size) : (first ?? Buffer.alloc(0)));
    }
  });
}
