/**
 * The assistant_operation row: how every statement family finds it, locks it and writes it.
 *
 * Lock order, for every transaction in the operation-* modules: the conversation (create, resume
 * and retry only, see conversation-repo) → the operation row (this module) → advisory locks
 * (organization capacity, circuit breaker) → item rows → the operation row's update last. A
 * transaction that takes them in this order never deadlocks with another one.
 *
 * Cost: each function is one statement on the primary key: O(log N) in the number of operations,
 * independent of the operation's size.
 */
import { AppError } from '../../domain/errors.ts';
import type { OperationRecord, OperationState } from '../../domain/operation.ts';
import type { Queryable } from '../db/db.ts';
import { prepared } from '../db/prepared.ts';
import type { ConversationScope } from '../tenants/conversation-repo.ts';

export const OPERATION_COLUMNS = `id, conversation_id, organization_id, operation_type, status, total_items,
  completed_count, failed_count, state_json, created_at, updated_at`;

/**
 * The columns of a ListedOperation: lists never carry query_params out of the database (a page of
 * operations, at up to OPSPAD_MAX_QUERY_PARAMS_BYTES each).
 */
export const LISTED_COLUMNS = (alias: string) =>
  OPERATION_COLUMNS.split(',')
    .map((c) => c.trim())
    .map((c) => (c === 'state_json' ? `${alias}state_json - 'query_params' AS state_json` : `${alias}${c}`))
    .join(', ');

/** The operation is completed or cancelled: `what` (e.g. "paused") can no longer happen to it. */
export function operationFinished(op: OperationRecord, what: string): AppError {
  return new AppError('operation_finished', `Operation ${op.id} is ${op.status}; it cannot be ${what}.`, {
    operation_id: op.id,
    status: op.status,
  });
}

export function operationNotFound(operationId: string): AppError {
  return new AppError('not_found', `Operation ${operationId} was not found in this conversation.`, {
    operation_id: operationId,
  });
}

/**
 * Locks and returns the operation, scoped to the organization and conversation.
 *
 * `exclusive` (FOR UPDATE) is what every action that changes the operation's state takes
 * (pause, cancel, complete, resume, maintenance): it waits for every other lock on the row and
 * holds them all off. `shared` (FOR KEY SHARE) is what a record holds while it locks its items,
 * so the lanes of one operation record side by side and a state change waits for them; `update`
 * (FOR NO KEY UPDATE) is what a record then takes before it writes, and what a lease holds
 * throughout (lockOperationForLease, and the step functions before they lease): a lease reads
 * its batch's item rows without locking them, so nothing that may record items no live lease
 * holds (a late worker's report, an assistant's) writes beside it. Every update of the row
 * commutes (`count + n`, the cursor only forward).
 */
const LOCK_OPERATION_SQL = {
  exclusive: prepared(`SELECT ${OPERATION_COLUMNS} FROM assistant_operation
     WHERE id = $1 AND organization_id = $2 AND conversation_id = $3 FOR UPDATE`),
  shared: prepared(`SELECT ${OPERATION_COLUMNS} FROM assistant_operation
     WHERE id = $1 AND organization_id = $2 AND conversation_id = $3 FOR KEY SHARE`),
  update: prepared(`SELECT ${OPERATION_COLUMNS} FROM assistant_operation
     WHERE id = $1 AND organization_id = $2 AND conversation_id = $3 FOR NO KEY UPDATE`),
};

export async function lockOperation(
  tx: Queryable,
  scope: ConversationScope,
  operationId: string,
  mode: keyof typeof LOCK_OPERATION_SQL = 'exclusive',
): Promise<OperationRecord> {
  const rows = await tx.query<OperationRecord>(LOCK_OPERATION_SQL[mode], [
    operationId,
    scope.organizationId,
    scope.conversationId,
  ]);
  const op = rows[0];
  if (!op) {
    throw operationNotFound(operationId);
  }
  return op;
}

/**
 * The operation's row locked for a lease: `exclusive` as {@link lockOperation}; `shared` takes
 * the row's update lock (FOR NO KEY UPDATE), not a key-share lock, because the step functions
 * lease without locking item rows under that lock (sql/opspad_lease_from_cursor.sql): leases of
 * one operation take turns; the step functions' records of their own leases still run beside
 * them. Read with what decides whether the
 * lease is the usual case (sql/opspad_lease_usual.sql, the condition the step functions read
 * too): whether the caller is in the operation's dispatch epoch (`epoch` undefined: any), holds
 * a lease row of its own (then there is a batch to renew; without one the renewal's statement is
 * not sent) and whether an expired lease still holds items (then they are reclaimed first). One
 * round trip.
 */
export async function lockOperationForLease(
  tx: Queryable,
  scope: ConversationScope,
  operationId: string,
  mode: 'exclusive' | 'shared',
  owner: string,
  epoch: number | undefined,
): Promise<{ op: OperationRecord; epochMatches: boolean; expiredLeases: boolean; ownsLease: boolean }> {
  const rows = await tx.query<
    OperationRecord & { epoch_matches: boolean; expired_leases: boolean; owns_lease: boolean }
  >(
    `SELECT ${OPERATION_COLUMNS}, u.epoch_matches, u.expired_leases, u.owns_lease
     FROM assistant_operation,
       opspad_lease_usual(assistant_operation.id, $4, assistant_operation.status, assistant_operation.state_json, $5) u
     WHERE id = $1 AND organization_id = $2 AND conversation_id = $3
     FOR ${mode === 'exclusive' ? 'UPDATE' : 'NO KEY UPDATE'} OF assistant_operation`,
    [operationId, scope.organizationId, scope.conversationId, owner, epoch ?? null],
  );
  const row = rows[0];
  if (!row) {
    throw operationNotFound(operationId);
  }
  const { epoch_matches, expired_leases, owns_lease, ...op } = row;
  return { op, epochMatches: epoch_matches, expiredLeases: expired_leases, ownsLease: owns_lease };
}

/** The operation's row as it is now (its lock already held). */
export async function readOperation(tx: Queryable, operationId: string): Promise<OperationRecord> {
  const rows = await tx.query<OperationRecord>(`SELECT ${OPERATION_COLUMNS} FROM assistant_operation WHERE id = $1`, [
    operationId,
  ]);
  return rows[0] as OperationRecord;
}

/** The id of the conversation's active operation, or a 404 that points at the paused ones. */
async function activeOperationId(tx: Queryable, scope: ConversationScope): Promise<string> {
  const rows = await tx.query<{ id: string; status: string }>(
    `SELECT id, status FROM assistant_operation
     WHERE organization_id = $1 AND conversation_id = $2 AND status IN ('active', 'paused')
     ORDER BY (status = 'active') DESC, updated_at DESC LIMIT 6`,
    [scope.organizationId, scope.conversationId],
  );
  const active = rows.find((r) => r.status === 'active');
  if (active) {
    return active.id;
  }
  const paused = rows.map((r) => r.id);
  throw new AppError(
    'no_active_operation',
    paused.length > 0
      ? `No operation is active in this conversation. Resume a paused one with {"action":"resume","operation_id":"${paused[0]}"}, or pass operation_id.`
      : 'No operation is active in this conversation. Create one with {"action":"create", ...}.',
    { paused_operation_ids: paused },
  );
}

/** The operation named, or the conversation's active one when none is. */
export async function resolveOperationId(
  tx: Queryable,
  scope: ConversationScope,
  operationId: string | null | undefined,
): Promise<string> {
  return operationId ?? (await activeOperationId(tx, scope));
}

/** Sets the status and merges `statePatch`; a status other than paused drops the pause's reason. */
const SET_STATUS_SQL = prepared(`UPDATE assistant_operation
     SET status = $2, updated_at = now(), state_json = (state_json || $3::jsonb) - $4::text[]
     WHERE id = $1
     RETURNING ${OPERATION_COLUMNS}`);

export async function setStatus(
  tx: Queryable,
  operationId: string,
  status: OperationRecord['status'],
  statePatch: Partial<OperationState> = {},
): Promise<OperationRecord> {
  const rows = await tx.query<OperationRecord>(SET_STATUS_SQL, [
    operationId,
    status,
    JSON.stringify(statePatch),
    status === 'paused' ? [] : ['paused_reason', 'paused_by'],
  ]);
  return rows[0] as OperationRecord;
}

/** Sets the cursor, down as well as up (only under the exclusive lock). */
export async function setCursor(tx: Queryable, operationId: string, cursor: number): Promise<OperationRecord> {
  const rows = await tx.query<OperationRecord>(
    `UPDATE assistant_operation SET state_json = jsonb_set(state_json, '{cursor}', to_jsonb($2::int)),
       updated_at = now()
     WHERE id = $1 RETURNING ${OPERATION_COLUMNS}`,
    [operationId, cursor],
  );
  return rows[0] as OperationRecord;
}

/** Sets the dispatch epoch (a new lane generation of a background operation). */
export async function setDispatchEpoch(tx: Queryable, operationId: string, epoch: number): Promise<OperationRecord> {
  const rows = await tx.query<OperationRecord>(
    `UPDATE assistant_operation
     SET state_json = jsonb_set(state_json, '{dispatch_epoch}', to_jsonb($2::int)), updated_at = now()
     WHERE id = $1 RETURNING ${OPERATION_COLUMNS}`,
    [operationId, epoch],
  );
  return rows[0] as OperationRecord;
}
