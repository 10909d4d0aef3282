/**
 * A job's batch reports (run-batch.ts): its progress and a log line, what Bull Board shows of
 * a lane (the operator view and `opspad ops watch` read Postgres). Each is a round trip to the queue backend, so a job sends them
 * at most once every REPORT_EVERY_MS: a report that comes sooner waits and is merged with the
 * ones after it into one line over those batches and the newest progress. A lane of small
 * batches made two of its three queue calls a batch for its reports. The lane's next batch
 * never waits for a report; a job's reports go in order, and the job ends only once all are sent.
 */
import type { Job } from 'bullmq';
import type { OperationCounts } from '../../domain/operation.ts';
import type { Logger } from '../../logger.ts';
import type { RunBatchPayload } from '../catalog.ts';
import type { BudgetedOutcome } from './run-within-budget.ts';

/** The least time between two of a job's reports. */
export const REPORT_EVERY_MS = 250;

/** One or more consecutive batches of a job, reported as one. */
export interface MergedReport {
  step: Pick<RunBatchPayload, 'operation_id' | 'lane' | 'seq'>;
  /** The first and last batch's numbers within the job. */
  firstBatch: number;
  lastBatch: number;
  completed: number;
  failed: number;
  released: number;
  /** What the handler left behind, per batch that left one. */
  notes: string[];
  /** The operation's counts after the last batch. */
  counts: OperationCounts;
}

/** `report` with a batch after it added. */
export function mergeReport(
  report: MergedReport | undefined,
  step: MergedReport['step'],
  batch: number,
  outcome: Pick<BudgetedOutcome, 'completed' | 'failed' | 'unhandled'>,
  ran: Pick<BudgetedOutcome, 'abandoned' | 'stoppedBy'>,
  counts: OperationCounts,
): MergedReport {
  const note = ran.abandoned
    ? [`batch ${batch}: handler left behind, it ignored its signal (${ran.stoppedBy}) past the grace period`]
    : [];
  return {
    step,
    firstBatch: report?.firstBatch ?? batch,
    lastBatch: batch,
    completed: (report?.completed ?? 0) + outcome.completed.length,
    failed: (report?.failed ?? 0) + outcome.failed.length,
    released: (report?.released ?? 0) + outcome.unhandled.length,
    notes: [...(report?.notes ?? []), ...note],
    counts,
  };
}

/** The report's log line: `lane 0 step 3 batches 2-5: 40 completed, 0 failed; operation 90/200 recorded`. */
export function reportLine(report: MergedReport): string {
  const { step, firstBatch, lastBatch, counts } = report;
  const batches =
    firstBatch === lastBatch ? (lastBatch > 1 ? ` batch ${lastBatch}` : '') : ` batches ${firstBatch}-${lastBatch}`;
  return (
    `lane ${step.lane} step ${step.seq}${batches}: ${report.completed} completed, ${report.failed} failed` +
    `${report.released > 0 ? `, ${report.released} released` : ''}` +
    `${report.notes.length > 0 ? ` (${report.notes.join('; ')})` : ''}; ` +
    `operation ${counts.completed_count + counts.failed_count}/${counts.total_items} recorded`
  );
}

/** The job's progress after the report's last batch. */
export function reportProgress(report: MergedReport) {
  const { counts } = report;
  const recorded = counts.completed_count + counts.failed_count;
  return {
    operation_id: report.step.operation_id,
    recorded,
    total: counts.total_items,
    completed: counts.completed_count,
    failed: counts.failed_count,
    percent: counts.total_items === 0 ? 100 : Math.floor((recorded / counts.total_items) * 100),
  };
}

/** What the reports need of a BullMQ job. */
export type ReportedJob = Pick<Job, 'updateProgress' | 'log'>;

async function sendReport(job: ReportedJob, report: MergedReport): Promise<void> {
  // Settled, not all: the job ends only once both are sent, whichever fails.
  const sent = await Promise.allSettled([job.updateProgress(reportProgress(report)), job.log(reportLine(report))]);
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
export function batchReports(job: ReportedJob, logger: Pick<Logger, 'warn'>, everyMs = REPORT_EVERY_MS) {
  let sent: Promise<void> = Promise.resolve();
  let waiting: MergedReport | undefined;
  let timer: NodeJS.Timeout | undefined;
  let lastSentAt = Number.NEGATIVE_INFINITY;
  const then = (send: () => Promise<unknown>) => {
    sent = sent.then(send).then(
      () => undefined,
      (error: unknown) => logger.warn({ err: error }, 'could not send a batch report to the queue'),
    );
  };
  const flush = () => {
    clearTimeout(timer);
    timer = undefined;
    const report = waiting;
    waiting = undefined;
    if (report) {
      lastSentAt = performance.now();
      then(() => sendReport(job, report));
    }
  };
  return {
    send(...batch: Parameters<typeof mergeReport> extends [unknown, ...infer R] ? R : never): void {
      waiting = mergeReport(waiting, ...batch);
      // The monotonic clock: a wall clock stepped back would hold the reports to the job's end.
      const wait = lastSentAt + everyMs - performance.now();
      if (wait <= 0) {
        flush();
      } else {
        timer ??= setTimeout(flush, wait).unref();
      }
    },
    /** A line of the job's log, after the reports before it. */
    log(line: string): void {
      flush();
      then(() => job.log(line));
    },
    /** Runs the job's batches, then sends what waits and waits for every report to be sent. */
    async after<T>(run: () => Promise<T>): Promise<T> {
      try {
        return await run();
      } finally {
        flush();
        await sent;
      }
    },
  };
}

export type BatchReports = ReturnType<typeof batchReports>;
