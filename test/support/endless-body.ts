/**
 * A hostile uploader: one raw socket that sends a request head and then a chunked body for as long as the
 * server takes it, within a bound of time and bytes, so a test can tell a server that closes and stops
 * reading from one that reads on. Loopback only; the socket is destroyed before the promise settles.
 */
import { connect } from 'node:net';

export interface Upload {
  /** What the server answered (head and body as text), '' when nothing. */
  answer: string;
  /** Whether the server closed the connection before the bound was reached. */
  closed: boolean;
  /** Body bytes the socket took (written to the kernel) before the server closed or the bound was reached. */
  sent: number;
}

export interface UploadBound {
  /** Give up after this long, in ms; default 2000. */
  ms?: number;
  /** Stop sending after this many bytes; default 256 MiB. */
  bytes?: number;
  /**
   * Send this many bytes of the body, then nothing more, and wait for the answer. Without it the body goes on
   * until the server closes: a server that closes with some of it unread resets the connection, and a reset
   * that comes before the answer is read loses it (Node drops a socket whose write failed, with what it held
   * unread), so only a body that stops shows the answer for sure.
   */
  stopAfter?: number;
}

const FRAME = (() => {
  const chunk = Buffer.alloc(16 * 1024, 0x61);
  return Buffer.concat([Buffer.from(`${chunk.length.toString(16)}\r\n`), chunk, Buffer.from('\r\n')]);
})();

/**
 * Sends `head` (request line and headers, without the blank line; `Transfer-Encoding: chunked` is added) to
 * 127.0.0.1:`port`, then chunks of 16 KiB as fast as the socket takes them until the server closes or the
 * bound is reached (or `stopAfter` bytes are sent).
 */
export function endlessUpload(port: number, head: string, bound: UploadBound = {}): Promise<Upload> {
  const ms = bound.ms ?? 2000;
  const cap = bound.stopAfter ?? bound.bytes ?? 256 * 1024 * 1024;
  return new Promise((resolve) => {
    // Read straight from the socket into `answer` (onread): bytes a stream held would be dropped with it when the
    // server's reset comes right behind them.
    const socket = connect({
      port,
      host: '127.0.0.1',
      onread: {
        buffer: Buffer.alloc(64 * 1024),
        callback: (n: number, buf: Buffer) => {
          answer += buf.toString('latin1', 0, n);
          return true;
        },
      },
    });
    let answer = '';
    let closed = false;
    let sent = 0;
    let done = false;
    const finish = (): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ answer, closed, sent });
    };
    const timer = setTimeout(finish, ms);
    const pump = (): void => {
      for (let i = 0; i < 64; i++) {
        if (closed || done) return;
        if (sent >= cap) {
          if (bound.stopAfter === undefined) finish();
          return;
        }
        sent += FRAME.length;
        if (!socket.write(FRAME)) return;
      }
      setImmediate(pump);
    };
    socket.on('connect', () => {
      const start = `${head}\r\nTransfer-Encoding: chunked\r\n\r\n`;
      if (bound.stopAfter === undefined) {
        socket.write(start);
        pump();
        return;
      }
      // One write, which the kernel takes whole: no write is left to fail once the server has answered.
      const frames = Math.ceil(bound.stopAfter / FRAME.length);
      sent = frames * FRAME.length;
      socket.write(Buffer.concat([Buffer.from(start), ...new Array<Buffer>(frames).fill(FRAME)]));
    });
    socket.on('drain', pump);
    // The server's FIN, or its reset when it closes with the body unread: either way it stopped reading.
    const onClose = (): void => {
      closed = true;
      // What is still in flight of the answer arrives within a moment.
      setTimeout(finish, 50);
    };
    socket.on('end', onClose);
    socket.on('error', onClose);
    socket.on('close', onClose);
  });
}

/** The status of a raw HTTP answer, 0 when there is none. */
export function statusOf(answer: string): number {
  return Number(/^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1] ?? 0);
}
