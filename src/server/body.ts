import type { ResponseMeta } from './respond.js';
import type { HttpResponse } from './uws.js';

const NO_BODY = Buffer.alloc(0);

/**
 * Reads a request body up to `maxBytes` (start()) into its subclass's `body`, or calls `tooLarge`. uWS hands
 * chunks that are valid only during the callback, so each is copied; a single-chunk body (the usual JSON-RPC
 * call) costs one copy and no concat. The whole body read clears `meta.bodyPending`, so its answer keeps the
 * connection.
 *
 * `tooLarge` is called once the body passes the limit (a chunked body is cut there); no chunk after it is
 * kept, and reading the socket stops there (paused): the refusal, written while the body is pending,
 * closes the connection (respond.ts), so a client sending on never has more than the limit read. The
 * caller has already refused a declared Content-Length over the limit.
 *
 * A class, its state in fields: a road that keeps its request's own state in a subclass reads a body for
 * the cost of that one object and the function uWS calls.
 */
export abstract class BodyRead {
  private chunks: Buffer[] | undefined = undefined;
  private first: Buffer | undefined = undefined;
  private size = 0;
  private refused = false;

  constructor(
    private readonly res: HttpResponse,
    private readonly meta: ResponseMeta,
    private readonly maxBytes: number,
  ) {}

  /** The whole body. */
  protected abstract body(body: Buffer): void;
  /** The body passed the limit. */
  protected abstract tooLarge(): void;

  /** Starts reading: call once, while the request's handler runs. */
  start(): void {
    this.res.onData(this.data.bind(this));
  }

  private data(ab: ArrayBuffer, isLast: boolean): void {
    if (this.refused) return;
    this.size += ab.byteLength;
    if (this.size > this.maxBytes) {
      this.refused = true;
      this.chunks = undefined;
      this.first = undefined;
      this.res.pause();
      this.tooLarge();
      return;
    }
    if (ab.byteLength > 0) {
      const copy = Buffer.allocUnsafe(ab.byteLength);
      copy.set(new Uint8Array(ab));
      if (this.first === undefined) this.first = copy;
      else (this.chunks ??= [this.first]).push(copy);
    }
    if (isLast) {
      this.meta.bodyPending = false;
      this.body(this.chunks ? Buffer.concat(this.chunks, this.size) : (this.first ?? NO_BODY));
    }
  }
}

/** A BodyRead with its two outcomes as callbacks (readBody). */
class CallbackRead extends BodyRead {
  constructor(
    res: HttpResponse,
    meta: ResponseMeta,
    maxBytes: number,
    private readonly onBody: (body: Buffer) => void,
    private readonly onTooLarge: () => void,
  ) {
    super(res, meta, maxBytes);
  }

  protected body(body: Buffer): void {
    this.onBody(body);
  }

  protected tooLarge(): void {
    this.onTooLarge();
  }
}

/** Reads a request body up to `maxBytes` (see BodyRead) into `onBody`, or calls `onTooLarge`. */
export function readBody(
  res: HttpResponse,
  meta: ResponseMeta,
  maxBytes: number,
  onBody: (body: Buffer) => void,
  onTooLarge: () => void,
): void {
  new CallbackRead(res, meta, maxBytes, onBody, onTooLarge).start();
}
