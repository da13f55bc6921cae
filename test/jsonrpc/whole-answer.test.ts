import t, { type Test } from 'tap';
import { rewriteId } from '../../src/jsonrpc/id-rewrite.js';
import { reidAcceptedAnswer } from '../../src/jsonrpc/accepted-answer.js';
import { rewriteIdChecked, rewriteWholeAnswer, WRONG_ID } from '../../src/jsonrpc/whole-answer.js';
import { seeded } from '../support/seeded.js';

/** What forward.ts did before: the streaming rewriter's bytes, kept only when JSON.parse takes them. */
const reference = rewriteIdChecked;

const CLIENT_IDS = ['1', '"abc"', 'null', '12345678901234567890123', '"a\\"b"', '1.0', '-0', '2e5', '"é\\u00e9"'];
/** Not JSON scalars: parse.ts never gives one, but the answer must still be the reference's. */
const ODD_CLIENT_IDS = [' 1', '"ab', '1.', 'tru', '"a"b"', '{}'];

const hex = (b: Buffer | null): string | null => (b === null ? null : b.toString('hex'));

/** Compares every body under every client id; counts disagreements and keeps the first few to print. */
function compare(bodies: Iterable<Buffer>, ids: readonly string[] = CLIENT_IDS): { cases: number; accepted: number; mismatches: string[] } {
  let cases = 0;
  let accepted = 0;
  const mismatches: string[] = [];
  for (const body of bodies) {
    for (const id of ids) {
      cases++;
      const want = hex(reference(body, id));
      const got = hex(rewriteWholeAnswer(body, id));
      if (want !== null) accepted++;
      if (got !== want && mismatches.length < 2000)
        mismatches.push(
          `${JSON.stringify(body.toString('latin1')).slice(0, 200)} id ${id}: got ${got === null ? null : 'bytes'}, want ${want === null ? null : 'bytes'}`,
        );
    }
  }
  return { cases, accepted, mismatches };
}

function checkGroup(t: Test, name: string, bodies: Iterable<Buffer>, ids?: readonly string[]): void {
  const { cases, accepted, mismatches } = compare(bodies, ids);
  if (mismatches.length > 0) t.comment(mismatches.slice(0, 5).join('\n'));
  t.equal(mismatches.length, 0, `${name}: ${cases} cases, ${accepted} accepted`);
}

const bigResult = Array.from({ length: 60 }, (_, k) => ({
  address: '0x' + 'a0b86991c6218b36c1d19d4a2e9eb0ce3606eb48',
  topics: ['0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef', `0x${'0'.repeat(24)}${k.toString(16).padStart(40, '0')}`],
  data: '0x' + '00'.repeat(31) + (k & 0xff).toString(16).padStart(2, '0'),
  blockNumber: `0x${(19_000_000 + k).toString(16)}`,
  transactionHash: '0x' + 'ab'.repeat(32),
  transactionIndex: `0x${k.toString(16)}`,
  blockHash: '0x' + 'cd'.repeat(32),
  logIndex: `0x${k.toString(16)}`,
  removed: false,
}));

const SMALL_VALID = [
  '{"jsonrpc":"2.0","id":7,"result":"0x0000000000000000000000000000000000000000000000000de0b6b3a7640000"}',
  '{"jsonrpc":"2.0","id":1,"result":{"number":"0x1","transactions":[],"uncles":[],"nonce":null,"ok":true,"bad":false}}',
  '{"jsonrpc":"2.0","id":"gw-12","result":[1,-2,3.5,-0.25e-3,1E+9,0,-0,[],{},[[[]]],{"a":{"b":{}}}]}',
  '{"jsonrpc":"2.0","id":null,"error":{"code":-32601,"message":"the method eth_foo does not exist/is not available"}}',
  '{"jsonrpc":"2.0","error":{"code":3,"message":"execution reverted","data":"0x08c379a0"},"id":44}',
  '{"id":12,"jsonrpc":"2.0","result":null}',
  '{"jsonrpc":"2.0","result":true,"id":12345678901234567890}',
  '{"jsonrpc":"2.0","result":false,"id":-1.5e+3}',
  '{"jsonrpc":"2.0","id":"a\\"b\\\\c\\/d\\b\\f\\n\\r\\t\\u00e9\\uD83D\\uDE00","result":"x"}',
  '{"jsonrpc":"2.0","id":3,"result":"é ü 日本 😀 \\u2028 \\"quoted\\" back\\\\slash"}',
  ' \t\r\n{ \n"jsonrpc" : "2.0" ,\r\n "id"\t:\t9 , "result" : [ 1 , { "k" : [ ] } , "s" ] \n}\n\t ',
  '{"jsonrpc":"2.0","result":{"id":99,"nested":["id",{"id":1}]},"id":5}',
  '{"\\u0069d":1,"result":0}',
  '{"i\\u0064":1,"result":0}',
  '{"\\u0069\\u0064":1,"result":0}',
  '{"idx":1,"i":2,"\\\\id":3,"id":4}',
  '{"id":1,"id":2,"result":0}',
  '{"id":"x","result":"id"}',
  '{"id":0}',
  '{"id":""}',
  '{"id":null}',
  '{"jsonrpc":"2.0","result":{"s":"}]\\"}[{","t":["]",{"u":"{"}],"v":"\\\\"},"id":3}',
];

/** Too long to mutate at every byte; nested deeper than a recursive checker could go. */
const BIG_VALID = [
  '{"jsonrpc":"2.0","id":1,"result":"' + 'ab'.repeat(2000) + '"}',
  JSON.stringify({ jsonrpc: '2.0', id: 77, result: bigResult }),
  JSON.stringify({ jsonrpc: '2.0', result: bigResult, id: 'last' }, null, 2),
  '{"jsonrpc":"2.0","id":1,"result":' + '['.repeat(5000) + ']'.repeat(5000) + '}',
  '{"jsonrpc":"2.0","id":1,"result":' + '{"a":'.repeat(3000) + '1' + '}'.repeat(3000) + '}',
];
const VALID = [...SMALL_VALID, ...BIG_VALID];

const INVALID = [
  '',
  ' ',
  '{',
  '}',
  '{}',
  '[]',
  '"id"',
  '1',
  'null',
  '[{"id":1}]',
  '{"id":1',
  '{"id":1,',
  '{"id":1,}',
  '{"id":1}}',
  '{"id":1}]',
  '{"id":1} x',
  '{"id":1}{}',
  '{"id":1}\x00',
  '\ufeff{"id":1}',
  '{"id":1}\ufeff',
  '{"id":1,"result":01}',
  '{"id":1,"result":-}',
  '{"id":1,"result":1.}',
  '{"id":1,"result":.5}',
  '{"id":1,"result":1e}',
  '{"id":1,"result":1e+}',
  '{"id":1,"result":+1}',
  '{"id":1,"result":NaN}',
  '{"id":1,"result":Infinity}',
  '{"id":1,"result":-Infinity}',
  '{"id":1,"result":"\\x"}',
  '{"id":1,"result":"\\u12"}',
  '{"id":1,"result":"\\u12G4"}',
  '{"id":1,"result":"\\\'"}',
  '{"id":1,"result":"a\nb"}',
  '{"id":1,"result":"a\tb"}',
  '{"id":1,"result":"a\x00b"}',
  '{"id":1,"result":"a\x1fb"}',
  '{"id":1,"result":tru}',
  '{"id":1,"result":nul}',
  '{"id":1,"result":True}',
  '{"id":1,"result":[1,]}',
  '{"id":1,"result":[,1]}',
  '{"id":1,"result":{"a"}}',
  '{"id":1,"result":{"a":}}',
  '{"id":1,"result":{a:1}}',
  '{"id":1,"result":{\'a\':1}}',
  '{"id":1,"result":[1}',
  '{"id":1,"result":{]}',
  '{"id":1 "result":2}',
  '{"id":1,,"result":2}',
  '{"result":{"id":1}}',
  '{"result":[{"id":1}]}',
  '{"jsonrpc":"2.0","result":1}',
  '{"id":true}',
  '{"id":{}}',
  '{"id":[1]}',
  '{"id":nul}',
  '{"id":"\\"}',
  '{"id":"abc}',
  '{"ID":1}',
  '{"id ":1}',
  '{"i\\d":1}',
  '{"id":1,"result":"\x80"}',
  '{"id":1,"result":1}\x80',
  '{"id":1,\x80"result":1}',
  '{"id":\x801}',
  '\x80{"id":1}',
  '{"id":1,"result":\x0b1}',
  '{"id":1,"result":\x0c1}',
  '{"id":1,"result":\u00a01}',
  // The old id is taken unchecked, as rewriteId takes it; the client's bytes may make the answer valid.
  '{"id":1-2,"result":0}',
  '{"id":-,"result":0}',
  '{"id":01}',
  '{"id":1e+-5}',
  '{"id":"\x01\\q"}',
  '{"id":"x"5}',
  '{"id":null.5}',
  '{"id":"a"e5}',
  '{"id":null0}',
  '{"id":nullx}',
  '{"id":"a""b"}',
  '{"id":1"x"}',
  '{"id":1,"id":true}',
  '{"id":true,"id":1}',
  '{"id":1,"result":[' + '['.repeat(300) + ']}',
];

const TRUNCATED = [
  '{"jsonrpc":"2.0","id":7,"result":"0x0000000000000000000000000000000000000000000000000de0b6b3a7640000"}',
  '{"jsonrpc":"2.0","result":{"a":[1,-2.5e+3,true,false,null,"s\\"\\u00e9"],"b":{}},"id":"x\\\\y"}',
  '{"jsonrpc":"2.0","error":{"code":-32000,"message":"header not found"},"id":null}',
  ' { "id" : -12.5E-3 , "result" : [ ] } ',
  '{"\\u0069d":1,"result":"é😀"}',
  '{"id":123,"result":0}',
  '{"result":0,"id":123}',
  '{"result":1e5,"id":"abc"}',
];

const MUTATED = [
  '{"jsonrpc":"2.0","id":7,"result":"0x0de0b6b3a7640000"}',
  '{"jsonrpc":"2.0","result":{"a":[1,-2.5e+3,true,false,null,"s\\"\\u00e9"],"b":{}},"id":"x\\\\y"}',
  '{"jsonrpc":"2.0","error":{"code":-32000,"message":"m"},"id":null}',
  ' {"id" : 10 , "result": [ 0.5 ] } ',
];
const REPLACEMENTS = [...'"{}[],:0a\\ \x00\x80-.eEn5u/\t+'].map((ch) => ch.charCodeAt(0));

t.test('valid answers give the reference bytes', async (t) => {
  checkGroup(
    t,
    'valid',
    VALID.map((s) => Buffer.from(s)),
  );
  for (const s of VALID) t.not(reference(Buffer.from(s), '1'), null, `the reference takes ${s.slice(0, 60)}`);
});

t.test('invalid answers and odd ids are refused as the reference refuses them', async (t) => {
  checkGroup(
    t,
    'invalid',
    INVALID.map((s) => Buffer.from(s, 'latin1')),
  );
  checkGroup(
    t,
    'invalid, utf8 spelled',
    INVALID.map((s) => Buffer.from(s)),
  );
  checkGroup(
    t,
    'odd client ids',
    [...SMALL_VALID, ...INVALID].map((s) => Buffer.from(s)),
    ODD_CLIENT_IDS,
  );
});

t.test('what the reference does with an old id it never checks', async (t) => {
  const at = (body: string, id: string): string | null => rewriteWholeAnswer(Buffer.from(body, 'latin1'), id)?.toString('latin1') ?? null;
  t.equal(at('{"id":1-2,"result":0}', '"c"'), '{"id":"c","result":0}', 'a malformed number id is replaced whole');
  t.equal(at('{"id":"\x01\\q"}', '5'), '{"id":5}', 'a string id with a control character and a bad escape');
  t.equal(at('{"id":"x"5}', '1'), '{"id":15}', 'a number client id runs on into the bytes after the old id');
  t.equal(at('{"id":"x"5}', '"c"'), null, 'a string one cannot');
  t.equal(at('{"id":1,"id":true}', '2'), '{"id":2,"id":true}', 'only the first top-level id is replaced; the rest is checked');
  t.equal(at('{"id":true,"id":1}', '2'), null, 'a first id that is not a number, string or null refuses the answer');
  t.equal(at('{"result":{"id":1}}', '2'), null, 'a nested id is not the id');
  t.equal(at('\ufeff{"id":1}', '2'), null, 'a byte order mark');
});

t.test('every truncation of an answer', async (t) => {
  for (const s of TRUNCATED) {
    const body = Buffer.from(s);
    const prefixes = Array.from({ length: body.length + 1 }, (_, k) => body.subarray(0, k));
    checkGroup(t, `prefixes of ${s.slice(0, 50)}`, prefixes);
  }
});

t.test('every single-byte corruption, deletion and insertion', async (t) => {
  for (const s of MUTATED) {
    const body = Buffer.from(s);
    const mutants: Buffer[] = [];
    for (let k = 0; k < body.length; k++) {
      mutants.push(Buffer.concat([body.subarray(0, k), body.subarray(k + 1)]));
      for (const c of REPLACEMENTS) {
        const replaced = Buffer.from(body);
        replaced[k] = c;
        mutants.push(replaced);
        mutants.push(Buffer.concat([body.subarray(0, k), Buffer.of(c), body.subarray(k)]));
      }
    }
    checkGroup(t, `mutants of ${s.slice(0, 50)}`, mutants);
  }
});

t.test('random mutations, seeded', async (t) => {
  const rng = seeded(20240611);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rng() * xs.length)]!;
  const sources = [...SMALL_VALID, ...TRUNCATED, ...MUTATED, ...INVALID].map((s) => Buffer.from(s));
  const mutants: Buffer[] = [];
  for (let n = 0; n < 6000; n++) {
    let body = pick(sources);
    const edits = 1 + Math.floor(rng() * 3);
    for (let e = 0; e < edits; e++) {
      const at = Math.floor(rng() * (body.length + 1));
      const byte = rng() < 0.7 ? pick(REPLACEMENTS) : Math.floor(rng() * 256);
      const kind = rng();
      if (kind < 0.4 && at < body.length) {
        body = Buffer.from(body);
        body[at] = byte;
      } else if (kind < 0.7) {
        body = Buffer.concat([body.subarray(0, at), Buffer.of(byte), body.subarray(at)]);
      } else {
        body = Buffer.concat([body.subarray(0, at), body.subarray(at + 1)]);
      }
    }
    mutants.push(body);
  }
  checkGroup(t, 'random mutants', mutants, ['1', '"abc"', 'null', '12345678901234567890123', '"a\\"b"']);
});

t.test("an id already the client's is the body itself", async (t) => {
  const body = Buffer.from('{"jsonrpc":"2.0","id":"abc","result":"0x1"}');
  t.equal(rewriteWholeAnswer(body, '"abc"'), body, 'no copy');
  t.equal(hex(rewriteWholeAnswer(body, '"abd"')), hex(reference(body, '"abd"')), 'one byte off is a copy with the bytes');
  t.not(rewriteWholeAnswer(body, '"abd"'), body);
  const broken = Buffer.from('{"jsonrpc":"2.0","id":"abc","result":0x1}');
  t.equal(rewriteWholeAnswer(broken, '"abc"'), null, 'the same id does not skip the check');
});

t.test('a follower re-ids an accepted answer as rewriteId does', async (t) => {
  let mismatches = 0;
  let cases = 0;
  const first: string[] = [];
  const bodies = [...VALID, ...INVALID, ...TRUNCATED].map((s) => Buffer.from(s));
  for (const body of bodies) {
    for (const leader of CLIENT_IDS) {
      const accepted = rewriteWholeAnswer(body, leader);
      if (accepted === null) continue;
      for (const follower of [...CLIENT_IDS, ...ODD_CLIENT_IDS]) {
        cases++;
        const got = hex(reidAcceptedAnswer(accepted, follower));
        const want = hex(rewriteId(accepted, follower));
        if (got !== want && ++mismatches <= 5) first.push(`${accepted.toString().slice(0, 80)} → ${follower}`);
        if (CLIENT_IDS.includes(follower) && hex(rewriteWholeAnswer(accepted, follower)) !== want && ++mismatches <= 5) {
          first.push(`rewriteWholeAnswer ${accepted.toString().slice(0, 80)} → ${follower}`);
        }
      }
    }
  }
  if (first.length > 0) t.comment(first.join('\n'));
  t.ok(cases > 500, `${cases} cases`);
  t.equal(mismatches, 0);
});

t.test('given the id sent: WRONG_ID for another call’s answer, the same bytes for its own', async (t) => {
  const cases: Array<[string, string, 'ok' | 'wrong' | 'invalid']> = [
    ['{"jsonrpc":"2.0","id":7,"result":"0x1"}', '7', 'ok'],
    ['{"jsonrpc":"2.0","result":{"id":9,"l":[{"id":1}]},"id":7}', '7', 'ok'],
    ['{"jsonrpc":"2.0","id":8,"result":"0x1"}', '7', 'wrong'],
    ['{"jsonrpc":"2.0","id":77,"result":"0x1"}', '7', 'wrong'],
    ['{"jsonrpc":"2.0","id":"7","result":"0x1"}', '7', 'wrong'],
    ['{"jsonrpc":"2.0","id":7,"result":"0x1","id":7}', '7', 'wrong'],
    ['{"jsonrpc":"2.0","id":7,"\\u0069\\u0064":1,"result":"0x1"}', '7', 'wrong'],
    ['{"jsonrpc":"2.0","result":"0x1"}', '7', 'wrong'],
    ['{"jsonrpc":"2.0","id":7,"result":"0x1","id":7', '7', 'invalid'],
    ['{"jsonrpc":"2.0","result":"0x1",}', '7', 'invalid'],
  ];
  for (const [body, sent, want] of cases) {
    for (const client of ['"c"', '12', '[1]']) {
      const got = rewriteWholeAnswer(Buffer.from(body), client, sent);
      const kind = got === WRONG_ID ? 'wrong' : got === null ? 'invalid' : 'ok';
      t.equal(kind, want, `${body} for client ${JSON.stringify(client)}`);
      if (kind === 'ok') t.equal(String(got), String(rewriteWholeAnswer(Buffer.from(body), client)), 'the same bytes as without the check');
    }
  }
});
