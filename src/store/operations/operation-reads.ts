/**
 * Reads of operations: the `get` action, the conversation's open operations (the context
 * fragment) and an operation by id within the organization (the HTTP progress and stream). The
 * operator view's reads across organizations are in operator-view-repo.ts.
 *
 * Lock order: none; each read is one snapshot of committed rows.
 * Cost: primary-key or index reads of assistant_operation, each bounded by a page size, plus the
 * in-flight count of each operation read (its lease rows: O(lanes), not O(items)).
 */
import { AppError } from '../../domain/errors.ts';
import type { ListedOperation, OperationCounts, OperationRecord } from '../../domain/operation.ts';
import { countsOf } from '../../domain/operation.ts';
import type { Database, Queryable } from '../db/db.ts';
import { countInFlight, IN_FLIGHT_COLUMN } from '../leases/item-sql.ts';
import type { ConversationScope } from '../tenants/conversation-repo.ts';
import { type FailureRow, failuresPage } from './failure-sql.ts';
import { LISTED_COLUMNS, OPERATION_COLUMNS, operationNotFound, resolveOperationId } from './operation-row.ts';
import { OPEN_STATUSES_SQL } from './status-sql.ts';

export interface OperationDetails {
  operation: OperationRecord;
  counts: OperationCounts;
  failures: FailureRow[];
  /** Pass back to continue the failures list; null when it is complete. */
  nextFailuresCursor: string | null;
}

/** The `get` action: the operation with one page of failures and their reasons. */
export async function getOperation(
  db: Database,
  scope: ConversationScope,
  operationId: string | null | undefined,
  page: { after: number; limit: number },
): Promise<OperationDetails> {
  const id = await resolveOperationId(db, scope, operationId);
  const rows = await db.query<OperationRecord>(
    `SELECT ${OPERATION_COLUMNS} FROM assistant_operation
     WHERE id = $1 AND organization_id = $2 AND conversation_id = $3`,
    [id, scope.organizationId, scope.conversationId],
  );
  const op = rows[0];
  if (!op) {
    throw operationNotFound(id);
  }
  const failures = await failuresPage(db, op.id, page.after, page.limit + 1);
  const more = failures.length > page.limit;
  const shown = more ? failures.slice(0, page.limit) : failures;
  return {
    operation: op,
    counts: countsOf(op, await countInFlight(db, op.id)),
    failures: shown,
    nextFailuresCursor: more ? String(shown.at(-1)?.ordinal) : null,
  };
}

export interface OpenOperationsPage {
  operations: (ListedOperation & { in_flight_count: number })[];
  /** Active and paused operations in the conversation, including those not in the page. */
  total: number;
}

/**
 * The conversation's active and paused operations, the active one first and then the most
 * recently touched, at most `limit` of them: the context fragment's work is bounded whatever
 * the number of operations.
 */
export async function listOpenOperations(
  db: Queryable,
  scope: ConversationScope,
  limit: number,
): Promise<OpenOperationsPage> {
  const operations = await db.query<ListedOperation & { in_flight_count: number }>(
    `SELECT ${LISTED_COLUMNS('o.')}, ${IN_FLIGHT_COLUMN}
     FROM assistant_operation o
     WHERE organization_id = $1 AND conversation_id = $2 AND status IN (${OPEN_STATUSES_SQL})
     ORDER BY (status = 'active') DESC, updated_at DESC, id
     LIMIT $3`,
    [scope.organizationId, scope.conversationId, limit],
  );
  return { operations, total: await openOperationsTotal(db, scope, operations.length, limit) };
}

/** How many open operations the conversation has: counted only when a page of `limit` came back full. */
export async function openOperationsTotal(
  db: Queryable,
  scope: ConversationScope,
  shown: number,
  limit: number,
): Promise<number> {
  if (shown < limit) {
    return shown;
  }
  const rows = await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM assistant_operation
     WHERE organization_id = $1 AND conversation_id = $2 AND status IN (${OPEN_STATUSES_SQL})`,
    [scope.organizationId, scope.conversationId],
  );
  return rows[0]?.n ?? 0;
}

/** An operation and its counts, by id within the organization (any conversation). */
export async function getOperationInOrganization(
  db: Queryable,
  organizationId: string,
  operationId: string,
): Promise<{ operation: OperationRecord; counts: OperationCounts }> {
  const rows = await db.query<OperationRecord>(
    `SELECT ${OPERATION_COLUMNS} FROM assistant_operation WHERE id = $1 AND organization_id = $2`,
    [operationId, organizationId],
  );
  const operation = rows[0];
  if (!operation) {
    throw new AppError('not_found', `Operation ${operationId} was not found.`, { operation_id: operationId });
  }
  return { operation, counts: countsOf(operation, await countInFlight(db, operation.id)) };
}
