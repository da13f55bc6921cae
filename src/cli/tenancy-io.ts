// What every tenancy command is given (Io), the two errors that set its exit status, and the readers of
// its arguments, whose failures are usage errors.
import type { AccountStore } from '../accounts/account-store.js';
import type { StoreConfig } from '../config/load.js';
import { errorText } from '../log.js';
import type { Store } from '../store/open.js';
import { MAX_RU } from '../tenancy/owners.js';
import { intOption, type ParsedArgs } from './args.js';

/** A wrong command line: exit status 2 with the message. */
export class UsageError extends Error {}
/** A refused operation (unknown owner, key...): exit status 1 with the message. */
export class RefusedError extends Error {}

/** One command's arguments, config, output and stores (opened when first asked for). */
export interface Io {
  args: ParsedArgs;
  config: StoreConfig;
  out: (s: string) => void;
  /** The config's account store, opened at the first call (a usage error or `backup` opens none). */
  accounts: () => Promise<AccountStore>;
  /** The SQLite file at storage.path, for `backup`. */
  store: () => Store;
}

export function ownerId(s: string | undefined, what = 'owner ID'): number {
  if (s === undefined) throw new UsageError(`missing ${what}`);
  const n = Number(s);
  if (!/^\d+$/.test(s) || !Number.isSafeInteger(n) || n < 1) throw new UsageError(`${what} must be a positive integer, got '${s}'`);
  return n;
}

export function plan(config: StoreConfig, name: string | undefined): string {
  const plans = Object.keys(config.plans);
  if (name === undefined) throw new UsageError(`missing plan (plans: ${plans.join(', ')})`);
  if (!Object.hasOwn(config.plans, name)) throw new UsageError(`unknown plan '${name}' (plans: ${plans.join(', ')})`);
  return name;
}

/** Runs one of args.ts's readers, whose errors are all about the command line. */
export function asUsage<T>(read: () => T): T {
  try {
    return read();
  } catch (e) {
    throw new UsageError(errorText(e));
  }
}

export function requireRu(args: ParsedArgs, min: number): number {
  const ru = asUsage(() => intOption(args, 'ru', min, MAX_RU));
  if (ru === undefined) throw new UsageError('missing --ru N');
  return ru;
}

export function found<T>(value: T | null | false, id: number): T {
  if (value === null || value === false) throw new RefusedError(`no owner ${id}`);
  return value;
}
