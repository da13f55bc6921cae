// The help texts, all made from the command table (commands.ts): the overview (`chaingate --help`), a
// command's usage (`chaingate COMMAND --help`, `chaingate help COMMAND`) and a group's (`chaingate owner
// --help`), and the pointer an argument error ends with.
import { COMMANDS, type CommandSpec, GROUP_TITLES, type OptionSpec } from './commands.js';

/** Options shown in the overview's short form: --config and --env-file are said once below it. */
const COMMON = new Set(['config', 'env-file']);

function optionText(o: OptionSpec): string {
  const shape = o.value === undefined ? `--${o.name}` : `--${o.name} ${o.value}`;
  return o.required === true ? shape : `[${shape}]`;
}

/** `chaingate owner create --name NAME --plan PLAN --ru N [--json]`; `short` leaves out --config and --env-file. */
export function synopsis(c: CommandSpec, short = false): string {
  const options = c.options.filter((o) => !(short && COMMON.has(o.name)));
  // endpoint set's settings are many: its synopsis says SETTING... and its help lists them.
  const settings = c.words === 'endpoint set';
  const shown = settings ? options.filter((o) => o.name === 'json' || COMMON.has(o.name)) : options;
  return ['chaingate', c.words, ...c.args, ...(settings ? ['SETTING...'] : []), ...shown.map(optionText)].join(' ');
}

/** The width help text is wrapped to, in columns. */
const WIDTH = 100;

/** `text` in lines of at most `width` columns (a longer word stays whole), split at spaces. */
export function wrap(text: string, width: number): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(/\s+/).filter((w) => w !== '')) {
    if (line !== '' && line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else line = line === '' ? word : `${line} ${word}`;
  }
  if (line !== '') lines.push(line);
  return lines;
}

/**
 * Lines of `left  right`, the right column aligned and wrapped to WIDTH; a left side longer than `max`
 * puts its right on the next line.
 */
function columns(rows: ReadonlyArray<readonly [string, string]>, indent: string, max: number): string[] {
  const width = Math.min(max, Math.max(...rows.map(([l]) => l.length)));
  const pad = `${indent}${' '.repeat(width)}  `;
  const lines: string[] = [];
  for (const [left, right] of rows) {
    const text = wrap(right, Math.max(30, WIDTH - pad.length));
    if (left.length <= width) lines.push(`${indent}${left.padEnd(width)}  ${text.shift() ?? ''}`.trimEnd());
    else lines.push(`${indent}${left}`);
    lines.push(...text.map((l) => `${pad}${l}`));
  }
  return lines;
}

/** `chaingate --help`: every command, one line each, by group. */
export function overviewHelp(): string {
  const out = [
    'chaingate: a gateway in front of Ethereum execution and consensus nodes',
    '',
    'Usage: chaingate COMMAND [ARGUMENTS] [OPTIONS]',
  ];
  for (const [group, title] of Object.entries(GROUP_TITLES)) {
    const rows = COMMANDS.filter((c) => c.group === group).map((c) => [synopsis(c, true).slice('chaingate '.length), c.summary] as const);
    out.push('', ...wrap(title, WIDTH), ...columns(rows, '  ', 36));
  }
  out.push(
    '',
    'Every command but devnet, store copy, version and help takes --config FILE, and --env-file FILE (a',
    `systemd EnvironmentFile whose variables fill the config's \${NAME} references). Operator commands on`,
    "the store read only the config's storage and plans (endpoint create: the chains' names too) and refuse",
    'a database that does not exist: only serve creates one.',
    '',
    "Run 'chaingate help COMMAND' or 'chaingate COMMAND --help' for a command's options and exit status.",
    'Exit status 2 always means a wrong command line.',
    '',
  );
  return out.join('\n');
}

/** `chaingate COMMAND --help`: that command's usage, options and exit status only. */
export function commandHelp(c: CommandSpec): string {
  const about = `${c.summary[0]!.toUpperCase()}${c.summary.slice(1)}.${c.details === undefined ? '' : ` ${c.details}`}`;
  const usage = wrap(synopsis(c), WIDTH - 'Usage: '.length).join('\n       ');
  const out = [`Usage: ${usage}`, '', ...wrap(about, WIDTH)];
  const options = c.options.map((o) => [o.value === undefined ? `--${o.name}` : `--${o.name} ${o.value}`, o.text] as const);
  out.push('', 'Options:', ...columns([...options, ['-h, --help', 'this text']], '  ', 28));
  out.push('', ...wrap(`Exit status: ${c.exit}.`, WIDTH), '');
  return out.join('\n');
}

/** The commands whose words start with `prefix` (`owner`, `owner key`). */
export function commandsUnder(prefix: string): CommandSpec[] {
  return COMMANDS.filter((c) => c.words.startsWith(`${prefix} `));
}

/** `chaingate owner --help`: the commands of a group, one line each. */
export function groupHelp(prefix: string): string {
  const rows = commandsUnder(prefix).map((c) => [synopsis(c, true).slice('chaingate '.length), c.summary] as const);
  return [
    `Commands of chaingate ${prefix}:`,
    ...columns(rows, '  ', 40),
    '',
    ...wrap(
      `${commandsUnder(prefix).every((c) => c.options.some((o) => o.name === 'config')) ? 'Each takes --config FILE. ' : ''}` +
        `Run 'chaingate ${prefix} COMMAND --help' for its options and exit status.`,
      WIDTH,
    ),
    '',
  ].join('\n');
}

/** What an argument error prints: the one-line error, and where the usage is. */
export function usageErrorText(message: string, words: string | null): string {
  const help = words === null ? 'chaingate --help' : `chaingate ${words} --help`;
  return `chaingate: ${message}\nRun '${help}' for usage.\n`;
}
