import t from 'tap';
import { assertValidName, MAX_NAME_LENGTH, nameProblem } from '../../src/tenancy/names.js';

const UNPRINTABLE = 'must not contain control, format or line-separator characters';

t.test('a name is 1 to 100 printable code points', async (t) => {
  t.equal(MAX_NAME_LENGTH, 100);
  for (const name of [
    'acme',
    'Beta Corp',
    'café',
    '東京ノード',
    'a/b\\c "quoted"',
    'x'.repeat(100),
    '🦊'.repeat(100), // 200 UTF-16 units: the limit counts code points
    '👨‍👩‍👧 family', // ZWJ joins emoji and moves nothing
    'می‌خواهم', // ZWNJ inside a Persian word
  ])
    t.equal(nameProblem(name), null, JSON.stringify(name));
  t.equal(nameProblem(''), 'must be 1 to 100 characters, got 0');
  t.equal(nameProblem('x'.repeat(101)), 'must be 1 to 100 characters, got 101');
  t.equal(nameProblem('🦊'.repeat(101)), 'must be 1 to 100 characters, got 101');
});

t.test('controls, format characters, separators and lone surrogates are refused by code point', async (t) => {
  const cases: Array<[string, string]> = [
    ['row\nforged', 'U+000A'],
    ['a\rb', 'U+000D'],
    ['tab\there', 'U+0009'],
    ['\u001b[31mred', 'U+001B'],
    ['nul\u0000', 'U+0000'],
    ['del\u007f', 'U+007F'],
    ['c1\u009b31m', 'U+009B'],
    ['line\u2028sep', 'U+2028'],
    ['para\u2029sep', 'U+2029'],
    ['evil\u202etxt.exe', 'U+202E'],
    ['zero\u200bwidth', 'U+200B'],
    ['\ufeffbom', 'U+FEFF'],
    ['soft\u00adhyphen', 'U+00AD'],
    ['lone \ud800 high', 'U+D800'],
    ['lone \udfff low', 'U+DFFF'],
    ['tag\u{e0041}', 'U+E0041'],
  ];
  for (const [name, cp] of cases) t.equal(nameProblem(name), `${UNPRINTABLE} (found ${cp})`, cp);
  t.equal(nameProblem('ok \ud83e\udd8a pair'), null, 'a surrogate pair is one code point, not two lone ones');
});

t.test('assertValidName throws a RangeError naming what was checked', async (t) => {
  t.throws(() => assertValidName('a\nb', 'owner name'), new RangeError(`owner name ${UNPRINTABLE} (found U+000A)`));
  t.doesNotThrow(() => assertValidName('acme', 'owner name'));
});
