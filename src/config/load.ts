import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { isObject } from './checks.js';
import { type Config, readPlans, validateConfig } from './schema.js';
import { readStorageSection } from './storage.js';
import { errorText } from '../log.js';

export type LoadResult = { ok: true; config: Config } | { ok: false; errors: string[] };

/** What the operator commands on the store (owner, endpoint, backup) read of a config: the store, and the plans' names. */
/**
 * What the operator commands read of a config: its storage and plans, and its chains by slug (`endpoint
 * create` checks a chain is configured; what each chain holds is not read, nor checked).
 */
export type StoreConfig = Pick<Config, 'storage' | 'plans'> & { readonly chains: Readonly<Record<string, unknown>> };
export type StoreLoadResult = { ok: true; config: StoreConfig } | { ok: false; errors: string[] };

/**
 * Replaces `${NAME}` in every string scalar with the environment variable NAME. It runs on parsed
 * values, not on the YAML text, so a secret can never change the document's structure. `$${` escapes.
 */
function interpolate(v: unknown, path: string, env: NodeJS.ProcessEnv, errors: string[]): unknown {
  if (typeof v === 'string') {
    return v.replace(/\$(\$?)\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (whole, escaped: string, name: string) => {
      if (escaped) return whole.slice(1);
      const value = env[name];
      if (value === undefined) {
        errors.push(`${path}: environment variable ${name} is not set`);
        return '';
      }
      return value;
    });
  }
  if (Array.isArray(v)) return v.map((x, i) => interpolate(x, `${path}[${i}]`, env, errors));
  if (typeof v === 'object' && v !== null) {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) out[k] = interpolate(x, path ? `${path}.${k}` : k, env, errors);
    return out;
  }
  return v;
}

function deepFreeze<T>(v: T): T {
  if (typeof v === 'object' && v !== null) {
    for (const x of Object.values(v)) deepFreeze(x);
    Object.freeze(v);
  }
  return v;
}

/**
 * A YAML syntax error in one line, complete: the file (when there is one), the line and column, and what
 * is wrong. The parser's own message ends its first line with "at line L, column C:" before a snippet of
 * the text; the snippet is left out, as the line may hold a secret (an upstream's token).
 */
export function yamlErrorText(err: unknown, file?: string): string {
  const e = err as { message?: string; linePos?: Array<{ line: number; col: number }> };
  const what = (e.message ?? errorText(err))
    .split('\n')[0]!
    .replace(/ at line \d+, column \d+:?$/, '')
    .replace(/:$/, '');
  const at = e.linePos?.[0];
  const where = [file, at === undefined ? undefined : `line ${at.line}, column ${at.col}`].filter((w) => w !== undefined).join(', ');
  return where === '' ? `YAML: ${what}` : `YAML: ${where}: ${what}`;
}

function parseYamlText(text: string, file?: string): { ok: true; raw: unknown } | { ok: false; errors: string[] } {
  try {
    return { ok: true, raw: parseYaml(text, { uniqueKeys: true }) };
  } catch (err) {
    return { ok: false, errors: [yamlErrorText(err, file)] };
  }
}

/**
 * Parses, interpolates and validates YAML text; the config comes back deep-frozen. Given `baseDir` (the
 * config file's folder), a relative `storage.path`, the default included, is resolved against it; given
 * `file` (its path), a YAML syntax error names it.
 */
export function loadConfigText(text: string, env: NodeJS.ProcessEnv = process.env, baseDir?: string, file?: string): LoadResult {
  const parsed = parseYamlText(text, file);
  if (!parsed.ok) return parsed;
  const errors: string[] = [];
  const interpolated = interpolate(parsed.raw, '', env, errors);
  const result = validateConfig(interpolated);
  if (!result.ok) return { ok: false, errors: [...errors, ...result.errors] };
  if (errors.length > 0) return { ok: false, errors };
  if (baseDir !== undefined) result.config.storage.path = resolve(baseDir, result.config.storage.path);
  return { ok: true, config: deepFreeze(result.config) };
}

function readConfigFile(path: string): { ok: true; text: string } | { ok: false; errors: string[] } {
  try {
    return { ok: true, text: readFileSync(path, 'utf8') };
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    // The packaged config is the service's (root:chaingate, 0640): the usual cause is the wrong user.
    const hint = code === 'EACCES' ? "; run operator commands as the service's user (sudo -u chaingate chaingate ...)" : '';
    return { ok: false, errors: [`${path}: cannot read the config file (${code ?? errorText(err)})${hint}`] };
  }
}

/** The config file at `path`, whole (serve, check-config, status); a relative storage.path is read from its folder. */
export function loadConfigFile(path: string, env: NodeJS.ProcessEnv = process.env): LoadResult {
  const file = readConfigFile(path);
  return file.ok ? loadConfigText(file.text, env, dirname(resolve(path)), path) : file;
}

/**
 * The `storage` and `plans` sections of the config file at `path`, and its chains' slugs, all an operator
 * command on the store needs: `${NAME}` references are replaced in those two sections only, so a secret only the daemon uses
 * (an upstream's token) need not be set for `owner list`, and the other sections are not checked (that
 * is check-config's and serve's work). A relative storage.path is read from the file's folder.
 */
export function loadStoreConfigFile(path: string, env: NodeJS.ProcessEnv = process.env): StoreLoadResult {
  const file = readConfigFile(path);
  if (!file.ok) return file;
  const parsed = parseYamlText(file.text, path);
  if (!parsed.ok) return parsed;
  if (!isObject(parsed.raw)) return { ok: false, errors: ['(top level): must be a mapping'] };
  const errors: string[] = [];
  const storage = readStorageSection(interpolate(parsed.raw.storage, 'storage', env, errors), errors);
  const plans = readPlans(interpolate(parsed.raw.plans, 'plans', env, errors), errors);
  if (errors.length > 0) return { ok: false, errors };
  storage.path = resolve(dirname(resolve(path)), storage.path);
  const chains = Object.fromEntries(Object.keys(isObject(parsed.raw.chains) ? parsed.raw.chains : {}).map((slug) => [slug, {}]));
  return { ok: true, config: deepFreeze({ storage, plans, chains }) };
}
