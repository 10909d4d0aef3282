/**
 * The fair share's state in Redis, beside the type's BullMQ queue keys: sorted sets of the
 * running batches and of the registered workers (scored by expiry), of the parked jobs (scored
 * by when they were parked), and an arrivals counter. A decision is one script, atomic for every
 * process sharing the queue. On a Redis Cluster the prefix is the hash tag `{…}` (redis-target.ts),
 * so these keys share one slot and a script may touch them together.
 */
import { FAIR_SHARE_WEIGHT } from '../domain/fair-share.ts';
import { batchQueueName } from './catalog.ts';
import type { RedisClient } from './connection.ts';
import type { FairShareStore } from './fair-share-store.ts';

/** The Redis keys of a type's fair share, beside its BullMQ queue's keys. */
export function fairShareKeys(prefix: string, operationType: string) {
  const base = `${prefix}:${batchQueueName(operationType)}:fair`;
  return {
    running: `${base}:running`,
    workers: `${base}:workers`,
    arrivals: `${base}:arrivals`,
    parked: `${base}:parked`,
  };
}

/**
 * KEYS: running, workers, arrivals. ARGV: now, organization, member, expiry, the caller's
 * arrivals count, the organization's weight, then (organization, lanes, weight) triples of the
 * waiting view.
 * Returns {1, arrivals} (started: the member is added), {0, arrivals} (refused) or
 * {-1, arrivals} (the caller's view is older than the last arrival: refresh and ask again).
 * The rule is domain/fair-share.ts's mayStart; keep the two equivalent.
 */
export const ACQUIRE_LUA = `
local now = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local arrivals = redis.call('GET', KEYS[3]) or '0'
if arrivals ~= ARGV[5] then
  return {-1, arrivals}
end
redis.call('ZREM', KEYS[1], ARGV[3])
local slots = 0
for _, worker in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
  slots = slots + (tonumber(string.match(worker, ' (%d+)$')) or 0)
end
local running, busy = {}, 0
for _, entry in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  local org = string.match(entry, '^(%S+) ')
  if org then
    running[org] = (running[org] or 0) + 1
    busy = busy + 1
  end
end
local org = ARGV[2]
local weights = {}
weights[org] = tonumber(ARGV[6])
local waiting, total, listed = {}, 0, false
for i = 7, #ARGV - 2, 3 do
  waiting[ARGV[i]] = tonumber(ARGV[i + 1])
  weights[ARGV[i]] = tonumber(ARGV[i + 2])
  total = total + weights[ARGV[i]]
  if ARGV[i] == org then
    listed = true
  end
end
if not listed then
  total = total + weights[org]
end
local function share(of)
  return math.max(1, math.floor(slots * weights[of] / math.max(1, total)))
end
local mine = running[org] or 0
local ok
if mine < share(org) then
  ok = mine == 0
  if not ok then
    local sum = 0
    if not listed then
      sum = share(org)
    end
    for other, _ in pairs(waiting) do
      sum = sum + share(other)
    end
    if sum <= slots then
      ok = true
    else
      local idle = 0
      for other, _ in pairs(waiting) do
        if other ~= org and (running[other] or 0) == 0 then
          idle = idle + 1
        end
      end
      ok = busy + 1 + idle <= slots
    end
  end
else
  local reserved = 0
  for other, lanes in pairs(waiting) do
    if other ~= org then
      reserved = reserved + math.max(0, math.min(share(other), lanes) - (running[other] or 0))
    end
  end
  ok = busy + 1 + reserved <= slots
end
if ok then
  redis.call('ZADD', KEYS[1], ARGV[4], ARGV[3])
  return {1, arrivals}
end
return {0, arrivals}
`;

/** KEYS: running, parked. ARGV: member. Ends a batch and pops the longest-parked job id, if any. */
const RELEASE_LUA = `
redis.call('ZREM', KEYS[1], ARGV[1])
local popped = redis.call('ZPOPMIN', KEYS[2])
return popped[1]
`;

type FairShareRedis = RedisClient & {
  opspadFairAcquire(...args: (string | number)[]): Promise<[number, string]>;
  opspadFairRelease(...args: string[]): Promise<string | null>;
};

function withScripts(redis: RedisClient): FairShareRedis {
  const scripted = redis as unknown as FairShareRedis;
  if (typeof scripted.opspadFairAcquire !== 'function') {
    redis.defineCommand('opspadFairAcquire', { numberOfKeys: 3, lua: ACQUIRE_LUA });
    redis.defineCommand('opspadFairRelease', { numberOfKeys: 2, lua: RELEASE_LUA });
  }
  return scripted;
}

/**
 * `commands` (a connection that retries while Redis is away) serves the workers' side;
 * `producer` (one that fails fast) the arrivals an HTTP request announces.
 */
export function redisFairShareStore(options: {
  commands: () => RedisClient;
  producer: RedisClient;
  prefix: string;
  operationType: string;
}): FairShareStore {
  const keys = fairShareKeys(options.prefix, options.operationType);
  const redis = () => withScripts(options.commands());
  const registrationMember = (registration: { id: string; slots: number }) =>
    `${registration.id} ${registration.slots}`;
  return {
    async heartbeat(registration, running, expiry, wake) {
      const pipeline = redis().pipeline().zadd(keys.workers, expiry, registrationMember(registration));
      for (const member of running) {
        pipeline.zadd(keys.running, 'XX', expiry, member);
      }
      await pipeline.exec();
      if (wake <= 0) {
        return [];
      }
      const popped = await redis().zpopmin(keys.parked, wake);
      return popped.filter((_, index) => index % 2 === 0);
    },
    async acquire(request) {
      const [code, arrivals] = await redis().opspadFairAcquire(
        keys.running,
        keys.workers,
        keys.arrivals,
        request.now,
        request.organizationId,
        request.member,
        request.expiry,
        request.arrivals,
        request.weight ?? FAIR_SHARE_WEIGHT.default,
        ...request.waiting.flatMap(([organization, lanes, weight]) => [
          organization,
          lanes,
          weight ?? FAIR_SHARE_WEIGHT.default,
        ]),
      );
      return { code: code === 1 ? 1 : code === 0 ? 0 : -1, arrivals };
    },
    async forceStart(member, _organizationId, expiry) {
      await redis().zadd(keys.running, expiry, member);
    },
    async finish(member) {
      return (await redis().opspadFairRelease(keys.running, keys.parked, member)) ?? undefined;
    },
    async drop(member) {
      await redis().zrem(keys.running, member);
    },
    async park(jobId, now) {
      await redis().zadd(keys.parked, now, jobId);
    },
    async unregister(registration) {
      await redis().zrem(keys.workers, registrationMember(registration));
    },
    async announceArrival() {
      await options.producer.incr(keys.arrivals);
    },
  };
}
