/**
 * The `retry_failed` action: a new active operation (same type, query_params) over the failed
 * items of another, copied inside Postgres without passing through this process. A background
 * retry is held for approval like a create (operation-approval.ts): retrying 5,000 failed sends
 * sends 5,000 again, so the organization's threshold asks a person first just the same.
 *
 * Lock order: the conversation → the source operation (exclusive) → the conversation's active
 * operation (pauseActive) → the organization's capacity lock → the new rows.
 * Cost: O(failed items) for the copy (the source's failed rows, through the item table's
 * operation index), O(1) otherwise.
 */
import { AppError } from '../../domain/errors.ts';
import type { OperationRecord } from '../../domain/operation.ts';
import type { Database } from '../db/db.ts';
import { type ConversationScope, ensureConversation } from '../tenants/conversation-repo.ts';
import { appendEvent } from './event-repo.ts';
import { copyFailedItems } from './failure-sql.ts';
import { assertBackgroundCapacity, pauseActive } from './operation-admission.ts';
import { holdForApproval } from './operation-approval.ts';
import { type CreatedOperation, initialState, insertOperation } from './operation-create.ts';
import { type QuotaDefaults, reserveQuota } from './operation-quota.ts';
import { lockOperation, OPERATION_COLUMNS } from './operation-row.ts';

export async function retryFailed(
  db: Database,
  scope: ConversationScope,
  operationId: string,
  {
    batchSize,
    actor,
    maxActiveBackground,
    quota,
    eventData,
  }: {
    batchSize: number | null;
    actor: string;
    maxActiveBackground?: number;
    quota?: QuotaDefaults;
    /** More for the audit events' data (an operator bulk action's id). */
    eventData?: Record<string, unknown>;
  },
): Promise<CreatedOperation> {
  return db.transaction(async (tx) => {
    await ensureConversation(tx, scope, { lock: true });
    const source = await lockOperation(tx, scope, operationId);
    const prunedFailures = source.state_json.pruned_failures?.count ?? 0;
    if (prunedFailures > 0) {
      // Retention deleted some failure rows (store/retention/retention.ts): a retry of the rest would
      // quietly leave those items out.
      throw new AppError(
        'items_pruned',
        `Operation ${source.id} finished longer ago than the retention period (OPSPAD_RETENTION): ${prunedFailures} of its ${source.failed_count} failed items were deleted, so they cannot be retried. Get the ids you still need (get lists the ${source.failed_count - prunedFailures} kept) and create a new operation.`,
        {
          operation_id: source.id,
          failures_kept: source.failed_count - prunedFailures,
          failures_pruned: prunedFailures,
        },
      );
    }
    if (source.failed_count === 0) {
      throw new AppError('nothing_to_retry', `Operation ${source.id} has no failed items to retry.`, {
        operation_id: source.id,
      });
    }
    await reserveQuota(tx, scope.organizationId, source.failed_count, quota);
    const pausedOperationId = await pauseActive(tx, scope, actor, 'a retry operation was created');
    if (source.state_json.execution === 'background') {
      await assertBackgroundCapacity(tx, scope.organizationId, maxActiveBackground);
    }
    // A background retry starts its own lane generation, dispatched by the same deployment.
    const state = initialState({
      batchSize: batchSize ?? source.state_json.batch_size,
      execution: source.state_json.execution,
      queryParams: source.state_json.query_params,
      notes: source.state_json.notes,
      retryOf: source.id,
      maxParallelBatches: source.state_json.max_parallel_batches,
      maxFailureRate: source.state_json.max_failure_rate ?? null,
      queuePrefix: source.state_json.queue_prefix,
    });
    let operation = await insertOperation(tx, scope, source.operation_type, source.failed_count, state);
    const copied = await copyFailedItems(tx, source.id, operation.id);
    if (copied !== source.failed_count) {
      // The counter and the rows disagree; trust the rows.
      const rows = await tx.query<OperationRecord>(
        `UPDATE assistant_operation SET total_items = $2 WHERE id = $1 RETURNING ${OPERATION_COLUMNS}`,
        [operation.id, copied],
      );
      operation = rows[0] as OperationRecord;
    }
    if (source.state_json.execution === 'background') {
      operation = (await holdForApproval(tx, operation.id)) ?? operation;
    }
    await appendEvent(tx, {
      operationId: operation.id,
      organizationId: scope.organizationId,
      kind: 'created',
      actor,
      data: { ...eventData, total_items: copied, retry_of: source.id },
    });
    await appendEvent(tx, {
      operationId: source.id,
      organizationId: scope.organizationId,
      kind: 'retried',
      actor,
      data: { ...eventData, retry_operation_id: operation.id, items: copied },
    });
    return { operation, pausedOperationId };
  });
}
