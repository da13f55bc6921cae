/**
 * The fleet's roll call: each gateway instance puts itself, scored by the Redis server's clock, in one sorted
 * set (`<prefix>instances`) on every beat, and learns how many instances beat within the last `liveMs`,
 * itself included. While Redis is unreachable, that last count divides a key's limit between the instances
 * (fleet-limiter.ts), so the fleet as a whole stays near the limit without a shared window.
 *
 * One script does the beat, the pruning and the count atomically, on the server's clock, so instances with
 * skewed clocks agree on who is live. The set expires `liveMs` after the last beat of any instance: by then
 * none of its members counts. Members are instance ids (host, process, a random tag), never a secret.
 */
import type { Redis, Result } from 'ioredis';

declare module 'ioredis' {
  interface RedisCommander<Context> {
    /** BEAT_SCRIPT: the set's key, this instance's id, liveMs; the instances live, this one included. */
    chaingateBeat(key: string, id: string, liveMs: number): Result<number, Context>;
  }
}

export interface InstanceRollCall {
  /** Records this instance as live now and answers how many are (at least 1); rejects when Redis does not answer. */
  beat(): Promise<number>;
  /** Takes this instance out of the count at once (at close); rejects when Redis does not answer. */
  leave(): Promise<void>;
}

const BEAT_SCRIPT = `
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local live = tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - live)
redis.call('PEXPIRE', KEYS[1], live)
return redis.call('ZCARD', KEYS[1])
`;

export function createInstanceRollCall(redis: Redis, opts: { prefix: string; id: string; liveMs: number }): InstanceRollCall {
  const key = opts.prefix + 'instances';
  redis.defineCommand('chaingateBeat', { lua: BEAT_SCRIPT, numberOfKeys: 1 });
  return {
    beat: async () => Math.max(1, await redis.chaingateBeat(key, opts.id, opts.liveMs)),
    leave: async () => {
      await redis.zrem(key, opts.id);
    },
  };
}
