import type { AccountStore } from '../accounts/account-store.js';
import { createPostgresAccounts } from '../accounts/postgres-accounts.js';
import { createSqliteAccounts } from '../accounts/sqlite-accounts.js';
import type { StoreConfig } from '../config/load.js';
import { NoDatabaseError, openStore, type Store } from '../store/open.js';
import { openPgStore, safeUrl } from '../store/pg-open.js';
import { MAX_NAME_LENGTH } from '../tenancy/names.js';
import { MAX_RU } from '../tenancy/owners.js';
import { parseArgs } from './args.js';
import { SETTING_FLAGS } from './endpoint-commands.js';
import { run } from './tenancy-commands.js';
import { asUsage, RefusedError, UsageError } from './tenancy-io.js';

export const TENANCY_USAGE = `Owners, keys and endpoints, in the config's store: the SQLite file at storage.path, or a fleet's
PostgreSQL at storage.url (safe while gateways run; Redis is not needed):

  chaingate owner create --name NAME --plan PLAN --ru N [--json]   new owner and its first management key
  chaingate owner list [--json]                                    owners, balances, endpoint counts
  chaingate owner topup ID --ru N                                  credit N RU
  chaingate owner set-plan ID PLAN
  chaingate owner key create ID [--role R] [--json]                another management key (shown once); R is
                                                                   admin (default: everything), developer
                                                                   (endpoints and usage) or viewer (read only)
  chaingate owner key list ID                                      management keys by prefix, with their roles
  chaingate owner key revoke ID PREFIX                             revoke the key starting with PREFIX
  chaingate owner suspend ID | owner resume ID                     refuse / accept the owner's keys
  chaingate owner delete ID                                        the owner, its endpoints and keys
  chaingate endpoint list [--owner ID] [--json]
  chaingate endpoint set ID SETTING... [--json]                    change an endpoint's restrictions (below)
  chaingate endpoint rotate ID [--grace D] [--json]                a new API key (shown once); the old one
                                                                   works for D more (default 24h, 0: not at all)
  chaingate backup --out FILE [--force]                            online copy of the SQLite file (not storage.url)

endpoint set takes any of these; a value 'none' clears one (no restriction, or its default), a flag left
out keeps its value, and lists are comma-separated (or the flag repeated):
  --allowed-origins https://app.example.com,*.example.com   browsers' Origin that may use the key
  --allow-no-origin true|false       with allowed origins, also accept requests without Origin (servers)
  --allowed-ips 192.0.2.0/24,2001:db8::1                    client addresses and CIDR ranges
  --allowed-methods eth_call,eth_get*                       method patterns, narrower than the plan's
  --allowed-contracts 0xABC...                              contract addresses calls may name
  --key-in-path true|false           false: the key only in X-API-Key or Authorization: Bearer
  --jwt-key id:alg:FILE              public keys (FILE a PEM or a JWK; alg ES256, RS256 or EdDSA) a
                                     token in Authorization: Bearer must be signed by
  --jwt-max-lifetime D               the longest a token may live (default 1h)
D is whole seconds or a duration: 90s, 15m, 24h, 7d.

N is RU in decimal digits, at most ${MAX_RU} (a balance too); NAME is 1 to ${MAX_NAME_LENGTH} characters, no control
characters. Every command also takes --config FILE (of which it reads storage and plans only) and
--env-file FILE (see chaingate --help). Exit status: 0 done, 1 refused (e.g. unknown owner), 2 bad arguments.
`;

/** The command words this module serves, for the lead's dispatcher. */
export const TENANCY_COMMANDS: ReadonlySet<string> = new Set(['owner', 'endpoint', 'backup']);

/** Which options each command accepts besides --config and --help; anything else is refused by name. */
const OPTIONS: Record<string, readonly string[]> = {
  'owner create': ['name', 'plan', 'ru', 'json'],
  'owner list': ['json'],
  'owner topup': ['ru'],
  'owner key create': ['role', 'json'],
  'endpoint list': ['owner', 'json'],
  'endpoint set': [...Object.keys(SETTING_FLAGS), 'json'],
  'endpoint rotate': ['grace', 'json'],
  backup: ['out', 'force'],
};

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
  'endpoint set': 1,
  'endpoint rotate': 1,
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
    const valued = ['name', 'plan', 'ru', 'owner', 'out', 'config', 'env-file', 'grace', 'role', ...Object.keys(SETTING_FLAGS)];
    const lists = ['allowed-origins', 'allowed-ips', 'allowed-methods', 'allowed-contracts', 'jwt-key'];
    const args = asUsage(() => parseArgs(argv, valued, ['json', 'help', 'force'], lists));
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
