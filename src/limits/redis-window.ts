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
    /** RATE_SCRIPT: `numKeys`, the keys, then (key index, limit, units, count) per run of takes alike; (admitted, wait ms) per run. */
    chaingateTakes(numKeys: number, ...args: Array<string | number>): Result<number[], Context>;
  }
}

export interface RedisWindowLimiter<F = never> {
  /**
   * Takes `units` (default 1) for `key` against `limit` units per second, all or nothing, exactly as
   * SlidingWindowLimiter.take (Infinity when `units` exceeds `limit`, answered without asking Redis). Throws
   * RangeError at once when `limit` or `units` is not a positive finite number; rejects when Redis does not
   * answer (its own machinery broke: the caller picks fail-open or fail-closed).
   */
  take(key: string, limit: number, units?: number): Promise<Take | F>;
}

export interface RedisWindowOptions<F = never> {
  /**
   * When set, a take whose call fails resolves with what this answers for it instead of rejecting: the
   * caller's fallback without a promise more per take on the hot path.
   */
  onFailure?: (err: unknown, key: string, limit: number, units: number) => F;
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
local out = {}
for i = 1, #ARGV, 4 do
  local k = tonumber(ARGV[i])
  local log = logs[k]
  if not log then log = load(k); logs[k] = log end
  local limit, take, count = tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3])
  -- count takes alike, in order: once one is refused, the rest are (the clock does not move within a call)
  local admitted, wait = 0, 0
  while admitted < count do
    wait = settle(log, limit, take)
    if wait > 0 then break end
    admitted = admitted + 1
  end
  out[#out + 1] = admitted; out[#out + 1] = wait
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
return out
`;

interface Pending<F> {
  key: string;
  limit: number;
  units: number;
  resolve: (take: Take | F) => void;
  reject: (err: unknown) => void;
}

export function createRedisWindowLimiter<F = never>(redis: Redis, opts: RedisWindowOptions<F> = {}): RedisWindowLimiter<F> {
  const onFailure = opts.onFailure;
  const fail = (p: Pending<F>, err: unknown): void => {
    if (onFailure === undefined) p.reject(err);
    else p.resolve(onFailure(err, p.key, p.limit, p.units));
  };
  const prefix = (opts.prefix ?? 'chaingate:') + 'rl:';
  const maxBatch = opts.maxBatch ?? 256;
  if (!Number.isSafeInteger(maxBatch) || maxBatch < 1) throw new RangeError('maxBatch must be a positive integer');
  redis.defineCommand('chaingateTakes', { lua: RATE_SCRIPT });

  let queue: Array<Pending<F>> = [];

  function send(batch: Array<Pending<F>>): void {
    // Per key, in order, runs of takes alike (limit and units) go as one (slot, limit, units, count): the
    // script settles them in order as it would one by one, with 4 arguments and 2 answers for the run.
    // Keys are independent windows, so only the order within a key matters.
    const groups = new Map<string, Array<{ limit: number; units: number; takes: Array<Pending<F>> }>>();
    for (const p of batch) {
      let runs = groups.get(p.key);
      if (runs === undefined) groups.set(p.key, (runs = []));
      const last = runs[runs.length - 1];
      if (last !== undefined && last.limit === p.limit && last.units === p.units) last.takes.push(p);
      else runs.push({ limit: p.limit, units: p.units, takes: [p] });
    }
    const keys: string[] = [];
    const args: Array<string | number> = [];
    const order: Array<Array<Pending<F>>> = [];
    for (const [key, runs] of groups) {
      keys.push(prefix + key);
      for (const run of runs) {
        args.push(keys.length, run.limit, run.units, run.takes.length);
        order.push(run.takes);
      }
    }
    redis.chaingateTakes(keys.length, ...keys, ...args).then(
      (out) => {
        order.forEach((takes, r) => {
          const admitted = out[2 * r];
          const wait = out[2 * r + 1];
          if (typeof admitted !== 'number' || typeof wait !== 'number') {
            const err = new Error(`rate script answered ${out.length / 2} runs for ${order.length}`);
            for (const p of takes) fail(p, err);
            return;
          }
          for (let i = 0; i < takes.length; i++) takes[i]!.resolve(i < admitted ? ADMITTED : { ok: false, retryAfterMs: wait });
        });
      },
      (err: unknown) => {
        for (const p of batch) fail(p, err);
      },
    );
  }

  function flush(): void {
    const all = queue;
    queue = [];
    for (let i = 0; i < all.length; i += maxBatch) send(all.slice(i, i + maxBatch));
  }

  function take(key: string, limit: number, units = 1): Promise<Take | F> {
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
