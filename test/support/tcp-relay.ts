/**
 * A TCP relay on 127.0.0.1 port 0 in front of a node, for tests of upstream loss: cut() destroys
 * every piped connection and refuses new ones until restore(). It reads the client→node half of
 * WebSocket connections, unmasking the client's frames as the node does, and counts the JSON-RPC
 * methods it sees there, so a test checks the eth_subscribe calls that reached the wire, not what
 * the gateway believes it sent. Compressed frames cannot be read and are counted apart.
 */
import { createServer, connect, type Socket } from 'node:net';
import type { Test } from 'tap';
import { resetSocket } from './reset-socket.js';

export interface TcpRelay {
  readonly port: number;
  /** http://127.0.0.1:port */
  readonly url: string;
  /** ws://127.0.0.1:port */
  readonly wsUrl: string;
  /** JSON-RPC requests with this method seen in client→node WebSocket messages. */
  requests(method: string): number;
  /** The HTTP heads of WebSocket upgrade requests, in order. */
  readonly upgrades: readonly string[];
  /** Client→node WebSocket text messages, unmasked, in order. */
  readonly messages: readonly string[];
  /** WebSocket frames that could not be read (compressed). */
  readonly unreadableFrames: number;
  /** Connections accepted and piped (refused ones excluded). */
  readonly connections: number;
  cut(): void;
  restore(): void;
}

interface FrameReader {
  push(chunk: Buffer): void;
}

/** Reads the client's side of one connection: an HTTP head, then WebSocket frames if it upgraded. */
function clientReader(onUpgrade: (head: string) => void, onMessage: (text: string) => void, onUnreadable: () => void): FrameReader {
  let buf: Buffer = Buffer.alloc(0);
  let mode: 'head' | 'ws' | 'other' = 'head';
  let fragments: Buffer[] = [];
  let fragmentedText = false;
  return {
    push(chunk) {
      if (mode === 'other') return;
      buf = buf.length === 0 ? chunk : Buffer.concat([buf, chunk]);
      if (mode === 'head') {
        const end = buf.indexOf('\r\n\r\n');
        if (end < 0) return;
        const head = buf.subarray(0, end).toString('latin1');
        if (!/^upgrade:\s*websocket/im.test(head)) {
          mode = 'other';
          return;
        }
        onUpgrade(head);
        mode = 'ws';
        buf = buf.subarray(end + 4);
      }
      for (;;) {
        if (buf.length < 2) return;
        const b0 = buf[0]!;
        const b1 = buf[1]!;
        let len = b1 & 0x7f;
        let offset = 2;
        if (len === 126) {
          if (buf.length < 4) return;
          len = buf.readUInt16BE(2);
          offset = 4;
        } else if (len === 127) {
          if (buf.length < 10) return;
          len = Number(buf.readBigUInt64BE(2));
          offset = 10;
        }
        const masked = (b1 & 0x80) !== 0;
        const maskAt = offset;
        if (masked) offset += 4;
        if (buf.length < offset + len) return;
        const payload = Buffer.from(buf.subarray(offset, offset + len));
        if (masked) for (let i = 0; i < payload.length; i++) payload[i] = payload[i]! ^ buf[maskAt + (i % 4)]!;
        buf = buf.subarray(offset + len);
        const fin = (b0 & 0x80) !== 0;
        const compressed = (b0 & 0x40) !== 0;
        const opcode = b0 & 0x0f;
        if (opcode >= 8) continue; // close, ping, pong
        if (opcode === 1 || opcode === 2) {
          fragments = [];
          fragmentedText = opcode === 1 && !compressed;
          if (compressed) onUnreadable();
        }
        fragments.push(payload);
        if (fin) {
          if (fragmentedText) onMessage(Buffer.concat(fragments).toString());
          fragments = [];
        }
      }
    },
  };
}

export async function tcpRelay(t: Test, target: { port: number; host?: string }): Promise<TcpRelay> {
  const host = target.host ?? '127.0.0.1';
  const sockets = new Set<Socket>();
  const methods = new Map<string, number>();
  const upgrades: string[] = [];
  const messages: string[] = [];
  let unreadableFrames = 0;
  let connections = 0;
  let isCut = false;

  const track = (s: Socket): void => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => {});
  };

  const server = createServer((client) => {
    if (isCut) {
      client.on('error', () => {});
      resetSocket(client);
      return;
    }
    connections++;
    const node = connect(target.port, host);
    track(client);
    track(node);
    const reader = clientReader(
      (head) => upgrades.push(head),
      (text) => {
        messages.push(text);
        for (const m of text.matchAll(/"method"\s*:\s*"([^"]+)"/g)) methods.set(m[1]!, (methods.get(m[1]!) ?? 0) + 1);
      },
      () => unreadableFrames++,
    );
    client.on('data', (d: Buffer) => reader.push(d));
    client.pipe(node);
    node.pipe(client);
    client.on('close', () => node.destroy());
    node.on('close', () => client.destroy());
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const port = (server.address() as { port: number }).port;

  const cutAll = (): void => {
    for (const s of sockets) resetSocket(s);
    sockets.clear();
  };
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        cutAll();
        server.close(() => resolve());
      }),
  );

  return {
    port,
    url: `http://127.0.0.1:${port}`,
    wsUrl: `ws://127.0.0.1:${port}`,
    requests: (method) => methods.get(method) ?? 0,
    upgrades,
    messages,
    get unreadableFrames() {
      return unreadableFrames;
    },
    get connections() {
      return connections;
    },
    cut() {
      isCut = true;
      cutAll();
    },
    restore() {
      isCut = false;
    },
  };
}
