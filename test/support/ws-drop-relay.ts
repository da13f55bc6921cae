/**
 * A WebSocket relay in front of a node that drops some of the node's subscription notifications on their way to
 * the client, as a silently dead or lagging upstream subscription does: every message is passed on as it came,
 * except the `eth_subscription` notifications `drop` says true for. The client's own messages all go through.
 */
import type { AddressInfo } from 'node:net';
import type { Test } from 'tap';
import WebSocket, { WebSocketServer } from 'ws';

export interface WsDropRelay {
  /** ws://127.0.0.1:port */
  readonly wsUrl: string;
  /** The notification results dropped so far, in order. */
  readonly dropped: unknown[];
}

export async function wsDropRelay(t: Test, target: string, drop: (result: Record<string, unknown>) => boolean): Promise<WsDropRelay> {
  const server = new WebSocketServer({ host: '127.0.0.1', port: 0, perMessageDeflate: false });
  await new Promise<void>((resolve) => server.once('listening', () => resolve()));
  const dropped: unknown[] = [];
  server.on('connection', (client) => {
    const node = new WebSocket(target, { perMessageDeflate: false });
    const early: Array<{ data: WebSocket.RawData; binary: boolean }> = [];
    client.on('message', (data, binary) => {
      if (node.readyState === WebSocket.OPEN) node.send(data, { binary });
      else early.push({ data, binary });
    });
    node.on('open', () => {
      for (const m of early.splice(0)) node.send(m.data, { binary: m.binary });
    });
    node.on('message', (data, binary) => {
      const text = data.toString();
      try {
        const m = JSON.parse(text) as { method?: string; params?: { result?: unknown } };
        const result = m.params?.result;
        if (m.method === 'eth_subscription' && typeof result === 'object' && result !== null && drop(result as Record<string, unknown>)) {
          dropped.push(result);
          return;
        }
      } catch {
        // Not JSON: passed on as it came.
      }
      if (client.readyState === WebSocket.OPEN) client.send(data, { binary });
    });
    const closeBoth = (): void => {
      client.terminate();
      node.terminate();
    };
    client.on('close', closeBoth);
    node.on('close', closeBoth);
    client.on('error', closeBoth);
    node.on('error', closeBoth);
  });
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        for (const c of server.clients) c.terminate();
        server.close(() => resolve());
      }),
  );
  return { wsUrl: `ws://127.0.0.1:${(server.address() as AddressInfo).port}`, dropped };
}
