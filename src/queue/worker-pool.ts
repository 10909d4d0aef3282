/**
 * The BullMQ workers of one process: one per registered operation type, each with the type's
 * concurrency and rate limit, sharing the type's slots fairly between organizations across the
 * fleet (fair-share.ts). Many such processes, on many machines, share one queue backend and one
 * Postgres; leases in Postgres keep any item from being handled by two of them at once.
 */
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { HandlerRegistry } from '../handlers/registry.ts';
import { HANDLER_DEFAULTS } from '../handlers/registry.ts';
import type { Logger } from '../logger.ts';
import type { Metrics } from '../metrics.ts';
import type { Database } from '../store/index.ts';
import type { QueueBackend } from './backend.ts';
import { batchQueueName } from './catalog.ts';
import type { Dispatcher } from './dispatcher.ts';
import { createFairShare, type FairShare } from './fair-share.ts';
import { createKeyLimiter, type KeyLimiter, type KeyLimitOverrideLookup } from './key-limiter.ts';
import { createRunBatchProcessor } from './processors/run-batch.ts';
import { createStopSignals } from './stop-signals.ts';

export interface WorkerPoolOptions {
  db: Database;
  handlers: HandlerRegistry;
  dispatcher: Dispatcher;
  logger: Logger;
  metrics: Metrics;
  backend: QueueBackend;
  /** This deployment's OPSPAD_QUEUE_PREFIX (the fair share counts only its own operations). */
  queuePrefix: string;
  leaseTtlMs: number;
  jobLockTtlMs: number;
  /** A batch's time budget (OPSPAD_BATCH_TIMEOUT), unless its handler sets `batchTimeoutMs`. */
  batchTimeoutMs: number;
  /** How long a handler may run on after its signal fired (OPSPAD_BATCH_GRACE). */
  batchGraceMs: number;
  /** How long a job goes on with its lane's next batches (OPSPAD_LANE_SLICE; 0: one batch a job). */
  laneSliceMs?: number;
  /** Organizations' own provider limits (`opspad orgs limits --handler`). */
  keyLimitOverride?: KeyLimitOverrideLookup;
}

export interface WorkerPool {
  /**
   * Stops taking jobs and lets running batches finish; after `graceMs`, aborts them, which
   * records what was done and gives the rest back for another worker. A handler that ignores
   * the abort is left behind after OPSPAD_BATCH_GRACE: close never waits for it.
   */
  close(graceMs?: number): Promise<void>;
}

/** How soon a worker retries a queue call that failed (see runRetryDelay below). */
const QUEUE_RETRY_DELAY_MS = 1000;

export async function startWorkerPool(options: WorkerPoolOptions): Promise<WorkerPool> {
  const stops = createStopSignals();
  const subscription = await options.backend.control.subscribe((message) =>
    stops.stop(message.operation_id, message.reason),
  );

  // Says where the process runs and since when (Bull Board lists it: board.ts), and is unique.
  const workerId = `${hostname()}:${process.pid}:${Date.now()}:${randomUUID().slice(0, 8)}`;
  const fairShares = new Map<string, FairShare>();
  const keyLimiters = new Map<string, KeyLimiter>();
  for (const type of options.handlers.types) {
    const handler = options.handlers.get(type);
    const queue = options.dispatcher.queues.find((candidate) => candidate.name === batchQueueName(type));
    if (!queue) {
      continue;
    }
    const budgetMs = handler?.batchTimeoutMs ?? options.batchTimeoutMs;
    // Unless woken sooner: by then every batch running when it was parked has ended.
    const parkMs = budgetMs + options.batchGraceMs;
    const limits = handler?.limits;
    if (limits) {
      keyLimiters.set(
        type,
        createKeyLimiter({
          store: options.backend.keyLimits(type),
          queue,
          db: options.db,
          operationType: type,
          own: {
            ...(limits.rate ? { rate: { max: limits.rate.max, intervalMs: limits.rate.durationMs } } : {}),
            ...(limits.concurrency === undefined ? {} : { concurrency: limits.concurrency }),
          },
          override: options.keyLimitOverride,
          entryTtlMs: options.jobLockTtlMs,
          parkMs,
          logger: options.logger,
        }),
      );
    }
    fairShares.set(
      type,
      createFairShare({
        store: options.backend.fairShare(type),
        queue,
        db: options.db,
        prefix: options.queuePrefix,
        operationType: type,
        slots: handler?.concurrency ?? HANDLER_DEFAULTS.concurrency,
        batchSize: handler?.batchSize,
        workerId,
        entryTtlMs: options.jobLockTtlMs,
        parkMs,
        logger: options.logger,
      }),
    );
  }
  const closeLimiters = () => {
    for (const limiter of keyLimiters.values()) {
      limiter.close();
    }
  };

  let closing: Promise<void> | undefined;
  const processor = createRunBatchProcessor({
    db: options.db,
    handlers: options.handlers,
    dispatcher: options.dispatcher,
    logger: options.logger,
    metrics: options.metrics,
    leaseSeconds: Math.max(1, Math.ceil(options.leaseTtlMs / 1000)),
    watchStop: (operationId) => stops.watch(operationId),
    fairShare: (type) => fairShares.get(type),
    keyLimiter: (type) => keyLimiters.get(type),
    batchTimeoutMs: options.batchTimeoutMs,
    batchGraceMs: options.batchGraceMs,
    jobLockMs: options.jobLockTtlMs,
    sliceMs: options.laneSliceMs,
    closing: () => closing !== undefined,
  });

  const workers = options.handlers.types.map((type) => {
    const handler = options.handlers.get(type);
    const rate = handler?.rateLimit;
    const worker = options.backend.createWorker(batchQueueName(type), processor, {
      concurrency: handler?.concurrency ?? HANDLER_DEFAULTS.concurrency,
      // A job is one batch: the limiter counts batches of the handler's fixed batch size.
      ...(rate && handler?.batchSize
        ? { limiter: { max: Math.max(1, Math.floor(rate.max / handler.batchSize)), duration: rate.durationMs } }
        : {}),
      lockDuration: options.jobLockTtlMs,
      stalledInterval: options.jobLockTtlMs,
      // Steps are idempotent (leases), so a job may stall many times (repeated crashes) safely.
      maxStalledCount: 100,
      // A fetch or a job's move that failed because the queue's store was gone (Postgres failing
      // over or restarting, with the jobs in it) is tried again this soon, not after BullMQ's 15 s.
      runRetryDelay: QUEUE_RETRY_DELAY_MS,
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
  await Promise.all(workers.map((worker) => worker.waitUntilReady())).catch(async (error: unknown) => {
    // Not started: close what was opened here, so the failed start leaves nothing behind.
    await Promise.allSettled([
      ...workers.map((worker) => worker.close(true)),
      ...[...fairShares.values()].map((fair) => fair.close()),
      subscription.close(),
    ]);
    closeLimiters();
    throw error;
  });
  options.logger.info({ types: options.handlers.types }, 'workers started');

  return {
    close(graceMs = 10_000) {
      closing ??= (async () => {
        const timer = setTimeout(() => stops.stopAll('shutdown'), graceMs);
        // Resolves once every running step has returned; a step whose handler ignores the abort
        // returns OPSPAD_BATCH_GRACE after it, leaving that handler's promise behind.
        await Promise.all(workers.map((worker) => worker.close()));
        clearTimeout(timer);
        await Promise.all([...fairShares.values()].map((fair) => fair.close()));
        closeLimiters();
        await subscription.close();
      })();
      return closing;
    },
  };
}
