/**
 * Redis connections for BullMQ. Workers retry commands forever (`maxRetriesPerRequest: null`) so a
 * Redis restart pauses them instead of failing jobs; producers fail fast instead of queueing
 * commands while Redis is away (`enableOfflineQueue: false`), which is what an HTTP request wants.
 */
import { Redis } from 'ioredis';
import type { Logger } from '../logger.ts';

export type RedisRole = 'worker' | 'producer';

export function createRedisConnection(url: string, role: RedisRole): Redis {
  const redis = new Redis(url, {
    maxRetriesPerRequest: role === 'worker' ? null : 1,
    enableOfflineQueue: role === 'worker',
    // Back off up to 2 s between reconnects; never give up (Redis may be restarting).
    retryStrategy: (times) => Math.min(times * 100, 2000),
  });
  // Connection errors are retried by ioredis; readiness and job failures report them.
  redis.on('error', () => {});
  return redis;
}

export function redactedUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) {
      parsed.password = '***';
    }
    return parsed.toString();
  } catch {
    return 'REDIS_URL';
  }
}

/**
 * Logs a queue's connection errors at most once a minute (they repeat on every reconnect try
 * while Redis is away); without a listener BullMQ would print each one to the console.
 */
export function logQueueErrors(
  emitter: { on(event: 'error', listener: (error: Error) => void): unknown; name: string },
  logger: Logger | undefined,
): void {
  let last = 0;
  emitter.on('error', (error) => {
    if (logger && Date.now() - last > 60_000) {
      last = Date.now();
      logger.warn({ err: error, queue: emitter.name }, 'queue connection error (retrying)');
    }
  });
}

/** Fails with a message saying what to do when Redis does not answer within `timeoutMs`. */
export async function assertRedisReachable(url: string, timeoutMs = 3000): Promise<void> {
  const redis = new Redis(url, {
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    retryStrategy: () => null,
    connectTimeout: timeoutMs,
  });
  let lastError: unknown;
  redis.on('error', (error) => {
    lastError = error;
  });
  try {
    await redis.connect();
    await redis.ping();
  } catch (error) {
    const reason = (lastError ?? error) instanceof Error ? ((lastError ?? error) as Error).message : String(error);
    throw new Error(
      `Redis at ${redactedUrl(url)} is not reachable (${reason}). The queue backend is Redis (REDIS_URL or OPSPAD_QUEUE_BACKEND=redis is set): start it (e.g. redis-server), or set REDIS_URL to one that runs, or unset both to keep the jobs in Postgres.`,
    );
  } finally {
    redis.disconnect();
  }
}
