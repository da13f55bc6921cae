import type { AccountStore } from '../accounts/account-store.js';
import { createPostgresAccounts } from '../accounts/postgres-accounts.js';
import { createSqliteAccounts } from '../accounts/sqlite-accounts.js';
import type { StoreConfig } from '../config/load.js';
import { NoDatabaseError, openStore, StoreAccessError, type Store } from '../store/open.js';
import { openPgStore, safeUrl } from '../store/pg-open.js';
import type { ParsedArgs } from './args.js';
import type { CommandSpec } from './commands.js';
import { usageErrorText } from './help.js';
import { run } from './tenancy-commands.js';
import { RefusedError, UsageError } from './tenancy-io.js';

/** The groups of the command table this module runs: the commands on the config's store. */
export function isStoreCommand(spec: CommandSpec): boolean {
  return spec.group === 'accounts' || spec.words === 'backup';
}

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
 * Runs one command on the config's store (`storage.url` when set, else the file at `storage.path`; never
 * Redis), its command line already read; returns the exit status.
 */
export async function runStoreCommand(
  line: { spec: CommandSpec; args: ParsedArgs; positionals: string[] },
  config: StoreConfig,
  out: (s: string) => void,
  err: (s: string) => void,
): Promise<number> {
  const opened: Opened = {};
  const where = config.storage.url === undefined ? `database ${config.storage.path}` : `database ${safeUrl(config.storage.url)}`;
  const { spec, args, positionals } = line;
  try {
    await run(spec.words, positionals, {
      args,
      config,
      out,
      accounts: () => (opened.accounts ??= openAccounts(config, opened)),
      store: () => openSqlite(config, opened),
    });
    return 0;
  } catch (e) {
    if (e instanceof RefusedError || e instanceof NoDatabaseError || e instanceof StoreAccessError) {
      err(`chaingate: ${e.message}\n`);
      return 1;
    }
    if (e instanceof UsageError) {
      err(usageErrorText(e.message, spec.words));
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
