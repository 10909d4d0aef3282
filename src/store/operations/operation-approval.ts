/**
 * Consent before bulk side effects: a background operation of more items than its
 * organization's `approve_above` is created `awaiting_approval` (the create's own call decides
 * it, sql/opspad_create_operation.sql; a retry_failed holds it with holdForApproval in its
 * transaction: nobody ever sees it active) and leases nothing until a person approves it; a
 * rejection cancels it. Who decided is the event's actor.
 *
 * Lock order: as resume (operation-control.ts): the conversation → the operation row, exclusive
 * → (approve: the conversation's active operation, the organization's capacity lock) → (reject:
 * its item rows, abandoned) → the audit event.
 * Cost: O(1) statements on primary keys; a rejection also abandons the operation's items (O(items)).
 */
import type { OperationRecord } from '../../domain/operation.ts';
import { countsOf } from '../../domain/operation.ts';
import { transition } from '../../domain/operation-lifecycle.ts';
import type { Database, Queryable } from '../db/db.ts';
import { abandonUnrecorded } from '../leases/item-sql.ts';
import { type ConversationScope, ensureConversation } from '../tenants/conversation-repo.ts';
import { appendEvent } from './event-repo.ts';
import { assertBackgroundCapacity, pauseActive } from './operation-admission.ts';
import type { FinishResult, StatusChange } from './operation-control.ts';
import { lockOperation, OPERATION_COLUMNS, operationFinished, setStatus } from './operation-row.ts';

/**
 * Holds a just-created background operation for approval when its organization's policy asks
 * for it (the rule: sql/opspad_needs_approval.sql, which a create applies in its own call): the
 * operation as it now is, or null when it may run.
 */
export async function holdForApproval(tx: Queryable, operationId: string): Promise<OperationRecord | null> {
  const rows = await tx.query<OperationRecord>(
    `UPDATE assistant_operation o SET status = 'awaiting_approval'
     WHERE o.id = $1 AND o.status = 'active' AND opspad_needs_approval(o.organization_id, o.total_items)
     RETURNING ${OPERATION_COLUMNS.split(',')
       .map((column) => `o.${column.trim()}`)
       .join(', ')}`,
    [operationId],
  );
  return rows[0] ?? null;
}

/** A person's approval: the operation becomes active, pausing the conversation's active one. */
export async function approveOperation(
  db: Database,
  scope: ConversationScope,
  operationId: string,
  { actor, maxActiveBackground }: { actor: string; maxActiveBackground?: number },
): Promise<StatusChange> {
  return db.transaction(async (tx) => {
    await ensureConversation(tx, scope, { lock: true });
    let op = await lockOperation(tx, scope, operationId);
    const rule = transition('approve', op.status);
    if (rule.kind === 'refused') {
      throw operationFinished(op, rule.verb);
    }
    let pausedOperationId: string | null = null;
    if (rule.kind === 'change') {
      pausedOperationId = await pauseActive(tx, scope, actor, `operation ${op.id} was approved`, op.id);
      await assertBackgroundCapacity(tx, scope.organizationId, maxActiveBackground);
      op = await setStatus(tx, op.id, rule.to);
      await appendEvent(tx, {
        operationId: op.id,
        organizationId: scope.organizationId,
        kind: rule.event,
        actor,
        data: {},
      });
    }
    return { operation: op, counts: countsOf(op, 0), pausedOperationId };
  });
}

/** A person's rejection: the operation is cancelled, every item abandoned. */
export async function rejectOperation(
  db: Database,
  scope: ConversationScope,
  operationId: string,
  { actor }: { actor: string },
): Promise<FinishResult> {
  return db.transaction(async (tx) => {
    let op = await lockOperation(tx, scope, operationId);
    const rule = transition('reject', op.status);
    if (rule.kind === 'refused') {
      throw operationFinished(op, rule.verb);
    }
    if (rule.kind === 'change') {
      const abandoned = await abandonUnrecorded(tx, op.id);
      op = await setStatus(tx, op.id, rule.to, { abandoned_count: op.state_json.abandoned_count + abandoned });
      await appendEvent(tx, {
        operationId: op.id,
        organizationId: scope.organizationId,
        kind: rule.event,
        actor,
        data: { abandoned },
      });
    }
    return { operation: op, counts: countsOf(op, 0), abandoned: op.state_json.abandoned_count };
  });
}

export interface AwaitingApproval {
  id: string;
  organization_id: string;
  organization_name: string;
  conversation_id: string;
  operation_type: string;
  total_items: number;
  created_at: Date;
}

/** Operations awaiting approval, oldest first, of one organization (by name) or all. */
export async function listAwaitingApproval(
  db: Queryable,
  { organizationName, limit }: { organizationName?: string; limit: number },
): Promise<AwaitingApproval[]> {
  return db.query<AwaitingApproval>(
    `SELECT o.id, o.organization_id, g.name AS organization_name, o.conversation_id, o.operation_type,
            o.total_items, o.created_at
     FROM assistant_operation o JOIN organization g ON g.id = o.organization_id
     WHERE o.status = 'awaiting_approval' AND ($1::text IS NULL OR g.name = $1)
     ORDER BY o.created_at, o.id LIMIT $2`,
    [organizationName ?? null, limit],
  );
}
