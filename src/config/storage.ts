import { hostname } from 'node:os';
import { DEFAULTS } from './defaults.js';
import { type Errors, isObject, readEnum, readInt, readObject, readString, readUrl } from './checks.js';

/**
 * Where keys, balances and usage live: a SQLite file (`path`, one machine, the default) or, for a fleet
 * of instances behind a load balancer, a PostgreSQL database (`url`), never both.
 */
export interface StorageConfig {
  /** The SQLite database; unused when `url` is set. Absolute once loaded: a relative one is read from the config file's folder. */
  path: string;
  /** The fleet's shared PostgreSQL database (postgres://user[:password]@host[:port]/database), or undefined. */
  url: string | undefined;
}

/** What the instances of a fleet share besides the store: rate limits in Redis, and how RU are reserved. */
export interface ClusterConfig {
  /** Redis for the fleet's rate limits (redis://[user:password@]host[:port][/db]). */
  redis_url: string;
  /** This instance's name in the fleet (heartbeats, reservations, `chaingate status`): default host name:port. */
  instance: string;
  /** s an instance's unspent reserved RU stay reserved without a renewal (what a killed instance's take to return). */
  reservation_ttl_s: number;
  /** RU an instance reserves at once from an owner's balance. */
  reservation_block_ru: number;
  /** While Redis is unreachable: `open` limits locally (rps / live instances), `closed` refuses calls (503). */
  redis_failure: 'open' | 'closed';
}

/**
 * The `storage` section alone: what the operator commands read of a config (config/load.ts,
 * loadStoreConfigFile). `path` is as written: a relative one is resolved by the loader, against the
 * config file's folder.
 */
export function readStorageSection(raw: unknown, errors: Errors): StorageConfig {
  const st = readObject(raw, 'storage', ['path', 'url'], errors);
  if (st.path !== undefined && st.url !== undefined) {
    errors.push('storage: set path (SQLite, one machine) or url (PostgreSQL, a fleet of instances), not both');
  }
  const path = readString(st.path, 'storage.path', DEFAULTS.storage.path, errors) ?? DEFAULTS.storage.path;
  const url = st.url === undefined ? undefined : readUrl(st.url, 'storage.url', ['postgres:', 'postgresql:'], errors);
  return { path, url };
}

/** Reads `storage` and `cluster` together: a fleet needs both, and one machine neither of `url` and `cluster`. */
export function readStorage(
  top: Record<string, unknown>,
  serverPort: number,
  errors: Errors,
): { storage: StorageConfig; cluster: ClusterConfig | undefined } {
  const storage = readStorageSection(top.storage, errors);
  const urlGiven = isObject(top.storage) && top.storage.url !== undefined;
  if (top.cluster === undefined || top.cluster === null) {
    if (urlGiven) errors.push('storage.url: the instances of a fleet share their rate limits through Redis: set cluster.redis_url too');
    return { storage, cluster: undefined };
  }
  const c = readObject(
    top.cluster,
    'cluster',
    ['redis_url', 'instance', 'reservation_ttl_s', 'reservation_block_ru', 'redis_failure'],
    errors,
  );
  if (!urlGiven) errors.push('cluster: the instances of a fleet share keys and balances through PostgreSQL: set storage.url too');
  if (c.redis_url === undefined) errors.push('cluster.redis_url: required (the Redis the fleet shares its rate limits through)');
  const d = DEFAULTS.cluster;
  const instance = readString(c.instance, 'cluster.instance', `${hostname()}:${serverPort}`, errors) ?? `${hostname()}:${serverPort}`;
  if (!/^[\w.:-]{1,100}$/.test(instance)) errors.push('cluster.instance: 1 to 100 letters, digits, and . _ : -');
  const cluster: ClusterConfig = {
    redis_url: (c.redis_url === undefined ? undefined : readUrl(c.redis_url, 'cluster.redis_url', ['redis:', 'rediss:'], errors)) ?? '',
    instance,
    reservation_ttl_s: readInt(c.reservation_ttl_s, 'cluster.reservation_ttl_s', d.reservation_ttl_s, 2, 3600, errors),
    reservation_block_ru: readInt(
      c.reservation_block_ru,
      'cluster.reservation_block_ru',
      d.reservation_block_ru,
      1,
      Number.MAX_SAFE_INTEGER,
      errors,
    ),
    redis_failure: readEnum(c.redis_failure, 'cluster.redis_failure', d.redis_failure, ['open', 'closed'], errors),
  };
  return { storage, cluster };
}
