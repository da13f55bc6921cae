/**
 * The command table (src/cli/commands.ts) read by the command line, the help and the docs: each command's
 * help is its own (whichever way it is asked for), every argument error names what is wrong and points at
 * that help, and the README's Commands table lists every command of the table.
 */
import t from 'tap';
import { readFileSync } from 'node:fs';
import { readCommandLine } from '../../src/cli/command-line.js';
import { COMMANDS, SETTING_OPTIONS } from '../../src/cli/commands.js';
import { FENCE_FIELDS } from '../../src/fences/settings.js';
import { commandHelp, overviewHelp, usageErrorText } from '../../src/cli/help.js';

const helpText = (argv: string[]): string => {
  const line = readCommandLine(argv);
  if (line.kind !== 'help') throw new Error(`${argv.join(' ')}: ${line.kind}`);
  return line.text;
};

t.test('each command prints its own usage, by --help, -h and help COMMAND alike', async (t) => {
  for (const c of COMMANDS) {
    const words = c.words.split(' ');
    const text = helpText([...words, '--help']);
    t.equal(text, commandHelp(c), `${c.words} --help`);
    t.equal(helpText([...words, '-h']), text, `${c.words} -h`);
    t.equal(helpText(['help', ...words]), text, `help ${c.words}`);
    t.equal(helpText([...words, '--config', 'x.yaml', '--no-such-option', '--help']), text, '--help wins over the rest of the line');
    t.match(text, new RegExp(`^Usage: chaingate ${c.words}(?: |\n)`), 'it opens on its usage');
    t.equal(text.split('Usage:').length, 2, 'one usage only: no other command');
    for (const o of c.options) t.match(text, `\n  --${o.name}`, `it lists --${o.name}`);
    t.match(text, `Exit status: ${c.exit.split(' ').slice(0, 3).join(' ')}`, 'and its exit status');
    t.ok(
      text.split('\n').every((l) => l.length <= 100),
      'no line wider than 100 columns',
    );
  }
});

t.test('the overview lists every command; a group prints its commands only', async (t) => {
  const overview = overviewHelp();
  t.equal(helpText([]), overview);
  t.equal(helpText(['--help']), overview);
  t.equal(helpText(['-h']), overview);
  t.equal(helpText(['help']), overview);
  for (const c of COMMANDS) t.match(overview, `\n  ${c.words}`, c.words);
  const owner = helpText(['owner', '--help']);
  t.equal(helpText(['help', 'owner']), owner);
  t.match(owner, /^Commands of chaingate owner:\n/);
  t.match(owner, '  owner key revoke ID PREFIX');
  t.notMatch(owner, '\n  endpoint ');
  t.notMatch(helpText(['owner', 'key', '-h']), 'owner create');
});

t.test('argument errors: one line naming what is wrong, and the help to read', async (t) => {
  const cases: Array<[string[], string, string | null]> = [
    [['frobnicate'], "unknown command 'frobnicate'", null],
    [['owner'], 'owner needs a command: create, list, topup, set-plan, suspend, resume, delete, key', 'owner'],
    [['owner', 'frob'], "unknown command 'owner frob' (owner: create, list, topup, set-plan, suspend, resume, delete, key)", 'owner'],
    [['owner', 'key'], 'owner key needs a command: create, list, revoke', 'owner key'],
    [['help', 'nothing'], "no command 'nothing'", null],
    [['serve'], 'missing --config FILE', 'serve'],
    [['serve', '--config'], '--config needs a value', 'serve'],
    [['serve', '--config', 'x.yaml', 'extra'], "serve: unexpected argument 'extra'", 'serve'],
    [['owner', 'list', '--ru', '5', '--config', 'x'], 'owner list takes no --ru', 'owner list'],
    [['owner', 'list', '--colour', '--config', 'x'], 'unknown option --colour', 'owner list'],
    [['owner', 'create', '--plan', 'free', '--ru', '1', '--config', 'x'], 'missing --name NAME', 'owner create'],
    [['endpoint', 'create', '--name', 'web', '--config', 'x'], 'missing --owner ID', 'endpoint create'],
    [['endpoint', 'delete', 'ep_1', 'ep_2', '--config', 'x'], "endpoint delete: unexpected argument 'ep_2'", 'endpoint delete'],
    [['store', 'copy', '--from', 'a.db'], 'missing --to URL', 'store copy'],
    [['version', '--json'], 'version takes no --json', 'version'],
    [['devnet', '--config', 'x'], 'devnet takes no --config', 'devnet'],
    [['--bogus'], 'missing command (got only --bogus)', null],
  ];
  for (const [argv, message, words] of cases) {
    t.same(readCommandLine(argv), { kind: 'usage', message, words }, argv.join(' '));
  }
  t.equal(
    usageErrorText('owner list takes no --ru', 'owner list'),
    "chaingate: owner list takes no --ru\nRun 'chaingate owner list --help' for usage.\n",
  );
  t.equal(usageErrorText("unknown command 'x'", null), "chaingate: unknown command 'x'\nRun 'chaingate --help' for usage.\n");
});

t.test('a command line read: its words, its arguments, its options; --version is version', async (t) => {
  const line = readCommandLine(['--config', 'c.yaml', 'owner', 'key', 'revoke', '3', 'abcdefgh']);
  t.equal(line.kind, 'run');
  if (line.kind !== 'run') return;
  t.equal(line.spec.words, 'owner key revoke');
  t.same(line.positionals, ['3', 'abcdefgh']);
  t.equal(line.args.options.get('config'), 'c.yaml');
  const version = readCommandLine(['--version']);
  t.equal(version.kind === 'run' && version.spec.words, 'version');
  // A value that looks like a word is the option's: `--name owner` names the owner 'owner'.
  const named = readCommandLine(['owner', 'create', '--name', 'list', '--plan', 'free', '--ru', '0', '--config', 'x']);
  t.equal(named.kind === 'run' && named.spec.words, 'owner create');
  t.same(readCommandLine(['endpoint', 'list'], { given: ['config'] }).kind, 'run', 'a config given by the caller need not be on the line');
});

t.test('every listing takes --json; endpoint set takes a flag per setting', async (t) => {
  for (const c of COMMANDS.filter((c) => c.words.endsWith(' list') || c.words === 'status')) {
    t.ok(
      c.options.some((o) => o.name === 'json'),
      `${c.words} --json`,
    );
  }
  t.same(SETTING_OPTIONS.map((o) => o.field).sort(), [...FENCE_FIELDS].sort(), 'a flag for each field of the restrictions, and no other');
});

t.test("the README's Commands table lists every command of the table, and no other", async (t) => {
  const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
  const start = readme.indexOf('\n## Commands\n');
  t.ok(start >= 0, 'a Commands section');
  const section = readme.slice(start, readme.indexOf('\n## ', start + 1));
  // The first cell of each row: one command, or several joined by ` / ` (`owner suspend ID` / `owner resume ID`).
  const shown = section
    .split('\n')
    .filter((l) => l.startsWith('| `'))
    .flatMap((l) => [...l.split(' | ')[0]!.matchAll(/`(?:chaingate )?([^`]+)`/g)].map((m) => m[1]!));
  const named = (words: string): boolean => shown.some((s) => s === words || s.startsWith(`${words} `));
  for (const c of COMMANDS) t.ok(named(c.words), `chaingate ${c.words} is listed`);
  for (const s of shown) {
    t.ok(
      COMMANDS.some((c) => s === c.words || s.startsWith(`${c.words} `)),
      `${s}: a command of the table`,
    );
  }
});
