import t from 'tap';
import { createResponseParser, MAX_HEAD_BYTES } from '../../src/upstreams/http-parser.js';

interface Parsed {
  status?: number;
  headers?: Array<[string, string]>;
  contentLength?: number | undefined;
  body: string;
  done: boolean;
  error?: string;
  keepAlive: boolean;
  /** Offset into the whole input where the parser stopped for good. */
  stoppedAt: number;
}

/**
 * Feeds `input` in pieces cut at `cuts`. Each piece is copied into a scratch buffer followed by decoy bytes
 * that look like HTTP framing and lie past the limit, and the scratch is overwritten after the piece, as
 * the client's shared read buffer is: reading past the limit, or keeping bytes without copying, shows up.
 */
function parseInPieces(input: Buffer, cuts: number[], opts: { pauseEvery?: boolean; headers?: boolean } = {}): Parsed {
  const out: Parsed = { body: '', done: false, keepAlive: false, stoppedAt: -1 };
  const parser = createResponseParser({
    wantsHeaders: () => opts.headers ?? true,
    onHead(status, headers, contentLength) {
      out.status = status;
      out.headers = headers;
      out.contentLength = contentLength;
    },
    onBody(chunk, start, end) {
      out.body += chunk.toString('latin1', start, end);
      return !opts.pauseEvery;
    },
  });
  const bounds = [0, ...cuts, input.length];
  for (let i = 0; i + 1 < bounds.length; i++) {
    const piece = input.subarray(bounds[i], bounds[i + 1]);
    const scratch = Buffer.concat([piece, DECOY]);
    let from = 0;
    while (from < piece.length) {
      from = parser.execute(scratch, from, piece.length);
      if (parser.done || parser.error !== undefined) {
        out.stoppedAt = bounds[i]! + from;
        break;
      }
    }
    scratch.fill(0x58);
    if (out.stoppedAt !== -1) break;
  }
  out.done = parser.done;
  out.error = parser.error;
  out.keepAlive = parser.keepAlive;
  return out;
}

const DECOY = Buffer.from('\r\n\r\n0\r\n\r\nHTTP/1.1 200 OK\r\n\r\n', 'latin1');

/** Arguments for parsing all of `text` in one call. */
const whole = (text: string): [Buffer, number, number] => {
  const b = Buffer.from(text, 'latin1');
  return [b, 0, b.length];
};

const everyByte = (input: Buffer): number[] => Array.from({ length: input.length - 1 }, (_, i) => i + 1);

const chunkedWithEverything = Buffer.from(
  'HTTP/1.1 100 Continue\r\nX-Early: 1\r\n\r\n' +
    'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\nX-Spaces:   padded\t \r\n\r\n' +
    '5;name=value;other\r\nhello\r\n' +
    '1\r\n \r\n' +
    'A\r\n0123456789\r\n' +
    '0\r\nX-Trailer: yes\r\nX-Other: 2\r\n\r\n',
  'latin1',
);

t.test('a chunked response with 1xx, extensions and trailers parses the same at every split', async (t) => {
  const whole = parseInPieces(chunkedWithEverything, []);
  t.equal(whole.status, 200);
  t.same(whole.headers, [
    ['transfer-encoding', 'chunked'],
    ['content-type', 'application/json'],
    ['x-spaces', 'padded'],
  ]);
  t.equal(whole.contentLength, undefined);
  t.equal(whole.body, 'hello 0123456789');
  t.equal(whole.done, true);
  t.equal(whole.keepAlive, true);
  t.equal(whole.stoppedAt, chunkedWithEverything.length);

  const byteByByte = parseInPieces(chunkedWithEverything, everyByte(chunkedWithEverything));
  t.same(byteByByte, whole, 'one byte at a time');
  for (let cut = 1; cut < chunkedWithEverything.length; cut++) {
    const split = parseInPieces(chunkedWithEverything, [cut]);
    if (JSON.stringify(split) !== JSON.stringify(whole)) t.fail(`split at ${cut} differs`, { split, whole });
  }
  t.same(
    parseInPieces(chunkedWithEverything, everyByte(chunkedWithEverything), { pauseEvery: true }),
    whole,
    'stopping after every body piece and resuming at the returned offset',
  );
});

t.test('a content-length response parses the same at every split and stops at its end', async (t) => {
  const response = Buffer.from('HTTP/1.1 200 OK\r\nContent-Length: 11\r\nConnection: keep-alive\r\n\r\nhello worldEXTRA', 'latin1');
  const whole = parseInPieces(response, []);
  t.equal(whole.status, 200);
  t.equal(whole.contentLength, 11);
  t.equal(whole.body, 'hello world');
  t.equal(whole.stoppedAt, response.length - 'EXTRA'.length, 'bytes after the response are not consumed');
  t.same(parseInPieces(response, everyByte(response)), whole);
  t.same(parseInPieces(response, everyByte(response), { pauseEvery: true }), whole);
});

t.test('framing decides keep-alive and end of body', async (t) => {
  const parse = (text: string): Parsed => parseInPieces(Buffer.from(text, 'latin1'), []);

  const closeDelimited = createResponseParser({ onHead() {}, onBody: () => true });
  closeDelimited.execute(...whole('HTTP/1.1 200 OK\r\n\r\nsome body'));
  t.equal(closeDelimited.done, false, 'a body without length runs until the connection ends');
  t.equal(closeDelimited.finish(), true);
  t.equal(closeDelimited.done, true);
  t.equal(closeDelimited.keepAlive, false);

  const truncated = createResponseParser({ onHead() {}, onBody: () => true });
  truncated.execute(...whole('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort'));
  t.equal(truncated.finish(), false, 'a short content-length body is not complete at close');

  t.equal(parse('HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n').keepAlive, false, 'Connection: close');
  t.equal(parse('HTTP/1.1 200 OK\r\nConnection: Keep-Alive, Close\r\nContent-Length: 0\r\n\r\n').keepAlive, false);
  t.equal(parse('HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok').keepAlive, false, 'HTTP/1.0');
  t.equal(parse('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok').keepAlive, true);
  const noContent = parse('HTTP/1.1 204 No Content\r\nContent-Length: 7\r\n\r\n');
  t.same([noContent.done, noContent.contentLength, noContent.body], [true, 0, ''], '204 has no body');
  t.equal(parse('HTTP/1.1 304 Not Modified\r\n\r\n').done, true);
  const both = parse('HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n');
  t.same([both.body, both.done, both.keepAlive], ['ok', true, false], 'chunked wins over a length, then the socket is dropped');
  const gzipOnly = parse('HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nxyz');
  t.same([gzipOnly.done, gzipOnly.keepAlive, gzipOnly.body], [false, false, 'xyz'], 'non-chunked coding reads to close');
  t.equal(parse('HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n').status, 200, 'reason phrase is optional');
  t.same(parse('HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n12345').body, '12345', 'repeated equal lengths');
});

t.test('bytes that are not an HTTP/1.x response are refused', async (t) => {
  const refuse = (text: string, reason: RegExp): void => {
    const r = parseInPieces(Buffer.from(text, 'latin1'), []);
    t.match(r.error, reason, JSON.stringify(text));
    t.equal(r.done, false);
    t.equal(r.keepAlive, false);
  };
  refuse('SSH-2.0-OpenSSH_9.6\r\n', /not an HTTP/);
  refuse('HTTP/2 200\r\n\r\n', /not an HTTP/);
  refuse('{"jsonrpc":"2.0"}', /not an HTTP/);
  refuse('HTTP/1.1 20 OK\r\n\r\n', /status line/);
  refuse('HTTP/1.1 200OK\r\n\r\n', /status line/);
  refuse('HTTP/1.2 200 OK\r\n\r\n', /status line/);
  refuse('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n', /101/);
  refuse('HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n', /conflicting content-length/);
  refuse('HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n', /invalid content-length/);
  refuse('HTTP/1.1 200 OK\r\nNo Colon Here\r\n\r\n', /header/);
  refuse('HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n', /header name/);
  refuse('HTTP/1.1 200 OK\r\n folded: x\r\n\r\n', /header name/);
  refuse('HTTP/1.1 200 OK\r\nX-A: 1\nX-B: 2\r\n\r\n', /stray/);
  refuse('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n', /chunked is not the final/);
  refuse('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n', /invalid chunk size/);
  refuse('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\nok', /invalid chunk size/);
  refuse('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nokX\r\n', /CRLF/);
  refuse('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n' + 'f'.repeat(14) + '\r\n', /too large/);
});

t.test('garbage is refused as soon as the first bytes arrive', async (t) => {
  const parser = createResponseParser({ onHead() {}, onBody: () => true });
  parser.execute(Buffer.from('H'), 0, 1);
  t.equal(parser.error, undefined);
  parser.execute(Buffer.from('X'), 0, 1);
  t.match(parser.error, /not an HTTP/);
});

t.test('an endless head is refused at the size limit', async (t) => {
  const filler = Buffer.from('HTTP/1.1 200 OK\r\n' + 'X-Pad: '.padEnd(1000, 'p') + '\r\n');
  const parser = createResponseParser({ onHead() {}, onBody: () => true });
  let fed = 0;
  while (parser.error === undefined && fed < 2 * MAX_HEAD_BYTES) {
    parser.execute(filler, 0, filler.length);
    fed += filler.length;
  }
  t.match(parser.error, /head too large/);
  t.ok(fed <= MAX_HEAD_BYTES + 2 * filler.length);
  const single = createResponseParser({ onHead() {}, onBody: () => true });
  single.execute(Buffer.alloc(MAX_HEAD_BYTES + 10, 'HTTP/1.1 200 OK\r\nX: y'), 0, MAX_HEAD_BYTES + 10);
  t.match(single.error, /head too large/, 'in one read as well');
});

t.test('reset readies the parser for the next response on the connection', async (t) => {
  const bodies: string[] = [];
  const parser = createResponseParser({
    onHead() {},
    onBody(chunk, start, end) {
      bodies.push(chunk.toString('latin1', start, end));
      return true;
    },
  });
  parser.execute(...whole('HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na'));
  t.equal(parser.done, true);
  parser.reset();
  t.equal(parser.done, false);
  parser.execute(...whole('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nb\r\n0\r\n\r\n'));
  t.equal(parser.done, true);
  t.same(bodies, ['a', 'b']);
});

t.test('a consumer that reads no header gets an empty list and the same framing, keep-alive and errors', async (t) => {
  const responses = [
    'HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Custom: a\r\n\r\nhello',
    'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-Other: b\r\n\r\n3\r\nabc\r\n0\r\n\r\n',
    'HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n',
    'HTTP/1.1 200 OK\r\nConnection: keep-alive, Close\r\nContent-Length: 2\r\n\r\nok',
    'HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok',
    'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n',
    'HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nabc',
    'HTTP/1.1 204 No Content\r\nX-A: 1\r\n\r\n',
  ];
  for (const text of responses) {
    const input = Buffer.from(text, 'latin1');
    for (const cuts of [[], [7], [20, 21, 40]]) {
      const full = parseInPieces(input, cuts);
      const bare = parseInPieces(input, cuts, { headers: false });
      if (full.status !== undefined) t.same(bare.headers, [], `no header list: ${JSON.stringify(text.slice(0, 40))}`);
      t.same(
        { ...bare, headers: undefined },
        { ...full, headers: undefined },
        `same outcome: ${JSON.stringify(text.slice(0, 40))} cut at ${cuts}`,
      );
    }
  }
});
