import type { AccountStore } from '../accounts/account-store.js';
import { createFleetKeys, type FleetKeys } from '../accounts/fleet-keys.js';
import { CHANGES_CHANNEL, type ChangeListener, type IgnoredReason, listenForChanges } from '../accounts/pg-changes.js';
import { createPostgresAccounts } from '../accounts/postgres-accounts.js';
import type { ClusterConfig } from '../config/storage.js';
import type { FenceOptions } from '../fences/fences.js';
import { createFleetLimiter, type FleetLimiter } from '../limits/fleet-limiter.js';
import type { Logger } from '../log.js';
import { createFleetLedger, type FleetLedger } from '../metering/fleet-ledger.js';
import type { LedgerOptions } from '../metering/ledger.js';
import type { LedgerStore } from '../metering/ledger-store.js';
import { createPgLedgerStore } from '../metering/pg-ledger-store.js';
import { openPgStore, type PgStore } from '../store/pg-open.js';

/** How often an instance rolls old usage up and prunes what the fleet no longer needs, in ms. */
const HOUSEKEEPING_MS = 60_000;
/** What `prune` keeps: batch ids (a batch is never retried later than this), dead instances, expired reservations. */
const PRUNE_AFTER_S = 86_400;

/**
 * An instance's part of a fleet: the shared PostgreSQL (owners, keys, balances, usage), the change feed
 * that keeps its keys current, its ledger over RU reserved in blocks, and the Redis rate limiter. Made
 * by `openFleet`, which resolves once the instance can serve: the schema current, the feed listening,
 * the limiter's first roll call answered (or failed: it starts on local limits).
 */
export interface Fleet {
  readonly pg: PgStore;
  readonly accounts: AccountStore;
  readonly ledgerStore: LedgerStore;
  readonly ledger: FleetLedger;
  readonly keys: FleetKeys;
  readonly limiter: FleetLimiter;
  /** Stops in the order the parts depend on each other: the limiter, the feed, the ledger (its last batch written, its RU given back), then the pool. */
  close(): Promise<boolean>;
}

export interface FleetOptions {
  url: string;
  cluster: ClusterConfig;
  log: Logger;
  /** Usage retention, as on one machine (config `usage`). */
  retention: { keepMinutesH: number; keepHoursD: number; failuresKept?: number };
  /** The ledger's flush interval and metrics (config `ledger`). */
  ledger: Pick<LedgerOptions, 'flushIntervalMs' | 'metrics'>;
  /** Called with each endpoint that stopped working elsewhere in the fleet, to close its sockets. */
  onRevoked: (endpointId: string) => void;
  /** Told whether Redis decides the rate limits (the gauge chaingate_cluster_redis_up). */
  onRedisState?: (up: boolean) => void;
  /** Called with each change notice dropped because it does not parse (chaingate_change_notices_ignored_total). */
  onNoticeIgnored?: (reason: IgnoredReason) => void;
  /** Called each time the instance reads every known key again (chaingate_change_resyncs_total). */
  onResync?: () => void;
  /** Called with each failed write of usage to PostgreSQL (after it is logged), e.g. to count it. */
  onFlushError?: (err: unknown) => void;
  /** What this instance's heartbeat says of it (`chaingate status`). */
  info?: Record<string, unknown>;
  /** How a grant's restrictions are compiled (config `fences`); default { balance: false }. */
  fences?: FenceOptions;
}

export async function openFleet(options: FleetOptions): Promise<Fleet> {
  const { cluster, log } = options;
  const pg = await openPgStore(options.url, {
    onIdleError: (err) => log.warn('a PostgreSQL connection failed; the pool makes another', { error: err.message }),
  });
  const accounts = createPostgresAccounts(pg, options.fences !== undefined ? { fences: options.fences } : {});
  const ledgerStore = createPgLedgerStore(pg, options.retention);
  const keys = createFleetKeys(accounts, {
    onRevoked: options.onRevoked,
    onError: (err) =>
      log.warn(
        're-reading keys after a change failed; they are read again at their next call (an endpoint whose key is not held, at the next resync)',
        { error: String(err) },
      ),
    ...(options.onResync !== undefined ? { onResync: options.onResync } : {}),
  });
  // Logged once per reason: whoever floods the channel must not flood the log too; the metric counts them all.
  const loggedReasons = new Set<IgnoredReason>();
  const ignored = (reason: IgnoredReason): void => {
    options.onNoticeIgnored?.(reason);
    if (loggedReasons.has(reason)) return;
    loggedReasons.add(reason);
    log.warn(
      `a notice on the ${CHANGES_CHANNEL} channel that does not parse was ignored; further ones are only counted (chaingate_change_notices_ignored_total). Only the gateway's role should be able to connect (docs/fleet.md)`,
      { reason },
    );
  };
  let feed: ChangeListener;
  try {
    feed = await listenForChanges(pg, (notice) => keys.apply(notice), {
      onDown: (err) => log.warn('the fleet change feed is down; reconnecting', { error: err.message }),
      onUp: () => log.info('the fleet change feed is back; re-reading known keys'),
      onIgnored: ignored,
    });
  } catch (err) {
    keys.close();
    await pg.close();
    throw err;
  }
  const ledger = createFleetLedger(ledgerStore, {
    instance: cluster.instance,
    reservationTtlS: cluster.reservation_ttl_s,
    blockRu: cluster.reservation_block_ru,
    ...options.ledger,
    ...(options.info !== undefined ? { info: options.info } : {}),
    onFlushError: (err) => {
      options.onFlushError?.(err);
      log.error('writing usage to PostgreSQL failed; kept and sent again', { error: String(err) });
    },
  });
  const limiter = createFleetLimiter({
    url: cluster.redis_url,
    failure: cluster.redis_failure,
    instanceId: cluster.instance,
    // Redis away: the instances whose heartbeat (each ledger flush) reached PostgreSQL within the roll
    // call's window, measured against the newest heartbeat, so on the store's clock alone.
    countLive: async (withinMs) => {
      const beats = (await ledgerStore.instances()).map((i) => i.heartbeatAt);
      const newest = Math.max(...beats);
      return beats.filter((at) => at >= newest - withinMs).length;
    },
    onStateChange: (up, cause) => {
      if (up) log.info('rate limits are shared through Redis');
      else
        log.warn(
          cluster.redis_failure === 'open'
            ? 'Redis unreachable: rate limits are local (rps / live instances)'
            : 'Redis unreachable: calls refused (cluster.redis_failure: closed)',
          {
            error: cause?.message,
          },
        );
      options.onRedisState?.(up);
    },
  });
  await limiter.ready();
  const housekeeping = setInterval(() => {
    ledgerStore
      .rollUp()
      .then(() => ledgerStore.prune(PRUNE_AFTER_S))
      .catch((err: unknown) => log.warn('usage roll-up or prune failed; tried again next minute', { error: String(err) }));
  }, HOUSEKEEPING_MS);
  housekeeping.unref();

  return {
    pg,
    accounts,
    ledgerStore,
    ledger,
    keys,
    limiter,
    async close() {
      clearInterval(housekeeping);
      await limiter.close();
      await feed.close();
      keys.close();
      await keys.settled();
      const flushed = await ledger.stop();
      await ledgerStore.close();
      // The account store owns the pool: closing it closes the connections every part used.
      await accounts.close();
      return flushed;
    },
  };
}
