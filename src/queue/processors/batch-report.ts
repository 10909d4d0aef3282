/**
 * A batch's progress and log line on its job (run-batch.ts): sent together, since each is a
 * round trip to the queue backend and neither waits for the other. The lane's next batch does
 * not wait for them (batchReports): a job's reports go in order, one batch's after the other's,
 * and the job ends only once all are sent.
 */
import type { Job } from 'bullmq';
import type { OperationCounts } from '../../domain/operation.ts';
import type { Logger } from '../../logger.ts';
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
  // Settled, not all: the job ends only once both are sent, whichever fails.
  const sent = await Promise.allSettled([
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
  const failed = sent.find((result) => result.status === 'rejected');
  if (failed) {
    throw failed.reason;
  }
}

/**
 * A job's batch reports, sent in order while its lane goes on (see above). A report that cannot
 * be sent is logged and skipped: it only describes work the ledger already holds, and failing
 * the job for it would run the job again beside the lane's next step, already queued.
 */
export function batchReports(job: Job, logger: Pick<Logger, 'warn'>) {
  let sent: Promise<void> = Promise.resolve();
  const then = (send: () => Promise<unknown>) => {
    sent = sent.then(send).then(
      () => undefined,
      (error: unknown) => logger.warn({ err: error }, 'could not send a batch report to the queue'),
    );
  };
  return {
    send(...report: Parameters<typeof reportBatch> extends [Job, ...infer R] ? R : never): void {
      then(() => reportBatch(job, ...report));
    },
    /** A line of the job's log, after the reports before it. */
    log(line: string): void {
      then(() => job.log(line));
    },
    /** Runs the job's batches, then waits for their reports to be sent. */
    async after<T>(run: () => Promise<T>): Promise<T> {
      try {
        return await run();
      } finally {
        await sent;
      }
    },
  };
}

export type BatchReports = ReturnType<typeof batchReports>;
