import { readFileSync } from 'node:fs';
import { errorText } from '../log.js';

/**
 * Reads a systemd EnvironmentFile (the unit's `/etc/chaingate/env`) for `--env-file FILE`, the way systemd
 * reads one: `KEY=VALUE` lines; blank lines and lines starting with `#` or `;` skipped; whitespace around
 * the key and the value dropped; a value in 'single quotes' taken as written, one in "double quotes" with
 * `\"`, `\\`, `` \` `` and `\$` unescaped; outside quotes a backslash takes the next character as it is;
 * a backslash at the end of a line joins the next one. No `${...}` expansion inside values (systemd makes
 * none either). Where systemd skips a line it cannot read with a warning, this refuses it, naming the
 * line: a secret silently dropped would show up later as a confusing "is not set".
 */
export type EnvFileResult = { ok: true; vars: Record<string, string> } | { ok: false; errors: string[] };

const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** What `text` assigns, or every line it cannot read (`file:line: why`). */
export function parseEnvFile(text: string, file: string): EnvFileResult {
  const vars: Record<string, string> = {};
  const errors: string[] = [];
  let i = 0;
  let line = 1;
  const at = (): string => text[i] ?? '';
  while (i < text.length) {
    const startLine = line;
    // Leading whitespace, then a comment, a blank line or a key.
    while (at() === ' ' || at() === '\t' || at() === '\r') i++;
    if (at() === '\n' || at() === '') {
      i++;
      line++;
      continue;
    }
    if (at() === '#' || at() === ';') {
      while (i < text.length && at() !== '\n') i++;
      continue;
    }
    let key = '';
    while (i < text.length && at() !== '=' && at() !== '\n') key += text[i++];
    key = key.trim();
    if (at() !== '=') {
      errors.push(`${file}:${startLine}: not KEY=VALUE`);
      continue;
    }
    i++;
    const value = readValue();
    if (value === undefined) errors.push(`${file}:${startLine}: a quote is not closed`);
    else if (!NAME.test(key))
      errors.push(`${file}:${startLine}: '${key}' is not a variable name (letters, digits and _, not first a digit)`);
    else vars[key] = value;
  }
  return errors.length > 0 ? { ok: false, errors } : { ok: true, vars };

  /** The value from after `=` to its line's end (continued lines included); undefined for an unclosed quote. */
  function readValue(): string | undefined {
    let value = '';
    // Unquoted text's trailing whitespace is dropped, quoted text's kept: `keep` is how much of `value` is quoted or escaped.
    let keep = 0;
    while (at() === ' ' || at() === '\t') i++;
    for (;;) {
      const c = at();
      if (c === '' || c === '\n') {
        if (c === '\n') line++;
        i++;
        return value.slice(0, keep) + value.slice(keep).trimEnd();
      }
      if (c === "'" || c === '"') {
        const close = c;
        i++;
        for (;;) {
          const q = at();
          if (q === '') return undefined;
          i++;
          if (q === close) break;
          if (q === '\n') line++;
          if (close === '"' && q === '\\') {
            const next = at();
            i++;
            if (next === '\n') line++;
            else value += '"\\`$'.includes(next) ? next : `\\${next}`;
          } else value += q;
        }
        keep = value.length;
      } else if (c === '\\') {
        const next = text[i + 1] ?? '';
        i += 2;
        if (next === '\n') line++;
        else value += next;
        keep = value.length;
      } else {
        value += c;
        i++;
      }
    }
  }
}

/** The variables of the env file at `path`, or why not (it cannot be read, or lines it cannot read). */
export function readEnvFile(path: string): EnvFileResult {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    return { ok: false, errors: [`${path}: cannot read the env file (${(err as NodeJS.ErrnoException).code ?? errorText(err)})`] };
  }
  return parseEnvFile(text, path);
}

/**
 * The environment `${NAME}` references are read from: the process's, with the env file's variables over
 * it, as under systemd, where the EnvironmentFile makes the service's environment (a service does not see
 * the shell's variables at all; here those the file does not set still count).
 */
export function withEnvFile(env: NodeJS.ProcessEnv, vars: Record<string, string>): NodeJS.ProcessEnv {
  return { ...env, ...vars };
}
