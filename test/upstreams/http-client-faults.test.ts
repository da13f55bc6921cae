import t, { type Test } from 'tap';
import { createServer as createHttpServer } from 'node:http';
import { createServer as createTcpServer, type Socket } from 'node:net';
import { createHttpUpstream, type HttpUpstream, type UpstreamOptions } from '../../src/upstreams/http-client.js';
import { closed, exchange, fetchOutcome, listenOn, readRequests, sleep } from './exchange-harness.js';
import { waitFor } from '../support/wait-for.js';
import { resetSocket } from '../support/reset-socket.js';

function upstreamFor(t: Test, opts: UpstreamOptions): HttpUpstream {
  const upstream = createHttpUpstream(opts);
  t.teardown(() => upstream.close());
  return upstream;
}

/** A raw upstream: `respond(socket, n)` runs for the n-th request overall (0-based), with its connection's index. */
async function rawServer(t: Test, respond: (socket: Socket, request: number, connection: number, head: string) => void) {
  const sockets: Socket[] = [];
  let requests = 0;
  const server = createTcpServer((socket) => {
    const connection = sockets.push(socket) - 1;
    readRequests(socket, (head) => respond(socket, requests++, connection, head));
  });
  const listening = await listenOn(t, server);
  return { ...listening, sockets, requests: () => requests };
}

const OK = 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok';

t.test('a keep-alive socket the server dropped is retried once on a fresh socket', async (t) => {
  // Connection 0 answers its first request and hangs up on the next without a byte, as a server whose
  // keep-alive timer fired just as the request was sent.
  const server = await rawServer(t, (socket, _n, connection) => {
    if (connection === 0 && server.requests() > 1) socket.destroy();
    else socket.write(OK);
  });
  const upstream = upstreamFor(t, { url: `http://127.0.0.1:${server.port}` });
  t.equal((await fetchOutcome(upstream, { method: 'POST', timeoutMs: 2000 })).body.toString(), 'ok');
  const second = await fetchOutcome(upstream, { method: 'POST', body: 'again', timeoutMs: 2000 });
  t.equal(second.error, undefined);
  t.equal(second.body.toString(), 'ok', 'answered on the fresh socket');
  t.same(second.calls, ['head', 'data', 'end']);
  t.equal(server.accepted(), 2);
  t.equal(server.requests(), 3, 'the failed try, then the retry');
});

t.test('the retry happens once: a second silent close is a reset', async (t) => {
  const server = await rawServer(t, (socket, n) => (n === 0 ? socket.write(OK) : socket.destroy()));
  const upstream = upstreamFor(t, { url: `http://127.0.0.1:${server.port}` });
  await fetchOutcome(upstream, { method: 'POST', timeoutMs: 2000 });
  const out = await fetchOutcome(upstream, { method: 'POST', timeoutMs: 2000 });
  t.equal(out.error?.kind, 'reset');
  t.equal(server.requests(), 3);
  t.equal(server.accepted(), 2);
});

t.test('a fresh socket closed before any answer is a reset, not retried', async (t) => {
  const server = await rawServer(t, (socket) => socket.destroy());
  const upstream = upstreamFor(t, { url: `http://127.0.0.1:${server.port}` });
  const out = await fetchOutcome(upstream, { method: 'POST', timeoutMs: 2000 });
  t.equal(out.error?.kind, 'reset');
  t.equal(server.requests(), 1, 'the server may have acted on it, so it is not sent twice');
});

t.test('a keep-alive socket that closes after answering part of a response is not retried', async (t) => {
  const server = await rawServer(t, (socket, n) =>
    n === 0 ? socket.write(OK) : socket.end('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\npart'),
  );
  const upstream = upstreamFor(t, { url: `http://127.0.0.1:${server.port}` });
  await fetchOutcome(upstream, { method: 'POST', timeoutMs: 2000 });
  const out = await fetchOutcome(upstream, { method: 'POST', timeoutMs: 2000 });
  t.equal(out.error?.kind, 'reset');
  t.same(out.calls, ['head', 'data', 'error'], 'truncated: never onEnd');
  t.equal(server.requests(), 2);
});

t.test('an idle socket closed by the server is noticed and replaced', async (t) => {
  const server = createHttpServer((req, res) => {
    req.resume();
    res.end('ok');
  });
  server.keepAliveTimeout = 50;
  const listening = await listenOn(t, server);
  const upstream = upstreamFor(t, { url: `http://127.0.0.1:${listening.port}` });
  await fetchOutcome(upstream, { method: 'POST', timeoutMs: 2000 });
  await waitFor(() => upstream.stats().open === 0);
  const out = await fetchOutcome(upstream, { method: 'POST', timeoutMs: 2000 });
  t.equal(out.body.toString(), 'ok');
  t.equal(listening.accepted(), 2);
});

t.test('idle sockets are closed after idleSocketTimeoutMs', async (t) => {
  const server = await rawServer(t, (socket) => socket.write(OK));
  const upstream = upstreamFor(t, { url: `http://127.0.0.1:${server.port}`, idleSocketTimeoutMs: 150 });
  await fetchOutcome(upstream, { method: 'POST', timeoutMs: 2000 });
  t.equal(upstream.stats().open, 1);
  await closed(server.sockets[0]!);
  t.equal(upstream.stats().open, 0);
});

t.test('abort of an in-flight request closes its connection, and the sink hears nothing more', async (t) => {
  const server = await rawServer(t, () => {});
  const upstream = upstreamFor(t, { url: `http://127.0.0.1:${server.port}` });
  const ex = exchange(upstream, { method: 'POST', body: 'x', timeoutMs: 2000 });
  await waitFor(() => server.requests() === 1);
  ex.handle.abort();
  await closed(server.sockets[0]!);
  t.pass('the server saw the connection close');
  await sleep(50);
  t.same(ex.outcome.calls, []);
  t.same(upstream.stats(), { open: 0, busy: 0, queued: 0 });
  ex.handle.abort();
  ex.handle.resume();
  t.pass('abort and resume after abort are harmless');
});

t.test('abort during the body closes the connection; no onEnd or onError follows', async (t) => {
  const server = await rawServer(t, (socket) => socket.write('HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nfirst'));
  const upstream = upstreamFor(t, { url: `http://127.0.0.1:${server.port}` });
  const ex = exchange(upstream, { method: 'GET', timeoutMs: 2000 }, (_chunk, handle) => {
    handle.abort();
    return true;
  });
  await waitFor(() => server.sockets.length === 1);
  await closed(server.sockets[0]!);
  await sleep(50);
  t.same(ex.outcome.calls, ['head', 'data']);
});

t.test('abort of a queued request removes it before it reaches the server', async (t) => {
  const server = await rawServer(t, () => {});
  // Without pipelining, so the second request has to wait in the queue.
  const upstream = upstreamFor(t, { url: `http://127.0.0.1:${server.port}`, maxConnections: 1, pipelining: 1 });
  const first = exchange(upstream, { method: 'POST', body: 'first', timeoutMs: 5000 });
  const queued = exchange(upstream, { method: 'POST', body: 'queued', timeoutMs: 5000 });
  t.same(upstream.stats(), { open: 1, busy: 1, queued: 1 });
  queued.handle.abort();
  t.same(upstream.stats(), { open: 1, busy: 1, queued: 0 });
  await waitFor(() => server.requests() === 1);
  first.handle.abort();
  await closed(server.sockets[0]!);
  await sleep(50);
  t.equal(server.requests(), 1, 'only the first request was sent');
  t.equal(server.accepted(), 1, 'no connection was opened for the aborted one');
  t.same(queued.outcome.calls, []);
});

t.test('no response head within timeoutMs is a timeout, and the socket is closed', async (t) => {
  const server = await rawServer(t, () => {});
  const upstream = upstreamFor(t, { url: `http://user:pw@127.0.0.1:${server.port}/KEY` });
  const started = Date.now();
  const out = await fetchOutcome(upstream, { method: 'POST', timeoutMs: 200 });
  const elapsed = Date.now() - started;
  t.equal(out.error?.kind, 'timeout');
  t.match(out.error?.message, /no response head within 200 ms/);
  t.notMatch(out.error?.message, /pw|KEY/);
  t.ok(elapsed >= 190 && elapsed < 1000, `fired after ${elapsed} ms`);
  await closed(server.sockets[0]!);
  t.equal(upstream.stats().open, 0);
});

t.test('a queued request times out even if no connection frees up', async (t) => {
  const server = await rawServer(t, () => {});
  const upstream = upstreamFor(t, { url: `http://127.0.0.1:${server.port}`, maxConnections: 1, pipelining: 1 });
  const hanging = exchange(upstream, { method: 'POST', timeoutMs: 5000 });
  const out = await fetchOutcome(upstream, { method: 'POST', timeoutMs: 150 });
  t.equal(out.error?.kind, 'timeout');
  t.equal(upstream.stats().queued, 0);
  t.same(hanging.outcome.calls, [], 'the in-flight one is untouched');
});

t.test('a body silent longer than timeoutMs is a timeout, never onEnd', async (t) => {
  const server = await rawServer(t, (socket) => socket.write('HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789'));
  const upstream = upstreamFor(t, { url: `http://127.0.0.1:${server.port}` });
  const out = await fetchOutcome(upstream, { method: 'GET', timeoutMs: 200 });
  t.equal(out.error?.kind, 'timeout');
  t.match(out.error?.message, /stalled/);
  t.same(out.calls, ['head', 'data', 'error']);
  t.equal(out.body.toString(), '0123456789');
  await closed(server.sockets[0]!);
});

t.test('a paused body does not time out', async (t) => {
  const body = Buffer.alloc(256 * 1024, 'p');
  const server = await rawServer(t, (socket) => {
    socket.write(`HTTP/1.1 200 OK\r\nContent-Length: ${body.length}\r\n\r\n`);
    socket.write(body);
  });
  const upstream = upstreamFor(t, { url: `http://127.0.0.1:${server.port}` });
  let pauses = 0;
  const ex = exchange(upstream, { method: 'GET', timeoutMs: 150 }, (_chunk, handle) => {
    if (pauses++ > 0) return true;
    setTimeout(() => handle.resume(), 500);
    return false;
  });
  const out = await ex.settled;
  t.equal(out.error, undefined);
  t.equal(out.body.length, body.length);
});

t.test('a connection reset mid-body is a reset error, never onEnd', async (t) => {
  for (const [name, partial] of [
    ['content-length', 'HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789'],
    ['chunked', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n'],
  ] as const) {
    for (const hangUp of ['destroy', 'end'] as const) {
      const server = await rawServer(t, (socket) => {
        socket.write(partial);
        setTimeout(() => (hangUp === 'destroy' ? resetSocket(socket) : socket.end()), 20);
      });
      const upstream = upstreamFor(t, { url: `http://127.0.0.1:${server.port}` });
      const out = await fetchOutcome(upstream, { method: 'GET', timeoutMs: 2000 });
      t.equal(out.error?.kind, 'reset', `${name} body, server ${hangUp}`);
      t.same(out.calls, ['head', 'data', 'error']);
    }
  }
});

t.test('bytes that are not HTTP are a protocol error and the socket is dropped', async (t) => {
  const server = await rawServer(t, (socket) => socket.write('SSH-2.0-OpenSSH_9.6\r\n'));
  const upstream = upstreamFor(t, { url: `http://127.0.0.1:${server.port}` });
  const out = await fetchOutcome(upstream, { method: 'POST', timeoutMs: 2000 });
  t.equal(out.error?.kind, 'protocol');
  t.same(out.calls, ['error']);
  await closed(server.sockets[0]!);
  t.equal(upstream.stats().open, 0);
});

t.test('bytes after a complete response end the response but drop the socket', async (t) => {
  const server = await rawServer(t, (socket) => socket.write(OK + 'HTTP/1.1 200 OK\r\n'));
  const upstream = upstreamFor(t, { url: `http://127.0.0.1:${server.port}` });
  const out = await fetchOutcome(upstream, { method: 'POST', timeoutMs: 2000 });
  t.equal(out.body.toString(), 'ok');
  t.equal(out.calls.at(-1), 'end');
  await closed(server.sockets[0]!);
});

t.test('bytes arriving on an idle socket drop it', async (t) => {
  const server = await rawServer(t, (socket) => {
    socket.write(OK);
    setTimeout(() => socket.write('unasked'), 30);
  });
  const upstream = upstreamFor(t, { url: `http://127.0.0.1:${server.port}` });
  await fetchOutcome(upstream, { method: 'POST', timeoutMs: 2000 });
  await closed(server.sockets[0]!);
  t.equal(upstream.stats().open, 0);
});

t.test('close() fails in-flight and queued requests with reset, and later ones too', async (t) => {
  const server = await rawServer(t, () => {});
  const upstream = createHttpUpstream({ url: `http://127.0.0.1:${server.port}`, maxConnections: 1, pipelining: 1 });
  const inFlight = exchange(upstream, { method: 'POST', timeoutMs: 5000 });
  const queued = exchange(upstream, { method: 'POST', timeoutMs: 5000 });
  await waitFor(() => server.requests() === 1);
  upstream.close();
  t.same(inFlight.outcome.calls, ['error']);
  t.equal(inFlight.outcome.error?.kind, 'reset');
  t.same(queued.outcome.calls, ['error']);
  await closed(server.sockets[0]!);
  const later = exchange(upstream, { method: 'POST', timeoutMs: 5000 });
  t.same(later.outcome.calls, [], 'not called back before request() returns');
  const out = await later.settled;
  t.equal(out.error?.kind, 'reset');
  const abortedLater = exchange(upstream, { method: 'POST', timeoutMs: 5000 });
  abortedLater.handle.abort();
  await sleep(20);
  t.same(abortedLater.outcome.calls, []);
  t.same(upstream.stats(), { open: 0, busy: 0, queued: 0 });
});

t.test('a body dripping a byte at a time meets answerTimeoutMs: a timeout, never onEnd, the socket closed', async (t) => {
  const server = await rawServer(t, (socket) => {
    socket.write('HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n');
    // Never silent for timeoutMs, so only the whole answer's deadline ends it.
    const drip = setInterval(() => (socket.destroyed ? clearInterval(drip) : socket.write('x')), 40);
    socket.on('close', () => clearInterval(drip));
  });
  const upstream = upstreamFor(t, { url: `http://127.0.0.1:${server.port}`, answerTimeoutMs: 500 });
  const started = Date.now();
  const out = await fetchOutcome(upstream, { method: 'GET', timeoutMs: 200 });
  const took = Date.now() - started;
  t.equal(out.error?.kind, 'timeout');
  t.match(out.error?.message, /not complete within 500 ms/);
  t.notOk(out.ended);
  t.ok(took >= 500 && took < 1500, `failed at the deadline, counted from request() (took ${took} ms)`);
  t.ok(out.body.length > 3 && out.body.length < 100, `some bytes came first (${out.body.length})`);
  await closed(server.sockets[0]!);
});

t.test('answerTimeoutMs is a positive number', async (t) => {
  t.throws(() => createHttpUpstream({ url: 'http://127.0.0.1:1', answerTimeoutMs: 0 }), /answerTimeoutMs must be a positive number/);
});

t.test('answerTimeoutMs does not count the time the consumer held the body paused', async (t) => {
  // A fast node: the head and 2 MiB at once; the last bytes 300 ms after the consumer resumed, so sweeps run
  // while the body is flowing again after a pause longer than the whole answer's deadline.
  const first = Buffer.alloc(2 * 1024 * 1024, 'a');
  const tail = Buffer.alloc(64 * 1024, 'z');
  let sendTail: (() => void) | undefined;
  const server = await rawServer(t, (socket) => {
    socket.write(`HTTP/1.1 200 OK\r\nContent-Length: ${first.length + tail.length}\r\n\r\n`);
    socket.write(first);
    sendTail = () => socket.write(tail);
  });
  const upstream = upstreamFor(t, { url: `http://127.0.0.1:${server.port}`, answerTimeoutMs: 1000 });
  let resumedAt = 0;
  const ex = exchange(upstream, { method: 'GET', timeoutMs: 2000 }, (_chunk, handle) => {
    if (resumedAt !== 0) return true;
    resumedAt = -1;
    setTimeout(() => {
      resumedAt = Date.now();
      handle.resume();
      setTimeout(() => sendTail?.(), 300);
    }, 1500);
    return false;
  });
  const out = await ex.settled;
  t.equal(out.error, undefined, "not a timeout: 1.5 s of it were the client's");
  t.ok(out.ended);
  t.equal(out.body.length, first.length + tail.length);
  t.ok(resumedAt > 0, 'the body was paused and resumed');
});

t.test('a dripping node with a paused consumer is cut at answerTimeoutMs plus the paused time', async (t) => {
  const server = await rawServer(t, (socket) => {
    socket.write('HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n');
    const drip = setInterval(() => (socket.destroyed ? clearInterval(drip) : socket.write('x')), 40);
    socket.on('close', () => clearInterval(drip));
    // The client's close can find a drip byte unread: a reset, which this node takes as the end.
    socket.on('error', () => {});
  });
  const upstream = upstreamFor(t, { url: `http://127.0.0.1:${server.port}`, answerTimeoutMs: 500 });
  const started = Date.now();
  let pausedFor = 0;
  const ex = exchange(upstream, { method: 'GET', timeoutMs: 200 }, (_chunk, handle) => {
    if (pausedFor !== 0) return true;
    pausedFor = -1;
    const pausedAt = Date.now();
    setTimeout(() => {
      pausedFor = Date.now() - pausedAt;
      handle.resume();
    }, 300);
    return false;
  });
  const out = await ex.settled;
  const took = Date.now() - started;
  t.equal(out.error?.kind, 'timeout');
  t.match(out.error?.message, /not complete within 500 ms/);
  t.notOk(out.ended);
  // Timers run on the monotonic clock and these figures on the wall clock: a 300 ms timer can read 299.
  t.ok(pausedFor >= 295, `paused ${pausedFor} ms`);
  t.ok(took >= 495 + pausedFor && took < 1500 + pausedFor, `cut at the deadline moved by the pause (took ${took} ms)`);
  await closed(server.sockets[0]!);
});
