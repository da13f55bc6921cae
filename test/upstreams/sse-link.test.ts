import t, { type Test } from 'tap';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createHttpUpstream } from '../../src/upstreams/http-client.js';
import { openSseLink, type LinkTimers, type SseLinkOptions } from '../../src/upstreams/sse-link.js';
import { listenOn, sleep } from './exchange-harness.js';
import { waitFor } from '../support/wait-for.js';

interface LogLine {
  level: string;
  msg: string;
  fields: Record<string, string | number> | undefined;
}

/** A Beacon node's event endpoint whose every answer the test scripts; `n` counts requests from 1. */
async function fakeEventSource(t: Test, answer: (res: ServerResponse, n: number, req: IncomingMessage) => void) {
  const requests: IncomingMessage[] = [];
  const server = createServer((req, res) => {
    requests.push(req);
    answer(res, requests.length, req);
  });
  const { port } = await listenOn(t, server);
  return { url: `http://user:secret@127.0.0.1:${port}`, requests };
}

function openStream(res: ServerResponse): void {
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8' });
  res.flushHeaders();
}

const headFrame = (slot: number) => `event: head\ndata: {"slot":"${slot}"}\n\n`;

/** Opens a link on `url` for topic head, recording frames and log lines; everything is closed at teardown. */
function linkTo(t: Test, url: string, extra: Partial<SseLinkOptions> = {}) {
  const upstream = createHttpUpstream({ url });
  const frames: string[] = [];
  const logs: LogLine[] = [];
  const link = openSseLink({
    upstream,
    topic: 'head',
    onFrame: (frame) => frames.push(frame.toString('utf8')),
    log: (level, msg, fields) => logs.push({ level, msg, fields }),
    backoff: { initialMs: 10, maxMs: 50 },
    ...extra,
  });
  t.teardown(() => {
    link.close();
    upstream.close();
  });
  const lost = () => logs.filter((l) => l.msg === 'sse stream lost');
  return { link, frames, logs, lost };
}

t.test('events arrive in order as canonical frames, from one request for the topic', async (t) => {
  const source = await fakeEventSource(t, (res) => {
    openStream(res);
    // CRLF line ends, comments and writes that split events anywhere: the frames must not show any of it.
    let text = ': welcome\r\n\r\n';
    for (let slot = 1; slot <= 50; slot++) text += `event: head\r\ndata: {"slot":"${slot}"}\r\n\r\n: ping\r\n\r\n`;
    const bytes = Buffer.from(text);
    for (let at = 0; at < bytes.length; at += 37) res.write(bytes.subarray(at, at + 37));
  });
  const { frames, logs } = linkTo(t, source.url);
  await waitFor(() => frames.length === 50);
  t.same(
    frames,
    Array.from({ length: 50 }, (_, i) => headFrame(i + 1)),
  );
  t.equal(source.requests.length, 1);
  const req = source.requests[0]!;
  t.equal(req.method, 'GET');
  t.equal(req.url, '/eth/v1/events?topics=head');
  t.equal(req.headers.accept, 'text/event-stream');
  t.same(
    logs.map((l) => l.msg),
    ['sse stream open'],
  );
  t.notMatch(JSON.stringify(logs), /secret|user/, 'the URL credentials are never logged');
  t.equal(logs[0]!.fields!.upstream, 'http://127.0.0.1:' + new URL(source.url).port);
});

t.test('a stream the node ends is opened again and continues', async (t) => {
  const source = await fakeEventSource(t, (res, n) => {
    openStream(res);
    const first = n === 1 ? 1 : 4;
    for (let slot = first; slot < first + 3; slot++) res.write(`event: head\ndata: {"slot":"${slot}"}\n\n`);
    if (n === 1) res.end();
  });
  const { frames, lost } = linkTo(t, source.url);
  await waitFor(() => frames.length === 6);
  t.same(frames, [1, 2, 3, 4, 5, 6].map(headFrame));
  t.equal(source.requests.length, 2);
  t.equal(lost().length, 1);
  t.match(lost()[0], { level: 'info', fields: { reason: 'stream ended', topic: 'head' } });
});

t.test('onStatus: true when a stream opens, false when an open one is lost, nothing for a refusal or after close()', async (t) => {
  let stream: ServerResponse | undefined;
  const source = await fakeEventSource(t, (res, n) => {
    // 1: opens, then ends; 2: refused; 3: opens and stays.
    if (n === 2) {
      res.writeHead(503).end();
      return;
    }
    openStream(res);
    res.write(headFrame(n));
    if (n === 1) res.end();
    else stream = res;
  });
  const statuses: boolean[] = [];
  const { link, frames } = linkTo(t, source.url, { onStatus: (open) => statuses.push(open) });
  await waitFor(() => frames.length === 2);
  t.same(statuses, [true, false, true], 'open, lost, (the 503 says nothing), open again');
  t.equal(source.requests.length, 3);
  const gone = new Promise<void>((resolve) => stream!.once('close', resolve));
  link.close();
  await gone;
  await sleep(100);
  t.same(statuses, [true, false, true], 'close() reports nothing');
});

t.test('a 500 is retried with a doubling backoff that starts over after a stream stayed open', async (t) => {
  let clock = 0;
  const scheduled: number[] = [];
  const timers: LinkTimers = {
    setTimeout(fn, ms) {
      scheduled.push(ms);
      return setTimeout(fn, ms);
    },
    clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
  };
  let held: ServerResponse | undefined;
  const source = await fakeEventSource(t, (res, n) => {
    if (n <= 4) {
      res.writeHead(500, { 'content-type': 'text/plain' });
      res.end('down');
      return;
    }
    openStream(res);
    res.write(`event: head\ndata: {"slot":"${n}"}\n\n`);
    if (n === 5) held = res;
    if (n === 6) res.end();
  });
  const { frames, logs, lost } = linkTo(t, source.url, {
    timers,
    now: () => clock,
    random: () => 0.5,
    backoff: { initialMs: 20, maxMs: 80 },
    stableAfterMs: 30_000,
    headTimeoutMs: 5_000,
  });
  await waitFor(() => frames.length === 1);
  t.same(
    lost().map((l) => [l.level, l.fields!.reason, l.fields!.retry_ms]),
    [
      ['warn', 'status 500', 15],
      ['warn', 'status 500', 30],
      ['warn', 'status 500', 60],
      ['warn', 'status 500', 60],
    ],
    'equal jitter on 20, 40, 80, 80 ms',
  );
  clock += 30_000;
  held!.end();
  await waitFor(() => frames.length === 3);
  t.same(frames, [5, 6, 7].map(headFrame));
  t.same(
    lost()
      .slice(4)
      .map((l) => l.fields!.retry_ms),
    [15, 30],
    'a stream open 30 s starts the backoff over; one that ended at once does not',
  );
  t.same(
    scheduled.filter((ms) => ms !== 5_000),
    lost().map((l) => l.fields!.retry_ms),
    'each reconnection waited the delay it logged',
  );
  t.equal(source.requests.length, 7);
  t.equal(logs.filter((l) => l.msg === 'sse stream open').length, 3);
});

t.test('close() aborts the stream and no reconnection follows', async (t) => {
  let stream: ServerResponse | undefined;
  const source = await fakeEventSource(t, (res) => {
    openStream(res);
    res.write(headFrame(1));
    stream = res;
  });
  const { link, frames } = linkTo(t, source.url);
  await waitFor(() => frames.length === 1);
  const gone = new Promise<void>((resolve) => stream!.once('close', resolve));
  link.close();
  await gone;
  t.equal(stream!.writableFinished, false, 'the gateway, not the node, ended the stream');
  await sleep(150);
  t.equal(source.requests.length, 1, 'no reconnection after close, past several backoff delays');
  t.equal(frames.length, 1);
  link.close();
});

t.test('a link closed from its own onFrame delivers nothing more, even from the same chunk', async (t) => {
  const source = await fakeEventSource(t, (res) => {
    openStream(res);
    res.write(headFrame(1) + headFrame(2) + headFrame(3));
  });
  const upstream = createHttpUpstream({ url: source.url });
  t.teardown(() => upstream.close());
  const frames: string[] = [];
  const link = openSseLink({
    upstream,
    topic: 'head',
    onFrame(frame) {
      frames.push(frame.toString());
      link.close();
    },
    log() {},
  });
  await waitFor(() => frames.length > 0);
  await sleep(50);
  t.same(frames, [headFrame(1)]);
  t.equal(source.requests.length, 1);
});

t.test('an oversized event drops the stream, which is opened again', async (t) => {
  const source = await fakeEventSource(t, (res, n) => {
    openStream(res);
    if (n === 1) res.write(headFrame(1) + `event: head\ndata: ${'x'.repeat(2000)}\n\n` + headFrame(2));
    else res.write(headFrame(3));
  });
  const { frames, lost } = linkTo(t, source.url, { maxEventBytes: 1000 });
  await waitFor(() => frames.length === 2);
  t.same(frames, [headFrame(1), headFrame(3)], 'nothing read after the oversized event');
  t.match(lost()[0], { level: 'warn', fields: { reason: 'event over 1000 bytes' } });
});

t.test('a 200 that is not text/event-stream is retried', async (t) => {
  const source = await fakeEventSource(t, (res, n) => {
    if (n === 1) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"data":[]}');
      return;
    }
    openStream(res);
    res.write(headFrame(1));
  });
  const { frames, lost } = linkTo(t, source.url);
  await waitFor(() => frames.length === 1);
  t.same(frames, [headFrame(1)]);
  t.match(lost()[0], { level: 'warn', fields: { reason: 'content-type "application/json" is not text/event-stream' } });
});

t.test('a node that never answers the head is left after headTimeoutMs', async (t) => {
  const source = await fakeEventSource(t, (res, n) => {
    if (n === 1) return;
    openStream(res);
    res.write(headFrame(1));
  });
  const { frames, lost } = linkTo(t, source.url, { headTimeoutMs: 100 });
  await waitFor(() => frames.length === 1);
  t.equal(source.requests.length, 2);
  t.match(lost()[0], { level: 'warn', fields: { reason: 'no response head within 100 ms' } });
});

t.test('a stream silent for silenceTimeoutMs is opened again', async (t) => {
  const source = await fakeEventSource(t, (res, n) => {
    openStream(res);
    res.write(headFrame(n));
  });
  const { frames, lost } = linkTo(t, source.url, { silenceTimeoutMs: 300 });
  await waitFor(() => frames.length === 2);
  t.same(frames, [headFrame(1), headFrame(2)]);
  t.match(lost()[0], { level: 'warn', fields: { reason: /stalled for 300 ms/ } });
});

t.test('options are validated by name', async (t) => {
  const upstream = createHttpUpstream({ url: 'http://127.0.0.1:9' });
  t.teardown(() => upstream.close());
  const base = { upstream, topic: 'head', onFrame() {}, log() {} };
  t.throws(() => openSseLink({ ...base, silenceTimeoutMs: 0 }), /silenceTimeoutMs must be a positive number/);
  t.throws(() => openSseLink({ ...base, backoff: { initialMs: 10, maxMs: Infinity } }), /backoff.maxMs/);
});
