/**
 * Puts background operations on the queues. An operation runs as up to `max_parallel_batches`
 * lanes; a lane is a chain of short jobs, each leasing and handling one batch and then adding the
 * lane's next job at the back of the queue. Jobs of many operations interleave in one queue, so a
 * small operation never waits for a large one to finish.
 */
import type { Queue } from 'bullmq';
import { limitKeyOf } from '../domain/key-limits.ts';
import type { OperationRecord } from '../domain/operation.ts';
import { remainingOf } from '../domain/operation.ts';
import type { HandlerRegistry } from '../handlers/registry.ts';
import type { Logger } from '../logger.ts';
import type { QueueBackend } from './backend.ts';
import {
  batchQueueName,
  RUN_BATCH_JOB,
  RUN_BATCH_JOB_OPTIONS,
  type RunBatchPayload,
  runBatchJobId,
} from './catalog.ts';
import { logQueueErrors } from './connection.ts';

/** Job states in which a job will still run: a lane with such a job is alive. */
const LIVE_STATES = ['waiting', 'active', 'delayed', 'prioritized', 'waiting-children'] as const;

export interface Dispatcher {
  /** Queues of every registered handler type (Bull Board, metrics). */
  readonly queues: readonly Queue[];
  /** Starts the lanes of an active background operation for its current dispatch epoch. */
  startLanes(operation: OperationRecord): Promise<number>;
  /**
   * Adds a lane's next step. `traceContext`, the step's own job trace context (BullMQ's
   * `opts.telemetry.metadata`), is handed on as it is: every step of a lane is then a child of the
   * dispatch that started the lane, side by side, instead of each one nested in the one before
   * (a 10,000-step lane would make a trace 20,000 levels deep).
   */
  enqueueNext(step: RunBatchPayload, traceContext?: string): Promise<void>;
  /** `<operation_id>.<epoch>` of every lane with a job that will still run. */
  liveLanes(): Promise<Set<string>>;
  close(): Promise<void>;
}

export function createDispatcher(options: {
  backend: QueueBackend;
  handlers: HandlerRegistry;
  /** Where queue connection errors go (without one, they are dropped: Redis is retried). */
  logger?: Logger;
}): Dispatcher {
  const queues = new Map<string, Queue>();
  for (const type of options.handlers.types) {
    const queue = options.backend.createQueue(batchQueueName(type), { defaultJobOptions: RUN_BATCH_JOB_OPTIONS });
    logQueueErrors(queue, options.logger);
    queues.set(type, queue);
  }
  const queueFor = (type: string) => {
    const queue = queues.get(type);
    if (!queue) {
      throw new Error(`No worker handler is registered for operation_type "${type}".`);
    }
    return queue;
  };
  const add = (step: RunBatchPayload) =>
    queueFor(step.operation_type).add(RUN_BATCH_JOB, step, { jobId: runBatchJobId(step) });

  return {
    queues: [...queues.values()],
    async startLanes(operation) {
      const state = operation.state_json;
      if (operation.status !== 'active' || state.execution !== 'background' || !state.dispatch_epoch) {
        return 0;
      }
      const batchSize = options.handlers.get(operation.operation_type)?.batchSize ?? state.batch_size;
      const lanes = Math.max(
        1,
        Math.min(state.max_parallel_batches ?? 4, Math.ceil(remainingOf(operation) / batchSize)),
      );
      const limits = options.handlers.get(operation.operation_type)?.limits;
      const limited = limits
        ? {
            limit_key: limitKeyOf(
              {
                organizationId: operation.organization_id,
                operationType: operation.operation_type,
                queryParams: state.query_params ?? {},
              },
              limits.key,
            ),
            batch_size: batchSize,
          }
        : {};
      const steps = Array.from({ length: lanes }, (_, lane) => ({
        operation_id: operation.id,
        organization_id: operation.organization_id,
        conversation_id: operation.conversation_id,
        operation_type: operation.operation_type,
        epoch: state.dispatch_epoch as number,
        lane,
        seq: 0,
        ...limited,
      }));
      const queue = queueFor(operation.operation_type);
      // Before the jobs are queued, so no worker decides on a fair share without this operation.
      await options.backend.fairShare(operation.operation_type).announceArrival();
      await queue.addBulk(
        steps.map((step) => ({ name: RUN_BATCH_JOB, data: step, opts: { jobId: runBatchJobId(step) } })),
      );
      return lanes;
    },
    async enqueueNext(step, traceContext) {
      const next = { ...step, seq: step.seq + 1 };
      if (traceContext === undefined) {
        await add(next);
        return;
      }
      // addBulk keeps a job's own trace context where add would replace it with the current one.
      await queueFor(next.operation_type).addBulk([
        {
          name: RUN_BATCH_JOB,
          data: next,
          opts: { jobId: runBatchJobId(next), telemetry: { metadata: traceContext } },
        },
      ]);
    },
    async liveLanes() {
      const live = new Set<string>();
      for (const queue of queues.values()) {
        const jobs = await queue.getJobs([...LIVE_STATES]);
        for (const job of jobs) {
          const [operationId, epoch] = String(job.id).split('.');
          live.add(`${operationId}.${epoch}`);
        }
      }
      return live;
    },
    async close() {
      await Promise.all([...queues.values()].map((queue) => queue.close()));
    },
  };
}
