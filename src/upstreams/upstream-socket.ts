import { connect as connectTcp, type Socket } from 'node:net';
import { connect as connectTls, rootCertificates } from 'node:tls';
import type { UpstreamTarget } from './upstream-url.js';

export interface UpstreamSocketConfig {
  readonly target: UpstreamTarget;
  /** Extra CA for https upstreams, trusted on top of the built-in roots. */
  readonly ca: string | Buffer | undefined;
}

/** What one upstream socket reports. */
export interface UpstreamSocketEvents {
  /** The connection (and TLS handshake) is established. */
  onConnect(): void;
  /**
   * Bytes read. When `borrowed`, chunk is a view of a read buffer shared by every plain-TCP upstream socket:
   * valid only during the call, so whatever is kept must be copied.
   */
  onBytes(chunk: Buffer, borrowed: boolean): void;
  /** The peer finished sending (FIN). */
  onEnd(): void;
  /** The socket failed, or closed; may be reported more than once. */
  onGone(err: Error | undefined): void;
}

// Reads land in one reusable buffer instead of a fresh allocation per read. Sharing it is safe because
// each read callback runs to completion before the next read begins.
const SHARED_READ_BUFFER = Buffer.allocUnsafe(64 * 1024);

/** Opens a TCP or TLS connection with Nagle disabled; writes issued before it is established are queued. */
export function openUpstreamSocket(config: UpstreamSocketConfig, events: UpstreamSocketEvents): Socket {
  const { target } = config;
  let socket: Socket;
  if (target.secure) {
    socket = connectTls({
      host: target.host,
      port: target.port,
      servername: target.servername,
      ca: config.ca === undefined ? undefined : [...rootCertificates, config.ca],
    });
    socket.setNoDelay(true);
    socket.on('secureConnect', events.onConnect);
    socket.on('data', (chunk: Buffer) => events.onBytes(chunk, false));
  } else {
    socket = connectTcp({
      host: target.host,
      port: target.port,
      noDelay: true,
      onread: {
        buffer: SHARED_READ_BUFFER,
        callback(bytes, buffer) {
          events.onBytes((buffer as Buffer).subarray(0, bytes), true);
          return true;
        },
      },
    });
    socket.on('connect', events.onConnect);
  }
  socket.on('end', events.onEnd);
  socket.on('error', events.onGone);
  socket.on('close', () => events.onGone(undefined));
  return socket;
}
