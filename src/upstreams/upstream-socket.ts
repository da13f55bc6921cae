import { connect as connectTcp, type Socket } from 'node:net';
import { connect as connectTls, createSecureContext, rootCertificates, type SecureContext } from 'node:tls';
import type { UpstreamTarget } from './upstream-url.js';

export interface UpstreamSocketConfig {
  readonly target: UpstreamTarget;
  /** Built once per upstream: a context per connection would parse the CA bundle on every connect. */
  readonly secureContext: SecureContext | undefined;
}

/** Socket settings for one upstream; `ca` is trusted on top of the built-in roots for https. */
export function upstreamSocketConfig(target: UpstreamTarget, ca: string | Buffer | undefined): UpstreamSocketConfig {
  if (!target.secure) return { target, secureContext: undefined };
  return { target, secureContext: createSecureContext(ca === undefined ? {} : { ca: [...rootCertificates, ca] }) };
}

/** What one upstream socket reports. */
export interface UpstreamSocketEvents {
  /** The connection (and TLS handshake) is established. */
  onConnect(): void;
  /**
   * Bytes read: chunk[0, length). When `borrowed`, chunk is the read buffer shared by every plain-TCP
   * upstream socket: valid only during the call, so whatever is kept must be copied.
   */
  onBytes(chunk: Buffer, length: number, borrowed: boolean): void;
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
      secureContext: config.secureContext,
    });
    socket.setNoDelay(true);
    socket.on('secureConnect', events.onConnect);
    socket.on('data', (chunk: Buffer) => events.onBytes(chunk, chunk.length, false));
  } else {
    socket = connectTcp({
      host: target.host,
      port: target.port,
      noDelay: true,
      onread: {
        buffer: SHARED_READ_BUFFER,
        callback(bytes) {
          events.onBytes(SHARED_READ_BUFFER, bytes, true);
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
