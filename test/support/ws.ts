/** A WebSocket client for tests: ordered message queue, close code and reason, upgrade refusals. */
import type { Test } from 'tap';
import WebSocket from 'ws';

export interface TestSocket {
  ws: WebSocket;
  /** The next message (text), waiting up to `ms`. */
  next(ms?: number): Promise<string>;
  /** Sends a request and resolves with the next message. */
  call(body: unknown): Promise<unknown>;
  /** Resolves with the close code and reason once the socket closes. */
  closed: Promise<{ code: number; reason: string }>;
  /** Messages received and not yet taken by next(). */
  queued(): string[];
}

export function wsUrl(httpBase: string, path: string): string {
  return httpBase.replace(/^http/, 'ws') + path;
}

export async function openSocket(t: Test, url: string, opts: WebSocket.ClientOptions = {}): Promise<TestSocket> {
  const ws = new WebSocket(url, opts);
  const queue: string[] = [];
  const waiters: Array<(m: string) => void> = [];
  ws.on('message', (data) => {
    const m = String(data);
    const w = waiters.shift();
    if (w) w(m);
    else queue.push(m);
  });
  const closed = new Promise<{ code: number; reason: string }>((resolve) => {
    ws.once('close', (code, reason) => resolve({ code, reason: String(reason) }));
  });
  t.teardown(() => ws.terminate());
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  const next = (ms = 5000): Promise<string> => {
    const m = queue.shift();
    if (m !== undefined) return Promise.resolve(m);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        waiters.splice(waiters.indexOf(done), 1);
        reject(new Error(`no message within ${ms} ms`));
      }, ms);
      const done = (msg: string): void => {
        clearTimeout(timer);
        resolve(msg);
      };
      waiters.push(done);
    });
  };
  return {
    ws,
    next,
    closed,
    queued: () => queue,
    async call(body) {
      ws.send(typeof body === 'string' ? body : JSON.stringify(body));
      return JSON.parse(await next()) as unknown;
    },
  };
}

/** An upgrade the gateway refuses: its HTTP status and body. */
export function refusedUpgrade(url: string, opts: WebSocket.ClientOptions = {}): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, opts);
    ws.once('open', () => {
      ws.terminate();
      reject(new Error('the upgrade was accepted'));
    });
    ws.once('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    ws.once('error', () => {});
  });
}
