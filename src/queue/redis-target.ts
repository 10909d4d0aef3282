/**
 * Which Redis the jobs live in: one server (REDIS_URL) or a Redis Cluster (REDIS_CLUSTER_NODES),
 * and the key prefix opspad uses there.
 *
 * On a cluster every key opspad writes carries the hash tag `{<OPSPAD_QUEUE_PREFIX>}` (BullMQ's
 * documented way to run on Cluster): BullMQ's scripts touch several keys of a queue at once,
 * and the fair share's script several keys of a type, and Redis Cluster runs a multi-key
 * script only when all its keys hash to one slot. One tag for the whole deployment puts all of
 * opspad's keys on one master (its replicas take over if it fails): opspad's jobs carry batches
 * of ids, so one Redis is rarely what limits it (docs/deployment.md).
 *
 * On one server the prefix stays exactly OPSPAD_QUEUE_PREFIX, as it always was: tagging it
 * there would gain nothing and would leave the jobs, job schedulers and counters already stored
 * under the old prefix behind on upgrade. The deployment's identity (the `queue_prefix`
 * recorded on its operations, which the reconciler reads) is OPSPAD_QUEUE_PREFIX either way, so
 * moving a deployment from one Redis to a cluster loses no operation: the reconciler queues
 * every active one again on the cluster.
 */
import type { Config } from '../config/env.ts';

export type RedisTarget = { kind: 'single'; url: string } | { kind: 'cluster'; nodes: readonly string[] };

/** The configured Redis, for `OPSPAD_QUEUE_BACKEND=redis`. */
export function redisTargetOf(config: Pick<Config, 'REDIS_URL' | 'REDIS_CLUSTER_NODES'>): RedisTarget {
  if (config.REDIS_CLUSTER_NODES) {
    return { kind: 'cluster', nodes: config.REDIS_CLUSTER_NODES };
  }
  if (!config.REDIS_URL) {
    throw new Error('The Redis queue backend needs REDIS_URL or REDIS_CLUSTER_NODES.');
  }
  return { kind: 'single', url: config.REDIS_URL };
}

/** The prefix of every key opspad and BullMQ write: hash-tagged on a cluster (see above). */
export function redisKeyPrefix(target: RedisTarget, queuePrefix: string): string {
  return target.kind === 'cluster' ? `{${queuePrefix}}` : queuePrefix;
}

/** A URL without its password, for logs and messages. */
export function redactedUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) {
      parsed.password = '***';
    }
    return parsed.toString();
  } catch {
    return 'the Redis URL';
  }
}

/** Where the jobs live, for logs and messages (never a password): a URL, or a sentence's subject. */
export function describeRedisTarget(target: RedisTarget): string {
  if (target.kind === 'single') {
    return redactedUrl(target.url);
  }
  return `The Redis Cluster at ${target.nodes.map(redactedUrl).join(', ')}`;
}
