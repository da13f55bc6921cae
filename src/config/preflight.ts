import { accessSync, constants, readFileSync, statSync, type Stats } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { createSecureContext, type SecureContextOptions } from 'node:tls';
import { surveyStore } from '../store/open.js';
import type { Config, ServerConfig } from './schema.js';
import { errorText } from '../log.js';

/**
 * Checks of a valid config against the machine it runs on: the TLS files it reads, the directory its
 * database lives in, the owners already in that database. Kept apart from validateConfig, which is pure,
 * because these do I/O and their answer changes without the file changing. `check-config` and `serve`
 * both run them before anything listens, so what check-config passes, serve does not fail on. Every
 * error starts with its key path; an empty list means ready.
 */
export function preflightConfig(config: Config): string[] {
  const errors: string[] = [];
  if (config.server.tls) checkTls(config.server.tls, errors);
  // A fleet's store is PostgreSQL: its instances warn of owners on plans not configured when they start.
  if (config.storage.url === undefined && checkStoragePath(config.storage.path, errors)) checkPlansInUse(config, errors);
  return errors;
}

/**
 * What check-config says of a valid config besides "valid": not errors, facts an operator may not expect.
 * Today one: the database does not exist yet, and serve will create it (no other command does).
 */
export function preflightNotes(config: Config): string[] {
  if (config.storage.url !== undefined || statOrCode(resolve(config.storage.path)) !== 'ENOENT') return [];
  return [`storage.path: ${resolve(config.storage.path)} does not exist yet: chaingate serve creates it`];
}

/** `ENOENT`, or the message when an error carries no code. */
function reason(err: unknown): string {
  return (err as NodeJS.ErrnoException).code ?? errorText(err);
}

/** OpenSSL's words without its `error:0480006C:PEM routines::` prefix: `no start line`. */
function opensslReason(err: unknown): string {
  return errorText(err).replace(/^error:[0-9A-Fa-f]+:[^:]*::?/, '');
}

function readFileFor(key: string, path: string, errors: string[]): Buffer | undefined {
  try {
    return readFileSync(path);
  } catch (err) {
    errors.push(`${key}: cannot read ${resolve(path)} (${reason(err)})`);
    return undefined;
  }
}

/** uWS says only "App construction failed" when a file is missing or wrong, so each file is tried here first. */
function checkTls(tls: NonNullable<ServerConfig['tls']>, errors: string[]): void {
  const cert = readFileFor('server.tls.cert_file', tls.cert_file, errors);
  const key = readFileFor('server.tls.key_file', tls.key_file, errors);
  if (cert === undefined || key === undefined) return;
  const refusal = (options: SecureContextOptions): string | undefined => {
    try {
      createSecureContext(options);
      return undefined;
    } catch (err) {
      return opensslReason(err);
    }
  };
  const passphrase = tls.passphrase !== undefined ? { passphrase: tls.passphrase } : {};
  const certRefused = refusal({ cert });
  if (certRefused !== undefined) {
    errors.push(`server.tls.cert_file: ${resolve(tls.cert_file)} holds no usable PEM certificate (${certRefused})`);
    return;
  }
  const keyRefused = refusal({ key, ...passphrase });
  if (keyRefused !== undefined) {
    const hint = tls.passphrase !== undefined ? ' with server.tls.passphrase' : ' (an encrypted key needs server.tls.passphrase)';
    errors.push(`server.tls.key_file: ${resolve(tls.key_file)} holds no private key that opens${hint}: ${keyRefused}`);
    return;
  }
  const pairRefused = refusal({ cert, key, ...passphrase });
  if (pairRefused !== undefined) {
    errors.push(
      `server.tls.key_file: ${resolve(tls.key_file)} is not the key of the certificate in ${resolve(tls.cert_file)} (${pairRefused})`,
    );
  }
}

function statOrCode(path: string): Stats | string {
  try {
    return statSync(path);
  } catch (err) {
    return reason(err);
  }
}

function writable(path: string): string | undefined {
  try {
    accessSync(path, constants.W_OK);
    return undefined;
  } catch (err) {
    return reason(err);
  }
}

/**
 * The store opens (or creates, parent directories included) the file read-write, and SQLite keeps its
 * -wal and -shm files next to it, so both the file and its directory must be writable. Nothing is
 * created here. True when the file may be looked into.
 */
function checkStoragePath(path: string, errors: string[]): boolean {
  const file = resolve(path);
  const at = statOrCode(file);
  if (typeof at !== 'string') {
    if (at.isDirectory()) {
      errors.push(`storage.path: ${file} is a directory; give the path of the database file inside it`);
      return false;
    }
    const fileRefused = writable(file);
    const dirRefused = writable(dirname(file));
    if (fileRefused !== undefined) errors.push(`storage.path: cannot write ${file} (${fileRefused})`);
    if (dirRefused !== undefined)
      errors.push(`storage.path: cannot write in ${dirname(file)} (${dirRefused}), where SQLite keeps the -wal and -shm files`);
    return fileRefused === undefined && dirRefused === undefined;
  }
  if (at !== 'ENOENT' && at !== 'ENOTDIR') {
    errors.push(`storage.path: cannot reach ${file} (${at})`);
    return false;
  }
  // Absent: the store will create it and any missing directories, inside the nearest one that exists.
  let ancestor = dirname(file);
  let found = statOrCode(ancestor);
  while ((found === 'ENOENT' || found === 'ENOTDIR') && dirname(ancestor) !== ancestor) {
    ancestor = dirname(ancestor);
    found = statOrCode(ancestor);
  }
  if (typeof found === 'string') errors.push(`storage.path: cannot create ${file}: cannot reach ${ancestor} (${found})`);
  else if (!found.isDirectory()) errors.push(`storage.path: cannot create ${file}: ${ancestor} is not a directory`);
  else {
    const refused = writable(ancestor);
    if (refused !== undefined) errors.push(`storage.path: cannot create ${file}: cannot write in ${ancestor} (${refused})`);
  }
  return false;
}

/**
 * An owner whose plan is not configured is locked out (its keys get 401, its endpoints cannot be made)
 * and nothing says why, so a `plans` section that drops a plan still in use is refused. Suspended owners
 * count: resuming one must not lock it out.
 */
function checkPlansInUse(config: Config, errors: string[]): void {
  const file = resolve(config.storage.path);
  let survey: ReturnType<typeof surveyStore>;
  try {
    survey = surveyStore(file);
  } catch (err) {
    errors.push(`storage.path: cannot read ${file} (${errorText(err)})`);
    return;
  }
  if (survey.kind === 'absent') return;
  if (survey.kind === 'newer') {
    errors.push(`storage.path: ${file}: ${survey.message}`);
    return;
  }
  for (const [plan, owners] of survey.ownersByPlan) {
    if (Object.hasOwn(config.plans, plan)) continue;
    errors.push(
      `plans: plan '${plan}' is used by ${owners} owner${owners === 1 ? '' : 's'} but is not configured ` +
        `(configure it, or move ${owners === 1 ? 'it' : 'them'} to a configured plan with chaingate owner set-plan)`,
    );
  }
}
