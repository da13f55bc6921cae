import t from 'tap';
import { escapeCell, formatTable } from '../../src/cli/table.js';

t.test('escapeCell writes every unprintable character as an escape, and a backslash as two', async (t) => {
  t.equal(escapeCell('plain name, café 🦊'), 'plain name, café 🦊');
  t.equal(escapeCell('a\nb\rc\td'), 'a\\nb\\rc\\td');
  t.equal(escapeCell('\u001b[31mred\u001b[0m'), '\\x1b[31mred\\x1b[0m');
  t.equal(escapeCell('nul\u0000 del\u007f c1\u009b'), 'nul\\x00 del\\x7f c1\\x9b');
  t.equal(escapeCell('line\u2028 bidi\u202e lone\ud800 bom\ufeff'), 'line\\u2028 bidi\\u202e lone\\ud800 bom\\ufeff');
  t.equal(escapeCell('tag\u{e0041}'), 'tag\\u{e0041}');
  t.equal(escapeCell('C:\\n is typed, not a newline'), 'C:\\\\n is typed, not a newline');
  t.equal(escapeCell('👨‍👩‍👧'), '👨‍👩‍👧', 'ZWJ, which a valid name may hold, prints as itself');
});

t.test('one row of data is one line, whatever its cells hold', async (t) => {
  const table = formatTable(
    ['ID', 'NAME', 'CREATED'],
    [
      ['1', 'acme\n2  forged  2024-01-01', 'today'],
      ['3', '\u001b]0;owned\u0007\u001b[2J', 'today'],
    ],
  );
  t.equal(
    table,
    [
      'ID  NAME                         CREATED',
      '1   acme\\n2  forged  2024-01-01  today',
      '3   \\x1b]0;owned\\x07\\x1b[2J      today',
      '',
    ].join('\n'),
  );
  // biome-ignore lint/suspicious/noControlCharactersInRegex: the test looks for control bytes in the output
  t.notMatch(table, /[\u0000-\u0008\u000b-\u001f\u007f]/, 'no control byte but the row ends');
});
