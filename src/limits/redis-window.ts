/**
 * The sliding-window rate limiter over Redis, for a fleet of gateways limiting a key together: the same
 * take and the same promises as the in-process limiter (see the top of sliding-window.ts), kept for every
 * instance that talks to one Redis server.
 *
 * A key's window is the in-process limiter's entry log (entry-log.ts: entries of (time, units), merged up to
 * MERGE_SHARE of the limit, at most MAX_ENTRIES, dropped once their latest take is a full second old), kept
 * in one Redis string (a MessagePack array) and read, decided and written by ONE Lua script, which Redis runs
 * atomically: no other take of any instance falls between the read and the write. Times come from the Redis
 * server's clock (`TIME`), so instances whose clocks disagree still share one time line. So, across the fleet:
 *
 * - never over: no one-second interval of the server's clock holds more than the limit;
 * - never refused below 98 % of the limit (the merge share, as on one machine);
 * - bounded: at most MAX_ENTRIES entries (under 3 KB in Redis) per key, and a key expires
 *   WINDOW_MS + EXPIRY_SLACK_MS after its last write, when every unit it holds has left the window, so idle
 *   keys vanish.
 *
 * A server clock that steps back has the entries it left in the future counted as of now: nothing is admitted
 * early and nobody is locked out past a second. A step forward lets the units of that second leave early (at
 * most one more limit), as it would for any limiter on that clock.
 *
 * Takes issued within one event-loop turn are sent together, one script call for up to `maxBatch` of them:
 * the script reads and writes each key once per call and Redis runs one script instead of one per take (on
 * loopback, 200 takes in flight: some 4 times the takes per second of a call per take, with or without ioredis'
 * autopipelining, and a tenth of Redis's time per take).
 * A take whose call fails (Redis unreachable, a timeout) rejects: that is the caller's to decide
 * (fleet-limiter.ts falls back to local limits). Redis keys are `<prefix>rl:<key>`; callers pass limiter keys
 * (`ep:<endpointId>`, `ip:<addr>`), never an API key. One script call touches the keys of all its takes: that
 * needs one Redis server (standalone, or a Sentinel-managed primary); Redis Cluster would want them in one slot.
 */
import type { Redis, Result } from 'ioredis';
import { ADMITTED, checkTake, MAX_ENTRIES, MERGE_SHARE, WINDOW_MS } from './entry-log.js';
import type { Take } from './sliding-window.js';

declare module 'ioredis' {
  interface RedisCommander<Context> {
    /** RATE_SCRIPT: `numKeys`, the keys, then (key index, limit, units) per take; a wait (ms) per take, 0 when admitted. */
    chaingateTakes(numKeys: number, ...args: Array<string | number>): Result<number[], Context>;
  }
}

export interface RedisWindowLimiter {
  /**
   * Takes `units` (default 1) for `key` against `limit` units per second, all or nothing, exactly as
   * SlidingWindowLimiter.take (Infinity when `units` exceeds `limit`, answered without asking Redis). Throws
   * RangeError at once when `limit` or `units` is not a positive finite number; rejects when Redis does not
   * answer (its own machinery broke: the caller picks fail-open or fail-closed).
   */
  take(key: string, limit: number, units?: number): Promise<Take>;
}

export interface RedisWindowOptions {
  /** Prefix of every Redis key (default 'chaingate:'); a key's window is `<prefix>rl:<key>`. */
  prefix?: string;
  /** Takes sent in one script call at most (default 256); more within one turn go in several calls. 1: a call per take. */
  maxBatch?: number;
}

/** How long a window's key outlives its last write beyond the window, so no live unit is dropped early. */
const EXPIRY_SLACK_MS = 100;

/** One script call: per key touched (KEYS[k]), load the log once, settle each take in order, write back once. */
const RATE_SCRIPT = `
local WINDOW, SHARE, MAX, EXPIRY = ${WINDOW_MS}, ${MERGE_SHARE}, ${MAX_ENTRIES}, ${WINDOW_MS + EXPIRY_SLACK_MS}
local clock = redis.call('TIME')
local at = tonumber(clock[1]) * 1000 + tonumber(clock[2]) / 1000
local logs = {}
local function load(k)
  local times, units, sum, changed = {}, {}, 0, false
  local blob = redis.call('GET', KEYS[k])
  if blob then
    local flat = cmsgpack.unpack(blob)
    for i = 1, #flat, 2 do
      local t, u = flat[i], flat[i + 1]
      if t <= at - WINDOW then
        changed = true
      else
        if t > at then t = at; changed = true end
        times[#times + 1] = t; units[#units + 1] = u; sum = sum + u
      end
    end
  end
  return { times = times, units = units, sum = sum, changed = changed }
end
local function settle(log, limit, take)
  local excess = log.sum + take - limit
  if excess > 0 then
    local freed, t = 0, at
    for i = 1, #log.times do
      t = log.times[i]; freed = freed + log.units[i]
      if freed >= excess then break end
    end
    return math.max(1, math.ceil(t + WINDOW - at))
  end
  local n = #log.times
  log.sum = log.sum + take
  log.changed = true
  if n > 0 and log.units[n] + take <= limit * SHARE then
    log.units[n] = log.units[n] + take
    log.times[n] = at
    return 0
  end
  if n == MAX then
    log.units[2] = log.units[2] + log.units[1]
    table.remove(log.times, 1); table.remove(log.units, 1); n = n - 1
  end
  log.times[n + 1] = at; log.units[n + 1] = take
  return 0
end
local waits = {}
for i = 1, #ARGV, 3 do
  local k = tonumber(ARGV[i])
  local log = logs[k]
  if not log then log = load(k); logs[k] = log end
  waits[#waits + 1] = settle(log, tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2]))
end
for k, log in pairs(logs) do
  if log.changed then
    if #log.times == 0 then
      redis.call('DEL', KEYS[k])
    else
      local flat = {}
      for i = 1, #log.times do flat[2 * i - 1] = log.times[i]; flat[2 * i] = log.units[i] end
      redis.call('SET', KEYS[k], cmsgpack.pack(flat), 'PX', EXPIRY)
    end
  end
end
return waits
`;

interface Pending {
  key: string;
  limit: number;
  units: number;
  resolve: (take: Take) => void;
  reject: (err: unknown) => void;
}

export function createRedisWindowLimiter(redis: Redis, opts: RedisWindowOptions = {}): RedisWindowLimiter {
  const prefix = (opts.prefix ?? 'chaingate:') + 'rl:';
  const maxBatch = opts.maxBatch ?? 256;
  if (!Number.isSafeInteger(maxBatch) || maxBatch < 1) throw new RangeError('maxBatch must be a positive integer');
  redis.defineCommand('chaingateTakes', { lua: RATE_SCRIPT });

  let queue: Pending[] = [];

  function send(batch: Pending[]): void {
    const slots = new Map<string, number>();
    const args: Array<string | number> = [];
    for (const p of batch) {
      let slot = slots.get(p.key);
      if (slot === undefined) slots.set(p.key, (slot = slots.size + 1));
      args.push(slot, p.limit, p.units);
    }
    const keys = [...slots.keys()].map((key) => prefix + key);
    redis.chaingateTakes(keys.length, ...keys, ...args).then(
      (waits) => {
        batch.forEach((p, i) => {
          const wait = waits[i];
          if (wait === 0) p.resolve(ADMITTED);
          else if (typeof wait === 'number') p.resolve({ ok: false, retryAfterMs: wait });
          else p.reject(new Error(`rate script answered ${waits.length} waits for ${batch.length} takes`));
        });
      },
      (err: unknown) => {
        for (const p of batch) p.reject(err);
      },
    );
  }

  function flush(): void {
    const all = queue;
    queue = [];
    for (let i = 0; i < all.length; i += maxBatch) send(all.slice(i, i + maxBatch));
  }

  function take(key: string, limit: number, units = 1): Promise<Take> {
    checkTake(limit, units);
    if (units > limit) return Promise.resolve({ ok: false, retryAfterMs: Infinity });
    return new Promise((resolve, reject) => {
      // setImmediate, not a microtask: the takes of every callback of this turn's poll phase go together.
      if (queue.length === 0) setImmediate(flush);
      queue.push({ key, limit, units, resolve, reject });
    });
  }

  return { take };
}
