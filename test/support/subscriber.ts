/**
 * A WebSocket client for subscription tests: answers matched to requests by id, notifications kept
 * apart in arrival order with the exact byte size of each message as received, and the close seen
 * by the client. Unlike openSocket's single queue, a notification arriving before an answer never
 * takes the answer's place.
 */
import type { Test } from 'tap';
import WebSocket from 'ws';
import { rpc } from './rpc.js';

export interface Notification {
  subscription: string;
  result: Record<string, unknown>;
  /** Bytes of the whole message as received (what the gateway meters). */
  bytes: number;
  /** performance.now() when it arrived. */
  at: number;
}

export interface Answer {
  id: number;
  result?: unknown;
  error?: { code: number; message: string };
}

export interface Subscriber {
  readonly ws: WebSocket;
  /** One JSON-RPC request; resolves with its answer, rejects after `ms`. */
  request(method: string, params?: unknown[], ms?: number): Promise<Answer>;
  /** eth_subscribe; resolves with the subscription id, throws on an error answer. */
  subscribe(kind: string, params?: unknown): Promise<string>;
  /** Every notification received, in order. */
  readonly notifications: Notification[];
  /** The results delivered for one subscription id, in order. */
  resultsOf(id: string): Array<Record<string, unknown>>;
  /** Resolves once the socket closed, with the code and reason the client saw. */
  readonly closed: Promise<{ code: number; reason: string }>;
  readonly isClosed: boolean;
}

let nextRequestId = 0;

export async function openSubscriber(t: Test, url: string): Promise<Subscriber> {
  const ws = new WebSocket(url, { perMessageDeflate: false });
  const notifications: Notification[] = [];
  const waiting = new Map<number, (a: Answer) => void>();
  let isClosed = false;
  ws.on('message', (data: Buffer) => {
    const m = JSON.parse(data.toString()) as Record<string, unknown>;
    if (m.method === 'eth_subscription') {
      const p = m.params as { subscription: string; result: Record<string, unknown> };
      notifications.push({ subscription: p.subscription, result: p.result, bytes: data.length, at: performance.now() });
      return;
    }
    const done = waiting.get(m.id as number);
    if (done) {
      waiting.delete(m.id as number);
      done(m as unknown as Answer);
    }
  });
  const closed = new Promise<{ code: number; reason: string }>((resolve) => {
    ws.once('close', (code: number, reason: Buffer) => {
      isClosed = true;
      resolve({ code, reason: reason.toString() });
    });
  });
  ws.on('error', () => {}); // The close event reports what happened.
  t.teardown(() => ws.terminate());
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('unexpected-response', (_req, res) => reject(new Error(`upgrade refused with HTTP ${res.statusCode}`)));
    ws.once('close', () => reject(new Error('closed before opening')));
  });
  const request = (method: string, params: unknown[] = [], ms = 10_000): Promise<Answer> => {
    const id = ++nextRequestId;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        waiting.delete(id);
        reject(new Error(`no answer to ${method} within ${ms} ms`));
      }, ms);
      waiting.set(id, (a) => {
        clearTimeout(timer);
        resolve(a);
      });
      ws.send(JSON.stringify({ jsonrpc: '2.0', id, method, params }));
    });
  };
  return {
    ws,
    request,
    async subscribe(kind, params) {
      const a = await request('eth_subscribe', params === undefined ? [kind] : [kind, params]);
      if (typeof a.result !== 'string') throw new Error(`eth_subscribe ${kind} refused: ${JSON.stringify(a)}`);
      return a.result;
    },
    notifications,
    resultsOf: (id) => notifications.filter((n) => n.subscription === id).map((n) => n.result),
    closed,
    get isClosed() {
      return isClosed;
    },
  };
}

/** Polls `ready` every 20 ms; rejects naming `what` (and `detail()` when given) after `ms`. */
export async function waitUntil(ready: () => boolean, ms: number, what: string, detail?: () => string): Promise<number> {
  const start = performance.now();
  while (!ready()) {
    if (performance.now() - start > ms) throw new Error(`${what}: not within ${ms} ms${detail ? ` (${detail()})` : ''}`);
    await new Promise((r) => setTimeout(r, 20));
  }
  return performance.now() - start;
}

/** A JSON-RPC call to a node at its own HTTP URL (anvil's port, bypassing the gateway); its result. */
export async function nodeCall<T = unknown>(url: string, method: string, params: unknown[] = []): Promise<T> {
  const body = (await rpc(url, method, params)).json as { result?: T } | undefined;
  if (body === undefined || !('result' in body)) throw new Error(`${method} refused by the node: ${JSON.stringify(body)}`);
  return body.result as T;
}
