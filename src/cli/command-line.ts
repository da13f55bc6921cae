// Reads a command line against the command table (commands.ts): which command it names, and its options
// and arguments checked against that command's row. What is wrong comes back as a result naming the
// command, whose help the error points at (exit 2); nothing here prints or exits.
import { errorText } from '../log.js';
import { type ParsedArgs, parseArgs } from './args.js';
import { COMMANDS, type CommandSpec, commandNamed } from './commands.js';
import { commandHelp, commandsUnder, groupHelp, overviewHelp } from './help.js';

export type CommandLine =
  /** Run `spec` with `args`; `positionals` are the arguments after the command's words. */
  | { kind: 'run'; spec: CommandSpec; args: ParsedArgs; positionals: string[] }
  /** Print `text` (a help) and exit 0. */
  | { kind: 'help'; text: string }
  /** A wrong command line: `message` in one line, and the help to point at (`words`; null: the overview). */
  | { kind: 'usage'; message: string; words: string | null };

/** Every option any command takes a value for, so a value (`--name owner`) is never read as a word. */
const VALUED: ReadonlySet<string> = new Set(COMMANDS.flatMap((c) => c.options.filter((o) => o.value !== undefined).map((o) => o.name)));

/**
 * The words of the command line that are not options or their values, with `-h` read as `--help`: the
 * command's words come first among them.
 */
function wordsOf(argv: readonly string[]): { words: string[]; argv: string[] } {
  const words: string[] = [];
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '-h') {
      out.push('--help');
    } else if (a.startsWith('--')) {
      out.push(a);
      if (!a.includes('=') && VALUED.has(a.slice(2)) && i + 1 < argv.length) out.push(argv[++i]!);
    } else {
      words.push(a);
      out.push(a);
    }
  }
  return { words, argv: out };
}

/** The command named by the longest run of leading `words` that is one. */
function longestCommand(words: readonly string[]): CommandSpec | undefined {
  for (let n = Math.min(3, words.length); n > 0; n--) {
    const spec = commandNamed(words.slice(0, n).join(' '));
    if (spec !== undefined) return spec;
  }
  return undefined;
}

/** The help `chaingate help WORDS...` asks for, or what is wrong with WORDS. */
function helpFor(topic: readonly string[]): CommandLine {
  if (topic.length === 0) return { kind: 'help', text: overviewHelp() };
  const spec = commandNamed(topic.join(' '));
  if (spec !== undefined) return { kind: 'help', text: commandHelp(spec) };
  if (commandsUnder(topic.join(' ')).length > 0) return { kind: 'help', text: groupHelp(topic.join(' ')) };
  return { kind: 'usage', message: `no command '${topic.join(' ')}'`, words: null };
}

/** A prefix of known commands (`owner`, `owner key`) without the rest: what is missing, or its help. */
function unfinished(words: readonly string[], help: boolean): CommandLine {
  for (let n = Math.min(2, words.length); n > 0; n--) {
    const prefix = words.slice(0, n).join(' ');
    const under = commandsUnder(prefix);
    if (under.length === 0) continue;
    if (help) return { kind: 'help', text: groupHelp(prefix) };
    const next = [...new Set(under.map((c) => c.words.split(' ')[n]!))].join(', ');
    const message =
      words.length > n ? `unknown command '${words.slice(0, n + 1).join(' ')}' (${prefix}: ${next})` : `${prefix} needs a command: ${next}`;
    return { kind: 'usage', message, words: prefix };
  }
  return { kind: 'usage', message: `unknown command '${words[0]}'`, words: null };
}

export interface ReadOptions {
  /** Options the caller supplies itself (a test's config): not required on the command line. */
  given?: readonly string[];
}

/**
 * Reads `argv` (what follows `chaingate`). `--help`/`-h` anywhere asks for the help of the command named
 * (the overview when none is); `--version` is the command `version`.
 */
export function readCommandLine(argv: readonly string[], opts: ReadOptions = {}): CommandLine {
  const { words, argv: normal } = wordsOf(argv);
  const help = normal.includes('--help');
  if (words.length === 0) {
    if (normal.length === 1 && normal[0] === '--version') return run(commandNamed('version')!, [], [], opts);
    if (help || normal.length === 0) return { kind: 'help', text: overviewHelp() };
    return { kind: 'usage', message: `missing command (got only ${normal[0]})`, words: null };
  }
  if (words[0] === 'help') return help && words.length === 1 ? helpFor(['help']) : helpFor(words.slice(1));
  const spec = longestCommand(words);
  if (spec === undefined) return unfinished(words, help);
  if (help) return { kind: 'help', text: commandHelp(spec) };
  return run(spec, normal, words.slice(spec.words.split(' ').length), opts);
}

/** The options of `spec` read from `argv` and checked: known, valued as declared, the required ones given. */
function run(spec: CommandSpec, argv: readonly string[], positionals: string[], opts: ReadOptions): CommandLine {
  const valued = spec.options.filter((o) => o.value !== undefined).map((o) => o.name);
  const flags = spec.options.filter((o) => o.value === undefined).map((o) => o.name);
  const lists = spec.options.filter((o) => o.list === true).map((o) => o.name);
  let args: ParsedArgs;
  try {
    // Another command's option is refused by name: `owner list takes no --ru`.
    const known = new Set([...valued, ...flags]);
    for (const a of argv) {
      const name = a.startsWith('--') ? a.slice(2).split('=')[0]! : undefined;
      if (name !== undefined && !known.has(name) && (VALUED.has(name) || COMMANDS.some((c) => c.options.some((o) => o.name === name))))
        return { kind: 'usage', message: `${spec.words} takes no --${name}`, words: spec.words };
    }
    args = parseArgs(argv, valued, flags, lists);
  } catch (e) {
    return { kind: 'usage', message: errorText(e), words: spec.words };
  }
  const extra = positionals.slice(spec.args.length);
  if (extra.length > 0) return { kind: 'usage', message: `${spec.words}: unexpected argument '${extra[0]}'`, words: spec.words };
  // An argument left out is named by the command itself (`missing owner ID`), which knows what it is.
  for (const o of spec.options) {
    if (o.required === true && !args.options.has(o.name) && !(opts.given ?? []).includes(o.name))
      return { kind: 'usage', message: `missing --${o.name} ${o.value}`, words: spec.words };
  }
  return { kind: 'run', spec, args, positionals };
}
