import type { HttpResponse } from './uws.js';

/**
 * Streams a body into a uWS response with backpressure. With a known total size it uses tryEnd, so
 * the client gets a Content-Length and a cut stream is visibly short; without one it writes chunks
 * (chunked encoding, whose missing final chunk marks a cut). `onDrain` runs when a full client has
 * taken what was queued, so the producer can resume.
 *
 * uWS drops a response whose client stops reading for about 10 seconds; that stays, so a stalled
 * reader cannot pin upstream sockets and memory.
 */
export interface StreamOut {
  /** Writes a piece; false means the client is full and `onDrain` will fire. */
  write(chunk: Buffer): boolean;
  /** Completes the body (only when every declared byte was written). */
  end(): void;
  /** Cuts the connection: the client sees a truncated body, never a complete-looking one. */
  cut(): void;
}

export function createStreamOut(res: HttpResponse, total: number | undefined, isAborted: () => boolean, onDrain: () => void): StreamOut {
  let pending: Buffer | null = null;
  let pendingOffset = 0;
  let finished = false;

  const retryPending = (offset: number): boolean => {
    if (pending === null || isAborted()) return true;
    const rest = pending.subarray(offset - pendingOffset);
    let ok = false;
    let done = false;
    res.cork(() => {
      [ok, done] = res.tryEnd(rest, total!);
    });
    if (done) {
      finished = true;
      pending = null;
      return true;
    }
    if (ok) {
      pending = null;
      onDrain();
    }
    return ok;
  };

  return {
    write(chunk) {
      if (finished || isAborted()) return true;
      if (total === undefined) {
        let ok = true;
        res.cork(() => {
          ok = res.write(chunk);
        });
        if (!ok) {
          res.onWritable(() => {
            onDrain();
            return true;
          });
        }
        return ok;
      }
      const offset = res.getWriteOffset();
      let ok = false;
      let done = false;
      res.cork(() => {
        [ok, done] = res.tryEnd(chunk, total);
      });
      if (done) {
        finished = true;
        return true;
      }
      if (!ok) {
        pending = chunk;
        pendingOffset = offset;
        res.onWritable(retryPending);
      }
      return ok;
    },
    end() {
      if (finished || isAborted()) return;
      finished = true;
      if (total === undefined) res.cork(() => res.end());
      else if (pending === null) res.cork(() => res.close());
    },
    cut() {
      if (finished || isAborted()) return;
      finished = true;
      res.close();
    },
  };
}
