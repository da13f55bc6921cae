import { runTenancyCommand } from '../../src/cli/tenancy.js';
import type { Config } from '../../src/config/schema.js';

/** What one operator command printed, and its exit status. */
export interface CliRun {
  code: number;
  out: string;
  err: string;
}

/** Runs one operator command (`owner list`, ...) in this process against `config`'s store, capturing its output. */
export async function runTenancy(config: Config, ...argv: string[]): Promise<CliRun> {
  let out = '';
  let err = '';
  const code = await runTenancyCommand(
    argv,
    config,
    (s) => (out += s),
    (s) => (err += s),
  );
  return { code, out, err };
}
