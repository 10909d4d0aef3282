/**
 * The Redis backend: BullMQ's default. One producer connection (failing fast, for requests)
 * serves the queues, the control channel's publisher, the request counters and the stream
 * leases; one command connection (retrying while Redis is away) the workers' fair share; each
 * worker and each control subscription gets a connection of its own (a blocking read or a
 * subscription holds its connection).
 */
import { Queue, Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import type { QueueBackend } from './backend.ts';
import { assertRedisReachable, createRedisConnection, redactedUrl } from './connection.ts';
import { redisControlChannel } from './control-channel.ts';
import { redisFairShareStore } from './fair-share-redis.ts';
import { redisCappedLeases, redisWindowCounter } from './redis-counters.ts';

/** Fails (saying what to do) when Redis does not answer; then connects as the backend. */
export async function createRedisQueueBackend(options: { url: string; prefix: string }): Promise<QueueBackend> {
  await assertRedisReachable(options.url);
  const connections: Redis[] = [];
  const connect = (role: 'worker' | 'producer') => {
    const connection = createRedisConnection(options.url, role);
    connections.push(connection);
    return connection;
  };
  const producer = connect('producer');
  let commands: Redis | undefined;
  const disconnect = () => {
    for (const connection of connections) {
      connection.disconnect();
    }
  };
  return {
    kind: 'redis',
    location: `${redactedUrl(options.url)} (key prefix ${options.prefix})`,
    namespace: options.prefix,
    createQueue: (name, settings) => new Queue(name, { ...settings, connection: producer, prefix: options.prefix }),
    createWorker: (name, processor, settings) =>
      new Worker(name, processor, { ...settings, connection: connect('worker'), prefix: options.prefix }),
    control: redisControlChannel({
      publisher: producer,
      prefix: options.prefix,
      newSubscriber: () => connect('worker'),
    }),
    counter: redisWindowCounter(producer, options.prefix),
    leases: redisCappedLeases(producer, options.prefix),
    fairShare: (operationType) =>
      redisFairShareStore({
        // Never a blocking connection: BullMQ's workers block on theirs.
        commands: () => {
          commands ??= connect('worker');
          return commands;
        },
        producer,
        prefix: options.prefix,
        operationType,
      }),
    readinessChecks: { redis: async () => void (await producer.ping()) },
    close: async () => disconnect(),
    force: disconnect,
  };
}
