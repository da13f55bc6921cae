import { readCommandLine } from '../../src/cli/command-line.js';
import { usageErrorText } from '../../src/cli/help.js';
import { isStoreCommand, runStoreCommand } from '../../src/cli/tenancy.js';
import type { StoreConfig } from '../../src/config/load.js';

/** What one operator command printed, and its exit status. */
export interface CliRun {
  code: number;
  out: string;
  err: string;
}

/**
 * Runs one operator command (`owner list`, ...: `argv` as typed after `chaingate`) in this process against
 * `config`'s store, as main.ts does but without exiting, capturing its output. The config is the caller's,
 * so `--config` may be left out.
 */
export async function runTenancy(config: StoreConfig, ...argv: string[]): Promise<CliRun> {
  let out = '';
  let err = '';
  const line = readCommandLine(argv, { given: ['config'] });
  if (line.kind === 'help') return { code: 0, out: line.text, err };
  if (line.kind === 'usage') return { code: 2, out, err: usageErrorText(line.message, line.words) };
  if (!isStoreCommand(line.spec)) return { code: 2, out, err: usageErrorText(`${line.spec.words} is not a command on the store`, null) };
  const code = await runStoreCommand(
    line,
    config,
    (s) => (out += s),
    (s) => (err += s),
  );
  return { code, out, err };
}
