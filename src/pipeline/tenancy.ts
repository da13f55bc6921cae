import type { Config } from '../config/schema.js';
import type { ChainPrices } from '../chain/method-policy.js';
import type { LimitTable, Metrics } from '../metrics/registry.js';
import { DEFAULT_RU } from '../jsonrpc/methods.js';
import { createSlidingWindowLimiter, type SlidingWindowLimiter } from '../limits/sliding-window.js';
import { createUnknownKeyGuard, type UnknownKeyGuard } from '../limits/unknown-keys.js';
import { allocateSharedWindows, createSharedWindowLimiter, type SharedWindowMemory } from '../limits/shared-window.js';
import { allocateSharedUnknownKeys, createSharedUnknownKeyGuard, type SharedUnknownKeysMemory } from '../limits/shared-unknown-keys.js';
import { allocateSharedCounts, createSharedCounts, type SharedCountsMemory } from '../limits/shared-counts.js';
import { releaseLocksHeldBy } from '../limits/shared-table.js';
import { type ConnectionCounts, createConnectionCounts } from './stream-limits.js';
import type { Logger } from '../log.js';
import { errorText } from '../log.js';
import type { TransferListItem } from 'node:worker_threads';
import { createLedger, type Ledger } from '../metering/ledger.js';
import { createLedgerHost, type LedgerHostOptions } from '../metering/ledger-host.js';
import { createLedgerView, type LedgerHandoff } from '../metering/ledger-view.js';
import { createUsageRollUp } from '../metering/usage.js';
import { openStore, type Store } from '../store/open.js';
import type { CheckpointResult } from '../store/faults.js';
import { createDirectory, type Directory } from '../tenancy/directory.js';
import { createStoreChanges } from '../store/changes.js';
import { createWriteLock, releaseWriteLockHeldBy } from '../store/write-lock.js';
import type { AccountStore } from '../accounts/account-store.js';
import { createDaemonSqliteAccounts } from '../accounts/sqlite-accounts.js';
import type { EndpointAuth } from '../tenancy/key-cache.js';
import type { FleetLimiter } from '../limits/fleet-limiter.js';
import type { FleetLedger } from '../metering/fleet-ledger.js';
import type { LedgerStore } from '../metering/ledger-store.js';

/**
 * Everything tenancy needs at run time: the SQLite store, the directory of keys, the RU ledger, the
 * rate limiter and the unknown-key guard, plus the timers that keep them current: a look once a
 * second for changes made by the CLI, and a usage roll-up once a minute.
 */
export interface Tenancy {
  /** The SQLite store and its directory of keys; null in a fleet, whose store is PostgreSQL (`fleet`). */
  readonly store: Store | null;
  readonly directory: Directory | null;
  /** Owners, keys and endpoints as the management API reads and writes them, in either store. */
  readonly accounts: AccountStore;
  /** What API keys grant, as the request path asks it. */
  readonly keys: KeyBook;
  /** The parts only a fleet has: shared limits in Redis, RU reserved in blocks (fleet-gate.ts asks them). */
  readonly fleet: FleetParts | null;
  readonly ledger: Ledger;
  readonly limiter: SlidingWindowLimiter;
  readonly unknownKeys: UnknownKeyGuard;
  /** Open WebSocket connections and event streams per key or IP (shared by every worker thread). */
  readonly connections: { readonly websocket: ConnectionCounts; readonly sse: ConnectionCounts };
  /**
   * RU of one call of `method` before any size surcharge: the chain's own price when `chain` has one, else
   * ru.methods or the built-in cost, else the chain's default, else ru.default.
   */
  ruCost(method: string, chain?: ChainPrices | null): number;
  /** Ledger flushes that failed since start (chaingate status shows them). */
  flushFailures(): number;
  /** A reload's RU costs (ru.default, ru.methods) for calls from now on. */
  reconfigure(next: Config): void;
  /**
   * Logs a store fault that `during` (e.g. a management route) answered 503 for, and has the store
   * repair itself after it when it needs to (see WalRecovery).
   */
  storeFault(during: string, err: Error): void;
  /** Registers who closes the connections of endpoints that stopped working (deleted, owner suspended). */
  onRevoked(close: (endpointId: string) => void): void;
  /** A worker thread ended (its Worker.threadId): the locks it held (shared limits, store writes) are let go. */
  threadEnded(threadId: number): void;
  /** What a worker thread is given to share this tenancy (createTenancy's `threads`), and the ports it takes. */
  share(): { shared: TenancyShare; transfer: TransferListItem[] };
  /** Stops the timers, flushes the ledger and closes the store; false when the last flush failed. */
  close(): Promise<boolean>;
}

/**
 * What API keys grant, as the request path asks it. On one machine every answer is at hand (`cached`
 * reads SQLite through the key cache). In a fleet a key this instance has not met is read from
 * PostgreSQL first (`lookUp`), and the request goes on once the answer is in (server/held-request.ts).
 */
export interface KeyBook {
  /** The grant, null for none; undefined (a fleet only): not known here yet, ask `lookUp`. */
  cached(apiKey: string): EndpointAuth | null | undefined;
  /** Reads the key from the store and remembers the answer; rejects when the store fails (answer 503). */
  lookUp(apiKey: string): Promise<EndpointAuth | null>;
  /** Runs `run` with `cached(apiKey)` answering `auth` (a lookup's answer the cache did not keep: a change came meanwhile). */
  answering<T>(apiKey: string, auth: EndpointAuth | null, run: () => T): T;
}

/** A fleet's shared parts the request path asks before planning (fleet-gate.ts). */
export interface FleetParts {
  readonly limiter: FleetLimiter;
  readonly ledger: FleetLedger;
  /** Balances as written to the shared store, and the fleet's instances (`chaingate status`). */
  readonly ledgerStore: LedgerStore;
  readonly instance: string;
}

/** The key book of one machine: every key's answer is in SQLite, read through the directory's cache. */
function localKeys(directory: Directory): KeyBook {
  return {
    cached: (apiKey) => directory.endpointByKey(apiKey),
    lookUp: async (apiKey) => directory.endpointByKey(apiKey),
    answering: (_apiKey, _auth, run) => run(),
  };
}

/** The RU prices of `config` (Tenancy.ruCost), replaced by a reload's. */
export function createRuPrices(config: Config): Pick<Tenancy, 'ruCost' | 'reconfigure'> {
  let ru = config.ru;
  let costs = new Map<string, number>(Object.entries({ ...DEFAULT_RU, ...ru.methods }));
  return {
    ruCost: (method, chain) =>
      chain == null ? (costs.get(method) ?? ru.default) : (chain.costs.get(method) ?? costs.get(method) ?? chain.default ?? ru.default),
    reconfigure(next) {
      ru = next.ru;
      costs = new Map<string, number>(Object.entries({ ...DEFAULT_RU, ...ru.methods }));
    },
  };
}

export const REFRESH_INTERVAL_MS = 1000;
/** How often a thread of a gateway with workers looks whether another thread changed the store, in ms. */
const SHARED_CHANGES_INTERVAL_MS = 50;

/**
 * What the threads of one gateway share about tenancy (plain data and shared memory, handed to each worker
 * in workerData): made by the main thread (Tenancy.share), given to createTenancy in each worker.
 */
export interface TenancyShare {
  changes: SharedArrayBuffer;
  /** The write lock of the threads' connections to the SQLite file (store/write-lock.ts). */
  writeLock: SharedArrayBuffer;
  /** This worker's view of the RU balances (metering/ledger-host.ts). */
  ledger: LedgerHandoff;
  /** The rate limits, the unknown-key throttle and the open connections, in shared memory (limits/shared-*.ts). */
  limits: SharedLimits;
}

interface SharedLimits {
  windows: SharedWindowMemory;
  unknownKeys: SharedUnknownKeysMemory;
  websocket: SharedCountsMemory;
  sse: SharedCountsMemory;
}

/** How a tenancy is shared between threads: one thread alone, the main thread of workers, or a worker. */
export type TenancyThreads = { role: 'alone' } | { role: 'main' } | { role: 'worker'; shared: TenancyShare };
const ROLL_UP_INTERVAL_MS = 60_000;
/**
 * How long rows of the key-change log are kept, in s: every thread reads them within a second, and one that
 * missed rows pruned meanwhile reads every key again (tenancy/directory.ts).
 */
const KEY_CHANGES_KEPT_S = 86_400;

/**
 * The log of the WAL repair after store faults (store/faults.ts). A checkpoint that cannot complete is
 * retried at every flush: its reason is logged when it changes.
 */
function checkpointLog(log: Logger): (r: CheckpointResult) => void {
  let failure: string | undefined;
  return (r) => {
    if (r.ok && r.usedReserve)
      log.warn('WAL checkpointed after a store fault: its space is free again; the room reserve was used, so the disk is nearly full', {
        reserve: 'storage.reserve_bytes',
      });
    else if (r.ok) log.info('WAL checkpointed after a store fault: its space is free again');
    else if (r.reason !== failure)
      log.warn('WAL checkpoint after a store fault did not complete; retried at each flush', { reason: r.reason });
    failure = r.ok ? undefined : r.reason;
  };
}

export function createTenancy(
  config: Config,
  log: Logger,
  metrics?: Pick<Metrics, 'ledgerFlush' | 'ledgerFlushFailures' | 'limitTableEviction'>,
  threads: TenancyThreads = { role: 'alone' },
): Tenancy {
  // A short busy timeout: better-sqlite3 waits synchronously, and the event loop must not stall behind the CLI.
  let flushFailures = 0;
  // One writer at a time among this gateway's threads: the busy timeout is then only ever spent on another process.
  const writeLock = createWriteLock(threads.role === 'worker' ? threads.shared.writeLock : undefined);
  const store = openStore(config.storage.path, {
    busyTimeoutMs: 100,
    writeLock,
    // One thread writes the room reserve; any thread gives it up when its checkpoint needs the room.
    reserveBytes: threads.role === 'worker' ? 0 : config.storage.reserve_bytes,
    onCheckpoint: checkpointLog(log),
  });
  const changes = createStoreChanges(threads.role === 'worker' ? threads.shared.changes : undefined);
  // Every thread compiles the restrictions of the keys it looks up (a grant holds functions: never sent between threads).
  const fences = { balance: config.fences.contracts_cover_balance };
  const directory = createDirectory(store, { changes, fences });
  const ledgerOptions: LedgerHostOptions = {
    flushIntervalMs: config.ledger.flush_interval_ms,
    failuresKept: config.usage.failures_kept,
    metrics,
    onFlushError: (err) => {
      flushFailures++;
      log.error('ledger flush failed; debits kept in memory and retried', { error: errorText(err) });
    },
    onReadError: (err) => log.warn('re-reading RU balances failed; retried', { error: errorText(err) }),
  };
  // With workers, one writer (the main thread's host) and a view in each worker, over balances in shared memory.
  const host = threads.role === 'main' ? createLedgerHost(store, ledgerOptions) : null;
  const ledger: Ledger =
    threads.role === 'worker' ? createLedgerView(threads.shared.ledger, store) : (host ?? createLedger(store, ledgerOptions));
  // With workers every limit is kept in shared memory, made by the main thread: a plan's rps holds for the process.
  const limits: SharedLimits | null =
    threads.role === 'worker'
      ? threads.shared.limits
      : threads.role === 'main'
        ? {
            windows: allocateSharedWindows(),
            unknownKeys: allocateSharedUnknownKeys(),
            websocket: allocateSharedCounts(),
            sse: allocateSharedCounts(),
          }
        : null;
  // A full table reuses an entry counting least (counted in the metric), never letting a key through.
  const onEvict = (table: LimitTable) => ({ onEvict: () => metrics?.limitTableEviction(table) });
  const limiter =
    limits === null ? createSlidingWindowLimiter(onEvict('rate')) : createSharedWindowLimiter(limits.windows, onEvict('rate'));
  const unknownKeys =
    limits === null
      ? createUnknownKeyGuard(onEvict('unknown_keys'))
      : createSharedUnknownKeyGuard(limits.unknownKeys, onEvict('unknown_keys'));
  // In one thread a count is held only while something is open (createConnectionCounts): nothing to evict.
  const connections =
    limits === null
      ? { websocket: createConnectionCounts(), sse: createConnectionCounts() }
      : { websocket: createSharedCounts(limits.websocket, onEvict('websocket')), sse: createSharedCounts(limits.sse, onEvict('sse')) };
  const rollUp = createUsageRollUp(store, { keepMinutesH: config.usage.keep_minutes_h, keepHoursD: config.usage.keep_hours_d });
  const prices = createRuPrices(config);
  let closeRevoked: (endpointId: string) => void = () => {};

  /** Runs `refresh` (reading what another connection wrote), then closes the sockets of revoked keys. */
  const checkStore = (refresh: () => void): void => {
    try {
      refresh();
      for (const id of directory.takeRevokedEndpointIds()) closeRevoked(id);
    } catch (err) {
      log.warn('store check failed', { error: errorText(err) });
    }
  };
  const timers: ReturnType<typeof setInterval>[] = [];
  const every = (ms: number, fn: () => void): void => {
    timers.push(setInterval(fn, ms).unref());
  };
  every(REFRESH_INTERVAL_MS, () => {
    // The ledger's flush runs a checkpoint a store fault made due; a worker's connection, which writes only
    // for the management routes, runs its own here.
    if (threads.role === 'worker') store.checkpointIfDue();
    checkStore(() => {
      if (directory.refreshIfChanged()) ledger.reload();
    });
  });
  if (threads.role === 'worker') {
    // A key deleted through another worker closes this worker's sockets of it within this interval.
    // (A call may have seen the change first: the revoked ids it queued are taken here all the same.)
    every(SHARED_CHANGES_INTERVAL_MS, () =>
      checkStore(() => {
        if (changes.changed()) directory.refreshIfChanged();
      }),
    );
  } else {
    // The usage roll-up writes: the main thread's alone (or the single thread's), as the ledger's writes are.
    every(ROLL_UP_INTERVAL_MS, () => {
      try {
        rollUp.rollUp();
        directory.pruneChanges(Date.now(), KEY_CHANGES_KEPT_S);
      } catch (err) {
        log.warn('usage roll-up failed; retried next minute', { error: errorText(err) });
      }
    });
  }

  return {
    store,
    directory,
    accounts: createDaemonSqliteAccounts(store, directory, { fences }),
    keys: localKeys(directory),
    fleet: null,
    ledger,
    limiter,
    unknownKeys,
    connections,
    ruCost: prices.ruCost,
    flushFailures: () => flushFailures,
    reconfigure: prices.reconfigure,
    storeFault(during, err) {
      store.noteFault(err);
      log.error('store fault; answered 503', { during, error: err.message });
    },
    onRevoked(close) {
      closeRevoked = close;
    },
    share() {
      if (host === null) throw new Error('only the main thread of a gateway with workers shares its tenancy');
      const { handoff, transferList } = host.attach();
      return { shared: { changes: changes.memory, writeLock: writeLock.memory, ledger: handoff, limits: limits! }, transfer: transferList };
    },
    threadEnded(threadId) {
      // A thread ended inside a take would leave its key locked in every other thread.
      if (limits !== null) for (const memory of Object.values(limits)) releaseLocksHeldBy(memory, threadId);
      // One ended inside a store write would stop every writer.
      releaseWriteLockHeldBy(writeLock.memory, threadId);
    },
    async close() {
      for (const timer of timers) clearInterval(timer);
      const flushed = ledger.close();
      store.close();
      return flushed;
    },
  };
}
