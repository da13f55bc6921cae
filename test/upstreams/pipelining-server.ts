/** A raw pipelining HTTP/1.1 server for the upstream client's tests, and the requests and answers they use. */
import type { Test } from 'tap';
import { createServer as createTcpServer, type Socket } from 'node:net';
import { waitFor } from '../support/wait-for.js';
import { listenOn, readRequests } from './exchange-harness.js';

/** One request as the server read it. */
export interface Arrival {
  connection: number;
  /** The request body: each test sends a token there. */
  token: string;
  /** Requests on this connection read earlier and not yet answered when this one was read. */
  outstanding: number;
  /** Requests read from the same TCP read as this one, this one included. */
  sameRead: number;
}

/** What the server writes for one request, in order on its connection; null never answers, holding every later one. */
export type Answer = string | Buffer | null;

/**
 * A raw HTTP/1.1 server that reads pipelined requests and answers them strictly in order per connection,
 * as a sequential pipelining server does: `answer` may return a promise to delay an answer (and everything
 * behind it on that connection).
 */
export async function pipeliningServer(t: Test, answer: (arrival: Arrival, socket: Socket) => Answer | Promise<Answer>) {
  const arrivals: Arrival[] = [];
  const sockets: Socket[] = [];
  const server = createTcpServer((socket) => {
    const connection = sockets.push(socket) - 1;
    let outstanding = 0;
    let answered: Promise<unknown> = Promise.resolve();
    let read: Arrival[] = [];
    readRequests(
      socket,
      (_head, body) => {
        const arrival: Arrival = { connection, token: body.toString('utf8'), outstanding, sameRead: 0 };
        outstanding++;
        read.push(arrival);
        arrivals.push(arrival);
        const reply = Promise.resolve(answer(arrival, socket));
        answered = answered.then(async () => {
          const bytes = await reply;
          if (bytes === null) return new Promise(() => {});
          if (!socket.destroyed) socket.write(bytes);
          outstanding--;
        });
      },
      () => {
        for (const arrival of read) arrival.sameRead = read.length;
        read = [];
      },
    );
  });
  const listening = await listenOn(t, server);
  return { ...listening, arrivals, sockets, url: `http://127.0.0.1:${listening.port}` };
}

export const ok = (body: string): string => `HTTP/1.1 200 OK\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;

/** A POST carrying `token` as its body. */
export const post = (token: string, timeoutMs = 5000) => ({ method: 'POST' as const, body: token, timeoutMs });

/**
 * A server that reads three pipelined requests on its first socket, answers the first (token '1') and then closes
 * that socket (`destroy`: a reset; `Connection: close`: said in the answer); later sockets get every answer.
 */
export async function closingAfterFirst(t: Test, close: 'destroy' | 'Connection: close') {
  const server = await pipeliningServer(t, async (arrival, socket) => {
    if (arrival.connection > 0) return ok(`answer-${arrival.token}`);
    if (arrival.token !== '1') return null;
    await waitFor(() => server.arrivals.length === 3);
    if (close === 'destroy') {
      setTimeout(() => socket.destroy(), 10);
      return ok('answer-1');
    }
    return 'HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 8\r\n\r\nanswer-1';
  });
  return server;
}
