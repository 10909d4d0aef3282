/**
 * The `create` action: a new operation row, its items and its `created` event, in one
 * transaction that also pauses the conversation's active operation.
 *
 * Lock order: the conversation (so two creates in one conversation take turns) → the active
 * operation's row (pauseActive) → the organization's capacity lock (background only) → the new
 * rows, which nobody else can see before commit.
 * Cost: O(items) for the insert (COPY on Postgres, see item-sql insertItems), O(1) otherwise;
 * a large create also refreshes the item table's statistics afterwards, in the background.
 */
import type { ExecutionMode, OperationRecord, OperationState } from '../domain/operation.ts';
import { OPERATION_DEFAULTS } from '../domain/operation-input.ts';
import { type ConversationScope, ensureConversation } from './conversation-repo.ts';
import type { Database, Queryable } from './db.ts';
import { appendEvent } from './event-repo.ts';
import { insertItems } from './item-sql.ts';
import { assertBackgroundCapacity, pauseActive } from './operation-admission.ts';
import { OPERATION_COLUMNS } from './operation-row.ts';

/** A create of at least this many items refreshes the item table's statistics (see createOperation). */
const ANALYZE_AFTER_ITEMS = 10_000;

export interface CreateOperationParams {
  operationType: string;
  itemIds: readonly string[];
  batchSize: number;
  queryParams: Record<string, unknown> | null;
  notes: string | null;
  execution: ExecutionMode;
  /** Background: batches run at once (default 4). */
  maxParallelBatches?: number;
  /** Circuit breaker threshold; absent: never pause for failures. */
  maxFailureRate?: number | null;
  /** OPSPAD_MAX_ACTIVE_BACKGROUND: checked when the new operation runs in the background. */
  maxActiveBackground?: number;
  /** Background: the queue prefix of the deployment that dispatches it. */
  queuePrefix?: string;
  actor: string;
}

export interface CreatedOperation {
  operation: OperationRecord;
  pausedOperationId: string | null;
}

/** What a new operation's state is built from: a create's parameters or a retried operation's state. */
export interface InitialStateInput {
  batchSize: number;
  execution: ExecutionMode;
  queryParams: Record<string, unknown> | null;
  notes: string | null;
  maxParallelBatches?: number;
  maxFailureRate?: number | null;
  queuePrefix?: string;
  retryOf?: string;
}

/**
 * The state of a new operation, from a create or a retry: the cursor at the start, nothing
 * abandoned, and for background work the first lane generation of the deployment dispatching it.
 */
export function initialState(input: InitialStateInput): OperationState {
  return {
    cursor: 0,
    batch_size: input.batchSize,
    execution: input.execution,
    query_params: input.queryParams,
    notes: input.notes,
    abandoned_count: 0,
    ...(input.retryOf === undefined ? {} : { retry_of: input.retryOf }),
    max_parallel_batches: input.maxParallelBatches ?? OPERATION_DEFAULTS.maxParallelBatches,
    max_failure_rate: input.maxFailureRate ?? null,
    ...(input.execution === 'background' ? { dispatch_epoch: 1, queue_prefix: input.queuePrefix } : {}),
  };
}

/**
 * Creates an operation with its items, pausing the conversation's active operation in the same
 * transaction. The caller has validated the ids (non-empty, unique, within limits).
 */
export async function createOperation(
  db: Database,
  scope: ConversationScope,
  params: CreateOperationParams,
  extraState: Partial<OperationState> = {},
): Promise<CreatedOperation> {
  const created = await db.transaction(async (tx) => {
    const result = await insertCreatedOperation(tx, scope, params, { count: params.itemIds.length }, extraState);
    await insertItems(tx, result.operation.id, params.itemIds);
    return result;
  });
  await analyzeAfterLargeCreate(db, params.itemIds.length);
  return created;
}

/**
 * The statements of a create but the items': the conversation's lock, the pause of its active
 * operation, the background limit, the operation row (with `items.operationId` when the caller
 * wrote the items first, see item-copy.ts) and its `created` event. In the caller's transaction.
 */
export async function insertCreatedOperation(
  tx: Queryable,
  scope: ConversationScope,
  params: Omit<CreateOperationParams, 'itemIds'>,
  items: { count: number; operationId?: string },
  extraState: Partial<OperationState> = {},
): Promise<CreatedOperation> {
  await ensureConversation(tx, scope, { lock: true });
  const pausedOperationId = await pauseActive(tx, scope, params.actor, 'a new operation was created');
  if (params.execution === 'background') {
    await assertBackgroundCapacity(tx, scope.organizationId, params.maxActiveBackground);
  }
  const state: OperationState = { ...initialState(params), ...extraState };
  const operation = await insertOperation(tx, scope, params.operationType, items.count, state, items.operationId);
  await appendEvent(tx, {
    operationId: operation.id,
    organizationId: scope.organizationId,
    kind: 'created',
    actor: params.actor,
    data: { total_items: operation.total_items, batch_size: params.batchSize, execution: params.execution },
  });
  return { operation, pausedOperationId };
}

/**
 * After a create of many items: until the table's statistics count the new operation's rows, the
 * planner takes it for a small one and reads all of its rows for every lease, renewal and record
 * (it walks the `(operation, item)` index for the operation and filters): O(N) per batch, 3.5 s
 * for one lease of a 1,000,000-item operation. Refreshing them costs one sampled pass (about
 * 0.15 s at 1,100,000 rows), which the create waits for, so no worker or assistant gets the
 * operation before the planner knows its size: run in the background, the pass lost the race to
 * the first leases, and a worker went through 1,000,000 items in 20.3 s instead of 13.4 s.
 * A failed pass is not the create's failure (autovacuum's analyze comes round later).
 */
export async function analyzeAfterLargeCreate(db: Database, items: number): Promise<void> {
  if (items >= ANALYZE_AFTER_ITEMS && db.engine === 'postgres') {
    await db.query('ANALYZE assistant_operation_item').catch(() => undefined);
  }
}

/** Inserts the operation's row, active; `operationId` when the caller chose it (a streamed create). */
export async function insertOperation(
  tx: Queryable,
  scope: ConversationScope,
  operationType: string,
  totalItems: number,
  state: OperationState,
  operationId?: string,
): Promise<OperationRecord> {
  const rows = await tx.query<OperationRecord>(
    `INSERT INTO assistant_operation
       (id, conversation_id, organization_id, operation_type, status, total_items, state_json)
     VALUES (coalesce($6::uuid, gen_random_uuid()), $1, $2, $3, 'active', $4, $5::jsonb)
     RETURNING ${OPERATION_COLUMNS}`,
    [scope.conversationId, scope.organizationId, operationType, totalItems, JSON.stringify(state), operationId ?? null],
  );
  return rows[0] as OperationRecord;
}
