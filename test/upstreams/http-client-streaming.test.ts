import t, { type Test } from 'tap';
import { createServer as createHttpServer, type ServerResponse } from 'node:http';
import { createServer as createTcpServer } from 'node:net';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { createHttpUpstream, type RequestHandle, type UpstreamError } from '../../src/upstreams/http-client.js';
import { listenOn, readRequests } from './exchange-harness.js';
import { waitFor } from '../support/wait-for.js';

const TOTAL = 50 * 1024 * 1024;
// Byte i of every body is i & 0xff; the block length is a multiple of 256 so blocks join seamlessly.
const BLOCK = Buffer.from(Array.from({ length: 64 * 1024 }, (_, i) => i & 0xff));

/** Writes TOTAL pattern bytes, waiting for 'drain' so the server itself holds little. */
function writePattern(out: { write(b: Buffer): boolean; once(e: 'drain', f: () => void): unknown }, done: () => void): void {
  let sent = 0;
  const pump = (): void => {
    while (sent < TOTAL) {
      const piece = BLOCK.subarray(0, Math.min(BLOCK.length, TOTAL - sent));
      sent += piece.length;
      if (!out.write(piece)) {
        out.once('drain', pump);
        return;
      }
    }
    done();
  };
  pump();
}

// V8 frees the ArrayBuffers behind delivered chunks lazily: in a process with tap's large heap, 50 MB of
// already-dropped chunks can sit uncollected. Collecting now and then makes RSS show what is retained.
setFlagsFromString('--expose-gc');
const collectGarbage = runInNewContext('gc') as () => void;

/**
 * Reads the body with a slow consumer: it queues chunks and handles one per timer tick, refusing more
 * (onData → false) while its queue is not empty. A client that ignored that refusal would fill the queue
 * with the whole body, since the server writes far faster than one chunk per tick.
 */
async function streamSlowly(url: string) {
  const upstream = createHttpUpstream({ url });
  collectGarbage();
  const baseline = process.memoryUsage().rss;
  let peak = baseline;
  let received = 0;
  let mismatches = 0;
  let chunks = 0;
  let mostHeld = 0;
  const held: Buffer[] = [];
  const consumeOne = (handle: RequestHandle): void => {
    const chunk = held.shift()!;
    for (let i = 0; i < chunk.length; i++) if (chunk[i] !== ((received + i) & 0xff)) mismatches++;
    received += chunk.length;
    if (++chunks % 64 === 0) {
      collectGarbage();
      peak = Math.max(peak, process.memoryUsage().rss);
    }
    if (held.length > 0) setTimeout(consumeOne, 1, handle);
    else handle.resume();
  };
  const calls: string[] = [];
  let error: UpstreamError | undefined;
  // A sink of its own: the shared test sink keeps every chunk, which would be the very retention measured here.
  await new Promise<void>((resolve) => {
    const handle = upstream.request(
      { method: 'GET', timeoutMs: 5000 },
      {
        onHead: () => calls.push('head'),
        onData(chunk) {
          held.push(chunk);
          mostHeld = Math.max(mostHeld, held.length);
          if (held.length === 1) setTimeout(consumeOne, 1, handle);
          return false;
        },
        onEnd() {
          calls.push('end');
          resolve();
        },
        onError(err) {
          calls.push('error');
          error = err;
          resolve();
        },
      },
    );
  });
  await waitFor(() => held.length === 0);
  upstream.close();
  return { calls, error, received, mismatches, growth: peak - baseline, chunks, mostHeld };
}

/** The whole body arrived in order, held back by the slow consumer, with memory bounded. */
function assertStreamedWhole(t: Test, r: Awaited<ReturnType<typeof streamSlowly>>): void {
  t.equal(r.error, undefined);
  t.same(r.calls, ['head', 'end']);
  t.ok(r.mostHeld <= 2, `the consumer never held more than ${r.mostHeld} chunks`);
  t.equal(r.received, TOTAL);
  t.equal(r.mismatches, 0, 'every byte in order');
  t.ok(r.growth < 25 * 1024 * 1024, `RSS grew ${(r.growth / 1048576).toFixed(1)} MB over ${r.chunks} chunks`);
}

t.test('a 50 MB chunked body streams to a slow consumer with bounded memory', async (t) => {
  const server = createHttpServer((req, res: ServerResponse) => {
    req.resume();
    res.writeHead(200, { 'content-type': 'application/octet-stream' });
    writePattern(res, () => res.end());
  });
  const { port } = await listenOn(t, server);
  assertStreamedWhole(t, await streamSlowly(`http://127.0.0.1:${port}`));
});

t.test('a 50 MB content-length body streams to a slow consumer with bounded memory', async (t) => {
  const server = createTcpServer((socket) =>
    readRequests(socket, () => {
      socket.write(`HTTP/1.1 200 OK\r\nContent-Length: ${TOTAL}\r\n\r\n`);
      writePattern(socket, () => {});
    }),
  );
  const { port } = await listenOn(t, server);
  assertStreamedWhole(t, await streamSlowly(`http://127.0.0.1:${port}`));
});
