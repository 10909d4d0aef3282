/**
 * The request counters and capped leases of the Redis backend, under the deployment's prefix:
 * a counter is `<prefix>:<key>:<window>`, expiring on its own; a key's leases are a sorted set
 * `<prefix>:<key>` scored by when each lapses, by Redis's clock (the processes' clocks need not
 * agree). Taking a lease (drop lapsed ones, count, add) is one script, so concurrent takers never
 * exceed the cap.
 */
import type { CappedLeases, WindowCounter } from './backend.ts';
import type { RedisClient } from './connection.ts';

/** KEYS[1] the counter; ARGV[1] its expiry in ms. Returns the new count. */
const INCREMENT = `
local n = redis.call('INCR', KEYS[1])
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return n`;

export function redisWindowCounter(redis: RedisClient, prefix: string): WindowCounter {
  return {
    async increment(key, window, ttlMs) {
      // One command (a MULTI is not auto-pipelined): counted and given its expiry atomically.
      return Number(await redis.eval(INCREMENT, 1, `${prefix}:${key}:${window}`, ttlMs));
    },
    async read(key, window) {
      return Number((await redis.get(`${prefix}:${key}:${window}`)) ?? 0);
    },
  };
}

/**
 * KEYS[1] the key's set; ARGV: member, lease ms, cap. Returns 1 when the lease was taken, 0 when
 * the key already holds `cap` live leases.
 */
const ACQUIRE = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1`;

/** KEYS[1] the key's set; ARGV: member, lease ms. Extends a lease that has not lapsed. */
const RENEW = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[2]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1`;

export function redisCappedLeases(redis: RedisClient, prefix: string): CappedLeases {
  return {
    async acquire(key, member, leaseMs, cap) {
      return Number(await redis.eval(ACQUIRE, 1, `${prefix}:${key}`, member, leaseMs, cap)) === 1;
    },
    async renew(key, member, leaseMs) {
      await redis.eval(RENEW, 1, `${prefix}:${key}`, member, leaseMs);
    },
    async release(key, member) {
      await redis.zrem(`${prefix}:${key}`, member);
    },
  };
}
