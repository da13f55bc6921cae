/**
 * Where keys, balances and usage live: a SQLite file (`path`, one machine, the default) or, for a fleet
 * of instances behind a load balancer, a PostgreSQL database (`url`), never both; and, in a fleet, what
 * the instances share besides the store (`cluster`).
 */
import { hostname } from 'node:os';
import { type Static, Type } from './typebox.js';
import { type Errors, isObject } from './checks.js';
import { int, Missing, oneOf, optionalText, Problem, section, text, unlessNoString, url } from './keys.js';
import { withoutNulls } from './fill-defaults.js';
import { checkSchema } from './schema-check.js';

export const StorageSchema = section(
  {
    path: text(
      './data/chaingate.db',
      "The SQLite database; unused when url is set. A relative path is read from the config file's folder.",
    ),
    reserve_bytes: int(
      0,
      1_073_741_824,
      4_194_304,
      "Room kept beside the SQLite file (<path>-reserve) for the repair after a full disk: given up when the WAL's checkpoint lacks room, written again once there is room for it twice; 0: none.",
    ),
    url: Type.Optional(url('postgres-url', "The fleet's shared PostgreSQL database (postgres://user[:password]@host[:port]/database).")),
  },
  'Where keys, balances and usage live.',
);

/** The store: `path` is absolute once loaded (config/load.ts resolves a relative one). */
export type StorageConfig = Static<typeof StorageSchema>;

export const ClusterSchema = section(
  {
    redis_url: url('redis-url', "Redis for the fleet's rate limits (redis://[user:password@]host[:port][/db]).", {
      [Missing]: 'required (the Redis the fleet shares its rate limits through)',
    }),
    instance: optionalText("This instance's name in the fleet (heartbeats, reservations, chaingate status); default host name:port.", {
      pattern: '^[\\w.:-]{1,100}$',
      [Problem]: unlessNoString('1 to 100 letters, digits, and . _ : -'),
    }),
    reservation_ttl_s: int(
      2,
      3600,
      10,
      "Seconds an instance's unspent reserved RU stay reserved without a renewal (what a killed instance's take to return).",
    ),
    reservation_block_ru: int(1, Number.MAX_SAFE_INTEGER, 1000, "RU an instance reserves at once from an owner's balance."),
    redis_failure: oneOf(
      ['open', 'closed'] as const,
      'open',
      'While Redis is unreachable: open limits locally (rps / live instances), closed refuses calls (503).',
    ),
  },
  'A fleet only, with storage.url: what the instances share besides the store.',
  { default: undefined },
);

/** What the instances of a fleet share besides the store: rate limits in Redis, and how RU are reserved. */
export type ClusterConfig = Omit<Static<typeof ClusterSchema>, 'instance'> & {
  /** As configured, or host name:server.port. */
  instance: string;
};

/** storage: path or url, not both. */
function checkOneStore(given: unknown, errors: Errors): void {
  if (isObject(given) && given.path !== undefined && given.url !== undefined)
    errors.push('storage: set path (SQLite, one machine) or url (PostgreSQL, a fleet of instances), not both');
}

/**
 * The `storage` section alone: what the operator commands read of a config (config/load.ts,
 * loadStoreConfigFile). `path` is as written: a relative one is resolved by the loader, against the
 * config file's folder.
 */
export function readStorageSection(raw: unknown, errors: Errors): StorageConfig {
  const given = withoutNulls(StorageSchema, raw);
  checkOneStore(given, errors);
  return checkSchema(StorageSchema, given, 'storage', errors);
}

/** `storage` and `cluster` together (checked already against their schemas): a fleet needs both, and one machine neither of `url` and `cluster`. */
export function readStorage(
  storage: StorageConfig,
  cluster: Static<typeof ClusterSchema> | undefined,
  given: Record<string, unknown>,
  serverPort: number,
  errors: Errors,
): { storage: StorageConfig; cluster: ClusterConfig | undefined } {
  checkOneStore(given.storage, errors);
  const urlGiven = isObject(given.storage) && given.storage.url !== undefined;
  if (given.cluster === undefined) {
    if (urlGiven) errors.push('storage.url: the instances of a fleet share their rate limits through Redis: set cluster.redis_url too');
    return { storage, cluster: undefined };
  }
  if (!urlGiven) errors.push('cluster: the instances of a fleet share keys and balances through PostgreSQL: set storage.url too');
  if (cluster === undefined) return { storage, cluster: undefined };
  return {
    storage,
    cluster: { ...cluster, redis_url: cluster.redis_url ?? '', instance: cluster.instance ?? `${hostname()}:${serverPort}` },
  };
}
