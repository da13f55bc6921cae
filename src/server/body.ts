import type { HttpResponse } from './uws.js';

/**
 * Reads a request body up to `maxBytes`. uWS hands chunks that are valid only during the callback, so
 * each is copied; a single-chunk body (the usual JSON-RPC call) costs one copy and no concat.
 * `onTooLarge` fires once the body passes the limit (a chunked body is cut there); no chunk after it
 * is kept. The caller has already refused a declared Content-Length over the limit.
 */
export function readBody(res: HttpResponse, maxBytes: number, onBody: (body: Buffer) => void, onTooLarge: () => void): void {
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
      onTooLarge();
      return;
    }
    if (ab.byteLength > 0) {
      const copy = Buffer.allocUnsafe(ab.byteLength);
      copy.set(new Uint8Array(ab));
      if (first === undefined) first = copy;
      else (chunks ??= [first]).push(copy);
    }
    if (isLast) onBody(chunks ? Buffer.concat(chunks, size) : (first ?? Buffer.alloc(0)));
  });
}
