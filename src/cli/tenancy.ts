import { existsSync, mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import type { AccountStore } from '../accounts/account-store.js';
import { createPostgresAccounts } from '../accounts/postgres-accounts.js';
import { createSqliteAccounts } from '../accounts/sqlite-accounts.js';
import type { StoreConfig } from '../config/load.js';
import { NoDatabaseError, openStore, type Store } from '../store/open.js';
import { openPgStore, safeUrl } from '../store/pg-open.js';
import { KEY_PREFIX_LENGTH } from '../tenancy/keys.js';
import { MAX_NAME_LENGTH, nameProblem } from '../tenancy/names.js';
import { MAX_RU } from '../tenancy/owners.js';
import { intOption, parseArgs, type ParsedArgs, stringOption } from './args.js';
import { formatTable, formatTime } from './table.js';
import { errorText } from '../log.js';

export const TENANCY_USAGE = `Owners, keys and endpoints, in the config's store: the SQLite file at storage.path, or a fleet's
PostgreSQL at storage.url (safe while gateways run; Redis is not needed):

  chaingate owner create --name NAME --plan PLAN --ru N [--json]   new owner and its first management key
  chaingate owner list [--json]                                    owners, balances, endpoint counts
  chaingate owner topup ID --ru N                                  credit N RU
  chaingate owner set-plan ID PLAN
  chaingate owner key create ID [--json]                           another management key (shown once)
  chaingate owner key list ID                                      management keys by prefix
  chaingate owner key revoke ID PREFIX                             revoke the key starting with PREFIX
  chaingate owner suspend ID | owner resume ID                     refuse / accept the owner's keys
  chaingate owner delete ID                                        the owner, its endpoints and keys
  chaingate endpoint list [--owner ID] [--json]
  chaingate backup --out FILE [--force]                            online copy of the SQLite file (not storage.url)

N is RU in decimal digits, at most ${MAX_RU} (a balance too); NAME is 1 to ${MAX_NAME_LENGTH} characters, no control
characters. Every command also takes --config FILE (of which it reads storage and plans only) and
--env-file FILE (see chaingate --help). Exit status: 0 done, 1 refused (e.g. unknown owner), 2 bad arguments.
`;

/** The command words this module serves, for the lead's dispatcher. */
export const TENANCY_COMMANDS: ReadonlySet<string> = new Set(['owner', 'endpoint', 'backup']);

/** A wrong command line: exit status 2 with the message. */
class UsageError extends Error {}
/** A refused operation (unknown owner, key...): exit status 1 with the message. */
class RefusedError extends Error {}

interface Io {
  args: ParsedArgs;
  config: StoreConfig;
  out: (s: string) => void;
  /** The config's account store, opened at the first call (a usage error or `backup` opens none). */
  accounts: () => Promise<AccountStore>;
  /** The SQLite file at storage.path, for `backup`. */
  store: () => Store;
}

function ownerId(s: string | undefined, what = 'owner ID'): number {
  if (s === undefined) throw new UsageError(`missing ${what}`);
  const n = Number(s);
  if (!/^\d+$/.test(s) || !Number.isSafeInteger(n) || n < 1) throw new UsageError(`${what} must be a positive integer, got '${s}'`);
  return n;
}

function plan(config: StoreConfig, name: string | undefined): string {
  const plans = Object.keys(config.plans);
  if (name === undefined) throw new UsageError(`missing plan (plans: ${plans.join(', ')})`);
  if (!Object.hasOwn(config.plans, name)) throw new UsageError(`unknown plan '${name}' (plans: ${plans.join(', ')})`);
  return name;
}

/** Runs one of args.ts's readers, whose errors are all about the command line. */
function asUsage<T>(read: () => T): T {
  try {
    return read();
  } catch (e) {
    throw new UsageError(errorText(e));
  }
}

function requireRu(args: ParsedArgs, min: number): number {
  const ru = asUsage(() => intOption(args, 'ru', min, MAX_RU));
  if (ru === undefined) throw new UsageError('missing --ru N');
  return ru;
}

function found<T>(value: T | null | false, id: number): T {
  if (value === null || value === false) throw new RefusedError(`no owner ${id}`);
  return value;
}

/** Which options each command accepts besides --config and --help; anything else is refused by name. */
const OPTIONS: Record<string, readonly string[]> = {
  'owner create': ['name', 'plan', 'ru', 'json'],
  'owner list': ['json'],
  'owner topup': ['ru'],
  'owner key create': ['json'],
  'endpoint list': ['owner', 'json'],
  backup: ['out', 'force'],
};

async function run(command: string, rest: string[], io: Io): Promise<void> {
  const { args, config, out } = io;
  const json = args.options.has('json');
  const [a, b] = rest;
  switch (command) {
    case 'owner create': {
      const name = stringOption(args, 'name')?.trim();
      if (!name) throw new UsageError('missing --name NAME');
      const problem = nameProblem(name);
      if (problem !== null) throw new UsageError(`--name ${problem}`);
      const chosen = plan(config, stringOption(args, 'plan'));
      const ru = requireRu(args, 0);
      const created = await (await io.accounts()).createOwner(name, chosen, ru);
      out(
        json
          ? `${JSON.stringify({ id: created.id, management_key: created.managementKey })}\n`
          : `owner ${created.id} created\nmanagement key (shown once, keep it secret): ${created.managementKey}\n`,
      );
      return;
    }
    case 'owner list': {
      const owners = await (await io.accounts()).listOwners();
      if (json) {
        out(
          `${JSON.stringify(
            owners.map((o) => ({
              id: o.id,
              name: o.name,
              plan: o.plan,
              ru_balance: o.ruBalance,
              suspended: o.suspended,
              endpoints: o.endpoints,
              created_at: o.createdAt,
            })),
          )}\n`,
        );
      } else {
        out(
          formatTable(
            ['ID', 'NAME', 'PLAN', 'BALANCE', 'SUSPENDED', 'ENDPOINTS', 'CREATED'],
            owners.map((o) => [
              String(o.id),
              o.name,
              o.plan,
              String(o.ruBalance),
              o.suspended ? 'yes' : 'no',
              String(o.endpoints),
              formatTime(o.createdAt),
            ]),
          ),
        );
      }
      return;
    }
    case 'owner topup': {
      const id = ownerId(a);
      const ru = requireRu(args, 1);
      const result = await (await io.accounts()).topUp(id, ru);
      switch (result.kind) {
        case 'credited':
          out(`owner ${id}: balance ${result.balance} RU\n`);
          return;
        case 'refused':
          throw new RefusedError(
            result.error === 'no_owner'
              ? `no owner ${id}`
              : `owner ${id}: a top-up of ${ru} RU would take the balance (${result.balance} RU) past the maximum ${MAX_RU} RU`,
          );
        default:
          return result satisfies never;
      }
    }
    case 'owner set-plan': {
      const id = ownerId(a);
      const p = plan(config, b);
      found(await (await io.accounts()).setPlan(id, p), id);
      out(`owner ${id}: plan ${p}\n`);
      return;
    }
    case 'owner key create': {
      const id = ownerId(a);
      const key = found(await (await io.accounts()).createManagementKey(id), id);
      out(
        json ? `${JSON.stringify({ id, management_key: key })}\n` : `management key for owner ${id} (shown once, keep it secret): ${key}\n`,
      );
      return;
    }
    case 'owner key list': {
      const id = ownerId(a);
      const keys = found(await (await io.accounts()).listManagementKeys(id), id);
      out(
        formatTable(
          ['PREFIX', 'CREATED', 'REVOKED'],
          keys.map((k) => [k.keyPrefix, formatTime(k.createdAt), k.revokedAt === null ? '-' : formatTime(k.revokedAt)]),
        ),
      );
      return;
    }
    case 'owner key revoke': {
      const id = ownerId(a);
      if (b === undefined)
        throw new UsageError(`missing PREFIX (the first ${KEY_PREFIX_LENGTH} characters of the key; see owner key list)`);
      const result = await (await io.accounts()).revokeManagementKey(id, b.slice(0, KEY_PREFIX_LENGTH));
      if (result === 'no_owner') throw new RefusedError(`no owner ${id}`);
      if (result === 'no_key')
        throw new RefusedError(`owner ${id} has no live management key with prefix '${b}' (see owner key list ${id})`);
      if (result === 'ambiguous') throw new RefusedError(`several live management keys of owner ${id} have the prefix '${b}'`);
      out(`owner ${id}: management key ${b.slice(0, KEY_PREFIX_LENGTH)} revoked\n`);
      return;
    }
    case 'owner suspend':
    case 'owner resume': {
      const id = ownerId(a);
      const suspend = command === 'owner suspend';
      found(await (await io.accounts()).setSuspended(id, suspend), id);
      out(`owner ${id}: ${suspend ? 'suspended (its keys are refused)' : 'resumed'}\n`);
      return;
    }
    case 'owner delete': {
      const id = ownerId(a);
      const { endpoints } = found(await (await io.accounts()).deleteOwner(id), id);
      out(`owner ${id} deleted with ${endpoints} endpoint${endpoints === 1 ? '' : 's'}\n`);
      return;
    }
    case 'endpoint list': {
      const owner = stringOption(args, 'owner');
      const of = owner === undefined ? undefined : ownerId(owner, '--owner');
      const rows = await (await io.accounts()).listAllEndpoints(of);
      if (json) {
        out(
          `${JSON.stringify(
            rows.map((e) => ({
              id: e.id,
              owner_id: e.ownerId,
              name: e.name,
              network: e.network,
              key_prefix: e.keyPrefix,
              created_at: e.createdAt,
            })),
          )}\n`,
        );
      } else {
        out(
          formatTable(
            ['ID', 'OWNER', 'NETWORK', 'NAME', 'KEY', 'CREATED'],
            rows.map((e) => [e.id, String(e.ownerId), e.network, e.name ?? '-', `${e.keyPrefix}…`, formatTime(e.createdAt)]),
          ),
        );
      }
      return;
    }
    case 'backup': {
      const target = stringOption(args, 'out');
      if (target === undefined) throw new UsageError('missing --out FILE');
      if (config.storage.url !== undefined) {
        throw new RefusedError(
          `backup copies the SQLite file at storage.path, and this config keeps its data in PostgreSQL (storage.url ${safeUrl(config.storage.url)}): back that up with pg_dump`,
        );
      }
      const file = resolve(target);
      if (file === io.store().path) throw new UsageError('--out is the database itself');
      if (existsSync(file) && !args.options.has('force')) throw new RefusedError(`${target} exists: pass --force to overwrite it`);
      mkdirSync(dirname(file), { recursive: true });
      // SQLite's online backup: a consistent copy while the daemon keeps writing.
      const { totalPages } = await io.store().db.backup(file);
      out(`backup written to ${target} (${totalPages} pages)\n`);
      return;
    }
    default:
      throw new UsageError(`unknown command '${command}'`);
  }
}

/** The words naming the command (`owner key create`), and the positionals after them. */
function splitCommand(positionals: string[]): { command: string; rest: string[] } {
  const [first, second, third] = positionals;
  if (first === 'owner' && second === 'key') return { command: `owner key ${third ?? ''}`.trim(), rest: positionals.slice(3) };
  if (first === 'backup') return { command: 'backup', rest: positionals.slice(1) };
  return { command: [first, second].filter((w) => w !== undefined).join(' '), rest: positionals.slice(2) };
}

const POSITIONALS: Record<string, number> = {
  'owner topup': 1,
  'owner set-plan': 2,
  'owner key create': 1,
  'owner key list': 1,
  'owner key revoke': 2,
  'owner suspend': 1,
  'owner resume': 1,
  'owner delete': 1,
};

/** What the CLI keeps open for one command, closed when it ends. */
interface Opened {
  accounts?: Promise<AccountStore>;
  store?: Store;
}

/** The SQLite file at storage.path, which must exist: only serve creates one (see NoDatabaseError). */
function openSqlite(config: StoreConfig, opened: Opened): Store {
  opened.store ??= openStore(config.storage.path, { mustExist: true });
  return opened.store;
}

/** The config's account store: a fleet's PostgreSQL (schema brought current) or the SQLite file, its own connection. */
async function openAccounts(config: StoreConfig, opened: Opened): Promise<AccountStore> {
  if (config.storage.url === undefined) return createSqliteAccounts(openSqlite(config, opened));
  return createPostgresAccounts(await openPgStore(config.storage.url, { maxConnections: 1 }));
}

/** What an error of the store says: a refused connection (one per address tried) may have no message of its own. */
function storeErrorText(e: unknown): string {
  const err = e as { message?: string; code?: string };
  return err.message || err.code || String(e);
}

/**
 * Runs one operator command (`argv` as typed after `chaingate`, e.g. `['owner', 'list', '--config', F]`)
 * against the config's store (`storage.url` when set, else the file at `storage.path`; never Redis);
 * returns the exit status. Writes only through `out` and `err`, so it is testable and never exits the
 * process.
 */
export async function runTenancyCommand(
  argv: string[],
  config: StoreConfig,
  out: (s: string) => void,
  err: (s: string) => void,
): Promise<number> {
  const opened: Opened = {};
  const where = config.storage.url === undefined ? `database ${config.storage.path}` : `database ${safeUrl(config.storage.url)}`;
  try {
    const args = asUsage(() => parseArgs(argv, ['name', 'plan', 'ru', 'owner', 'out', 'config', 'env-file'], ['json', 'help', 'force']));
    if (args.options.has('help')) {
      out(TENANCY_USAGE);
      return 0;
    }
    const { command, rest } = splitCommand(args.positionals);
    const known = Object.hasOwn(OPTIONS, command) || Object.hasOwn(POSITIONALS, command);
    if (!known) throw new UsageError(command === '' ? 'missing command' : `unknown command '${command}'`);
    for (const name of args.options.keys()) {
      if (name !== 'config' && name !== 'env-file' && !(OPTIONS[command] ?? []).includes(name))
        throw new UsageError(`${command} takes no --${name}`);
    }
    const extra = rest.slice(POSITIONALS[command] ?? 0);
    if (extra.length > 0) throw new UsageError(`${command}: unexpected argument '${extra[0]}'`);
    await run(command, rest, {
      args,
      config,
      out,
      accounts: () => (opened.accounts ??= openAccounts(config, opened)),
      store: () => openSqlite(config, opened),
    });
    return 0;
  } catch (e) {
    if (e instanceof RefusedError || e instanceof NoDatabaseError) {
      err(`chaingate: ${e.message}\n`);
      return 1;
    }
    if (e instanceof UsageError) {
      err(`chaingate: ${e.message}\n\n${TENANCY_USAGE}`);
      return 2;
    }
    // The store itself failed (busy past the timeout, disk full, unreadable file, PostgreSQL unreachable): say so plainly.
    err(`chaingate: ${storeErrorText(e)} (${where})\n`);
    return 1;
  } finally {
    // A SQLite account store closes the file it was made over: close that once, whichever opened it.
    const accounts = await opened.accounts?.catch(() => undefined);
    if (accounts?.kind === 'postgres') await accounts.close();
    opened.store?.close();
  }
}
