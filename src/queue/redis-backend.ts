/**
 * The Redis backend: BullMQ's default, on one Redis or a Redis Cluster (keys hash-tagged there:
 * see redis-target.ts). One producer connection (failing fast, for requests)
 * serves the queues, the control channel's publisher and the stream leases; another, auto-
 * pipelined, the request counters; one command connection (retrying while Redis is away) the workers' fair share; each
 * worker and each control subscription gets a connection of its own (a blocking read or a
 * subscription holds its connection).
 */
import { Queue, Worker } from 'bullmq';
import type { QueueBackend } from './backend.ts';
import { assertRedisReachable, createRedisConnection, type RedisClient, untilReady } from './connection.ts';
import { redisControlChannel } from './control-channel.ts';
import { redisFairShareStore } from './fair-share-redis.ts';
import { redisKeyLimitStore } from './key-limits-redis.ts';
import { redisCappedLeases, redisWindowCounter } from './redis-counters.ts';
import { describeRedisTarget, type RedisTarget, redisKeyPrefix } from './redis-target.ts';

/**
 * Fails (saying what to do) when Redis does not answer; then connects as the backend.
 * `queuePrefix` is OPSPAD_QUEUE_PREFIX; the keys' prefix is derived from it (redis-target.ts).
 */
export async function createRedisQueueBackend(options: {
  target: RedisTarget;
  queuePrefix: string;
}): Promise<QueueBackend> {
  await assertRedisReachable(options.target);
  const prefix = redisKeyPrefix(options.target, options.queuePrefix);
  const connections: RedisClient[] = [];
  const connect = (role: 'worker' | 'producer', autoPipeline = false) => {
    const connection = createRedisConnection(options.target, role, { autoPipeline });
    connections.push(connection);
    return connection;
  };
  const producer = connect('producer');
  // What every request sends (its rate counter, the sign-in failures of its address) goes on a
  // connection of its own, auto-pipelined: the commands of the requests in flight share a write.
  const counters = connect('producer', true);
  // A producer refuses commands until it is connected; on a cluster that takes a slot map.
  await Promise.all([untilReady(producer), untilReady(counters)]).catch((error: unknown) => {
    producer.disconnect();
    counters.disconnect();
    throw error;
  });
  let commands: RedisClient | undefined;
  // Never a blocking connection: BullMQ's workers block on theirs.
  const commandConnection = () => {
    commands ??= connect('worker');
    return commands;
  };
  const disconnect = () => {
    for (const connection of connections) {
      connection.disconnect();
    }
  };
  return {
    kind: 'redis',
    location: `${describeRedisTarget(options.target)} (key prefix ${prefix})`,
    namespace: prefix,
    createQueue: (name, settings) => new Queue(name, { ...settings, connection: producer, prefix }),
    createWorker: (name, processor, settings) =>
      new Worker(name, processor, { ...settings, connection: connect('worker'), prefix }),
    control: redisControlChannel({
      publisher: producer,
      prefix,
      newSubscriber: () => connect('worker'),
    }),
    counter: redisWindowCounter(counters, prefix),
    leases: redisCappedLeases(producer, prefix),
    fairShare: (operationType) => redisFairShareStore({ commands: commandConnection, producer, prefix, operationType }),
    keyLimits: (operationType) => redisKeyLimitStore({ commands: commandConnection, prefix, operationType }),
    readinessChecks: { redis: async () => void (await producer.ping()) },
    close: async () => disconnect(),
    force: disconnect,
  };
}
