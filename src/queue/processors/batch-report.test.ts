/**
 * A job's batch reports (batch-report.ts): one line and one progress per batch while batches
 * are far apart; batches that come sooner than REPORT_EVERY_MS after a report merged into the
 * next, in order, and nothing left unsent when the job ends. The job here records what it is
 * sent; the integration test (lane-slices.test.ts) reads the lines back from BullMQ.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { OperationCounts } from '../../domain/operation.ts';
import { batchReports, mergeReport, REPORT_EVERY_MS, type ReportedJob, reportLine } from './batch-report.ts';

const step = { operation_id: 'op-1', lane: 0, seq: 3 };
const counts = (recorded: number): OperationCounts => ({
  total_items: 100,
  completed_count: recorded,
  failed_count: 0,
  remaining_count: 100 - recorded,
  in_flight_count: 0,
});
const done = (n: number) => ({ completed: Array.from({ length: n }, (_, i) => `c${i}`), failed: [], unhandled: [] });
const ran = { abandoned: false, stoppedBy: undefined };

function recordingJob() {
  const sent: string[] = [];
  const job: ReportedJob = {
    updateProgress: async (progress) => {
      sent.push(`progress ${(progress as { recorded: number }).recorded}`);
    },
    log: async (line) => {
      sent.push(line);
      return 0;
    },
  };
  return { job, sent };
}

describe('batch reports', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('says which batches a merged line covers, with their sums and the newest counts', () => {
    let report = mergeReport(undefined, step, 2, done(10), ran, counts(20));
    expect(reportLine(report)).toBe('lane 0 step 3 batch 2: 10 completed, 0 failed; operation 20/100 recorded');
    report = mergeReport(
      report,
      step,
      3,
      { completed: ['a'], failed: [{ id: 'b', reason: 'no' }], unhandled: ['c'] },
      ran,
      counts(22),
    );
    report = mergeReport(report, step, 4, done(5), { abandoned: true, stoppedBy: 'paused' }, counts(27));
    expect(reportLine(report)).toBe(
      'lane 0 step 3 batches 2-4: 16 completed, 1 failed, 1 released (batch 4: handler left behind, it ignored its signal (paused) past the grace period); operation 27/100 recorded',
    );
    expect(reportLine(mergeReport(undefined, step, 1, done(1), ran, counts(1)))).toMatch(/^lane 0 step 3: 1 completed/);
  });

  it('sends the first batch at once, merges the ones that come sooner than the interval, and flushes at the end', async () => {
    const { job, sent } = recordingJob();
    const reports = batchReports(job, { warn: () => {} });
    await reports.after(async () => {
      reports.send(step, 1, done(10), ran, counts(10));
      reports.send(step, 2, done(10), ran, counts(20));
      reports.send(step, 3, done(10), ran, counts(30));
      await vi.advanceTimersByTimeAsync(REPORT_EVERY_MS);
      reports.send(step, 4, done(10), ran, counts(40));
      reports.log('operation completed');
    });
    expect(sent).toEqual([
      'progress 10',
      'lane 0 step 3: 10 completed, 0 failed; operation 10/100 recorded',
      'progress 30',
      'lane 0 step 3 batches 2-3: 20 completed, 0 failed; operation 30/100 recorded',
      'progress 40',
      'lane 0 step 3 batch 4: 10 completed, 0 failed; operation 40/100 recorded',
      'operation completed',
    ]);
  });

  it('sends each batch when they are the interval apart', async () => {
    const { job, sent } = recordingJob();
    const reports = batchReports(job, { warn: () => {} });
    await reports.after(async () => {
      for (let batch = 1; batch <= 3; batch++) {
        reports.send(step, batch, done(1), ran, counts(batch));
        await vi.advanceTimersByTimeAsync(REPORT_EVERY_MS);
      }
    });
    expect(sent.filter((line) => line.startsWith('lane'))).toHaveLength(3);
  });
});
