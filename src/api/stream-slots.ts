/**
 * Open event streams per API key, counted across every API process: a sorted set in Redis per
 * key, one member per open stream, scored by when its lease runs out (by Redis's clock, so the
 * processes' clocks need not agree). A stream renews its lease while it runs and removes it when
 * it ends; a process that dies leaves leases that lapse within `leaseMs`, so a crash never keeps
 * a key's slots taken for good. Taking a slot (drop lapsed leases, count, add) is one script, so
 * concurrent opens never exceed the cap.
 *
 * If Redis does not answer, a stream opens anyway (and a warning is logged): losing the counter
 * must not take the event streams down with it, as with the per-key request limit.
 */
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Logger } from '../logger.ts';
import { throttledWarning } from './window-counter.ts';

/**
 * KEYS[1] the key's set; ARGV: member, lease ms, cap. Returns 1 when the slot was taken, 0 when
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

export interface StreamSlot {
  /** Extends the lease; call it well within `leaseMs`. */
  renew(): Promise<void>;
  release(): Promise<void>;
}

export interface StreamSlots {
  readonly maxPerKey: number;
  /** A slot for one more stream of `keyId`, or null when the key holds `maxPerKey` already. */
  acquire(keyId: string): Promise<StreamSlot | null>;
}

const NO_SLOT: StreamSlot = { renew: async () => {}, release: async () => {} };

export function redisStreamSlots(
  redis: Redis,
  prefix: string,
  { maxPerKey, leaseMs }: { maxPerKey: number; leaseMs: number },
  logger: Logger,
): StreamSlots {
  const warn = throttledWarning((error) =>
    logger.warn({ err: error }, 'stream counter unavailable; opening event streams without the per-key cap'),
  );
  return {
    maxPerKey,
    async acquire(keyId) {
      const key = `${prefix}:streams:${keyId}`;
      const member = randomUUID();
      try {
        if (Number(await redis.eval(ACQUIRE, 1, key, member, leaseMs, maxPerKey)) !== 1) {
          return null;
        }
      } catch (error) {
        warn(error);
        return NO_SLOT;
      }
      return {
        async renew() {
          await redis.eval(RENEW, 1, key, member, leaseMs).catch(warn);
        },
        async release() {
          await redis.zrem(key, member).catch(warn);
        },
      };
    },
  };
}
