/**
 * A batch's progress and log line on its job (run-batch.ts): sent together, since each is a
 * round trip to the queue backend and neither waits for the other. The lane's next batch does
 * not wait for them (batchReports): a job's reports go in order, one batch's after the other's,
 * and the job ends only once all are sent (a report that failed then fails the job).
 */
import type { Job } from 'bullmq';
import type { OperationCounts } from '../../domain/operation.ts';
import type { RunBatchPayload } from '../catalog.ts';
import type { BudgetedOutcome } from './run-within-budget.ts';

export async function reportBatch(
  job: Job,
  step: RunBatchPayload,
  /** The batch's number within its job. */
  batch: number,
  outcome: Pick<BudgetedOutcome, 'completed' | 'failed' | 'unhandled'>,
  ran: Pick<BudgetedOutcome, 'abandoned' | 'stoppedBy'>,
  counts: OperationCounts,
): Promise<void> {
  const recordedCount = counts.completed_count + counts.failed_count;
  await Promise.all([
    job.updateProgress({
      operation_id: step.operation_id,
      recorded: recordedCount,
      total: counts.total_items,
      completed: counts.completed_count,
      failed: counts.failed_count,
      percent: counts.total_items === 0 ? 100 : Math.floor((recordedCount / counts.total_items) * 100),
    }),
    job.log(
      `lane ${step.lane} step ${step.seq}${batch > 1 ? ` batch ${batch}` : ''}: ${outcome.completed.length} completed, ${outcome.failed.length} failed` +
        `${outcome.unhandled.length > 0 ? `, ${outcome.unhandled.length} released` : ''}` +
        `${ran.abandoned ? ` (handler left behind: it ignored its signal (${ran.stoppedBy}) past the grace period)` : ''}; ` +
        `operation ${recordedCount}/${counts.total_items} recorded`,
    ),
  ]);
}

/** A job's batch reports, sent in order while its lane goes on (see above). */
export function batchReports(job: Job) {
  let sent: Promise<void> = Promise.resolve();
  return {
    send(...report: Parameters<typeof reportBatch> extends [Job, ...infer R] ? R : never): void {
      sent = sent.then(() => reportBatch(job, ...report));
      // Seen by `after`, which awaits it; not an unhandled rejection meanwhile.
      sent.catch(() => {});
    },
    /** Runs the job's batches, then waits for their reports. */
    async after<T>(run: () => Promise<T>): Promise<T> {
      try {
        const result = await run();
        await sent;
        return result;
      } finally {
        await sent.catch(() => {});
      }
    },
  };
}

export type BatchReports = ReturnType<typeof batchReports>;
