/**
 * Fair share of a handler type's worker slots across organizations, for the whole fleet.
 *
 * BullMQ hands a free slot the job at the head of the queue, whoever it belongs to. Before a
 * batch job leases anything, its worker asks Redis — in one script, atomically for every process
 * sharing the queue — whether the job's organization may start one more batch under the rule of
 * domain/fair-share.ts, given:
 * - the fleet's slots: every worker process registers its concurrency for the type, with an
 *   expiry it keeps renewing (a dead process drops out by itself);
 * - the batches running now, by organization: an entry per running batch, with an expiry the
 *   running process renews (a dead process's entries drop out by themselves);
 * - who is waiting: the organizations with work of the type not yet handed out, read from
 *   Postgres (the source of truth) and cached. A counter in Redis ("arrivals"), incremented before
 *   the jobs of a newly started operation are queued, tells the script when the cache predates a
 *   newcomer, so a decision is never taken on a view that misses an organization whose job is in
 *   the queue.
 * A job refused is parked — moved to the delayed set and noted in a parked set — instead of
 * holding the slot; the slot takes the next job. Every batch that ends wakes the longest-parked
 * job, and a timer wakes as many as this process has idle slots, so parked work comes back as
 * soon as there is room (a parked job also wakes by itself after `parkMs`, should every wake-up
 * be lost).
 */
import type { Job, Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Logger } from '../logger.ts';
import { type Database, listWaitingOrganizations } from '../store/index.ts';
import { batchQueueName } from './catalog.ts';

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

/** Tells the fleet that an organization's work of this type may be new (before queueing it). */
export async function announceArrival(redis: Redis, prefix: string, operationType: string): Promise<void> {
  await redis.incr(fairShareKeys(prefix, operationType).arrivals);
}

/**
 * KEYS: running, workers, arrivals. ARGV: now, organization, member, expiry, the caller's
 * arrivals count, then (organization, lanes) pairs of the waiting view.
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
local waiting, competing, listed = {}, 0, false
for i = 6, #ARGV - 1, 2 do
  waiting[ARGV[i]] = tonumber(ARGV[i + 1])
  competing = competing + 1
  if ARGV[i] == org then
    listed = true
  end
end
if not listed then
  competing = competing + 1
end
local share = math.max(1, math.floor(slots / competing))
local ok = (running[org] or 0) < share
if not ok then
  local reserved = 0
  for other, lanes in pairs(waiting) do
    if other ~= org then
      reserved = reserved + math.max(0, math.min(share, lanes) - (running[other] or 0))
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

interface FairShareRedis extends Redis {
  opspadFairAcquire(...args: (string | number)[]): Promise<[number, string]>;
  opspadFairRelease(...args: string[]): Promise<string | null>;
}

function withScripts(redis: Redis): FairShareRedis {
  const scripted = redis as FairShareRedis;
  if (typeof scripted.opspadFairAcquire !== 'function') {
    redis.defineCommand('opspadFairAcquire', { numberOfKeys: 3, lua: ACQUIRE_LUA });
    redis.defineCommand('opspadFairRelease', { numberOfKeys: 2, lua: RELEASE_LUA });
  }
  return scripted;
}

export interface FairShareOptions {
  /** A connection for commands (never a blocking one). */
  redis: Redis;
  /** The type's queue, to wake parked jobs. */
  queue: Queue;
  db: Database;
  prefix: string;
  operationType: string;
  /** This process's slots for the type (the worker's concurrency). */
  slots: number;
  /** The handler's fixed batch size, if it has one. */
  batchSize: number | undefined;
  /** Unique per process: names its registration. */
  workerId: string;
  /** How long a registration or running entry lives without being renewed. */
  entryTtlMs: number;
  /** How long a refused job stays parked unless woken. */
  parkMs: number;
  /** How long the waiting view is trusted when no arrival says otherwise. */
  viewTtlMs?: number;
  logger: Logger;
}

/** A started batch's hold on its slot. */
export interface FairSlot {
  /** Frees the slot (idempotent) and wakes the longest-parked job. */
  release(): void;
}

export interface FairShare {
  /** A slot for a batch of `organizationId`, or undefined when it must wait its turn. */
  acquire(organizationId: string, jobId: string): Promise<FairSlot | undefined>;
  /** Parks a refused job (the processor then throws BullMQ's DelayedError). */
  park(job: Job, token: string | undefined): Promise<void>;
  close(): Promise<void>;
}

interface WaitingView {
  arrivals: string;
  at: number;
  args: (string | number)[];
}

export function createFairShare(options: FairShareOptions): FairShare {
  const redis = withScripts(options.redis);
  const keys = fairShareKeys(options.prefix, options.operationType);
  const registration = `${options.workerId} ${options.slots}`;
  const viewTtlMs = options.viewTtlMs ?? 1000;
  /** Members (`<organization> <job id>`) of the batches this process runs. */
  const mine = new Set<string>();
  let view: WaitingView | undefined;
  let refreshing: Promise<WaitingView> | undefined;
  let closed = false;
  const registered = redis
    .zadd(keys.workers, Date.now() + options.entryTtlMs, registration)
    .catch((error: unknown) => options.logger.warn({ err: error }, 'could not register for the fair share'));

  const refresh = (arrivals: string): Promise<WaitingView> => {
    refreshing ??= listWaitingOrganizations(options.db, {
      operationType: options.operationType,
      queuePrefix: options.prefix,
      batchSize: options.batchSize,
    })
      .then((waiting) => {
        // Read after the arrivals count it is stamped with: it includes every arrival counted.
        view = { arrivals, at: Date.now(), args: [...waiting].flat() };
        return view;
      })
      .finally(() => {
        refreshing = undefined;
      });
    return refreshing;
  };

  const wake = async (jobIds: readonly string[]) => {
    for (const id of jobIds) {
      const job = await options.queue.getJob(id);
      // Already woken by its delay, or gone: nothing to do.
      await job?.promote().catch(() => {});
    }
  };

  const heartbeat = async () => {
    const expiry = Date.now() + options.entryTtlMs;
    const pipeline = redis.pipeline().zadd(keys.workers, expiry, registration);
    for (const member of mine) {
      pipeline.zadd(keys.running, 'XX', expiry, member);
    }
    await pipeline.exec();
    const idle = options.slots - mine.size;
    if (idle > 0) {
      const popped = await redis.zpopmin(keys.parked, idle);
      await wake(popped.filter((_, index) => index % 2 === 0));
    }
  };
  const timer = setInterval(
    () => {
      heartbeat().catch((error: unknown) => options.logger.warn({ err: error }, 'fair-share heartbeat failed'));
    },
    Math.max(50, Math.floor(Math.min(options.entryTtlMs / 3, viewTtlMs))),
  );
  timer.unref();

  return {
    async acquire(organizationId, jobId) {
      const member = `${organizationId} ${jobId}`;
      await registered;
      let current = view && Date.now() - view.at < viewTtlMs ? view : undefined;
      let started = false;
      // Twice is enough unless operations arrive faster than a view is read; then start anyway
      // (counted) rather than keep the slot idle.
      for (let asked = 0; asked < 3 && !started; asked++) {
        const [code, arrivals] = await redis.opspadFairAcquire(
          keys.running,
          keys.workers,
          keys.arrivals,
          Date.now(),
          organizationId,
          member,
          Date.now() + options.entryTtlMs,
          current?.arrivals ?? '',
          ...(current?.args ?? []),
        );
        if (code === 0) {
          return undefined;
        }
        started = code === 1;
        if (!started) {
          current = await refresh(arrivals);
        }
      }
      if (!started) {
        await redis.zadd(keys.running, Date.now() + options.entryTtlMs, member);
      }
      mine.add(member);
      let released = false;
      return {
        release() {
          if (released) {
            return;
          }
          released = true;
          mine.delete(member);
          if (closed) {
            void redis.zrem(keys.running, member).catch(() => {});
            return;
          }
          redis
            .opspadFairRelease(keys.running, keys.parked, member)
            .then((parked) => (parked ? wake([parked]) : undefined))
            .catch((error: unknown) => options.logger.warn({ err: error }, 'could not free a fair-share slot'));
        },
      };
    },
    async park(job, token) {
      await job.moveToDelayed(Date.now() + options.parkMs, token);
      await redis.zadd(keys.parked, Date.now(), String(job.id));
    },
    async close() {
      closed = true;
      clearInterval(timer);
      await redis.zrem(keys.workers, registration).catch(() => {});
    },
  };
}
