/**
 * A local receiver of webhook deliveries on a loopback port: every POST it was sent (headers and body), each
 * answered with the next status of `statuses`, then 200. Closed at the test's end.
 */
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Test } from 'tap';

export interface WebhookReceiver {
  /** Its URL, `http://127.0.0.1:<port>/hook`. */
  url: string;
  got: Array<{ headers: IncomingHttpHeaders; body: string }>;
}

export async function webhookReceiver(t: Test, statuses: number[] = []): Promise<WebhookReceiver> {
  const got: WebhookReceiver['got'] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString('utf8')));
    req.on('end', () => {
      got.push({ headers: req.headers, body });
      res.statusCode = statuses.shift() ?? 200;
      res.end('ok');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, got };
}
