/**
 * What the reconciler and the sweeper read and change. They work across organizations by nature;
 * these functions say so in their names and return each operation's scope, so that every change
 * after them is scoped again.
 *
 * Lock order: lists take no lock; advanceDispatchEpoch locks the operation row exclusively.
 * Cost: keyset pages of assistant_operation (bounded by `limit`); one primary-key update.
 */
import type { ListedOperation, OperationRecord } from '../../domain/operation.ts';
import type { Database, Queryable } from '../db/db.ts';
import type { ConversationScope } from '../tenants/conversation-repo.ts';
import { LISTED_COLUMNS, lockOperation, setDispatchEpoch } from './operation-row.ts';

export interface ActiveBackgroundOperation extends ConversationScope {
  operation: ListedOperation;
  /** Milliseconds since the operation last changed, by the database's clock. */
  idleMs: number;
}

/** Active background operations after `afterId` (keyset pages), every organization. */
export async function listActiveBackgroundOperationsAllOrganizations(
  db: Queryable,
  queuePrefix: string,
  afterId: string,
  limit: number,
): Promise<ActiveBackgroundOperation[]> {
  const rows = await db.query<ListedOperation & { idle_ms: number }>(
    `SELECT ${LISTED_COLUMNS('')}, (extract(epoch FROM now() - updated_at) * 1000)::int AS idle_ms
     FROM assistant_operation
     WHERE status = 'active' AND state_json->>'execution' = 'background' AND id > $1::uuid
       AND coalesce(state_json->>'queue_prefix', $3) = $3
     ORDER BY id LIMIT $2`,
    [afterId, limit, queuePrefix],
  );
  return rows.map(({ idle_ms, ...operation }) => ({
    operation,
    idleMs: idle_ms,
    organizationId: operation.organization_id,
    conversationId: operation.conversation_id,
  }));
}

/**
 * Starts a new lane generation for an active background operation (the reconciler found no
 * live job for it). Returns the operation with its new epoch, or null if it is no longer active.
 */
export async function advanceDispatchEpoch(
  db: Database,
  scope: ConversationScope,
  operationId: string,
): Promise<OperationRecord | null> {
  return db.transaction(async (tx) => {
    const op = await lockOperation(tx, scope, operationId);
    if (op.status !== 'active' || op.state_json.execution !== 'background') {
      return null;
    }
    return setDispatchEpoch(tx, op.id, (op.state_json.dispatch_epoch ?? 0) + 1);
  });
}

/** Paused operations untouched for `idleSeconds`, every organization, oldest first. */
export async function listIdlePausedOperationsAllOrganizations(
  db: Queryable,
  idleSeconds: number,
  limit: number,
): Promise<(ConversationScope & { operationId: string })[]> {
  const rows = await db.query<{ id: string; organization_id: string; conversation_id: string }>(
    `SELECT id, organization_id, conversation_id FROM assistant_operation
     WHERE status = 'paused' AND updated_at < now() - make_interval(secs => $1)
     ORDER BY updated_at LIMIT $2`,
    [idleSeconds, limit],
  );
  return rows.map((r) => ({ operationId: r.id, organizationId: r.organization_id, conversationId: r.conversation_id }));
}
