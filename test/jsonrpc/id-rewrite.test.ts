import t from 'tap';
import { createIdRewriter, rewriteId, type IdRewriter } from '../../src/jsonrpc/id-rewrite.js';

interface Outcome {
  text: string;
  replaced: boolean;
  invalid: boolean;
  delta: number;
}

function feed(chunks: Buffer[], clientIdText: string): Outcome {
  const rewriter: IdRewriter = createIdRewriter(clientIdText);
  const out: Buffer[] = [];
  for (const chunk of chunks) out.push(...rewriter.push(chunk));
  return { text: Buffer.concat(out).toString('utf8'), replaced: rewriter.replaced, invalid: rewriter.invalid, delta: rewriter.delta };
}

function splitAt(body: Buffer, ...cuts: number[]): Buffer[] {
  const parts: Buffer[] = [];
  let from = 0;
  for (const cut of cuts) {
    parts.push(body.subarray(from, cut));
    from = cut;
  }
  parts.push(body.subarray(from));
  return parts;
}

t.test('replaces number, string and null ids with the client text', async (t) => {
  const cases: Array<[string, string, string]> = [
    ['{"jsonrpc":"2.0","id":17,"result":"0x1"}', '"abc"', '{"jsonrpc":"2.0","id":"abc","result":"0x1"}'],
    [
      '{"jsonrpc":"2.0","id":"gw-1","result":true}',
      '123456789012345678901234567890',
      '{"jsonrpc":"2.0","id":123456789012345678901234567890,"result":true}',
    ],
    [
      '{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}',
      '1.0',
      '{"jsonrpc":"2.0","id":1.0,"error":{"code":-32700,"message":"x"}}',
    ],
    ['{"id":-1.5e+3}', '"a\\"b"', '{"id":"a\\"b"}'],
    ['{"id":"\\"}\\\\"}', '7', '{"id":7}'],
    [' \n{ "id" : 4 , "result" : 0 }\n', '"é"', ' \n{ "id" : "é" , "result" : 0 }\n'],
    [
      '{"jsonrpc":"2.0","result":{"id":99,"nested":["id",{"id":1}]},"id":5}',
      '"c"',
      '{"jsonrpc":"2.0","result":{"id":99,"nested":["id",{"id":1}]},"id":"c"}',
    ],
    ['{"result":"has \\"id\\": 3 inside","id":3}', '8', '{"result":"has \\"id\\": 3 inside","id":8}'],
    ['{"a":true,"b":null,"c":-2,"d":[],"e":{},"id":1}', '2', '{"a":true,"b":null,"c":-2,"d":[],"e":{},"id":2}'],
    ['{"\\u0069d":1,"result":0}', '2', '{"\\u0069d":2,"result":0}'],
    ['{"idx":1,"i":2,"id":3}', '4', '{"idx":1,"i":2,"id":4}'],
    ['{"i\\u0064":1}', '2', '{"i\\u0064":2}'],
    ['{"\\\\id":1,"x\\u0069d":1,"i\\"":1,"\\u0069\\u0064":9}', '2', '{"\\\\id":1,"x\\u0069d":1,"i\\"":1,"\\u0069\\u0064":2}'],
  ];
  for (const [upstream, client, expected] of cases) {
    const out = feed([Buffer.from(upstream)], client);
    t.same(
      out,
      {
        text: expected,
        replaced: true,
        invalid: false,
        delta: Buffer.byteLength(expected) - Buffer.byteLength(upstream),
      },
      upstream,
    );
    t.equal(rewriteId(Buffer.from(upstream), client)?.toString(), expected, `rewriteId ${upstream}`);
  }
  t.equal(feed([Buffer.from('{"id":"x"}')], '"é"').delta, 1, 'delta counts bytes, not characters');
});

t.test('every split of a small body gives the same bytes', async (t) => {
  const bodies = [
    '{"jsonrpc":"2.0","id":"a\\\\\\"b","result":["x\\"}",{"k":[1,2]}]}',
    '{"jsonrpc":"2.0","result":{"s":"\\\\","n":[[{}]]},"id":12345}',
    '{"jsonrpc":"2.0","error":{"code":1,"message":"m"},"id":null}',
    '{"\\u0069d":"q","result":1}',
  ];
  for (const text of bodies) {
    const body = Buffer.from(text);
    const expected = feed([body], '"client"');
    t.equal(expected.replaced, true, text);
    let failures = 0;
    for (let a = 0; a <= body.length; a++) {
      for (let b = a; b <= body.length; b++) {
        const out = feed(splitAt(body, a, b), '"client"');
        if (out.text !== expected.text || !out.replaced || out.invalid || out.delta !== expected.delta) failures++;
      }
    }
    t.equal(failures, 0, `all two-cut splits of ${text}`);
    const bytewise = feed(splitAt(body, ...Array.from({ length: body.length - 1 }, (_, k) => k + 1)), '"client"');
    t.same(bytewise, expected, 'one byte at a time');
  }
});

t.test('the id before or after a 1 MB result', async (t) => {
  const big = `"0x${'ab'.repeat(512 * 1024)}"`;
  const tricky = `["${'\\\\'.repeat(1000)}", "\\"}]", {"id": 1}, ${big}]`;
  for (const [name, text] of [
    ['id first', `{"jsonrpc":"2.0","id":42,"result":${big}}`],
    ['id last', `{"jsonrpc":"2.0","result":${big},"id":42}`],
    ['id last after nested strings', `{"jsonrpc":"2.0","result":${tricky},"id":42}`],
  ] as const) {
    const body = Buffer.from(text);
    const expected = text.replace('"id":42', '"id":"the-client"');
    const chunks: Buffer[] = [];
    for (let i = 0; i < body.length; i += 16 * 1024 + 7) chunks.push(body.subarray(i, i + 16 * 1024 + 7));
    const rewriter = createIdRewriter('"the-client"');
    const out: Buffer[] = [];
    let gapMax = 0;
    let fed = 0;
    let sent = 0;
    for (const chunk of chunks) {
      fed += chunk.length;
      for (const part of rewriter.push(chunk)) {
        out.push(part);
        sent += part.length;
      }
      gapMax = Math.max(gapMax, Math.abs(fed - sent));
    }
    t.ok(rewriter.replaced, name);
    t.equal(rewriter.delta, 10);
    t.equal(Buffer.concat(out).toString(), expected, name);
    t.ok(gapMax <= 16, `${name}: output keeps pace with input (largest gap ${gapMax} bytes)`);
  }
});

t.test('chunks after the replacement pass through as they are', async (t) => {
  const rewriter = createIdRewriter('1');
  t.same(rewriter.push(Buffer.from('{"id":"')).map(String), ['{"id":', '1']);
  t.equal(rewriter.replaced, false, 'not replaced while the original id is still open');
  t.same(rewriter.push(Buffer.from('x"')).map(String), []);
  t.equal(rewriter.replaced, true);
  const later = Buffer.from(',"result":[');
  const passed = rewriter.push(later);
  t.equal(passed.length, 1);
  t.equal(passed[0], later, 'the same buffer, not a copy');
  const numberAtEnd = createIdRewriter('"n"');
  t.same(numberAtEnd.push(Buffer.from('{"id":12')).map(String), ['{"id":', '"n"']);
  t.equal(numberAtEnd.replaced, false, 'a number may go on in the next chunk');
  t.same(numberAtEnd.push(Buffer.from('3}')).map(String), ['}']);
  t.equal(numberAtEnd.delta, 0);
});

t.test('invalid answers', async (t) => {
  const invalid = [
    '[{"id":1}]',
    '"x"',
    'null',
    'x{"id":1}',
    '{"id":{"a":1}}',
    '{"id":[1]}',
    '{"id":true}',
    '{"id":nul}',
    '{"jsonrpc":"2.0","result":1}',
    '{}',
    '{"result" 1,"id":2}',
    '{"result":1 "id":2}',
    '{result:1}',
  ];
  for (const text of invalid) {
    const rewriter = createIdRewriter('1');
    const out = rewriter.push(Buffer.from(text));
    t.equal(rewriter.replaced, false, text);
    t.equal(rewriter.invalid, true, `${text} is invalid`);
    t.same(out, [], 'nothing is returned for the chunk that broke');
    t.same(rewriter.push(Buffer.from('{"id":1}')), [], 'nothing more once invalid');
    t.equal(rewriteId(Buffer.from(text), '1'), null, `rewriteId ${text}`);
  }
  const empty = createIdRewriter('1');
  empty.push(Buffer.alloc(0));
  t.same([empty.replaced, empty.invalid], [false, false], 'an empty chunk decides nothing');
  t.equal(rewriteId(Buffer.from('{"jsonrpc":"2.0","result":"0x1"'), '1'), null, 'truncated before any id');
  t.equal(rewriteId(Buffer.from('{"id":"abc'), '1'), null, 'truncated inside the id');
});

/** Feeds `body` cut into every pair of pieces, checking against sent id `sent`; one outcome per split must agree. */
function checkedSplits(body: string, sent: string): Array<{ wrongId: boolean; invalid: boolean; closed: boolean; text: string }> {
  const bytes = Buffer.from(body);
  const outcomes = [];
  for (let a = 0; a <= bytes.length; a++) {
    for (let b = a; b <= bytes.length; b += 3) {
      const rewriter = createIdRewriter('"c"', sent);
      const out: Buffer[] = [];
      for (const piece of splitAt(bytes, a, b)) out.push(...rewriter.push(piece));
      outcomes.push({ wrongId: rewriter.wrongId, invalid: rewriter.invalid, closed: rewriter.closed, text: Buffer.concat(out).toString() });
    }
  }
  return outcomes;
}

t.test('given the id sent, an answer that is not that call’s is refused, however it is cut', async (t) => {
  const refused: Array<[string, string]> = [
    ['{"jsonrpc":"2.0","id":8,"result":"0x1"}', 'another id'],
    ['{"jsonrpc":"2.0","id":77,"result":"0x1"}', 'the sent id as a prefix of another'],
    ['{"jsonrpc":"2.0","id":"7","result":"0x1"}', 'the sent number as a string'],
    ['{"jsonrpc":"2.0","id":null,"result":"0x1"}', 'null'],
    ['{"jsonrpc":"2.0","id":7,"id":7,"result":"0x1"}', 'the id twice, before the result'],
    ['{"jsonrpc":"2.0","id":7,"result":{"x":["}"]},"id":9}', 'a second id after a nested result'],
    ['{"jsonrpc":"2.0","id":7,"result":"0x1","\\u0069d":9}', 'a second id spelt with escapes'],
    ['{"jsonrpc":"2.0","result":"0x1"}', 'no id at all'],
  ];
  for (const [body, why] of refused) {
    const bad = checkedSplits(body, '7').filter((o) => !o.wrongId || !o.invalid);
    t.equal(bad.length, 0, `${why}: ${body}`);
    t.equal(rewriteId(Buffer.from(body), '"c"', '7'), null, `rewriteId refuses it: ${why}`);
  }
});

t.test('given the id sent, the call’s own answer passes whole, nested ids and all', async (t) => {
  const accepted = [
    '{"jsonrpc":"2.0","id":7,"result":"0x1"}',
    ' {"jsonrpc":"2.0","result":{"id":9,"peers":[{"id":"x"}],"s":"\\"id\\":9}"},"id":7}\n',
    '{"jsonrpc":"2.0","id":7,"result":["\\\\",{"a":"]\\"}"}],"error":null}',
  ];
  for (const body of accepted) {
    const expected = body.replace(/"id":7/, '"id":"c"');
    const bad = checkedSplits(body, '7').filter((o) => o.wrongId || o.invalid || !o.closed || o.text !== expected);
    t.equal(bad.length, 0, body);
  }
});

t.test('given the id sent, an answer cut before its object closes is not closed', async (t) => {
  const rewriter = createIdRewriter('"c"', '7');
  rewriter.push(Buffer.from('{"jsonrpc":"2.0","id":7,"result":[1,2'));
  t.equal(rewriter.replaced, true);
  t.equal(rewriter.closed, false, 'the caller sees it is cut');
  t.equal(rewriter.invalid, false);
  rewriter.push(Buffer.from(']}'));
  t.equal(rewriter.closed, true);
  t.same(rewriter.push(Buffer.from(' x')), [], 'bytes after the object are refused');
  t.equal(rewriter.invalid, true);
});
