/**
 * A stand-in Beacon node for what the devnet's node cannot be made to show: it records every request it
 * receives (so a test can prove a refusal never reached it), streams bodies of any size with
 * backpressure, and serves `/eth/v1/events` streams whose events the test emits, numbered per topic,
 * and drops at will. Listens on 127.0.0.1 port 0; closed at teardown.
 */
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { Test } from 'tap';

/** One request as the node received it: `target` is the raw path and query string. */
export interface SeenRequest {
  method: string;
  target: string;
  headers: IncomingHttpHeaders;
}

export interface FakeBeacon {
  url: string;
  port: number;
  /** Every request received, event streams included, in arrival order. */
  requests: SeenRequest[];
  /** Event streams ever opened for `topic` (a stream asking several topics counts for each). */
  streamsOpened(topic: string): number;
  /** Event streams of `topic` open now. */
  streamsOpen(topic: string): number;
  /** Writes the next `count` events of `topic` (data `{"topic":…,"n":…}`, n counting from 1 per topic) to its open streams;
   *  with `pad`, each event's data also holds a `pad` string of that many characters. */
  emit(topic: string, count: number, pad?: number): void;
  /** Ends every open stream of `topic` from the node's side. */
  drop(topic: string): void;
}

export interface FakeBeaconOptions {
  /** Answers every request but the event stream; default 200 `{"data":{"method":…,"target":…}}`. */
  answer?: (req: IncomingMessage, res: ServerResponse) => void;
  /** The first this many event-stream requests are answered 503 (a node not ready to stream); default 0. */
  refuseStreams?: number;
}

interface OpenStream {
  topics: ReadonlySet<string>;
  res: ServerResponse;
}

function echo(req: IncomingMessage, res: ServerResponse): void {
  const body = JSON.stringify({ data: { method: req.method, target: req.url } });
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }).end(body);
}

/** The `topics` a stream asks for, in both the comma and the repeated form. */
function topicsOf(target: string): Set<string> {
  const query = new URL(target, 'http://fake.invalid').searchParams;
  return new Set(
    query
      .getAll('topics')
      .flatMap((v) => v.split(','))
      .filter((v) => v !== ''),
  );
}

export async function fakeBeacon(t: Test, opts: FakeBeaconOptions = {}): Promise<FakeBeacon> {
  const answer = opts.answer ?? echo;
  const requests: SeenRequest[] = [];
  const streams = new Set<OpenStream>();
  const opened = new Map<string, number>();
  const sequence = new Map<string, number>();
  const sockets = new Set<Socket>();
  let refused = 0;

  const server = createServer((req, res) => {
    requests.push({ method: req.method ?? '', target: req.url ?? '', headers: req.headers });
    const path = (req.url ?? '').split('?')[0];
    if (req.method !== 'GET' || path !== '/eth/v1/events') {
      // The body is read before answering, so a POST is taken whole as a node would.
      req.resume();
      req.on('end', () => answer(req, res));
      return;
    }
    if (refused < (opts.refuseStreams ?? 0)) {
      refused++;
      res.writeHead(503, { 'content-type': 'application/json' }).end('{"code":503,"message":"not ready"}');
      return;
    }
    const stream: OpenStream = { topics: topicsOf(req.url ?? ''), res };
    for (const topic of stream.topics) opened.set(topic, (opened.get(topic) ?? 0) + 1);
    streams.add(stream);
    res.on('close', () => streams.delete(stream));
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    res.flushHeaders();
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  t.teardown(() => {
    for (const s of sockets) s.destroy();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });

  const openOf = (topic: string): OpenStream[] => [...streams].filter((s) => s.topics.has(topic));
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    requests,
    streamsOpened: (topic) => opened.get(topic) ?? 0,
    streamsOpen: (topic) => openOf(topic).length,
    emit(topic, count, pad) {
      const targets = openOf(topic);
      let frames = '';
      for (let i = 0; i < count; i++) {
        const n = (sequence.get(topic) ?? 0) + 1;
        sequence.set(topic, n);
        const data = pad === undefined ? { topic, n } : { topic, n, pad: 'p'.repeat(pad) };
        frames += `event: ${topic}\ndata: ${JSON.stringify(data)}\n\n`;
      }
      for (const s of targets) s.res.write(frames);
    },
    drop(topic) {
      for (const s of openOf(topic)) s.res.destroy();
    },
  };
}

/**
 * Answers with `total` bytes of `fill`, produced as the socket drains, so the node never holds more
 * than one chunk. Chunked encoding unless `contentLength` is set.
 */
export function streamBody(
  res: ServerResponse,
  total: number,
  opts: { contentType?: string; contentLength?: boolean; chunkBytes?: number } = {},
): void {
  const chunk = Buffer.alloc(opts.chunkBytes ?? 64 * 1024, 0x61);
  res.writeHead(200, {
    'content-type': opts.contentType ?? 'application/json',
    'eth-consensus-version': 'electra',
    ...(opts.contentLength ? { 'content-length': String(total) } : {}),
  });
  let sent = 0;
  const pump = (): void => {
    while (sent < total) {
      const piece = total - sent >= chunk.length ? chunk : chunk.subarray(0, total - sent);
      sent += piece.length;
      if (sent === total) {
        res.end(piece);
        return;
      }
      if (!res.write(piece)) {
        res.once('drain', pump);
        return;
      }
    }
  };
  pump();
}
