/**
 * One step of a lane: lease a batch (the job id is the lease owner), run the handler, record
 * the outcomes through the same store functions the assistant's progress/update use, then add
 * the lane's next step while the operation is active and has pending items. The record that
 * leaves nothing to record completes the operation in the same call (opspad_record_step); a
 * step that finds nothing left and sees it still active completes it in a statement.
 *
 * A job BullMQ retries after a crash has the same id, so it gets its own batch back; a result is
 * recorded only while its items are still leased to this job, so a late worker never overwrites
 * the one that took over.
 *
 * A job goes on with the lane's next batch itself, instead of queueing a job for it, while its
 * slice lasts (LANE_SLICE_MS, lane-slice.ts): each batch still takes its own fair-share slot,
 * lease and record (its progress and log line go at most every 250 ms, merged: batch-report.ts),
 * but the job chain's Redis round trips (add, fetch,
 * finish: about six per batch) are paid once per slice, and a batch handled whole is recorded by
 * the call that leases the next one (one statement and one commit a batch instead of two). A
 * handler with a rate limit gets one batch per job: BullMQ's limiter counts jobs.
 *
 * Before leasing, the step takes a slot under the fleet's fair share (queue/fair-share.ts); a
 * job whose organization already holds its share while others wait is parked instead. The
 * handler runs inside the batch's time budget (run-within-budget.ts): a handler that ignores its
 * signal past the grace period is left behind, and the step records what was finished, gives the
 * rest back and frees the slot.
 */
import { DelayedError, type Job, UnrecoverableError } from 'bullmq';
import { OPERATION_DEFAULTS } from '../../domain/operation-input.ts';
import type { HandlerRegistry } from '../../handlers/registry.ts';
import type { Handler } from '../../handlers/types.ts';
import type { Logger } from '../../logger.ts';
import type { Metrics } from '../../metrics.ts';
import { completeIfDone, type Database, extendLeases, releaseLeasedItems } from '../../store/index.ts';
import { ATTR, annotateActiveSpan, inSpan } from '../../telemetry/spans.ts';
import { RunBatchPayload } from '../catalog.ts';
import type { Dispatcher } from '../dispatcher.ts';
import type { FairShare } from '../fair-share.ts';
import type { KeyLimiter } from '../key-limiter.ts';
import { afterRecord } from './after-record.ts';
import { type BatchReports, batchReports } from './batch-report.ts';
import { failExhausted } from './fail-exhausted.ts';
import { createLaneSlice, LANE_SLICE_MS, type LaneSlice, type NextBatch } from './lane-slice.ts';
import { giveBack, type Prefetched } from './prefetched.ts';
import { recordBatch } from './record-batch.ts';
import { runWithinBudget } from './run-within-budget.ts';
import { leaseForStep } from './step-lease.ts';

export interface RunBatchDeps {
  db: Database;
  handlers: HandlerRegistry;
  dispatcher: Dispatcher;
  logger: Logger;
  metrics: Metrics;
  leaseSeconds: number;
  /**
   * A signal that fires when the operation is paused or cancelled (from the control channel);
   * `release` when the batch is over.
   */
  watchStop(operationId: string): { signal: AbortSignal; release(): void };
  /** The fair share of each type's slots; without one, a job always starts. */
  fairShare?(operationType: string): FairShare | undefined;
  /** The provider limits per key of each type whose handler declares them. */
  keyLimiter?(operationType: string): KeyLimiter | undefined;
  /** A batch's time budget, unless its handler sets `batchTimeoutMs`. */
  batchTimeoutMs: number;
  /** How long a handler may run on after its signal fired before it is left behind. */
  batchGraceMs: number;
  /** How long a job goes on with its lane's next batches (default LANE_SLICE_MS; 0: one batch a job). */
  sliceMs?: number;
  /** The workers' job lock duration: a job renews its lock with it before each further batch. */
  jobLockMs: number;
  /** True once the worker pool is closing: a job then runs no further batch. */
  closing?(): boolean;
}

export interface RunBatchResult {
  leased: number;
  completed: number;
  failed: number;
  released: number;
  /** The batches this job ran (its slice). */
  batches: number;
  next: 'enqueued' | 'completed_operation' | 'stopped';
}

/**
 * One batch's outcome; `continue`: the lane has more, not queued yet: the job decides.
 * `interrupted`: a signal (pause, cancel, shutdown, the time budget) cut the batch short.
 */
type StepResult = Omit<RunBatchResult, 'batches' | 'next'> & {
  next: RunBatchResult['next'] | 'continue';
  interrupted?: boolean;
  /** What decideNext answered before the record, if it was asked. */
  decided?: NextBatch;
  /** The lane's next batch, leased by the record's call. */
  prefetched?: Prefetched;
};

export function createRunBatchProcessor(deps: RunBatchDeps) {
  return async (job: Job, token?: string, shutdownSignal?: AbortSignal): Promise<RunBatchResult> => {
    const parsed = RunBatchPayload.safeParse(job.data);
    if (!parsed.success) {
      throw new UnrecoverableError(`invalid ${job.name} payload: ${parsed.error.message}`);
    }
    const step = parsed.data;
    // BullMQ's job span, when traces are on; the lease, handler and record spans are its children.
    annotateActiveSpan({
      [ATTR.organizationId]: step.organization_id,
      [ATTR.operationId]: step.operation_id,
      [ATTR.operationType]: step.operation_type,
      [ATTR.lane]: step.lane,
      [ATTR.step]: step.seq,
    });
    const handler = deps.handlers.get(step.operation_type);
    if (!handler) {
      throw new UnrecoverableError(`no handler for operation_type "${step.operation_type}" in this worker`);
    }
    // Without a lock token (a job not run by a worker) there is no lock to hold: one batch.
    const sliceMs = handler.rateLimit || token === undefined ? 0 : (deps.sliceMs ?? LANE_SLICE_MS);
    const owner = String(job.id);
    const fair = deps.fairShare?.(step.operation_type);
    const limiter = handler.limits ? deps.keyLimiter?.(step.operation_type) : undefined;
    const lane = createLaneSlice({
      job,
      token,
      jobLockMs: deps.jobLockMs,
      fair,
      organizationId: step.organization_id,
      // Jobs queued before the handler declared limits carry no key: the organization's.
      keys: limiter && {
        limiter,
        key: step.limit_key ?? step.organization_id,
        operationId: step.operation_id,
        want: step.batch_size ?? handler.batchSize ?? OPERATION_DEFAULTS.batchSize,
      },
      endsAt: Date.now() + sliceMs,
      stopping: () => shutdownSignal?.aborted === true || deps.closing?.() === true,
    });
    const refused = await lane.start();
    if (refused?.by === 'fair_share') {
      deps.metrics.batchesDeferred.inc({ operation_type: step.operation_type });
      await fair?.park(job, token);
      throw new DelayedError();
    }
    if (refused?.by === 'key_limit') {
      deps.metrics.batchesThrottled.inc({ operation_type: step.operation_type, limited_by: refused.refusal.limitedBy });
      await limiter?.park(job, token, step.operation_id, refused.refusal);
      throw new DelayedError();
    }
    const total = { leased: 0, completed: 0, failed: 0, released: 0, batches: 0 };
    let prefetched: Prefetched | undefined;
    const reports = batchReports(job, deps.logger.child({ operation_id: step.operation_id, job_id: owner }));
    try {
      return await reports.after(async () => {
        for (;;) {
          const ran = await runStep(deps, job, step, handler, shutdownSignal, {
            batch: total.batches + 1,
            prefetched,
            decideNext: sliceMs > 0 ? lane.decideNext : undefined,
            lane,
            reports,
          });
          prefetched = undefined;
          total.leased += ran.leased;
          total.completed += ran.completed;
          total.failed += ran.failed;
          total.released += ran.released;
          total.batches += 1;
          if (ran.next !== 'continue') {
            return { ...total, next: ran.next };
          }
          // Decided before the record (decideNext), or now when the batch ended otherwise: items
          // given back, or a signal that cut it short (then the lane's next batch is a new job).
          const decided = ran.decided ?? (ran.interrupted ? 'enqueue' : await lane.decideNext());
          if (decided === 'go' && ran.prefetched && (shutdownSignal?.aborted || deps.closing?.())) {
            // The worker began to close during the call that leased it: the batch goes back, and
            // the lane to a new job, as when the worker closes between batches.
            await giveBack(deps, step, owner, ran.prefetched);
            await deps.dispatcher.enqueueNext(step, job.opts.telemetry?.metadata);
            return { ...total, next: 'enqueued' };
          }
          if (decided === 'go') {
            prefetched = ran.prefetched; // leased by the record's call, or undefined: the step leases
            if (!prefetched && !(await lane.regrant())) {
              // Its key's grant went back with a record that leased nothing, and the key is full now.
              await deps.dispatcher.enqueueNext(step, job.opts.telemetry?.metadata);
              return { ...total, next: 'enqueued' };
            }
            continue;
          }
          if (decided === 'enqueue') {
            await deps.dispatcher.enqueueNext(step, job.opts.telemetry?.metadata);
          }
          return { ...total, next: decided === 'enqueue' ? 'enqueued' : 'stopped' };
        }
      });
    } finally {
      lane.release();
    }
  };
}

async function runStep(
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
