import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { type Config, validateConfig } from './schema.js';
import { errorText } from '../log.js';

export type LoadResult = { ok: true; config: Config } | { ok: false; errors: string[] };

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

/** Parses, interpolates and validates YAML text; the config comes back deep-frozen. */
export function loadConfigText(text: string, env: NodeJS.ProcessEnv = process.env): LoadResult {
  let raw: unknown;
  try {
    raw = parseYaml(text, { uniqueKeys: true });
  } catch (err) {
    return { ok: false, errors: [`YAML: ${errorText(err).split('\n')[0]}`] };
  }
  const errors: string[] = [];
  const interpolated = interpolate(raw, '', env, errors);
  const result = validateConfig(interpolated);
  if (!result.ok) return { ok: false, errors: [...errors, ...result.errors] };
  if (errors.length > 0) return { ok: false, errors };
  return { ok: true, config: deepFreeze(result.config) };
}

export function loadConfigFile(path: string, env: NodeJS.ProcessEnv = process.env): LoadResult {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    return {
      ok: false,
      errors: [`${path}: cannot read the config file (${(err as NodeJS.ErrnoException).code ?? errorText(err)})`],
    };
  }
  return loadConfigText(text, env);
}
