/** Plain HTTP helpers for tests: they speak to the gateway as curl would, and return raw bytes. */
import { Agent, request as httpRequest } from 'node:http';

export interface RawAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  json: unknown;
}

export function post(
  url: string,
  body: string | Buffer,
  headers: Record<string, string> = {},
  agent: Agent | false = false,
): Promise<RawAnswer> {
  return send('POST', url, body, { 'content-type': 'application/json', ...headers }, agent);
}

/** Each request on a connection of its own unless `agent` says otherwise. */
export function send(
  method: string,
  url: string,
  body?: string | Buffer,
  headers: Record<string, string> = {},
  agent: Agent | false = false,
): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    // An explicit length: Node frames DELETE and GET bodies neither by length nor by chunks otherwise.
    const framed = body === undefined ? headers : { 'content-length': String(Buffer.byteLength(body)), ...headers };
    const req = httpRequest(url, { method, headers: framed, agent }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', reject);
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString();
        let json: unknown;
        try {
          json = JSON.parse(text);
        } catch {
          json = undefined;
        }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

export function rpc(
  url: string,
  method: string,
  params: unknown[] = [],
  id: number | string = 1,
  headers: Record<string, string> = {},
): Promise<RawAnswer> {
  return post(url, JSON.stringify({ jsonrpc: '2.0', id, method, params }), headers);
}

/**
 * Calls that all go over one kept-alive connection, so over one worker thread: the response cache is per
 * worker, and a call on a new connection may land on another. Close it at the end.
 */
export function oneConnection(): { rpc(url: string, method: string, params?: unknown[]): Promise<RawAnswer>; close(): void } {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  return {
    rpc: (url, method, params = []) => post(url, JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }), {}, agent),
    close: () => agent.destroy(),
  };
}
