/**
 * The actions that change an operation's status: pause, resume, complete, cancel, and the
 * workers' complete-when-done. Which action is allowed in which status, and what it becomes, is
 * the lifecycle table (domain/operation-lifecycle.ts); these functions carry it out.
 *
 * Lock order: (resume only: the conversation →) the operation row, exclusive (FOR UPDATE), so
 * status changes of one operation are serialized with each other and with every lease and record
 * → (resume: the conversation's active operation, the organization's capacity lock) → the item
 * rows (complete/cancel abandon what is not recorded) → the audit event.
 * Cost: O(1) statements on primary keys, plus, for cancel and a forced complete, one UPDATE of the
 * operation's unrecorded items (O(items left), through the pending and leased items' indexes).
 */
import { AppError } from '../../domain/errors.ts';
import type { OperationCounts, OperationRecord, OperationStatus } from '../../domain/operation.ts';
import { countsOf, remainingOf } from '../../domain/operation.ts';
import { statusesAllowing, transition } from '../../domain/operation-lifecycle.ts';
import type { Database, Queryable } from '../db/db.ts';
import { prepared } from '../db/prepared.ts';
import { sqlList, sqlLiteral } from '../db/sql-literal.ts';
import { abandonUnrecorded, countInFlight } from '../leases/item-sql.ts';
import { type ConversationScope, ensureConversation } from '../tenants/conversation-repo.ts';
import { appendEvent } from './event-repo.ts';
import { assertBackgroundCapacity, assertNoOtherActive, pauseActive } from './operation-admission.ts';
import { lockOperation, OPERATION_COLUMNS, operationFinished, resolveOperationId, setStatus } from './operation-row.ts';

export interface FinishResult {
  operation: OperationRecord;
  counts: OperationCounts;
  abandoned: number;
}

export interface StatusChange {
  operation: OperationRecord;
  counts: OperationCounts;
  pausedOperationId: string | null;
}

/**
 * A complete with every item recorded, in one statement committed where it runs: the operation
 * row, exclusive → its update → the `completed` event. `action` is the lifecycle action whose
 * statuses may complete: `complete` (an assistant's last call) or `complete_if_done` (workers and
 * the reconciler, active only). It changes nothing when the case is another (items remain, the
 * status is not one the action completes, the operation is not the caller's), and returns no
 * row. It was five round trips (begin, lock, update, event, commit); for many small operations
 * each round trip is a socket write and read in the worker and in Postgres.
 */
const completeRecordedSql = (action: 'complete' | 'complete_if_done') =>
  prepared(`WITH locked AS (
    SELECT id, status, total_items, completed_count, failed_count, state_json FROM assistant_operation
    WHERE id = $1 AND organization_id = $2 AND conversation_id = $3
    FOR UPDATE),
  done AS (
    UPDATE assistant_operation o
    SET status = ${sqlLiteral('completed' satisfies OperationStatus)}, updated_at = now(),
        state_json = o.state_json - '{paused_reason,paused_by}'::text[]
    FROM locked l
    WHERE o.id = l.id AND l.status IN (${sqlList(statusesAllowing(action))})
      AND l.total_items - l.completed_count - l.failed_count
          - coalesce((l.state_json->>'abandoned_count')::int, 0) = 0
    RETURNING ${OPERATION_COLUMNS.split(',')
      .map((column) => `o.${column.trim()}`)
      .join(', ')}),
  event AS (
    INSERT INTO operation_event (operation_id, organization_id, kind, actor, data)
    SELECT id, $2, 'completed', $4, '{"forced": false, "abandoned": 0}'::jsonb FROM done)
  SELECT * FROM done`);

const COMPLETE_RECORDED_SQL = completeRecordedSql('complete');
const COMPLETE_IF_DONE_SQL = completeRecordedSql('complete_if_done');

/** The `complete` action. Refuses while items remain unless `force` (they become abandoned). */
export async function completeOperation(
  db: Database,
  scope: ConversationScope,
  operationId: string,
  { force, actor }: { force: boolean; actor: string },
): Promise<FinishResult> {
  const [recorded] = await db.query<OperationRecord>(COMPLETE_RECORDED_SQL, [
    operationId,
    scope.organizationId,
    scope.conversationId,
    actor,
  ]);
  if (recorded) {
    return { operation: recorded, counts: countsOf(recorded, 0), abandoned: 0 };
  }
  return db.transaction(async (tx) => {
    const op = await lockOperation(tx, scope, operationId);
    const rule = transition('complete', op.status);
    if (rule.kind === 'refused') {
      throw operationFinished(op, rule.verb);
    }
    if (rule.kind !== 'change') {
      return { operation: op, counts: countsOf(op, 0), abandoned: op.state_json.abandoned_count };
    }
    const remaining = remainingOf(op);
    if (remaining > 0 && !force) {
      throw new AppError(
        'items_remaining',
        `Operation ${op.id} still has ${remaining} of ${op.total_items} items not recorded. Keep going with progress/update, or pass "force": true to complete it anyway (they are recorded as abandoned).`,
        { operation_id: op.id, remaining_count: remaining },
      );
    }
    return markCompleted(tx, scope, op, remaining, actor);
  });
}

async function markCompleted(
  tx: Queryable,
  scope: ConversationScope,
  locked: OperationRecord,
  remaining: number,
  actor: string,
): Promise<FinishResult> {
  const abandoned = remaining > 0 ? await abandonUnrecorded(tx, locked.id) : 0;
  const op = await setStatus(tx, locked.id, 'completed', {
    abandoned_count: locked.state_json.abandoned_count + abandoned,
  });
  await appendEvent(tx, {
    operationId: op.id,
    organizationId: scope.organizationId,
    kind: 'completed',
    actor,
    data: { forced: remaining > 0, abandoned },
  });
  return { operation: op, counts: countsOf(op, 0), abandoned };
}

/**
 * What workers and the reconciler do when they see nothing left: complete the operation if it
 * is still active with every item recorded. A pause that landed first wins (the operation stays
 * paused, and completes once resumed), so a 200 to `pause` is never followed by `completed`.
 * One statement (COMPLETE_IF_DONE_SQL); false as well for an operation that is not the caller's.
 */
export async function completeIfDone(
  db: Database,
  scope: ConversationScope,
  operationId: string,
  actor: string,
): Promise<boolean> {
  const rows = await db.query(COMPLETE_IF_DONE_SQL, [operationId, scope.organizationId, scope.conversationId, actor]);
  return rows.length > 0;
}

/** The `cancel` action: every item not yet recorded, pending or leased, becomes abandoned. */
export async function cancelOperation(
  db: Database,
  scope: ConversationScope,
  operationId: string,
  {
    actor,
    expiredReason,
    eventData,
  }: {
    actor: string;
    /** Set when maintenance expires the operation. */
    expiredReason?: string;
    /** More for the audit event's data (an operator bulk action's id). */
    eventData?: Record<string, unknown>;
  },
): Promise<FinishResult> {
  return db.transaction(async (tx) => {
    let op = await lockOperation(tx, scope, operationId);
    const rule = transition('cancel', op.status);
    if (rule.kind === 'refused') {
      throw operationFinished(op, rule.verb);
    }
    if (rule.kind !== 'change') {
      return { operation: op, counts: countsOf(op, 0), abandoned: op.state_json.abandoned_count };
    }
    const abandoned = await abandonUnrecorded(tx, op.id);
    op = await setStatus(tx, op.id, rule.to, { abandoned_count: op.state_json.abandoned_count + abandoned });
    await appendEvent(tx, {
      operationId: op.id,
      organizationId: scope.organizationId,
      kind: expiredReason ? 'expired' : rule.event,
      actor,
      data: expiredReason ? { abandoned, reason: expiredReason } : { ...eventData, abandoned },
    });
    return { operation: op, counts: countsOf(op, 0), abandoned: op.state_json.abandoned_count };
  });
}

/** The `pause` action. Leased batches may still be recorded; no new batch is handed out. */
export async function pauseOperation(
  db: Database,
  scope: ConversationScope,
  operationId: string | null | undefined,
  {
    actor,
    reason,
    pausedBy,
    eventData,
  }: { actor: string; reason: string; pausedBy: string; eventData?: Record<string, unknown> },
): Promise<StatusChange> {
  return db.transaction(async (tx) => {
    const id = await resolveOperationId(tx, scope, operationId);
    let op = await lockOperation(tx, scope, id);
    const rule = transition('pause', op.status);
    if (rule.kind === 'refused') {
      throw operationFinished(op, rule.verb);
    }
    if (rule.kind === 'change') {
      op = await setStatus(tx, op.id, rule.to, { paused_reason: reason, paused_by: pausedBy });
      await appendEvent(tx, {
        operationId: op.id,
        organizationId: scope.organizationId,
        kind: rule.event,
        actor,
        data: { ...eventData, reason },
      });
    }
    return { operation: op, counts: countsOf(op, await countInFlight(tx, op.id)), pausedOperationId: op.id };
  });
}

/**
 * The `resume` action: makes the operation active, pausing the one that was; with
 * `onlyIfNoneActive` (a bulk resume), refusing instead while another one is active.
 */
export async function resumeOperation(
  db: Database,
  scope: ConversationScope,
  operationId: string,
  {
    actor,
    maxActiveBackground,
    eventData,
    onlyIfNoneActive = false,
  }: { actor: string; maxActiveBackground?: number; eventData?: Record<string, unknown>; onlyIfNoneActive?: boolean },
): Promise<StatusChange> {
  return db.transaction(async (tx) => {
    await ensureConversation(tx, scope, { lock: true });
    let op = await lockOperation(tx, scope, operationId);
    const rule = transition('resume', op.status);
    if (rule.kind === 'refused') {
      throw operationFinished(op, rule.verb);
    }
    let pausedOperationId: string | null = null;
    if (rule.kind === 'change') {
      if (onlyIfNoneActive) {
        await assertNoOtherActive(tx, scope, op.id);
      }
      pausedOperationId = await pauseActive(tx, scope, actor, `operation ${op.id} was resumed`, op.id);
      if (op.state_json.execution === 'background') {
        await assertBackgroundCapacity(tx, scope.organizationId, maxActiveBackground);
      }
      // A new lane generation for background work; the breaker starts from a clean window.
      op = await setStatus(tx, op.id, rule.to, {
        recent_outcomes: '',
        ...(op.state_json.execution === 'background'
          ? { dispatch_epoch: (op.state_json.dispatch_epoch ?? 0) + 1 }
          : {}),
      });
      await appendEvent(tx, {
        operationId: op.id,
        organizationId: scope.organizationId,
        kind: rule.event,
        actor,
        data: { ...eventData },
      });
    }
    return { operation: op, counts: countsOf(op, await countInFlight(tx, op.id)), pausedOperationId };
  });
}
