/**
 * A tiny argument reader: `--name value`, `--name=value` and boolean `--flag`, plus positionals.
 * Unknown options are refused by name so a typo never passes silently.
 */
export interface ParsedArgs {
  positionals: string[];
  options: Map<string, string | true>;
}

/** `repeatable`: valued options that may be given more than once, their values joined with commas (lists). */
export function parseArgs(
  argv: readonly string[],
  valued: readonly string[],
  flags: readonly string[],
  repeatable: readonly string[] = [],
): ParsedArgs {
  const positionals: string[] = [];
  const options = new Map<string, string | true>();
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (!a.startsWith('--')) {
      positionals.push(a);
      continue;
    }
    const eq = a.indexOf('=');
    const name = eq < 0 ? a.slice(2) : a.slice(2, eq);
    if (flags.includes(name)) {
      if (eq >= 0) throw new Error(`--${name} takes no value`);
      options.set(name, true);
    } else if (valued.includes(name)) {
      const value = eq >= 0 ? a.slice(eq + 1) : argv[++i];
      if (value === undefined || value === '') throw new Error(`--${name} needs a value`);
      const before = options.get(name);
      options.set(name, typeof before === 'string' && repeatable.includes(name) ? `${before},${value}` : value);
    } else {
      throw new Error(`unknown option --${name}`);
    }
  }
  return { positionals, options };
}

/**
 * A non-negative integer option from `min` to `max` (at most Number.MAX_SAFE_INTEGER), written in
 * decimal digits only: `Number()` alone would read `0x10` as 16, `1e3` as 1000 and ` 5` as 5.
 */
export function intOption(args: ParsedArgs, name: string, min: number, max: number): number | undefined {
  const v = args.options.get(name);
  if (v === undefined) return undefined;
  const n = typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : NaN;
  if (!(n >= min && n <= max)) throw new Error(`--${name} must be a decimal integer from ${min} to ${max}`);
  return n;
}

export function stringOption(args: ParsedArgs, name: string): string | undefined {
  const v = args.options.get(name);
  return typeof v === 'string' ? v : undefined;
}
