/**
 * Every BullMQ queue and job opspad uses, with the zod schema of each job's payload. Payloads
 * carry ids only — never item contents or secrets, which stay in Postgres.
 */
import { z } from 'zod';

/** One queue per operation type, so each type has its own concurrency and rate limit. */
export function batchQueueName(operationType: string): string {
  return `batches-${operationType}`;
}

export const RUN_BATCH_JOB = 'run-batch';

/**
 * One step of a lane: lease a batch of the operation, run the handler, record the results,
 * enqueue the lane's next step.
 */
export const RunBatchPayload = z.strictObject({
  operation_id: z.uuid(),
  organization_id: z.uuid(),
  conversation_id: z.guid(),
  operation_type: z.string(),
  /** The operation's dispatch epoch this lane belongs to. */
  epoch: z.number().int().min(1),
  lane: z.number().int().min(0),
  seq: z.number().int().min(0),
  /**
   * The provider limit key the batches count against (`<organization id>[:<key>]`), when the
   * handler declares limits; computed once when the lanes start (domain/key-limits.ts).
   */
  limit_key: z.string().max(300).optional(),
  /** The lane's batch size, when the handler declares limits: what a batch asks its key for. */
  batch_size: z.number().int().min(1).optional(),
});
export type RunBatchPayload = z.infer<typeof RunBatchPayload>;

/**
 * Deterministic job ids make enqueueing idempotent: adding a step twice (a retry, two processes
 * resuming) adds it once. The id is also the lease owner, so a job BullMQ retries after a
 * crash gets its own batch back. BullMQ ids may not contain ":".
 */
export function runBatchJobId(payload: RunBatchPayload): string {
  return `${payload.operation_id}.${payload.epoch}.${payload.lane}.${payload.seq}`;
}

/** Job ids of all steps of one epoch of an operation start with this. */
export function runBatchJobPrefix(operationId: string, epoch: number): string {
  return `${operationId}.${epoch}.`;
}

export const RUN_BATCH_JOB_OPTIONS = {
  // Infrastructure failures (database away) retry the step; handler failures never get here.
  attempts: 8,
  backoff: { type: 'exponential', delay: 1000 },
  removeOnComplete: { age: 3600, count: 2000 },
  removeOnFail: { age: 7 * 24 * 3600 },
} as const;
