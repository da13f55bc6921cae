import t, { type Test } from 'tap';
import { readFileSync } from 'node:fs';
import { createServer as createHttpServer, type IncomingMessage } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { createServer as createTcpServer, type Socket } from 'node:net';
import { createHttpUpstream, type HttpUpstream, type UpstreamOptions } from '../../src/upstreams/http-client.js';
import { testCertificate } from '../support/cert.js';
import { closed, dribble, exchange, fetchOutcome, listenOn, readRequests } from './exchange-harness.js';
import { waitFor } from '../support/wait-for.js';

interface Seen {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  body: string;
}

/** A node:http upstream that records each request and answers `answer(request)` as JSON. */
async function recordingServer(t: Test, answer: (seen: Seen) => unknown = () => ({ ok: true })) {
  const seen: Seen[] = [];
  const server = createHttpServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const record = { method: req.method!, url: req.url!, headers: req.headers, body: Buffer.concat(chunks).toString() };
      seen.push(record);
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify(answer(record)));
    });
  });
  const listening = await listenOn(t, server);
  return { seen, ...listening };
}

function upstreamFor(t: Test, opts: UpstreamOptions): HttpUpstream {
  const upstream = createHttpUpstream(opts);
  t.teardown(() => upstream.close());
  return upstream;
}

t.test('a POST carries the URL target, configured headers, userinfo as Basic auth and its body', async (t) => {
  const server = await recordingServer(t);
  const upstream = upstreamFor(t, {
    url: `http://alice:s%3Acret@127.0.0.1:${server.port}/v2/KEY123?apikey=QQQ`,
    headers: { 'X-Api-Key': 'configured' },
  });
  t.equal(upstream.label, `http://127.0.0.1:${server.port}`, 'label holds no userinfo, path or query');

  const body = '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}';
  const out = await fetchOutcome(upstream, {
    method: 'POST',
    body,
    headers: [['content-type', 'application/json']],
    timeoutMs: 2000,
  });
  t.equal(out.error, undefined);
  t.equal(out.status, 200);
  t.equal(out.body.toString(), '{"ok":true}');
  t.equal(out.contentLength, 11);
  t.ok(out.headers.some(([name, value]) => name === 'content-type' && value === 'application/json'));
  t.same(out.calls, ['head', 'data', 'end']);

  const [request] = server.seen;
  t.equal(request?.method, 'POST');
  t.equal(request?.url, '/v2/KEY123?apikey=QQQ');
  t.equal(request?.body, body);
  t.equal(request?.headers['content-length'], String(body.length));
  t.equal(request?.headers['content-type'], 'application/json');
  t.equal(request?.headers['x-api-key'], 'configured');
  t.equal(request?.headers.host, `127.0.0.1:${server.port}`);
  t.equal(request?.headers.authorization, 'Basic ' + Buffer.from('alice:s:cret').toString('base64'));
});

t.test('a GET with a path appends it to the URL path and joins the queries', async (t) => {
  const server = await recordingServer(t);
  const upstream = upstreamFor(t, { url: `http://127.0.0.1:${server.port}/beacon/KEY/?apikey=QQQ` });
  await fetchOutcome(upstream, { method: 'GET', path: '/eth/v1/beacon/headers?slot=5&x=%2F', timeoutMs: 2000 });
  await fetchOutcome(upstream, { method: 'GET', path: '/eth/v1/node/syncing', timeoutMs: 2000 });
  await fetchOutcome(upstream, { method: 'GET', timeoutMs: 2000 });
  t.same(
    server.seen.map((s) => s.url),
    ['/beacon/KEY/eth/v1/beacon/headers?apikey=QQQ&slot=5&x=%2F', '/beacon/KEY/eth/v1/node/syncing?apikey=QQQ', '/beacon/KEY/?apikey=QQQ'],
  );
  t.equal(server.seen[0]?.method, 'GET');
  t.equal(server.seen[0]?.headers['content-length'], undefined, 'a GET without body sends no length');
  t.equal(server.seen[0]?.headers.authorization, undefined);
});

t.test('a configured Authorization header replaces the URL userinfo', async (t) => {
  const server = await recordingServer(t);
  const upstream = upstreamFor(t, {
    url: `http://user:pass@127.0.0.1:${server.port}/`,
    headers: { authorization: 'Bearer token-1' },
  });
  await fetchOutcome(upstream, { method: 'POST', body: Buffer.from('{}'), timeoutMs: 2000 });
  t.equal(server.seen[0]?.headers.authorization, 'Bearer token-1');
});

t.test('sequential requests reuse one keep-alive connection', async (t) => {
  const server = await recordingServer(t, (seen) => ({ echo: seen.body }));
  const upstream = upstreamFor(t, { url: `http://127.0.0.1:${server.port}` });
  for (let i = 0; i < 20; i++) {
    const out = await fetchOutcome(upstream, { method: 'POST', body: `r${i}`, timeoutMs: 2000 });
    t.equal(out.body.toString(), JSON.stringify({ echo: `r${i}` }));
  }
  t.equal(server.accepted(), 1, 'the server saw a single connection');
  t.same(upstream.stats(), { open: 1, busy: 0, queued: 0 });
});

t.test('maxConnections bounds the sockets; extra requests queue and each answer reaches its request', async (t) => {
  const server = createHttpServer((req, res) => {
    const token = req.headers['x-token'];
    req.resume();
    req.on('end', () => setTimeout(() => res.end(`answer-${token}`), 5 + Math.floor(Math.random() * 10)));
  });
  const listening = await listenOn(t, server);
  for (const pipelining of [1, 8]) {
    const upstream = upstreamFor(t, { url: `http://127.0.0.1:${listening.port}`, maxConnections: 4, pipelining });
    const exchanges = Array.from({ length: 50 }, (_, i) =>
      exchange(upstream, { method: 'POST', body: 'x', headers: [['x-token', String(i)]], timeoutMs: 5000 }),
    );
    t.same(upstream.stats(), { open: 4, busy: 4, queued: 50 - 4 * pipelining }, `pipelining ${pipelining}`);
    const outcomes = await Promise.all(exchanges.map((e) => e.settled));
    outcomes.forEach((out, i) => {
      if (out.body.toString() !== `answer-${i}`) t.fail(`request ${i} got ${JSON.stringify(out.body.toString())}`);
    });
    t.equal(outcomes.filter((o) => o.ended).length, 50, 'all 50 answered');
    t.ok(listening.peak() <= 4, `server saw at most 4 sockets at once (${listening.peak()})`);
    t.same(upstream.stats(), { open: 4, busy: 0, queued: 0 });
    upstream.close();
    await waitFor(() => listening.open() === 0);
  }
  t.equal(listening.accepted(), 8, 'four connections per run');
});

t.test('a chunked body streams to onData as it arrives', async (t) => {
  let firstPieceSeen!: () => void;
  const firstPieceSeenByClient = new Promise<void>((resolve) => (firstPieceSeen = resolve));
  const server = createHttpServer(async (req, res) => {
    req.resume();
    res.writeHead(200, { 'content-type': 'application/json' });
    res.write('[1,');
    await firstPieceSeenByClient;
    res.write('2,');
    res.end('3]');
  });
  const listening = await listenOn(t, server);
  const upstream = upstreamFor(t, { url: `http://127.0.0.1:${listening.port}` });
  const ex = exchange(upstream, { method: 'GET', timeoutMs: 2000 }, (chunk) => {
    if (chunk.toString() === '[1,') firstPieceSeen();
    return true;
  });
  const out = await ex.settled;
  t.equal(out.body.toString(), '[1,2,3]');
  t.equal(out.contentLength, undefined);
  t.ok(out.headers.some(([n, v]) => n === 'transfer-encoding' && v === 'chunked'));
  t.ok(out.calls.filter((c) => c === 'data').length >= 2, 'the body came in pieces, before the server finished it');
});

t.test('responses dribbled one byte per TCP segment parse correctly, 1xx skipped', async (t) => {
  const responses = [
    'HTTP/1.1 100 Continue\r\n\r\n' +
      'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-Kind: chunked\r\n\r\n' +
      '4;ext="v"\r\nabcd\r\n3\r\nefg\r\n0\r\nX-Trailer: t\r\n\r\n',
    'HTTP/1.1 201 Created\r\nContent-Length: 5\r\nX-Kind: length\r\n\r\nhello',
  ];
  const server = createTcpServer((socket) => {
    let n = 0;
    readRequests(socket, () => void dribble(socket, Buffer.from(responses[n++] ?? '', 'latin1')));
  });
  const listening = await listenOn(t, server);
  const upstream = upstreamFor(t, { url: `http://127.0.0.1:${listening.port}` });
  const first = await fetchOutcome(upstream, { method: 'POST', body: '1', timeoutMs: 5000 });
  t.equal(first.status, 200);
  t.equal(first.body.toString(), 'abcdefg');
  t.same(first.headers, [
    ['transfer-encoding', 'chunked'],
    ['x-kind', 'chunked'],
  ]);
  t.equal(first.calls.at(-1), 'end');
  const second = await fetchOutcome(upstream, { method: 'POST', body: '2', timeoutMs: 5000 });
  t.equal(second.status, 201);
  t.equal(second.body.toString(), 'hello');
  t.equal(second.contentLength, 5);
  t.equal(listening.accepted(), 1, 'both on the same connection');
});

t.test('Connection: close and HTTP/1.0 answers close the socket after the response', async (t) => {
  for (const answer of [
    'HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok',
    'HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok',
  ]) {
    const sockets: Socket[] = [];
    const server = createTcpServer((socket) => {
      sockets.push(socket);
      readRequests(socket, () => socket.write(answer));
    });
    const listening = await listenOn(t, server);
    const upstream = upstreamFor(t, { url: `http://127.0.0.1:${listening.port}` });
    const out = await fetchOutcome(upstream, { method: 'POST', timeoutMs: 2000 });
    t.equal(out.body.toString(), 'ok');
    await closed(sockets[0]!);
    t.pass(`the client closed the socket after ${JSON.stringify(answer.slice(0, 8))}`);
    t.equal(upstream.stats().open, 0);
    const again = await fetchOutcome(upstream, { method: 'POST', timeoutMs: 2000 });
    t.equal(again.body.toString(), 'ok');
    t.equal(listening.accepted(), 2, 'the next request opened a new connection');
  }
});

t.test('a body delimited by the connection closing ends at the close', async (t) => {
  const server = createTcpServer((socket) =>
    readRequests(socket, () => socket.end('HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the end')),
  );
  const listening = await listenOn(t, server);
  const upstream = upstreamFor(t, { url: `http://127.0.0.1:${listening.port}` });
  const out = await fetchOutcome(upstream, { method: 'GET', timeoutMs: 2000 });
  t.equal(out.body.toString(), 'until the end');
  t.equal(out.contentLength, undefined);
  t.equal(out.calls.at(-1), 'end');
});

t.test('HTTPS with a self-signed certificate trusted through `ca`', async (t) => {
  const { certFile, keyFile, cert } = testCertificate(t);
  const seen: IncomingMessage['headers'][] = [];
  const server = createHttpsServer({ cert: readFileSync(certFile), key: readFileSync(keyFile) }, (req, res) => {
    seen.push(req.headers);
    req.resume();
    res.end(`secure ${req.url}`);
  });
  const listening = await listenOn(t, server);
  const url = `https://bob:hunter2@127.0.0.1:${listening.port}/rpc/KEY?k=v`;
  const upstream = upstreamFor(t, { url, ca: cert, headers: { 'x-configured': 'yes' } });
  t.equal(upstream.label, `https://127.0.0.1:${listening.port}`);
  const first = await fetchOutcome(upstream, { method: 'POST', body: '{}', timeoutMs: 3000 });
  const second = await fetchOutcome(upstream, { method: 'POST', body: '{}', timeoutMs: 3000 });
  t.equal(first.error, undefined);
  t.equal(first.body.toString(), 'secure /rpc/KEY?k=v');
  t.equal(second.body.toString(), 'secure /rpc/KEY?k=v');
  t.equal(listening.accepted(), 1, 'TLS connections are kept alive too');
  t.equal(seen[0]?.authorization, 'Basic ' + Buffer.from('bob:hunter2').toString('base64'));
  t.equal(seen[0]?.['x-configured'], 'yes');

  const untrusting = upstreamFor(t, { url });
  const refused = await fetchOutcome(untrusting, { method: 'POST', timeoutMs: 3000 });
  t.equal(refused.error?.kind, 'connect', 'without the CA the certificate is refused');
  t.notMatch(refused.error?.message ?? '', /hunter2|KEY/, 'the error names the upstream by label only');
});

t.test('options and requests that could break framing are refused up front', async (t) => {
  const urlWithKey = 'ftp://user:pw@example.com/KEY';
  t.throws(() => createHttpUpstream({ url: urlWithKey }), { name: 'TypeError', message: /url must use/ });
  const thrown = t.throws(() => createHttpUpstream({ url: 'not a url KEY' }), { name: 'TypeError' }) as unknown;
  t.notMatch((thrown as Error).message, /KEY/, 'the message does not repeat the URL');
  t.throws(() => createHttpUpstream({ url: 'http://127.0.0.1:1', headers: { 'x-a': 'v\r\nInjected: 1' } }), {
    message: /headers\["x-a"\]/,
  });
  t.throws(() => createHttpUpstream({ url: 'http://127.0.0.1:1', headers: { 'Content-Length': '5' } }), {
    message: /managed by the upstream client/,
  });
  t.throws(() => createHttpUpstream({ url: 'http://127.0.0.1:1', maxConnections: 0 }), { message: /maxConnections/ });
  t.throws(() => createHttpUpstream({ url: 'http://127.0.0.1:1', idleSocketTimeoutMs: -1 }), {
    message: /idleSocketTimeoutMs/,
  });
  const upstream = upstreamFor(t, { url: 'http://127.0.0.1:1' });
  const sink = { onHead() {}, onData: () => true, onEnd() {}, onError() {} };
  t.throws(() => upstream.request({ method: 'GET', path: '/a b', timeoutMs: 100 }, sink), { message: /request path/ });
  t.throws(() => upstream.request({ method: 'GET', path: 'relative', timeoutMs: 100 }, sink), { message: /request path/ });
  t.throws(() => upstream.request({ method: 'GET', headers: [['x', 'a\nb']], timeoutMs: 100 }, sink), {
    message: /request header/,
  });
  t.throws(() => upstream.request({ method: 'GET', timeoutMs: 0 }, sink), { message: /timeoutMs/ });
  t.same(upstream.stats(), { open: 0, busy: 0, queued: 0 });
});

t.test('labels keep IPv6 brackets and name the default port', async (t) => {
  const upstream = upstreamFor(t, { url: 'http://[::1]:8545/x' });
  t.equal(upstream.label, 'http://[::1]:8545');
  const https = upstreamFor(t, { url: 'https://rpc.example.com/v2/KEY' });
  t.equal(https.label, 'https://rpc.example.com:443');
});

t.test('a refused connection is a connect error', async (t) => {
  const probe = createTcpServer();
  const { port } = await listenOn(t, probe);
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  const upstream = upstreamFor(t, { url: `http://127.0.0.1:${port}` });
  const out = await fetchOutcome(upstream, { method: 'POST', timeoutMs: 2000 });
  t.equal(out.error?.kind, 'connect');
  t.match(out.error?.message, new RegExp(`http://127\\.0\\.0\\.1:${port}`));
  t.same(out.calls, ['error']);
  await waitFor(() => upstream.stats().open === 0);
});
