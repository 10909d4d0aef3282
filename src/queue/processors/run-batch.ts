/**
 * A batch job runs its lane's steps, each in run-step.ts: lease a batch (the job id is the lease
 * owner), run the handler, record the outcomes through the same store functions the assistant's
 * progress/update use, then add the lane's next step while the operation is active and has
 * pending items. The record that leaves nothing to record completes the operation in the same
 * call (opspad_record_step); a step that finds nothing left and sees it still active completes it
 * in a statement.
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
import type { Logger } from '../../logger.ts';
import type { Metrics } from '../../metrics.ts';
import type { Database } from '../../store/index.ts';
import { ATTR, annotateActiveSpan } from '../../telemetry/spans.ts';
import { RunBatchPayload } from '../catalog.ts';
import type { Dispatcher } from '../dispatcher.ts';
import type { FairShare } from '../fair-share.ts';
import type { KeyLimiter } from '../key-limiter.ts';
import { batchReports } from './batch-report.ts';
import { createLaneSlice, LANE_SLICE_MS } from './lane-slice.ts';
import { giveBack, type Prefetched } from './prefetched.ts';
import { runStep } from './run-step.ts';

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
