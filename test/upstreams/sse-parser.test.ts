import t from 'tap';
import { createSseParser, encodeSseEvent, type SseEvent } from '../../src/upstreams/sse-parser.js';

/** Feeds the chunks to a fresh parser; returns the events, the retry values and what push last returned. */
function parse(chunks: Buffer[], maxEventBytes?: number) {
  const events: SseEvent[] = [];
  const retries: number[] = [];
  const parser = createSseParser({ onEvent: (e) => events.push(e), onRetry: (ms) => retries.push(ms), maxEventBytes });
  let ok = true;
  for (const chunk of chunks) ok = parser.push(chunk);
  return { events, retries, ok };
}

const ev = (event: string, data: string, id?: string): SseEvent => ({ event, data, id });

// Every line ending, a split CRLF candidate, multi-byte UTF-8 (2, 3 and 4 bytes), a BOM, comments, fields
// without colon or space, an event block without data, unknown fields, retry, an id holding NUL.
const SAMPLE = Buffer.concat([
  Buffer.from([0xef, 0xbb, 0xbf]),
  Buffer.from(
    ': hello\n' +
      'event: head\r\n' +
      'data: {"slot":"1","note":"é€𝄞"}\r\n' +
      '\r\n' +
      'retry: 1500\r' +
      'event: block\r' +
      'id: 7\r' +
      'data: line one\r' +
      'data:line two\r' +
      'data:  indented\r' +
      '\r' +
      'event: ignored\n' +
      'id: 8\n' +
      '\n' +
      'data\n' +
      'bogus: field\n' +
      'retry: 12x\n' +
      'id: a\u0000b\n' +
      '\n' +
      ':keep-alive\r\n\r\n' +
      'event:finalized_checkpoint\n' +
      'data: 𝄞\n' +
      'data:\n' +
      '\n' +
      'data: unterminated at end of stream',
    'utf8',
  ),
]);

const EXPECTED: SseEvent[] = [
  ev('head', '{"slot":"1","note":"é€𝄞"}'),
  ev('block', 'line one\nline two\n indented', '7'),
  ev('', ''),
  ev('finalized_checkpoint', '𝄞\n'),
];

t.test('the sample stream read whole', async (t) => {
  const r = parse([SAMPLE]);
  t.same(r.events, EXPECTED);
  t.same(r.retries, [1500], 'only an all-digit retry counts');
  t.equal(r.ok, true);
});

t.test('the sample stream split at every byte position gives the same events', async (t) => {
  let mismatches = 0;
  for (let i = 0; i <= SAMPLE.length; i++) {
    const r = parse([SAMPLE.subarray(0, i), SAMPLE.subarray(i)]);
    if (JSON.stringify(r.events) !== JSON.stringify(EXPECTED) || r.retries.length !== 1) {
      mismatches++;
      t.fail(`split at ${i}: ${JSON.stringify(r.events)}`);
    }
  }
  t.equal(mismatches, 0, `${SAMPLE.length + 1} splits`);
});

t.test('the sample stream split at every pair of positions gives the same events', async (t) => {
  let mismatches = 0;
  for (let i = 0; i <= SAMPLE.length; i++) {
    for (let j = i; j <= SAMPLE.length; j++) {
      const r = parse([SAMPLE.subarray(0, i), SAMPLE.subarray(i, j), SAMPLE.subarray(j)]);
      if (JSON.stringify(r.events) !== JSON.stringify(EXPECTED)) mismatches++;
    }
  }
  t.equal(mismatches, 0);
});

t.test('the sample stream one byte per chunk gives the same events', async (t) => {
  const bytes = Array.from(SAMPLE, (b) => Buffer.from([b]));
  t.same(parse(bytes).events, EXPECTED);
});

t.test('CR then LF in the next chunk is one line end, not a blank line', async (t) => {
  const r = parse([Buffer.from('data: a\r'), Buffer.from('\ndata: b\r'), Buffer.from('\n'), Buffer.from('\r\n')]);
  t.same(r.events, [ev('', 'a\nb')]);
});

t.test('CR then an empty chunk then LF is still one line end', async (t) => {
  const r = parse([Buffer.from('data: a\r'), Buffer.alloc(0), Buffer.from('\n\n')]);
  t.same(r.events, [ev('', 'a')]);
});

t.test('a lone CR ends a line, and two end an event', async (t) => {
  t.same(parse([Buffer.from('event: x\rdata: 1\r\rdata: 2\r\r')]).events, [ev('x', '1'), ev('', '2')]);
});

t.test('the event name and id reset after each event', async (t) => {
  const r = parse([Buffer.from('event: a\nid: 1\ndata: x\n\ndata: y\n\n')]);
  t.same(r.events, [ev('a', 'x', '1'), ev('', 'y')]);
});

t.test('a BOM later in the stream is kept in the field name, so the line is ignored', async (t) => {
  const r = parse([Buffer.from('data: a\n\n\ufeffdata: b\n\ndata: c\n\n')]);
  t.same(r.events, [ev('', 'a'), ev('', 'c')]);
});

t.test('invalid UTF-8 becomes U+FFFD, as a UTF-8 decode does', async (t) => {
  const r = parse([Buffer.concat([Buffer.from('data: a'), Buffer.from([0xff, 0xc3]), Buffer.from('b\n\n')])]);
  t.same(r.events, [ev('', 'a\ufffd\ufffdb')]);
});

t.test('an event of exactly maxEventBytes passes; one byte more fails and stops the parser', async (t) => {
  // 'data: ' + 94 bytes = 100 bytes of kept lines.
  const fits = Buffer.from('data: ' + 'x'.repeat(94) + '\n\n');
  const r1 = parse([fits, Buffer.from('data: next\n\n')], 100);
  t.same(r1.events, [ev('', 'x'.repeat(94)), ev('', 'next')]);
  t.equal(r1.ok, true);

  const over = Buffer.from('data: ' + 'x'.repeat(95) + '\n\n');
  const r2 = parse([Buffer.from('data: before\n\n'), over, Buffer.from('data: after\n\n')], 100);
  t.same(r2.events, [ev('', 'before')], 'nothing after the oversized event');
  t.equal(r2.ok, false);
});

t.test('the limit counts every kept line of one event, not the whole stream', async (t) => {
  const line = 'data: ' + 'y'.repeat(44) + '\n'; // 50 bytes each, line end excluded
  const r1 = parse([Buffer.from(line + line + '\n' + line + line + '\n')], 100);
  t.equal(r1.events.length, 2);
  t.equal(r1.ok, true);
  const r2 = parse([Buffer.from(line + line + line + '\n')], 100);
  t.same(r2.events, []);
  t.equal(r2.ok, false);
});

t.test('a line with no end fails once it passes the limit, however it is split', async (t) => {
  const r = parse([Buffer.from('data: '), Buffer.from('z'.repeat(60)), Buffer.from('z'.repeat(60))], 100);
  t.equal(r.ok, false);
  const comment = parse([Buffer.from(':' + 'c'.repeat(200))], 100);
  t.equal(comment.ok, false, 'a comment line is bounded too');
});

t.test('comments and unknown fields do not count toward an event', async (t) => {
  const noise = ':' + 'c'.repeat(90) + '\nother: ' + 'o'.repeat(80) + '\n';
  const r = parse([Buffer.from(noise.repeat(5) + 'data: ok\n\n')], 100);
  t.same(r.events, [ev('', 'ok')]);
  t.equal(r.ok, true);
});

t.test('maxEventBytes is validated', async (t) => {
  t.throws(() => createSseParser({ onEvent() {}, maxEventBytes: 0 }), /maxEventBytes must be a positive integer/);
  t.throws(() => createSseParser({ onEvent() {}, maxEventBytes: 1.5 }), /maxEventBytes/);
});

t.test('encodeSseEvent writes the canonical frame', async (t) => {
  t.equal(encodeSseEvent(ev('head', '{"slot":"1"}')).toString(), 'event: head\ndata: {"slot":"1"}\n\n');
  t.equal(encodeSseEvent(ev('block', 'a\nb', '9')).toString(), 'event: block\nid: 9\ndata: a\ndata: b\n\n');
  t.equal(encodeSseEvent(ev('', '')).toString(), 'data: \n\n');
});

t.test('parsing an encoded event gives it back', async (t) => {
  const events = [...EXPECTED, ev('x', ' leading space\n\n', ''), ev('y', 'é\n€', 'id with spaces ')];
  const r = parse(events.map(encodeSseEvent));
  t.same(r.events, events);
});
