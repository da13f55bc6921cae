import type { Config } from '../config/schema.js';
import { createSlidingWindowLimiter } from '../limits/sliding-window.js';
import { createUnknownKeyGuard } from '../limits/unknown-keys.js';
import type { Logger } from '../log.js';
import type { Metrics } from '../metrics/registry.js';
import type { EndpointAuth } from '../tenancy/key-cache.js';
import { createConnectionCounts } from './stream-limits.js';
import { createRuPrices, type KeyBook, type Tenancy } from './tenancy.js';

/**
 * The tenancy of an instance in a fleet (config `storage.url` and `cluster`): keys, balances and usage in
 * the shared PostgreSQL, rate limits in Redis (fleet.ts opens them). The request path asks the shared
 * parts before planning (fleet-gate.ts) and otherwise runs as on one machine. What stays per instance:
 * the unknown-key throttle per IP, the WebSocket and event-stream connection counts, the keyless path's
 * upgrade count, and the management API's own request limit (each counted where the socket is).
 */
export async function openFleetTenancy(
  config: Config,
  log: Logger,
  metrics?: Pick<
    Metrics,
    'ledgerFlush' | 'ledgerFlushFailures' | 'clusterRedisUp' | 'changeNoticeIgnored' | 'changeResync' | 'limitTableEviction'
  >,
): Promise<Tenancy> {
  const cluster = config.cluster;
  if (config.storage.url === undefined || cluster === undefined) throw new Error('a fleet needs storage.url and cluster');
  let closeRevoked: (endpointId: string) => void = () => {};
  let flushFailures = 0;
  // Loaded here: PostgreSQL's client and the fleet's parts are no weight on a gateway that runs on one machine.
  const { openFleet } = await import('./fleet.js');
  const fleet = await openFleet({
    url: config.storage.url,
    cluster,
    log,
    retention: {
      keepMinutesH: config.usage.keep_minutes_h,
      keepHoursD: config.usage.keep_hours_d,
      failuresKept: config.usage.failures_kept,
    },
    ledger: { flushIntervalMs: config.ledger.flush_interval_ms, ...(metrics !== undefined ? { metrics } : {}) },
    onRevoked: (endpointId) => closeRevoked(endpointId),
    onRedisState: (up) => metrics?.clusterRedisUp(up),
    onNoticeIgnored: (reason) => metrics?.changeNoticeIgnored(reason),
    onResync: () => metrics?.changeResync(),
    onFlushError: () => {
      flushFailures++;
    },
    info: { pid: process.pid, port: config.server.port },
    fences: { balance: config.fences.contracts_cover_balance },
  });
  // One machine refuses to start over such owners (preflight.ts); a fleet's store is shared, so it only says so.
  const unplanned = new Map<string, number>();
  for (const o of await fleet.accounts.listOwners())
    if (!Object.hasOwn(config.plans, o.plan)) unplanned.set(o.plan, (unplanned.get(o.plan) ?? 0) + 1);
  for (const [plan, owners] of unplanned)
    log.warn(
      'owners on a plan this config does not have: their keys get 401 until it is configured or they are moved (chaingate owner set-plan)',
      { plan, owners },
    );
  // A lookup's answer the cache did not keep (a change came while it ran) still answers its own request.
  const answered = new Map<string, EndpointAuth | null>();
  const keys: KeyBook = {
    cached: (apiKey) => (answered.size > 0 && answered.has(apiKey) ? answered.get(apiKey) : fleet.keys.cached(apiKey)),
    lookUp: fleet.keys.lookUp,
    answering(apiKey, auth, run) {
      answered.set(apiKey, auth);
      try {
        return run();
      } finally {
        answered.delete(apiKey);
      }
    },
  };
  return {
    store: null,
    directory: null,
    accounts: fleet.accounts,
    keys,
    fleet: { limiter: fleet.limiter, ledger: fleet.ledger, ledgerStore: fleet.ledgerStore, instance: cluster.instance },
    ledger: fleet.ledger,
    limiter: createSlidingWindowLimiter({ onEvict: () => metrics?.limitTableEviction('rate') }),
    unknownKeys: createUnknownKeyGuard({ onEvict: () => metrics?.limitTableEviction('unknown_keys') }),
    connections: { websocket: createConnectionCounts(), sse: createConnectionCounts() },
    ...createRuPrices(config),
    flushFailures: () => flushFailures,
    storeFault(during, err) {
      log.error('store fault; answered 503', { during, error: err.message });
    },
    onRevoked(close) {
      closeRevoked = close;
    },
    threadEnded() {},
    share() {
      throw new Error('an instance of a fleet runs one thread: it shares its tenancy with none');
    },
    close: () => fleet.close(),
  };
}
