/**
 * Small readers for raw YAML values. Each takes the key path for its messages and an error list it
 * appends to, so validation goes on after a bad key and the operator sees every mistake at once.
 */
export type Errors = string[];
export type Raw = Record<string, unknown>;

export function isObject(v: unknown): v is Raw {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Reads an object; unknown keys are refused so a misspelt key never silently does nothing. */
export function readObject(v: unknown, path: string, known: readonly string[], errors: Errors): Raw {
  if (v === undefined || v === null) return {};
  if (!isObject(v)) {
    errors.push(`${path}: must be a mapping`);
    return {};
  }
  for (const k of Object.keys(v)) {
    if (!known.includes(k)) errors.push(`${path ? path + '.' : ''}${k}: unknown key (known: ${known.join(', ')})`);
  }
  return v;
}

export function readInt(v: unknown, path: string, dflt: number, min: number, max: number, errors: Errors): number {
  if (v === undefined || v === null) return dflt;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) {
    errors.push(`${path}: must be an integer from ${min} to ${max}`);
    return dflt;
  }
  return v;
}

export function readNumber(v: unknown, path: string, dflt: number, min: number, max: number, errors: Errors): number {
  if (v === undefined || v === null) return dflt;
  if (typeof v !== 'number' || !Number.isFinite(v) || v < min || v > max) {
    errors.push(`${path}: must be a number from ${min} to ${max}`);
    return dflt;
  }
  return v;
}

export function readBool(v: unknown, path: string, dflt: boolean, errors: Errors): boolean {
  if (v === undefined || v === null) return dflt;
  if (typeof v !== 'boolean') {
    errors.push(`${path}: must be true or false`);
    return dflt;
  }
  return v;
}

export function readString(v: unknown, path: string, dflt: string | undefined, errors: Errors): string | undefined {
  if (v === undefined || v === null) return dflt;
  if (typeof v !== 'string' || v === '') {
    errors.push(`${path}: must be a non-empty string`);
    return dflt;
  }
  return v;
}

export function readEnum<T extends string>(v: unknown, path: string, dflt: T, allowed: readonly T[], errors: Errors): T {
  if (v === undefined || v === null) return dflt;
  if (typeof v !== 'string' || !(allowed as readonly string[]).includes(v)) {
    errors.push(`${path}: must be one of ${allowed.join(', ')}`);
    return dflt;
  }
  return v as T;
}

/** Reads a URL with one of the given schemes; returns undefined (and records why) when it is not one. */
export function readUrl(v: unknown, path: string, schemes: readonly string[], errors: Errors): string | undefined {
  // "http(s)" for ['http:', 'https:'], as operators write it.
  const names = schemes.map((s) => s.replace(':', ''));
  const what = names.length === 2 && names[1] === `${names[0]}s` ? `${names[0]}(s)` : names.join('/');
  const article = what.startsWith('http') ? 'an' : 'a';
  if (typeof v !== 'string' || v === '') {
    errors.push(`${path}: must be ${article} ${what} URL`);
    return undefined;
  }
  let u: URL;
  try {
    u = new URL(v);
  } catch {
    errors.push(`${path}: must be ${article} ${what} URL`);
    return undefined;
  }
  if (!schemes.includes(u.protocol) || u.hostname === '') {
    errors.push(`${path}: must be ${article} ${what} URL`);
    return undefined;
  }
  return v;
}

export function readStringMap(v: unknown, path: string, errors: Errors): Record<string, string> {
  if (v === undefined || v === null) return {};
  if (!isObject(v)) {
    errors.push(`${path}: must be a mapping of header names to strings`);
    return {};
  }
  const out: Record<string, string> = {};
  for (const [k, val] of Object.entries(v)) {
    if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(k)) errors.push(`${path}.${k}: not a valid header name`);
    else if (typeof val !== 'string' && typeof val !== 'number') errors.push(`${path}.${k}: must be a string`);
    else if (/[\r\n]/.test(String(val))) errors.push(`${path}.${k}: may not contain a line break`);
    else out[k] = String(val);
  }
  return out;
}

export function readStringList(v: unknown, path: string, dflt: readonly string[], errors: Errors): string[] {
  if (v === undefined || v === null) return [...dflt];
  if (!Array.isArray(v) || v.some((s) => typeof s !== 'string' || s === '')) {
    errors.push(`${path}: must be a list of non-empty strings`);
    return [...dflt];
  }
  return v as string[];
}
