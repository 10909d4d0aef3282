/**
 * The provider limits' state in Redis, beside the type's BullMQ queue keys: per limit key a hash
 * for its token bucket (expiring once idle long enough to be full again), a sorted set of the
 * batches holding it (scored by expiry) with a hash of their items, and a sorted set of the jobs
 * parked at its concurrency. A decision is one script, atomic for every process; on a Redis
 * Cluster the prefix is a hash tag (redis-target.ts), so a key's four Redis keys share a slot.
 */
import { batchQueueName } from './catalog.ts';
import type { RedisClient } from './connection.ts';
import type { KeyLimitStore } from './key-limit-store.ts';

/** The Redis keys of one limit key of a type. */
export function keyLimitKeys(prefix: string, operationType: string, key: string) {
  const base = `${prefix}:${batchQueueName(operationType)}:limit:${key}`;
  return { bucket: `${base}:bucket`, holds: `${base}:holds`, items: `${base}:items`, parked: `${base}:parked` };
}

/**
 * KEYS: bucket, holds, items, parked. ARGV: now, member (`<job id> <batch>`), want, rate max
 * (0: none), rate interval ms, concurrency (0: none), expiry, parked-set ttl. Returns {items,
 * wait ms, limited by}. A job refused at the concurrency is put in the parked set (for the next
 * release to wake); one granted is taken out of it.
 * The rule is domain/key-limits.ts's grantItems; keep the two equivalent.
 */
export const KEY_ACQUIRE_LUA = `
local now = tonumber(ARGV[1])
local member = ARGV[2]
local items = math.max(0, math.floor(tonumber(ARGV[3])))
local rmax = tonumber(ARGV[4])
local rms = tonumber(ARGV[5])
local conc = tonumber(ARGV[6])
redis.call('ZREM', KEYS[2], member)
redis.call('HDEL', KEYS[3], member)
redis.call('ZREM', KEYS[4], string.match(member, '^(%S+)'))
if conc > 0 then
  local lapsed = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)
  if #lapsed > 0 then
    redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
    redis.call('HDEL', KEYS[3], unpack(lapsed))
  end
  local held = 0
  for _, n in ipairs(redis.call('HVALS', KEYS[3])) do
    held = held + tonumber(n)
  end
  items = math.min(items, math.max(0, conc - held))
  if items == 0 then
    -- Parked here, atomically with the refusal: a release from now on wakes it.
    redis.call('ZADD', KEYS[4], now, string.match(member, '^(%S+)'))
    redis.call('PEXPIRE', KEYS[4], tonumber(ARGV[8]))
    return {0, 0, 'concurrency'}
  end
end
if rmax > 0 then
  local bucket = redis.call('HMGET', KEYS[1], 'tokens', 'at')
  local tokens = rmax
  if bucket[1] then
    tokens = math.min(rmax, tonumber(bucket[1]) + math.max(0, now - tonumber(bucket[2])) * rmax / rms)
  end
  local needed = math.min(items, rmax)
  if tokens < needed then
    redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', now)
    redis.call('PEXPIRE', KEYS[1], rms * 2 + 1000)
    return {0, math.max(1, math.ceil((needed - tokens) * rms / rmax)), 'rate'}
  end
  items = math.min(items, math.floor(tokens))
  redis.call('HSET', KEYS[1], 'tokens', tostring(tokens - items), 'at', now)
  redis.call('PEXPIRE', KEYS[1], rms * 2 + 1000)
end
if conc > 0 then
  redis.call('ZADD', KEYS[2], ARGV[7], member)
  redis.call('HSET', KEYS[3], member, items)
end
return {items, 0, ''}
`;

/**
 * KEYS: bucket, holds, items, parked. ARGV: member, granted, leased, rate max (0: none).
 * Gives the unused tokens back, shrinks the hold to what was leased, and pops a parked job when
 * that freed room.
 */
const KEY_SETTLE_LUA = `
local unused = tonumber(ARGV[2]) - tonumber(ARGV[3])
local rmax = tonumber(ARGV[4])
if unused > 0 and rmax > 0 then
  local tokens = redis.call('HGET', KEYS[1], 'tokens')
  if tokens then
    redis.call('HSET', KEYS[1], 'tokens', tostring(math.min(rmax, tonumber(tokens) + unused)))
  end
end
if redis.call('HEXISTS', KEYS[3], ARGV[1]) == 1 then
  if tonumber(ARGV[3]) > 0 then
    redis.call('HSET', KEYS[3], ARGV[1], ARGV[3])
  else
    redis.call('HDEL', KEYS[3], ARGV[1])
    redis.call('ZREM', KEYS[2], ARGV[1])
  end
  if unused > 0 then
    return redis.call('ZPOPMIN', KEYS[4])[1]
  end
end
return false
`;

/** KEYS: holds, items, parked. ARGV: member. Ends a hold and pops a parked job when it had one. */
const KEY_RELEASE_LUA = `
redis.call('ZREM', KEYS[1], ARGV[1])
if redis.call('HDEL', KEYS[2], ARGV[1]) == 1 then
  return redis.call('ZPOPMIN', KEYS[3])[1]
end
return false
`;

/** How long a parked-set entry outlives its last park (its job wakes by its own delay anyway). */
const PARKED_TTL_MS = 3_600_000;

type KeyLimitRedis = RedisClient & {
  opspadKeyAcquire(...args: (string | number)[]): Promise<[number, number, string]>;
  opspadKeySettle(...args: (string | number)[]): Promise<string | null>;
  opspadKeyRelease(...args: string[]): Promise<string | null>;
};

function withScripts(redis: RedisClient): KeyLimitRedis {
  const scripted = redis as unknown as KeyLimitRedis;
  if (typeof scripted.opspadKeyAcquire !== 'function') {
    redis.defineCommand('opspadKeyAcquire', { numberOfKeys: 4, lua: KEY_ACQUIRE_LUA });
    redis.defineCommand('opspadKeySettle', { numberOfKeys: 4, lua: KEY_SETTLE_LUA });
    redis.defineCommand('opspadKeyRelease', { numberOfKeys: 3, lua: KEY_RELEASE_LUA });
  }
  return scripted;
}

/** `commands`: the workers' connection that retries while Redis is away (never a blocking one). */
export function redisKeyLimitStore(options: {
  commands: () => RedisClient;
  prefix: string;
  operationType: string;
}): KeyLimitStore {
  const redis = () => withScripts(options.commands());
  const keysOf = (key: string) => keyLimitKeys(options.prefix, options.operationType, key);
  return {
    async acquire(request) {
      const keys = keysOf(request.key);
      const [items, waitMs, limitedBy] = await redis().opspadKeyAcquire(
        keys.bucket,
        keys.holds,
        keys.items,
        keys.parked,
        request.now,
        request.member,
        request.want,
        request.limits.rate?.max ?? 0,
        request.limits.rate?.intervalMs ?? 1,
        request.limits.concurrency ?? 0,
        request.expiry,
        PARKED_TTL_MS,
      );
      return {
        items: Number(items),
        waitMs: Number(waitMs),
        ...(limitedBy === 'rate' || limitedBy === 'concurrency' ? { limitedBy } : {}),
      };
    },
    async settle(request) {
      const keys = keysOf(request.key);
      const popped = await redis().opspadKeySettle(
        keys.bucket,
        keys.holds,
        keys.items,
        keys.parked,
        request.member,
        request.granted,
        request.leased,
        request.limits.rate?.max ?? 0,
      );
      return popped ?? undefined;
    },
    async release(key, member) {
      const keys = keysOf(key);
      return (await redis().opspadKeyRelease(keys.holds, keys.items, keys.parked, member)) ?? undefined;
    },
    async renew(holds, expiry) {
      if (holds.length === 0) {
        return;
      }
      const pipeline = redis().pipeline();
      for (const hold of holds) {
        pipeline.zadd(keysOf(hold.key).holds, 'XX', expiry, hold.member);
      }
      await pipeline.exec();
    },
    async hasRoom(key, concurrency, now) {
      const keys = keysOf(key);
      const live = await redis().zrangebyscore(keys.holds, `(${now}`, '+inf');
      if (live.length === 0) {
        return true;
      }
      const items = await redis().hmget(keys.items, ...live);
      return items.reduce((sum, n) => sum + Number(n ?? 0), 0) < concurrency;
    },
    async sweep() {
      // Redis expires what is left behind by itself (the bucket's and the parked set's TTLs).
    },
  };
}
