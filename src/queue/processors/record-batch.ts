/**
 * A batch's record (run-step.ts): its outcomes through recordResults, timed and traced; when
 * the job goes on with its lane (a stop watch for the next batch is given), the same call leases
 * the lane's next batch (opspad_record_lease_step).
 */

import { AppError } from '../../domain/errors.ts';
import type { OperationCounts, OperationRecord } from '../../domain/operation.ts';
import type { Handler } from '../../handlers/types.ts';
import type { Logger } from '../../logger.ts';
import { recordResults } from '../../store/index.ts';
import { ATTR, inSpan } from '../../telemetry/spans.ts';
import type { RunBatchPayload } from '../catalog.ts';
import type { Prefetched } from './prefetched.ts';
import type { RunBatchDeps } from './run-batch.ts';
import type { BudgetedOutcome } from './run-within-budget.ts';

export interface RecordedBatch {
  operation: OperationRecord;
  counts: OperationCounts;
  /** The lane's next batch, when the call leased one. */
  next?: Prefetched;
}

/**
 * Whether the outcome completed every item of the batch as leased. The outcome holds each item
 * of the batch at most once and nothing else (run-handler.ts), so equal counts would do; the ids
 * are checked anyway, as naming the lease records its items without the server seeing them.
 */
export function completedWhole(
  outcome: Pick<BudgetedOutcome, 'completed' | 'failed'>,
  leased: readonly string[],
): boolean {
  if (outcome.failed.length > 0 || outcome.completed.length !== leased.length || leased.length === 0) {
    return false;
  }
  const batch = new Set(leased);
  return outcome.completed.every((id) => batch.delete(id));
}

/** Records the batch; null when the operation was cancelled or deleted meanwhile (nothing to record). */
export async function recordBatch(
  deps: Pick<RunBatchDeps, 'db' | 'metrics' | 'leaseSeconds'>,
  args: {
    scope: { organizationId: string; conversationId: string };
    step: RunBatchPayload;
    op: OperationRecord;
    owner: string;
    handler: Handler;
    outcome: Pick<BudgetedOutcome, 'completed' | 'failed'>;
    /** The batch as it was leased, in ordinal order. */
    leased: readonly string[];
    logger: Logger;
    /** Given when the job takes the lane's next batch: the call leases it too. */
    nextStop: Prefetched['stop'] | undefined;
    /** At most this many items for that batch (its key's grant), when the handler has limits. */
    nextBatchSize?: number;
  },
): Promise<RecordedBatch | null> {
  const { op, outcome, nextStop } = args;
  const labels = { operation_type: op.operation_type };
  const recordTimer = deps.metrics.recordDuration.startTimer(labels);
  let callSeconds = 0;
  let recorded: Awaited<ReturnType<typeof recordResults>>;
  try {
    recorded = await inSpan(
      'record results',
      { attributes: { [ATTR.completed]: outcome.completed.length, [ATTR.failed]: outcome.failed.length } },
      () =>
        recordResults(deps.db, args.scope, {
          operationId: op.id,
          completedIds: outcome.completed,
          failed: outcome.failed,
          owner: args.owner,
          // Every item of the batch completed: the call names the lease instead of sending its ids.
          wholeLease: completedWhole(outcome, args.leased) ? { firstId: args.leased[0] as string } : undefined,
          leaseNext: nextStop
            ? {
                leaseSeconds: deps.leaseSeconds,
                batchSize: args.nextBatchSize ?? args.handler.batchSize,
                epoch: args.step.epoch,
              }
            : undefined,
          // A worker's record that leaves nothing to record completes the operation (a call that
          // also leases the next batch leaves that to the worker, which completes it after).
          completeWhenDone: true,
        }),
    ).finally(() => {
      callSeconds = recordTimer();
    });
  } catch (error) {
    // Cancelled while the batch ran: the items are already abandoned; nothing to record.
    if (error instanceof AppError && (error.code === 'operation_finished' || error.code === 'not_found')) {
      return null;
    }
    throw error;
  }
  if (recorded.next && recorded.next.kind !== 'declined') {
    // A lease made by the record's call (empty ones too) counts that call's time.
    deps.metrics.leaseDuration.observe(labels, callSeconds);
  }
  if (recorded.leaseConflicts.length > 0) {
    args.logger.warn(
      { items: recorded.leaseConflicts.length },
      'lease taken over by another worker; its result stands',
    );
  }
  deps.metrics.itemsRecorded.inc({ ...labels, outcome: 'completed' }, outcome.completed.length);
  deps.metrics.itemsRecorded.inc({ ...labels, outcome: 'failed' }, outcome.failed.length);
  const { operation, counts } = recorded;
  return recorded.next?.kind === 'leased' && nextStop
    ? {
        operation,
        counts,
        next: { lease: { operation, batch: recorded.next.batch, counts, reclaimed: 0 }, stop: nextStop },
      }
    : { operation, counts };
}
