/**
 * A refusal sent while the request's body still streams closes the connection, and the gateway reads no
 * more of it, on every route that can meet a body: JSON-RPC, Beacon, the management API, route errors,
 * preflights, health, the dashboard and the metrics listener. A raw socket sends a chunked body for as long
 * as the gateway takes it (up to 2 s or 256 MiB): the gateway must answer, close, and have taken no more
 * than its limit and the kernel's socket buffers. An answer to a body read whole keeps its connection.
 * A real gateway in front of a real anvil and a fake Beacon node.
 */
import t from 'tap';
import { connect } from 'node:net';
import { createOwnerAdmin } from '../../src/tenancy/owners.js';
import { endlessUpload, statusOf } from '../support/endless-body.js';
import { fakeBeacon } from '../support/fake-beacon.js';
import { anvilFor, evmChain, gatewayFor } from '../support/gateway.js';

/** The most a closed upload may have sent: the limit, and what loopback's socket buffers hold on both sides. */
const TAKEN_AT_MOST = 32 * 1024 * 1024;

const anvil = await anvilFor(t);
const beacon = await fakeBeacon(t);
const g = await gatewayFor(t, {
  server: { default_chain: 'devnet', max_body_bytes: 65_536 },
  chains: { devnet: evmChain([anvil.url]), 'devnet-beacon': { kind: 'beacon', upstreams: [{ url: beacon.url }] } },
});
const owner = createOwnerAdmin(g.gateway.context.tenancy.store!).createOwner('uploads', 'free', 1_000_000);
const port = g.gateway.port;
const metricsPort = g.gateway.metricsPort!;
const JSON_HEAD = 'Host: x\r\nContent-Type: application/json';
const KEYED = `${JSON_HEAD}\r\nAuthorization: Bearer ${owner.managementKey}`;

/** Route, listener port, request head, the status it is answered. */
const ROUTES: ReadonlyArray<readonly [string, number, string, number]> = [
  ['JSON-RPC, over the limit', port, `POST /v1/rpc/public HTTP/1.1\r\n${JSON_HEAD}`, 413],
  ['JSON-RPC, wrong key', port, `POST /v1/rpc/not-a-key HTTP/1.1\r\n${JSON_HEAD}`, 401],
  ['JSON-RPC, wrong content type', port, 'POST /v1/rpc/public HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain', 415],
  ['Beacon POST, over the limit', port, `POST /devnet-beacon/v1/rpc/public/eth/v1/beacon/pool/attestations HTTP/1.1\r\n${JSON_HEAD}`, 413],
  ['Beacon GET with a body', port, 'GET /devnet-beacon/v1/rpc/public/eth/v1/node/version HTTP/1.1\r\nHost: x', 400],
  ['management create, no key', port, `POST /api/dashboard/endpoints HTTP/1.1\r\n${JSON_HEAD}`, 401],
  ['management create, over the limit', port, `POST /api/dashboard/endpoints HTTP/1.1\r\n${KEYED}`, 400],
  ['management, wrong verb', port, `PUT /api/dashboard/endpoints HTTP/1.1\r\n${KEYED}`, 405],
  ['management, unknown route', port, `POST /api/dashboard/nowhere HTTP/1.1\r\n${KEYED}`, 404],
  ['management account, a body it does not take', port, `GET /api/dashboard/account HTTP/1.1\r\n${KEYED}`, 200],
  ['route error', port, `POST /nowhere HTTP/1.1\r\n${JSON_HEAD}`, 404],
  ['CORS preflight', port, 'OPTIONS /v1/rpc/public HTTP/1.1\r\nHost: x\r\nOrigin: https://app.example', 204],
  ['health', port, 'GET /healthz HTTP/1.1\r\nHost: x', 200],
  ['health, HEAD', port, 'HEAD /healthz HTTP/1.1\r\nHost: x', 200],
  ['dashboard', port, 'GET /dashboard HTTP/1.1\r\nHost: x', 200],
  ['metrics listener', metricsPort, 'POST /metrics HTTP/1.1\r\nHost: x', 404],
];

t.test('a body that goes on: the gateway closes the connection and reads no further', async (t) => {
  // What the gateway answered is not read here: its reset, once it closes with the body unread, may make Node
  // drop the answer with the socket whose next write failed. The next test reads every answer.
  for (const [name, listener, head] of ROUTES) {
    const up = await endlessUpload(listener, head);
    t.ok(up.closed, `${name}: the gateway closed the connection`);
    t.ok(up.sent <= TAKEN_AT_MOST, `${name}: the gateway took ${(up.sent / 1048576).toFixed(1)} MiB of the body`);
  }
});

t.test('a body still coming when the answer goes out: the answer says Connection: close, and closes', async (t) => {
  for (const [name, listener, head, status] of ROUTES) {
    // Past the limit (64 KiB here), and then silence: the rest of the body never comes.
    const up = await endlessUpload(listener, head, { stopAfter: 80 * 1024 });
    t.equal(statusOf(up.answer), status, `${name}: ${status} (${up.answer.split('\r\n', 1)[0]})`);
    t.match(up.answer, /\r\nConnection: close\r\n/i, `${name}: the answer says Connection: close`);
    t.ok(up.closed, `${name}: the gateway closed the connection, not waiting for the rest of the body`);
  }
});

/** Sends `requests` on one connection, in turn, and returns each answer's status line; 'closed' once the gateway closed. */
function onOneConnection(requests: string[]): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const lines: string[] = [];
    let buffer = '';
    const next = (): void => {
      const request = requests[lines.length];
      if (request === undefined) {
        socket.destroy();
        resolve(lines);
      } else socket.write(request);
    };
    socket.on('connect', next);
    socket.on('data', (d: Buffer) => {
      buffer += d.toString('latin1');
      // Each answer here is whole with a Content-Length: its end is known.
      for (;;) {
        const end = buffer.indexOf('\r\n\r\n');
        if (end < 0) return;
        const length = Number(/\r\ncontent-length: (\d+)/i.exec(buffer.slice(0, end))?.[1] ?? 0);
        if (buffer.length < end + 4 + length) return;
        lines.push(buffer.slice(0, buffer.indexOf('\r\n')));
        buffer = buffer.slice(end + 4 + length);
        next();
      }
    });
    socket.on('close', () => {
      if (lines.length < requests.length) resolve([...lines, 'closed']);
    });
    socket.on('error', reject);
  });
}

t.test('an answer to a body read whole keeps the connection', async (t) => {
  const call = '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}';
  const sized = (path: string, body: string, extra = ''): string =>
    `POST ${path} HTTP/1.1\r\n${JSON_HEAD}${extra}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
  const chunked = (path: string, body: string): string =>
    `POST ${path} HTTP/1.1\r\n${JSON_HEAD}\r\nTransfer-Encoding: chunked\r\n\r\n${Buffer.byteLength(body).toString(16)}\r\n${body}\r\n0\r\n\r\n`;
  const keyed = `\r\nAuthorization: Bearer ${owner.managementKey}`;
  t.same(
    await onOneConnection([
      sized('/v1/rpc/public', call),
      chunked('/v1/rpc/public', call),
      sized('/v1/rpc/not-a-key', call),
      sized('/api/dashboard/endpoints', '{"network":"devnet"}', keyed),
      sized('/api/dashboard/endpoints', '{"network":"nowhere"}', keyed),
      'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n',
      sized('/v1/rpc/public', call),
    ]),
    [
      'HTTP/1.1 200 OK',
      'HTTP/1.1 200 OK',
      'HTTP/1.1 401 Unauthorized',
      'HTTP/1.1 201 Created',
      'HTTP/1.1 400 Bad Request',
      'HTTP/1.1 200 OK',
      'HTTP/1.1 200 OK',
    ],
    'seven answers on one connection, refusals of bodies read whole among them',
  );
});
