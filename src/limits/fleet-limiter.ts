/**
 * The limiter of a gateway in fleet mode: a key's limit holds across every instance through the shared
 * sliding window in Redis (redis-window.ts), and survives Redis going away.
 *
 * While Redis answers, every take is decided there. When a call fails or times out (`commandTimeoutMs`; the
 * connection queues nothing while disconnected, so calls fail at once instead of waiting for a reconnect),
 * the instance marks Redis down, says so through `onStateChange(false, cause)`, and until Redis is back:
 *
 * - `failure: 'open'` (the default): takes are decided by a local sliding window with the key's limit divided
 *   by the instances live at the last roll call (fleet-instances.ts: heartbeats in the last 10 s, this one
 *   included, at least 1), so the fleet together stays near the limit. A take of more units than this share
 *   but no more than the limit is refused for a second (it fits the plan, not this instance's share). At the
 *   switch the local window starts empty: a key may get up to one more share in that second.
 * - `failure: 'closed'`: every take answers UNAVAILABLE (the daemon's 503), for operators who prefer refusing
 *   to limiting loosely.
 *
 * One timer beats every `heartbeatMs` (default 1 s): the roll call while Redis is up, the probe while it is
 * down; a reconnect (tried every RECONNECT_MS) probes at once. So the instance is back on shared limits
 * within about a second of Redis answering again. The first roll call's outcome is the first state reported.
 */
import { createRequire } from 'node:module';
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import type { Redis as RedisClient } from 'ioredis';
import { checkTake, WINDOW_MS } from './entry-log.js';
import { createInstanceRollCall } from './fleet-instances.js';
import { createRedisWindowLimiter } from './redis-window.js';
import { createSlidingWindowLimiter, type Take } from './sliding-window.js';

/** A take's outcome in fleet mode: a Take, or (failure 'closed', Redis down) no decision possible. */
export type FleetTake = Take | { ok: false; unavailable: true };

export const UNAVAILABLE: FleetTake = Object.freeze({ ok: false, unavailable: true });

export interface FleetLimiter {
  /**
   * Takes `units` (default 1) for `key` against `limit` units per second across the fleet: the contract of
   * SlidingWindowLimiter.take (RangeError at once on bad input, Infinity when `units` exceeds `limit`), or
   * UNAVAILABLE while Redis is down with failure 'closed'. Never rejects: a Redis failure is a fallback.
   */
  take(key: string, limit: number, units?: number): Promise<FleetTake>;
  /** Whether takes are decided in Redis now (false before the first roll call answered). */
  redisUp(): boolean;
  /** Instances live at the last roll call, this one included (1 before any). */
  instances(): number;
  /** Resolves once the first roll call has answered or failed (within about a second): await it before serving. */
  ready(): Promise<void>;
  /** Stops the timer, takes this instance out of the roll call and closes the connection. */
  close(): Promise<void>;
}

export interface FleetLimiterOptions {
  /** Redis URL (`redis://[user:password@]host:port/db`, `rediss://` for TLS). */
  url: string;
  /** What takes get while Redis is down (default 'open'): local limits, or UNAVAILABLE. */
  failure?: 'open' | 'closed';
  /** Told the state at the first roll call and at every change after; `cause` is the failure that took Redis down. */
  onStateChange?: (up: boolean, cause?: Error) => void;
  /** Monotonic ms for the local fallback windows (default performance.now); Redis windows use the server's clock. */
  now?: () => number;
  /** How often the roll call (while up) or the probe (while down) runs (default 1000 ms). */
  heartbeatMs?: number;
  /** An instance counts as live this long after its last beat (default 10_000 ms). */
  liveMs?: number;
  /** A Redis call taking longer fails (default 200 ms). */
  commandTimeoutMs?: number;
  /** Prefix of every Redis key (default 'chaingate:'), for fleets sharing one Redis. */
  prefix?: string;
  /** This instance in the roll call (default `<hostname>:<pid>:<random>`). */
  instanceId?: string;
  /** Keys the local fallback tracks at most (default 100_000, see LimiterOptions.maxKeys). */
  maxKeys?: number;
  /**
   * While Redis is away, the instances with a heartbeat within the last `withinMs` (this limiter's
   * `liveMs`) as counted elsewhere (a fleet's PostgreSQL heartbeats), asked every `heartbeatMs`. Without
   * it, or while it fails, the count last read from Redis stays: an instance that started with Redis away
   * would count only itself.
   */
  countLive?: (withinMs: number) => Promise<number>;
}

/** Delay between reconnect attempts (ms): short, so a returning Redis is seen within about a second. */
const RECONNECT_MS = 500;
/** How long a connection attempt may take (ms) before it counts as failed and is tried again. */
const CONNECT_TIMEOUT_MS = 1000;

/**
 * ioredis, loaded by the first fleet limiter: a gateway on one machine never talks to Redis, and the
 * module (with its dependencies, ~7 MB of heap) would otherwise sit in every thread's heap.
 */
const loadRedis = (): typeof RedisClient => (createRequire(import.meta.url)('ioredis') as typeof import('ioredis')).Redis;

function positive(value: number, name: string): number {
  if (!Number.isSafeInteger(value) || value < 1) throw new RangeError(`${name} must be a positive integer of milliseconds`);
  return value;
}

export function createFleetLimiter(opts: FleetLimiterOptions): FleetLimiter {
  const failure = opts.failure ?? 'open';
  if (failure !== 'open' && failure !== 'closed') throw new RangeError("failure must be 'open' or 'closed'");
  const heartbeatMs = positive(opts.heartbeatMs ?? 1000, 'heartbeatMs');
  const liveMs = positive(opts.liveMs ?? 10_000, 'liveMs');
  const commandTimeout = positive(opts.commandTimeoutMs ?? 200, 'commandTimeoutMs');
  const prefix = opts.prefix ?? 'chaingate:';
  const id = opts.instanceId ?? `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;

  const Redis = loadRedis();
  const redis = new Redis(opts.url, {
    commandTimeout,
    connectTimeout: CONNECT_TIMEOUT_MS,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    autoResendUnfulfilledCommands: false,
    retryStrategy: () => RECONNECT_MS,
  });
  // A failed take falls back at once, and tells the state (Redis down) the first time.
  const shared = createRedisWindowLimiter<FleetTake>(redis, {
    prefix,
    onFailure: (err, key, limit, units) => {
      setState(false, err as Error);
      return fallback(key, limit, units);
    },
  });
  const rollCall = createInstanceRollCall(redis, { prefix, id, liveMs });
  const local = createSlidingWindowLimiter({ now: opts.now, maxKeys: opts.maxKeys });

  let up = false;
  let known = false;
  let live = 1;
  let beating = false;
  let counting = false;
  let closed = false;
  let markReady: () => void = () => {};
  const firstState = new Promise<void>((resolve) => {
    markReady = resolve;
  });

  function setState(next: boolean, cause?: Error): void {
    if (closed || (known && up === next)) return;
    known = true;
    up = next;
    markReady();
    opts.onStateChange?.(next, cause);
  }

  async function beat(): Promise<void> {
    // A connection attempt under way ends in 'ready' (which beats) or 'close' (down) within CONNECT_TIMEOUT_MS;
    // a beat now would fail for want of a connection and report Redis down when it may be just coming up.
    if (beating || closed || redis.status === 'connecting' || redis.status === 'connect') return;
    beating = true;
    try {
      live = await rollCall.beat();
      setState(true);
    } catch (err) {
      setState(false, err as Error);
    } finally {
      beating = false;
    }
  }

  // The connection's errors are not thrown anywhere: the last one is the cause told when it closes.
  let lastError: Error | null = null;
  redis.on('error', (err: Error) => {
    lastError = err;
  });
  redis.on('close', () => setState(false, lastError ?? new Error('connection to Redis closed')));
  redis.on('ready', () => {
    lastError = null;
    void beat();
  });
  async function recount(): Promise<void> {
    if (counting || closed || opts.countLive === undefined) return;
    counting = true;
    try {
      const n = await opts.countLive(liveMs);
      if (!up && Number.isSafeInteger(n)) live = Math.max(1, n);
    } catch {
      // The count last known stays.
    } finally {
      counting = false;
    }
  }

  const timer = setInterval(() => {
    void beat();
    if (known && !up) void recount();
  }, heartbeatMs);
  timer.unref();

  function fallback(key: string, limit: number, units: number): FleetTake {
    if (failure === 'closed') return UNAVAILABLE;
    const share = limit / live;
    if (units > share) return { ok: false, retryAfterMs: WINDOW_MS };
    return local.take(key, share, units);
  }

  function take(key: string, limit: number, units = 1): Promise<FleetTake> {
    checkTake(limit, units);
    if (units > limit) return Promise.resolve({ ok: false, retryAfterMs: Infinity });
    if (!up) return Promise.resolve(fallback(key, limit, units));
    return shared.take(key, limit, units);
  }

  async function close(): Promise<void> {
    if (closed) return;
    closed = true;
    clearInterval(timer);
    markReady();
    if (redis.status === 'ready') {
      await rollCall.leave().catch(() => {});
      await redis.quit().catch(() => {});
    }
    redis.disconnect();
  }

  return {
    take,
    redisUp: () => up,
    instances: () => live,
    ready: () => firstState,
    close,
  };
}
