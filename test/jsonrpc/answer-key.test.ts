/** The key two nodes' answers are compared by (consistency.quorum): canonical JSON of the result, an error's code and message. */
import t from 'tap';
import { answerKey, canonicalJson } from '../../src/jsonrpc/answer-key.js';

const key = (answer: object): string | null => answerKey(Buffer.from(JSON.stringify(answer)));

t.test('canonical JSON sorts keys at every depth and keeps array order', async (t) => {
  t.equal(canonicalJson({ b: 1, a: [{ d: 'x', c: null }, 2] }), '{"a":[{"c":null,"d":"x"},2],"b":1}');
  t.equal(canonicalJson('0x1'), '"0x1"');
  t.equal(canonicalJson(null), 'null');
  t.not(canonicalJson([1, 2]), canonicalJson([2, 1]), 'order matters in arrays');
});

t.test('the envelope is left out; results and errors never meet', async (t) => {
  t.equal(key({ jsonrpc: '2.0', id: 1, result: { a: 1, b: 2 } }), key({ result: { b: 2, a: 1 }, id: 'x', jsonrpc: '2.0' }));
  t.not(key({ id: 1, result: '0x1' }), key({ id: 1, result: '0x2' }));
  t.equal(
    key({ id: 1, error: { code: 3, message: 'execution reverted', data: '0x01' } }),
    key({ id: 2, error: { message: 'execution reverted', code: 3, data: '0x02' } }),
    "an error's data is not compared",
  );
  t.not(key({ id: 1, error: { code: 3, message: 'a' } }), key({ id: 1, error: { code: 3, message: 'b' } }));
  t.not(key({ id: 1, error: { code: -32000, message: 'x' } }), key({ id: 1, result: [-32000, 'x'] }));
  t.equal(key({ id: 1, result: null }), 'rnull', 'a null result is an answer');
  t.equal(answerKey(Buffer.from('{"id":1}')), null, 'neither result nor error');
  t.equal(answerKey(Buffer.from('not json')), null);
  t.equal(answerKey(Buffer.from('[1]')), null);
});
