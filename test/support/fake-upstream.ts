/**
 * Upstreams that misbehave in the ways a real node cannot be made to: hang, reset, speak garbage,
 * answer 5xx. Each listens on 127.0.0.1 port 0 and is closed at teardown.
 */
import { type AddressInfo, createServer, type Socket } from 'node:net';
import type { Test } from 'tap';
import { resetSocket } from './reset-socket.js';

export type Fault = 'hang' | 'reset' | 'garbage' | 'not-json' | 'http-500' | 'truncated';

export interface FakeUpstream {
  url: string;
  port: number;
  /** Raw request texts received, in order. */
  requests: string[];
  connections: number;
}

export async function fakeUpstream(t: Test, fault: Fault | ((socket: Socket, request: string) => void)): Promise<FakeUpstream> {
  const sockets = new Set<Socket>();
  const state: FakeUpstream = { url: '', port: 0, requests: [], connections: 0 };
  const server = createServer((socket) => {
    state.connections++;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    let buf = '';
    socket.on('data', (d: Buffer) => {
      buf += d.toString('latin1');
      // Pipelined requests may arrive in one read: each is taken in turn.
      for (;;) {
        const headEnd = buf.indexOf('\r\n\r\n');
        if (headEnd < 0) return;
        const m = /content-length:\s*(\d+)/i.exec(buf.slice(0, headEnd));
        const need = headEnd + 4 + (m ? Number(m[1]) : 0);
        if (buf.length < need) return;
        const request = buf.slice(0, need);
        buf = buf.slice(need);
        state.requests.push(request);
        if (typeof fault === 'function') fault(socket, request);
        else answerFault(socket, fault);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  state.port = typeof address === 'object' && address ? address.port : 0;
  state.url = `http://127.0.0.1:${state.port}`;
  t.teardown(() => {
    for (const s of sockets) s.destroy();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return state;
}

function answerFault(socket: Socket, fault: Fault): void {
  switch (fault) {
    case 'hang':
      return;
    case 'reset':
      resetSocket(socket);
      return;
    case 'garbage':
      socket.end('SSH-2.0-OpenSSH_9.2\r\nthis is not http at all\r\n');
      return;
    case 'not-json':
      socket.write('HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: 21\r\n\r\n<html>gateway</html>\n');
      return;
    case 'http-500':
      socket.write('HTTP/1.1 500 Internal Server Error\r\ncontent-type: text/plain\r\ncontent-length: 5\r\n\r\noops\n');
      return;
    case 'truncated':
      // Larger than what the gateway holds whole, so its answer to the client has already begun.
      socket.write(
        'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 1000000\r\n\r\n{"jsonrpc":"2.0","id":1,"result":"0x' +
          'ab'.repeat(100_000),
      );
      setTimeout(() => resetSocket(socket), 50);
      return;
  }
}

/** A port nothing listens on (taken, then released): a node that cannot be reached. */
export async function closedPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

/** The id text of the JSON-RPC call in a raw HTTP request the fake received (the gateway's own id for it). */
export function rpcIdOf(request: string): string {
  const m = /"id":(\d+|"[^"]*"|null)/.exec(request.slice(request.indexOf('\r\n\r\n')));
  if (m === null) throw new Error(`no JSON-RPC id in ${JSON.stringify(request.slice(0, 200))}`);
  return m[1]!;
}

/** `answer` (an answer written with `"id":1`) carrying the id of the call in `request`, as a node echoes it. */
export function echoId(request: string, answer: string): string {
  return answer.replace('"id":1', `"id":${rpcIdOf(request)}`);
}
