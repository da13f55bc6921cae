import t from 'tap';
import { rawResult } from '../../src/jsonrpc/raw-result.js';

const raw = (text: string): string | null => rawResult(Buffer.from(text))?.toString() ?? null;

t.test("the result member's bytes, wherever it stands among the members", async (t) => {
  t.equal(raw('{"jsonrpc":"2.0","id":1,"result":[{"a":1},{"b":[2,3]}]}'), '[{"a":1},{"b":[2,3]}]');
  t.equal(raw('{"result":"0x1","jsonrpc":"2.0","id":7}'), '"0x1"', 'first member');
  t.equal(raw('{"jsonrpc":"2.0","result":{"x":"}"},"id":"a,b"}'), '{"x":"}"}', 'braces and commas inside strings');
  t.equal(raw(' {\n "id" : 1 ,\n "result" : null \n}\n'), 'null', 'whitespace around names and values');
  t.equal(raw('{"id":1,"result":"say \\"result\\": no"}'), '"say \\"result\\": no"', 'escaped quotes');
  t.equal(raw('{"id":1,"note":{"result":5},"result":6}'), '6', 'a nested "result" is not the member');
  t.equal(raw('{"id":1,"note":"\\"result\\":5","result":[]}'), '[]', 'nor one inside a string value');
});

t.test('null for an error answer, a missing result, or no object', async (t) => {
  t.equal(raw('{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"x"}}'), null);
  t.equal(raw('{"jsonrpc":"2.0","id":1,"result":1,"error":{"code":1,"message":"both"}}'), null, 'an error anywhere wins');
  t.equal(raw('{"jsonrpc":"2.0","id":1}'), null);
  t.equal(raw('[{"result":1}]'), null, 'a batch is not an answer object');
  t.equal(raw('"result"'), null);
});

t.test('agrees with JSON.parse on answers of every shape', async (t) => {
  const results: unknown[] = [
    0,
    -1.5e3,
    true,
    null,
    'a"b\\c',
    [],
    {},
    [{ blockNumber: '0x1', data: '0x' + 'ab'.repeat(50), topics: ['0x1', '0x2'] }],
    { nested: { deep: [[[{ k: '}]' }]]] } },
  ];
  for (const result of results) {
    for (const body of [
      { jsonrpc: '2.0', id: 3, result },
      { result, id: 'x,y', jsonrpc: '2.0' },
    ]) {
      const text = JSON.stringify(body, null, Math.random() < 0.5 ? 0 : 2);
      t.same(JSON.parse(raw(text)!), result, text.slice(0, 60));
    }
  }
});
