/** Listeners on 127.0.0.1 port 0 and a recording ResponseSink, for the upstream client's tests. */
import type { AddressInfo, Server, Socket } from 'node:net';
import type { Test } from 'tap';
import type { HttpUpstream, RequestHandle, UpstreamError, UpstreamRequest } from '../../src/upstreams/http-client.js';

export interface Listening {
  port: number;
  /** Connections accepted so far. */
  accepted: () => number;
  /** Connections open right now. */
  open: () => number;
  /** Most connections open at once. */
  peak: () => number;
}

/** Starts `server` on 127.0.0.1:0 and closes it, with every connection it accepted, in t.teardown. */
export async function listenOn(t: Test, server: Server): Promise<Listening> {
  const sockets = new Set<Socket>();
  let accepted = 0;
  let peak = 0;
  server.on('connection', (socket: Socket) => {
    accepted++;
    sockets.add(socket);
    peak = Math.max(peak, sockets.size);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  );
  return {
    port: (server.address() as AddressInfo).port,
    accepted: () => accepted,
    open: () => sockets.size,
    peak: () => peak,
  };
}

export interface Outcome {
  status: number | undefined;
  headers: Array<[string, string]>;
  contentLength: number | undefined;
  body: Buffer;
  ended: boolean;
  error: UpstreamError | undefined;
  /** Every sink call in order, to catch a second settlement or a call after abort. */
  calls: string[];
}

export interface Exchange {
  handle: RequestHandle;
  outcome: Outcome;
  /** Settles at onEnd or onError. */
  settled: Promise<Outcome>;
}

/** Sends req, recording everything its sink sees. `onData` may replace the default "accept everything". */
export function exchange(
  upstream: HttpUpstream,
  req: UpstreamRequest,
  onData?: (chunk: Buffer, handle: RequestHandle) => boolean,
): Exchange {
  const outcome: Outcome = {
    status: undefined,
    headers: [],
    contentLength: undefined,
    body: Buffer.alloc(0),
    ended: false,
    error: undefined,
    calls: [],
  };
  const chunks: Buffer[] = [];
  let settle!: (o: Outcome) => void;
  const settled = new Promise<Outcome>((resolve) => (settle = resolve));
  const handle: RequestHandle = upstream.request(req, {
    onHead(status, headers, contentLength) {
      outcome.calls.push('head');
      outcome.status = status;
      outcome.headers = headers;
      outcome.contentLength = contentLength;
    },
    onData(chunk) {
      outcome.calls.push('data');
      chunks.push(chunk);
      return onData === undefined ? true : onData(chunk, handle);
    },
    onEnd() {
      outcome.calls.push('end');
      outcome.ended = true;
      outcome.body = Buffer.concat(chunks);
      settle(outcome);
    },
    onError(err) {
      outcome.calls.push('error');
      outcome.error = err;
      outcome.body = Buffer.concat(chunks);
      settle(outcome);
    },
  });
  return { handle, outcome, settled };
}

/** Sends req and waits for its outcome. */
export function fetchOutcome(upstream: HttpUpstream, req: UpstreamRequest): Promise<Outcome> {
  return exchange(upstream, req).settled;
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Splits a raw connection's bytes into requests (head text, body), as a minimal HTTP/1.1 server would; `onRead`,
 * when given, follows the requests of each TCP read.
 */
export function readRequests(socket: Socket, onRequest: (head: string, body: Buffer) => void, onRead?: () => void): void {
  let pending = Buffer.alloc(0);
  socket.on('data', (chunk: Buffer) => {
    pending = Buffer.concat([pending, chunk]);
    for (;;) {
      const end = pending.indexOf('\r\n\r\n');
      if (end === -1) break;
      const head = pending.toString('latin1', 0, end);
      const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
      if (pending.length < end + 4 + length) break;
      const body = pending.subarray(end + 4, end + 4 + length);
      pending = pending.subarray(end + 4 + length);
      onRequest(head, body);
    }
    onRead?.();
  });
}

/** Writes bytes one at a time, each in its own TCP segment, a millisecond apart. */
export async function dribble(socket: Socket, bytes: Buffer): Promise<void> {
  socket.setNoDelay(true);
  for (let i = 0; i < bytes.length && !socket.destroyed; i++) {
    socket.write(bytes.subarray(i, i + 1));
    await sleep(1);
  }
}

/** Resolves when the socket closes, the upstream-side view of "the client hung up"; rejects if it stays open `ms`. */
export function closed(socket: Socket, ms = 3000): Promise<void> {
  return new Promise((resolve, reject) => {
    if (socket.destroyed) return resolve();
    const timer = setTimeout(() => reject(new Error(`socket still open after ${ms} ms`)), ms);
    socket.once('close', () => {
      clearTimeout(timer);
      resolve();
    });
  });
}
