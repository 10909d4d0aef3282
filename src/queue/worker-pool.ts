/**
 * The BullMQ workers of one process: one per registered operation type, each with the type's
 * concurrency and rate limit. Many such processes, on many machines, share one Redis and one
 * Postgres; leases in Postgres keep any item from being handled by two of them at once.
 */
import { Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import type { HandlerRegistry } from '../handlers/registry.ts';
import { HANDLER_DEFAULTS } from '../handlers/registry.ts';
import type { Logger } from '../logger.ts';
import type { Metrics } from '../metrics.ts';
import type { Database } from '../store/index.ts';
import { batchQueueName } from './catalog.ts';
import { createRedisConnection } from './connection.ts';
import { subscribeStops } from './control-channel.ts';
import type { Dispatcher } from './dispatcher.ts';
import { createRunBatchProcessor } from './processors/run-batch.ts';
import { createStopSignals } from './stop-signals.ts';

export interface WorkerPoolOptions {
  db: Database;
  handlers: HandlerRegistry;
  dispatcher: Dispatcher;
  logger: Logger;
  metrics: Metrics;
  redisUrl: string;
  prefix: string;
  leaseTtlMs: number;
  jobLockTtlMs: number;
}

export interface WorkerPool {
  /**
   * Stops taking jobs and lets running batches finish; after `graceMs`, aborts them, which
   * records what was done and gives the rest back for another worker.
   */
  close(graceMs?: number): Promise<void>;
}

export async function startWorkerPool(options: WorkerPoolOptions): Promise<WorkerPool> {
  const stops = createStopSignals();
  const connections: Redis[] = [];
  const subscriber = createRedisConnection(options.redisUrl, 'worker');
  connections.push(subscriber);
  await subscribeStops(subscriber, options.prefix, (message) => stops.stop(message.operation_id, message.reason));

  const processor = createRunBatchProcessor({
    db: options.db,
    handlers: options.handlers,
    dispatcher: options.dispatcher,
    logger: options.logger,
    metrics: options.metrics,
    leaseSeconds: Math.max(1, Math.ceil(options.leaseTtlMs / 1000)),
    watchStop: (operationId) => stops.watch(operationId),
  });

  const workers = options.handlers.types.map((type) => {
    const handler = options.handlers.get(type);
    const connection = createRedisConnection(options.redisUrl, 'worker');
    connections.push(connection);
    const rate = handler?.rateLimit;
    const worker = new Worker(batchQueueName(type), processor, {
      connection,
      prefix: options.prefix,
      concurrency: handler?.concurrency ?? HANDLER_DEFAULTS.concurrency,
      // A job is one batch: the limiter counts batches of the handler's fixed batch size.
      ...(rate && handler?.batchSize
        ? { limiter: { max: Math.max(1, Math.floor(rate.max / handler.batchSize)), duration: rate.durationMs } }
        : {}),
      lockDuration: options.jobLockTtlMs,
      stalledInterval: options.jobLockTtlMs,
      // Steps are idempotent (leases), so a job may stall many times (repeated crashes) safely.
      maxStalledCount: 100,
    });
    worker.on('failed', (job, error) => {
      options.logger.error({ err: error, job_id: job?.id, queue: worker.name }, 'batch job failed');
    });
    worker.on('error', (error) => {
      options.logger.warn({ err: error, queue: worker.name }, 'worker error');
    });
    return worker;
  });
  // "Started" means connected and taking jobs: other processes (and tests) may rely on it.
  await Promise.all(workers.map((worker) => worker.waitUntilReady()));
  options.logger.info({ types: options.handlers.types }, 'workers started');

  let closing: Promise<void> | undefined;
  return {
    close(graceMs = 10_000) {
      closing ??= (async () => {
        const timer = setTimeout(() => stops.stopAll('worker shutting down'), graceMs);
        await Promise.all(workers.map((worker) => worker.close()));
        clearTimeout(timer);
        for (const connection of connections) {
          connection.disconnect();
        }
      })();
      return closing;
    },
  };
}
