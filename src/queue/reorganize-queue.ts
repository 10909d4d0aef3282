/**
 * The `reorganize` queue: one job per pad to reorganize (cadence or sweep), and the sweep itself,
 * run by a BullMQ job scheduler (OPSPAD_REORGANIZE_CRON, or every OPSPAD_REORGANIZE_INTERVAL).
 * The sweep only hands out jobs — pads changed since their last reorganization, a bounded batch
 * at a time — so a slow model never holds it up.
 */
import { type Job, type Queue, UnrecoverableError, type Worker } from 'bullmq';
import { z } from 'zod';
import type { Logger } from '../logger.ts';
import { type ReorganizeDeps, reorganizeScratchpad } from '../reorganizer/reorganize.ts';
import { type ConversationScope, listPadsToReorganizeAllOrganizations } from '../store/index.ts';
import type { QueueBackend } from './backend.ts';
import { logQueueErrors } from './connection.ts';

export const REORGANIZE_QUEUE = 'reorganize';
export const REORGANIZE_PAD_JOB = 'reorganize-pad';
export const REORGANIZE_SWEEP_JOB = 'reorganize-sweep';

export const ReorganizePadPayload = z.strictObject({
  conversation_id: z.guid(),
  organization_id: z.uuid(),
  reason: z.string(),
});

export interface ReorganizeQueue {
  readonly queue: Queue;
  /** Adds a job for the pad at `version`; one per version, however often it is asked. */
  enqueue(scope: ConversationScope, version: number, reason: string): Promise<void>;
  /** Creates or updates the sweep's job scheduler (idempotent; the queue backend may have lost it). */
  ensureScheduler(): Promise<void>;
  close(): Promise<void>;
}

export interface SweepSchedule {
  cron?: string | undefined;
  everyMs: number;
}

export function createReorganizeQueue(backend: QueueBackend, schedule: SweepSchedule, logger: Logger): ReorganizeQueue {
  const queue = backend.createQueue(REORGANIZE_QUEUE, {
    defaultJobOptions: {
      attempts: 3,
      backoff: { type: 'exponential', delay: 5000 },
      removeOnComplete: { age: 3600, count: 1000 },
      removeOnFail: { age: 24 * 3600 },
    },
  });
  logQueueErrors(queue, logger);
  return {
    queue,
    async enqueue(scope, version, reason) {
      await queue.add(
        REORGANIZE_PAD_JOB,
        { conversation_id: scope.conversationId, organization_id: scope.organizationId, reason },
        // A conversation id alone is not unique: two organizations may use the same one.
        { jobId: `pad.${scope.organizationId}.${scope.conversationId}.${version}` },
      );
    },
    async ensureScheduler() {
      await queue.upsertJobScheduler(
        REORGANIZE_SWEEP_JOB,
        schedule.cron ? { pattern: schedule.cron } : { every: schedule.everyMs },
        { name: REORGANIZE_SWEEP_JOB, data: {} },
      );
    },
    close: () => queue.close(),
  };
}

/** Hands out one job per pad changed since its last reorganization; returns how many. */
export async function sweepPads(deps: ReorganizeDeps, queue: ReorganizeQueue, batch: number): Promise<number> {
  const pads = await listPadsToReorganizeAllOrganizations(deps.db, batch);
  for (const pad of pads) {
    await queue.enqueue(pad, pad.version, 'scheduled_sweep');
  }
  return pads.length;
}

export function startReorganizeWorker(options: {
  backend: QueueBackend;
  deps: ReorganizeDeps;
  queue: ReorganizeQueue;
  sweepBatch: number;
  logger: Logger;
}): Worker {
  const worker = options.backend.createWorker(
    REORGANIZE_QUEUE,
    async (job: Job, _token?: string, signal?: AbortSignal) => {
      if (job.name === REORGANIZE_SWEEP_JOB) {
        const handedOut = await sweepPads(options.deps, options.queue, options.sweepBatch);
        await job.log(`${handedOut} pads to reorganize`);
        return { handed_out: handedOut };
      }
      const payload = ReorganizePadPayload.safeParse(job.data);
      if (!payload.success) {
        throw new UnrecoverableError(`invalid ${job.name} payload: ${payload.error.message}`);
      }
      const scope = { conversationId: payload.data.conversation_id, organizationId: payload.data.organization_id };
      const outcome = await reorganizeScratchpad(options.deps, scope, { reason: payload.data.reason, signal });
      await job.log(`${outcome.status}${outcome.version ? ` → version ${outcome.version}` : ''}`);
      return outcome;
    },
    { concurrency: 4 },
  );
  worker.on('failed', (job, error) => options.logger.error({ err: error, job_id: job?.id }, 'reorganize job failed'));
  worker.on('error', (error) => options.logger.warn({ err: error }, 'reorganize worker error'));
  return worker;
}
