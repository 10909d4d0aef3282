/**
 * The fair share's state in Redis, beside the type's BullMQ queue keys: sorted sets of the
 * running batches and of the registered workers (scored by expiry), of the parked jobs (scored
 * by when they were parked), an arrivals counter, and the views of the waiting organizations the
 * processes decide with (a hash each, sent once a view). A decision is one script, atomic for
 * every process sharing the queue. On a Redis Cluster the prefix is the hash tag `{…}` (redis-target.ts),
 * so these keys share one slot and a script may touch them together.
 */
import { randomUUID } from 'node:crypto';
import { FAIR_SHARE_WEIGHT } from '../domain/fair-share.ts';
import { batchQueueName } from './catalog.ts';
import type { RedisClient } from './connection.ts';
import type { FairAcquireRequest, FairShareStore } from './fair-share-store.ts';

/** The Redis keys of a type's fair share, beside its BullMQ queue's keys. */
export function fairShareKeys(prefix: string, operationType: string) {
  const base = `${prefix}:${batchQueueName(operationType)}:fair`;
  return {
    running: `${base}:running`,
    workers: `${base}:workers`,
    arrivals: `${base}:arrivals`,
    parked: `${base}:parked`,
    /** A published view of the waiting organizations (ACQUIRE_LUA), one per view. */
    view: (id: string) => `${base}:view:${id}`,
  };
}

/**
 * How long a published view lives: well past the second a process trusts a view it read (see
 * fair-share.ts), so this bounds only the views of a process that died.
 */
const VIEW_KEY_TTL_MS = 60_000;
/** How long the view before lives once a process publishes the next: its decisions end. */
const PREVIOUS_VIEW_TTL_MS = 5_000;

/**
 * KEYS: running, workers, arrivals, view. ARGV: now, organization, member, expiry, the caller's
 * arrivals count, the organization's weight.
 * The view is a hash the store published: `o:<organization>` → `<lanes> <weight>` per waiting
 * organization, `n` their count, `w` the sum of their weights. The sums over every
 * waiting organization that the rule needs depend only on the slots and the total weight: they
 * are computed once per view and pair (`a:<slots>:<total>`), and a decision reads the view's
 * entries of the organizations running batches only. So a decision costs the same whether 10 or
 * 10,000 organizations wait (the view travels once, not with every decision).
 * Returns {1, arrivals} (started: the member is added), {0, arrivals} (refused),
 * {-1, arrivals} (the caller's view is older than the last arrival: refresh and ask again) or
 * {-2, arrivals} (the view is gone: publish it again).
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
local waitingCount = tonumber(redis.call('HGET', KEYS[4], 'n'))
if not waitingCount then
  return {-2, arrivals}
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
local function waitingEntry(of)
  local value = redis.call('HGET', KEYS[4], 'o:' .. of)
  if not value then
    return nil, nil
  end
  local lanes, weight = string.match(value, '^(%d+) (%d+)$')
  return tonumber(lanes), tonumber(weight)
end
local org = ARGV[2]
local orgLanes, orgWeight = waitingEntry(org)
local listed = orgLanes ~= nil
if not listed then
  orgWeight = tonumber(ARGV[6])
end
local total = tonumber(redis.call('HGET', KEYS[4], 'w')) + (listed and 0 or orgWeight)
local function share(weight)
  return math.max(1, math.floor(slots * weight / math.max(1, total)))
end
-- Over every waiting organization: the sum of their guarantees, and of their guarantees held to
-- the lanes their work can use.
local sumsField = 'a:' .. slots .. ':' .. total
local sumShare, sumUsable
local sums = redis.call('HGET', KEYS[4], sumsField)
if sums then
  local a, b = string.match(sums, '^(%d+) (%d+)$')
  sumShare, sumUsable = tonumber(a), tonumber(b)
else
  sumShare, sumUsable = 0, 0
  local fields = redis.call('HGETALL', KEYS[4])
  for i = 1, #fields, 2 do
    if string.sub(fields[i], 1, 2) == 'o:' then
      local lanes, weight = string.match(fields[i + 1], '^(%d+) (%d+)$')
      local guaranteed = share(tonumber(weight))
      sumShare = sumShare + guaranteed
      sumUsable = sumUsable + math.min(guaranteed, tonumber(lanes))
    end
  end
  redis.call('HSET', KEYS[4], sumsField, string.format('%d %d', sumShare, sumUsable))
end
local mine = running[org] or 0
local ok
if mine < share(orgWeight) then
  ok = mine == 0
  if not ok then
    local sum = sumShare
    if not listed then
      sum = sum + share(orgWeight)
    end
    if sum <= slots then
      ok = true
    else
      -- Waiting organizations other than this one that run no batch.
      local idle = waitingCount - (listed and 1 or 0)
      for other, _ in pairs(running) do
        if other ~= org and redis.call('HEXISTS', KEYS[4], 'o:' .. other) == 1 then
          idle = idle - 1
        end
      end
      ok = busy + 1 + idle <= slots
    end
  end
else
  -- Slots the other waiting organizations still need to reach their guarantee (no more than
  -- their work can use): every one's usable guarantee, less what those running already hold.
  local reserved = sumUsable
  if listed then
    reserved = reserved - math.min(share(orgWeight), orgLanes)
  end
  for other, count in pairs(running) do
    if other ~= org then
      local lanes, weight = waitingEntry(other)
      if lanes then
        local usable = math.min(share(weight), lanes)
        reserved = reserved + math.max(0, usable - count) - usable
      end
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
    redis.defineCommand('opspadFairAcquire', { numberOfKeys: 4, lua: ACQUIRE_LUA });
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
  // Each view this process decides with is published once, under a key of its own (decisions
  // that ask at once share the publication). The view before is left a few seconds, for the
  // decisions still holding it.
  const storeId = randomUUID();
  const published = new WeakMap<FairAcquireRequest['waiting'], Promise<string>>();
  let views = 0;
  let latest: string | undefined;
  const publish = async (waiting: FairAcquireRequest['waiting']): Promise<string> => {
    const key = keys.view(`${storeId}:${++views}`);
    const previous = latest;
    latest = key;
    let weights = 0;
    const entries: (string | number)[] = [];
    for (const [organization, lanes, weight = FAIR_SHARE_WEIGHT.default] of waiting) {
      entries.push(`o:${organization}`, `${lanes} ${weight}`);
      weights += weight;
    }
    const publication = redis()
      .multi()
      .hset(key, 'n', waiting.length, 'w', weights, ...entries);
    publication.pexpire(key, VIEW_KEY_TTL_MS);
    if (previous !== undefined) {
      publication.pexpire(previous, PREVIOUS_VIEW_TTL_MS);
    }
    const failed = (await publication.exec())?.find(([error]) => error !== null);
    if (failed) {
      throw failed[0];
    }
    return key;
  };
  /** The view's key, published now unless it is already (or was, as `stale`: again). */
  const publishOnce = (waiting: FairAcquireRequest['waiting'], stale?: Promise<string>): Promise<string> => {
    let key = published.get(waiting);
    if (key === undefined || key === stale) {
      const publishing = publish(waiting);
      published.set(waiting, publishing);
      // A failed publication is not kept: the next decision publishes again.
      publishing.catch(() => {
        if (published.get(waiting) === publishing) {
          published.delete(waiting);
        }
      });
      key = publishing;
    }
    return key;
  };
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
      const decide = async (viewKey: string) => {
        const [code, arrivals] = await redis().opspadFairAcquire(
          keys.running,
          keys.workers,
          keys.arrivals,
          viewKey,
          request.now,
          request.organizationId,
          request.member,
          request.expiry,
          request.arrivals,
          request.weight ?? FAIR_SHARE_WEIGHT.default,
        );
        return { code, arrivals };
      };
      if (request.arrivals === '') {
        // No view yet: the script answers -1 before it reads one.
        const { arrivals } = await decide(keys.view('none'));
        return { code: -1, arrivals };
      }
      const first = publishOnce(request.waiting);
      let answer = await decide(await first);
      if (answer.code === -2) {
        // Gone (a view older than its expiry): published again, once for every decision on it.
        // Gone twice in a row cannot happen within the expiry; the caller would read again.
        answer = await decide(await publishOnce(request.waiting, first));
      }
      return { code: answer.code === 1 ? 1 : answer.code === 0 ? 0 : -1, arrivals: answer.arrivals };
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
      if (latest !== undefined) {
        await redis().del(latest);
        latest = undefined;
      }
    },
    async announceArrival() {
      await options.producer.incr(keys.arrivals);
    },
  };
}
