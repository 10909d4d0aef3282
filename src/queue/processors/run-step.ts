/**
 * One batch of a lane (run-batch.ts runs a job's batches): lease it, or take the one the previous
 * record leased; run the handler within its budget, its lease kept alive by a heartbeat; record
 * the outcomes, the same call leasing the lane's next batch when the job goes on; give back what
 * was not handled. The step says whether the lane goes on, was queued, or stops.
 */
import type { Job } from 'bullmq';
import type { Handler } from '../../handlers/types.ts';
import { completeIfDone, extendLeases, releaseLeasedItems } from '../../store/index.ts';
import { ATTR, inSpan } from '../../telemetry/spans.ts';
import type { RunBatchPayload } from '../catalog.ts';
import { afterRecord } from './after-record.ts';
import type { BatchReports } from './batch-report.ts';
import { failExhausted } from './fail-exhausted.ts';
import type { LaneSlice, NextBatch } from './lane-slice.ts';
import { giveBack, type Prefetched } from './prefetched.ts';
import { recordBatch } from './record-batch.ts';
import type { RunBatchDeps, RunBatchResult } from './run-batch.ts';
import { runWithinBudget } from './run-within-budget.ts';
import { leaseForStep } from './step-lease.ts';

/**
 * One batch's outcome; `continue`: the lane has more, not queued yet: the job decides.
 * `interrupted`: a signal (pause, cancel, shutdown, the time budget) cut the batch short.
 */
export type StepResult = Omit<RunBatchResult, 'batches' | 'next'> & {
  next: RunBatchResult['next'] | 'continue';
  interrupted?: boolean;
  /** What decideNext answered before the record, if it was asked. */
  decided?: NextBatch;
  /** The lane's next batch, leased by the record's call. */
  prefetched?: Prefetched;
};

export async function runStep(
  deps: RunBatchDeps,
  job: Job,
  step: RunBatchPayload,
  handler: Handler,
  shutdownSignal: AbortSignal | undefined,
  slice: {
    /** The batch's number within the job. */
    batch: number;
    /** Its batch when the previous batch's record leased it. */
    prefetched?: Prefetched;
    /** Present when the job may go on with the lane (its slice). */
    decideNext?: () => Promise<NextBatch>;
    /** The batch's grant under its key's limits, if any (lane-slice.ts). */
    lane?: Pick<LaneSlice, 'granted' | 'leased'>;
    reports: BatchReports;
  },
): Promise<StepResult> {
  const owner = String(job.id);
  const scope = { organizationId: step.organization_id, conversationId: step.conversation_id };
  const logger = deps.logger.child({ operation_id: step.operation_id, job_id: owner });
  const stopTimer = deps.metrics.batchDuration.startTimer({ operation_type: step.operation_type });

  const granted = slice.prefetched ? undefined : slice.lane?.granted();
  const lease = slice.prefetched?.lease ?? (await leaseForStep(deps, scope, step, owner, handler, granted));
  if (granted !== undefined) {
    await slice.lane?.leased(lease?.batch.length ?? 0);
  }
  if (!lease) {
    return { leased: 0, completed: 0, failed: 0, released: 0, next: 'stopped' }; // deleted
  }
  if (lease.reclaimed > 0) {
    deps.metrics.leaseExpiries.inc({ operation_type: step.operation_type }, lease.reclaimed);
  }
  const op = lease.operation;
  if (lease.batch.length === 0) {
    // Nothing pending for this lane. The last lane out completes the operation.
    const done =
      op.status === 'active' &&
      lease.counts.remaining_count === 0 &&
      (await completeIfDone(deps.db, scope, op.id, 'worker'));
    if (done) {
      slice.reports.log(`operation completed: ${op.completed_count} completed, ${op.failed_count} failed`);
    }
    return { leased: 0, completed: 0, failed: 0, released: 0, next: done ? 'completed_operation' : 'stopped' };
  }

  const stop = slice.prefetched?.stop ?? deps.watchStop(step.operation_id);
  // Heartbeat: a batch slower than its lease keeps it, instead of being handed to another
  // worker and handled twice. A worker that dies stops beating, and the lease expires.
  const heartbeat = setInterval(
    () => {
      extendLeases(deps.db, scope, op.id, owner, deps.leaseSeconds).catch((error: unknown) =>
        logger.warn({ err: error }, 'could not extend the lease; it may be taken over'),
      );
    },
    Math.max(500, (deps.leaseSeconds * 1000) / 3),
  );
  const budgetMs = handler.batchTimeoutMs ?? deps.batchTimeoutMs;
  const labels = { operation_type: op.operation_type };
  const handlerTimer = deps.metrics.handlerDuration.startTimer(labels);
  // One span per batch, not per item: a batch of 1,000 would otherwise cost 1,000 spans, and
  // the per-item outcome (with its reason) is in Postgres already. A handler's own spans (an
  // instrumented HTTP client) are children of this one.
  const ran = await inSpan('handle batch', { attributes: { [ATTR.batchSize]: lease.batch.length } }, async (span) => {
    const outcome = await runWithinBudget(
      handler,
      lease.batch,
      {
        operationId: op.id,
        organizationId: op.organization_id,
        operationType: op.operation_type,
        queryParams: op.state_json.query_params ?? {},
        logger,
      },
      {
        budgetMs,
        graceMs: deps.batchGraceMs,
        stops: [stop.signal, shutdownSignal],
        onAbandonedSettled: () => deps.metrics.abandonedPending.dec(labels),
      },
    );
    span.setAttributes({
      [ATTR.completed]: outcome.completed.length,
      [ATTR.failed]: outcome.failed.length,
      [ATTR.released]: outcome.unhandled.length,
      [ATTR.abandoned]: outcome.abandoned,
      ...(outcome.stoppedBy ? { [ATTR.stoppedBy]: outcome.stoppedBy } : {}),
    });
    return outcome;
  }).finally(() => {
    handlerTimer();
    clearInterval(heartbeat);
    stop.release();
  });
  if (ran.abandoned) {
    deps.metrics.batchesAbandoned.inc({ ...labels, reason: ran.stoppedBy ?? 'stopped' });
    deps.metrics.abandonedPending.inc(labels);
    logger.warn(
      { reason: ran.stoppedBy, grace_ms: deps.batchGraceMs, items: ran.unhandled.length },
      'handler ignored its signal past the grace period; batch abandoned and its items given back',
    );
  }
  const outcome = await failExhausted(deps.db, scope, op.id, owner, handler, budgetMs, ran);

  let after = op;
  let counts = lease.counts;
  // A batch handled whole, with the lane free to go on in this job: decide that now, so the
  // record's call can lease the next batch too (one statement and one commit instead of two).
  // Not when this batch was all the operation had left as it was leased (nothing pending, no
  // other lane's lease that could expire and come back; the only batch of a small operation):
  // there is no next batch, and the decision would cost a lock extension and a slot (two Redis
  // round trips) for nothing. Items given back meanwhile are decided on after the record.
  // A decision that fails (Redis) leases nothing, and is thrown once the batch is recorded.
  let undecided: { error: unknown } | undefined;
  const allThatWasLeft = lease.counts.remaining_count <= lease.batch.length;
  const decided =
    slice.decideNext && outcome.unhandled.length === 0 && ran.stoppedBy === undefined && !allThatWasLeft
      ? await slice.decideNext().catch((error: unknown) => {
          undecided = { error };
          return undefined;
        })
      : undefined;
  // Watched from before the call that may lease the next batch: a pause or cancel sent as soon
  // as that call commits is not missed while this step finishes.
  const nextStop = decided === 'go' ? deps.watchStop(step.operation_id) : undefined;
  let next: Prefetched | undefined;
  let handedOver = false;
  try {
    if (outcome.completed.length + outcome.failed.length > 0) {
      const nextGrant = nextStop ? slice.lane?.granted() : undefined;
      const recorded = await recordBatch(deps, {
        scope,
        step,
        op,
        owner,
        handler,
        outcome,
        leased: lease.batch,
        logger,
        nextStop,
        nextBatchSize: nextGrant,
      });
      if (nextGrant !== undefined) {
        await slice.lane?.leased(recorded?.next?.lease.batch.length ?? 0);
      }
      if (!recorded) {
        return { leased: lease.batch.length, completed: 0, failed: 0, released: 0, next: 'stopped' };
      }
      ({ operation: after, counts, next } = recorded);
    }
    const released = await releaseLeasedItems(deps.db, scope, op.id, owner, outcome.unhandled).catch(
      (error: unknown) => {
        // The lease expires by itself; releasing early only saves time.
        logger.warn({ err: error }, 'could not release unhandled items');
        return 0;
      },
    );
    stopTimer();
    if (released > 0) {
      deps.metrics.itemsReleased.inc(labels, released);
    }

    slice.reports.send(step, slice.batch, outcome, ran, counts);

    if (undecided) {
      throw undecided.error;
    }
    const result = {
      leased: lease.batch.length,
      completed: outcome.completed.length,
      failed: outcome.failed.length,
      released,
      decided,
    };
    if (next) {
      // Leased only while the operation was active in this lane generation (the call checked).
      handedOver = true;
      return { ...result, next: 'continue', prefetched: next };
    }
    const then = afterRecord(after, counts, step.epoch, released);
    if (then === 'complete_if_done') {
      const done = await completeIfDone(deps.db, scope, after.id, 'worker');
      return { ...result, next: done ? 'completed_operation' : 'stopped' };
    }
    if (then !== 'go_on') {
      return { ...result, next: then };
    }
    if (slice.decideNext) {
      return { ...result, next: 'continue', interrupted: ran.stoppedBy !== undefined };
    }
    await deps.dispatcher.enqueueNext(step, job.opts.telemetry?.metadata);
    return { ...result, next: 'enqueued' };
  } finally {
    if (!handedOver) {
      // The step ended another way after the call leased the next batch (an error): give it back.
      await (next ? giveBack(deps, step, owner, next) : nextStop?.release());
    }
  }
}
