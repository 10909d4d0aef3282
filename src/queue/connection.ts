/**
 * Redis connections for BullMQ: to one server, or an ioredis `Cluster` over a Redis Cluster.
 * Workers retry commands forever (`maxRetriesPerRequest: null`) so a Redis restart (or a
 * cluster failover) pauses them instead of failing jobs; producers fail fast instead of queueing
 * commands while Redis is away (`enableOfflineQueue: false`), which is what an HTTP request wants.
 */
import { Cluster, Redis } from 'ioredis';
import { ProblemError } from '../domain/problem-error.ts';
import type { Logger } from '../logger.ts';
import { describeRedisTarget, type RedisTarget } from './redis-target.ts';

export type RedisRole = 'worker' | 'producer';

/** A connection to one Redis or to a cluster: every command opspad sends works on either. */
export type RedisClient = Redis | Cluster;

// Back off up to 2 s between reconnects; never give up (Redis may be restarting).
const reconnectDelay = (times: number) => Math.min(times * 100, 2000);

/** Credentials and TLS of a cluster's nodes, from its seed URLs (config/parsers.ts makes them agree). */
function clusterNodeOptions(nodes: readonly string[]): { username?: string; password?: string; tls?: object } {
  const urls = nodes.map((node) => new URL(node));
  const withCredentials = urls.find((url) => url.username || url.password);
  return {
    ...(withCredentials?.username ? { username: decodeURIComponent(withCredentials.username) } : {}),
    ...(withCredentials?.password ? { password: decodeURIComponent(withCredentials.password) } : {}),
    ...(urls[0]?.protocol === 'rediss:' ? { tls: {} } : {}),
  };
}

function seedNodes(nodes: readonly string[]): { host: string; port: number }[] {
  return nodes.map((node) => {
    const url = new URL(node);
    return { host: url.hostname.replace(/^\[(.*)\]$/, '$1'), port: Number(url.port || 6379) };
  });
}

/**
 * `autoPipeline`: commands issued while the event loop handles one round of I/O go out in one
 * write (ioredis's auto-pipelining) — for the per-request counters, where many requests in
 * flight each send one command; never for BullMQ's connections, which manage their own.
 */
export function createRedisConnection(
  target: RedisTarget,
  role: RedisRole,
  options: { autoPipeline?: boolean } = {},
): RedisClient {
  const enableAutoPipelining = options.autoPipeline === true;
  const redis =
    target.kind === 'single'
      ? new Redis(target.url, {
          maxRetriesPerRequest: role === 'worker' ? null : 1,
          enableOfflineQueue: role === 'worker',
          retryStrategy: reconnectDelay,
          enableAutoPipelining,
        })
      : new Cluster(seedNodes(target.nodes), {
          enableOfflineQueue: role === 'worker',
          enableAutoPipelining,
          clusterRetryStrategy: reconnectDelay,
          redisOptions: { ...clusterNodeOptions(target.nodes), maxRetriesPerRequest: role === 'worker' ? null : 1 },
        });
  // Connection errors are retried by ioredis; readiness and job failures report them.
  redis.on('error', () => {});
  return redis;
}

/**
 * Resolves once `redis` takes commands (a producer refuses them until then); rejects after
 * `timeoutMs` (Redis went away right after answering) instead of holding start-up for good.
 */
export async function untilReady(redis: RedisClient, timeoutMs = 10_000): Promise<void> {
  if (redis.status === 'ready') {
    return;
  }
  await new Promise<void>((resolve, reject) => {
    const settle = (error?: Error) => {
      clearTimeout(timer);
      redis.off('ready', onReady);
      redis.off('end', onEnd);
      if (error) {
        reject(error);
      } else {
        resolve();
      }
    };
    const onReady = () => settle();
    const onEnd = () => settle(new Error('the Redis connection closed before it was ready'));
    const timer = setTimeout(() => settle(new Error(`Redis was not ready within ${timeoutMs} ms`)), timeoutMs);
    redis.once('ready', onReady);
    redis.once('end', onEnd);
  });
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

/**
 * Fails with a message saying what to do when Redis does not answer within `timeoutMs`; for a
 * cluster, when no seed node answers or the cluster does not report `cluster_state:ok` (ioredis's
 * ready check) in time.
 */
export async function assertRedisReachable(target: RedisTarget, timeoutMs = 3000): Promise<void> {
  const redis =
    target.kind === 'single'
      ? new Redis(target.url, {
          lazyConnect: true,
          maxRetriesPerRequest: 0,
          enableOfflineQueue: false,
          retryStrategy: () => null,
          connectTimeout: timeoutMs,
        })
      : new Cluster(seedNodes(target.nodes), {
          lazyConnect: true,
          enableOfflineQueue: false,
          clusterRetryStrategy: () => null,
          redisOptions: { ...clusterNodeOptions(target.nodes), maxRetriesPerRequest: 0, connectTimeout: timeoutMs },
        });
  let lastError: unknown;
  redis.on('error', (error: unknown) => {
    lastError = error;
  });
  let timer: NodeJS.Timeout | undefined;
  try {
    // A cluster client retries its seeds on its own schedule: bound the whole attempt.
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
    });
    await Promise.race([redis.connect().then(() => redis.ping()), timeout]);
  } catch (error) {
    const cause = lastError ?? error;
    const reason = cause instanceof Error ? cause.message : String(cause);
    const single = target.kind === 'single';
    const what = single ? `Redis at ${describeRedisTarget(target)}` : describeRedisTarget(target);
    const setting = single ? 'REDIS_URL' : 'REDIS_CLUSTER_NODES';
    throw new ProblemError(
      `${what} is not reachable (${reason}), and the queue backend is Redis (${setting} or OPSPAD_QUEUE_BACKEND=redis is set)`,
      `Start it (e.g. redis-server), or set ${setting} to one that runs, or unset both to keep the jobs in Postgres`,
    );
  } finally {
    clearTimeout(timer);
    redis.disconnect();
  }
}
