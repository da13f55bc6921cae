import t from 'tap';
import { parseEnvFile, withEnvFile } from '../../src/config/env-file.js';

const parsed = (text: string) => parseEnvFile(text, 'env');

t.test('KEY=VALUE lines as systemd reads an EnvironmentFile', async (t) => {
  const r = parsed(
    [
      '# a comment',
      '; another',
      '',
      '   ',
      'PLAIN=value',
      '  SPACED  =   around it   ',
      'EMPTY=',
      "SINGLE='  kept as $written \\n '",
      'DOUBLE="say \\"hi\\" \\\\ \\$HOME \\` \\n"',
      'ESCAPED=a\\ b\\#c',
      'HASH=not#a comment',
      'JOINED=first \\',
      'second',
      'MULTI="line one',
      'line two"',
      'EQUALS=a=b=c',
      'WINDOWS=crlf\r',
    ].join('\n'),
  );
  t.same(r, {
    ok: true,
    vars: {
      PLAIN: 'value',
      SPACED: 'around it',
      EMPTY: '',
      SINGLE: '  kept as $written \\n ',
      DOUBLE: 'say "hi" \\ $HOME ` \\n',
      ESCAPED: 'a b#c',
      HASH: 'not#a comment',
      JOINED: 'first second',
      MULTI: 'line one\nline two',
      EQUALS: 'a=b=c',
      WINDOWS: 'crlf',
    },
  });
});

t.test('a later line wins; the last line needs no newline', async (t) => {
  t.same(parsed('A=1\nA=2'), { ok: true, vars: { A: '2' } });
});

t.test('every line it cannot read is named, with its number', async (t) => {
  t.same(parsed('GOOD=1\nexport\n1BAD=x\nBAD-NAME=y\n=z\nOPEN="never closed\n'), {
    ok: false,
    errors: [
      'env:2: not KEY=VALUE',
      "env:3: '1BAD' is not a variable name (letters, digits and _, not first a digit)",
      "env:4: 'BAD-NAME' is not a variable name (letters, digits and _, not first a digit)",
      "env:5: '' is not a variable name (letters, digits and _, not first a digit)",
      'env:6: a quote is not closed',
    ],
  });
});

t.test("the file's variables win over the process environment; the others stay", async (t) => {
  t.same(withEnvFile({ NODE_TOKEN: 'from the shell', PATH: '/bin' }, { NODE_TOKEN: 'from the file' }), {
    NODE_TOKEN: 'from the file',
    PATH: '/bin',
  });
});
