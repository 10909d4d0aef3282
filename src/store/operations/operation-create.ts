/**
 * The `create` action: a new operation row, its items and its `created` event, written together
 * with the pause of the conversation's active operation, in one call of
 * sql/opspad_create_operation.sql (with the items up to INLINE_ITEMS), or in one transaction with
 * the COPY of more ids.
 *
 * Lock order: the conversation (so two creates in one conversation take turns) → the
 * organization's quota row (operation-quota.ts) → the active operation's row (the pause) → the
 * organization's capacity lock (background only) → the new rows, which nobody else can see
 * before commit.
 * Cost: O(items). A create of up to INLINE_ITEMS ids is one round trip, where a transaction of
 * its steps would be nine. A create of more ids is a transaction (begin, the call, the COPY,
 * commit), and a create of many ids refreshes the item table's statistics before it answers.
 */
import type { ExecutionMode, OperationRecord, OperationState } from '../../domain/operation.ts';
import { OPERATION_DEFAULTS } from '../../domain/operation-input.ts';
import { type Database, type Queryable, withRetries } from '../db/db.ts';
import { prepared } from '../db/prepared.ts';
import type { ConversationScope } from '../tenants/conversation-repo.ts';
import { rethrowAdmissionRefusal } from './admission-refusals.ts';
import { insertItems } from './item-insert.ts';
import { timeOrderedUuid } from './operation-id.ts';
import type { QuotaDefaults } from './operation-quota.ts';
import { OPERATION_COLUMNS } from './operation-row.ts';

/** A create of at least this many items refreshes the item table's statistics (see createOperation). */
const ANALYZE_AFTER_ITEMS = 10_000;

/**
 * A create of at most this many ids inserts them in its own statement (CREATE_SQL); more go in
 * by COPY (item-insert.ts insertItems), which costs two round trips of its own but streams.
 */
const INLINE_ITEMS = 1_000;

const CREATE_PAUSE_REASON = 'a new operation was created';

/** A create in one call (sql/opspad_create_operation.sql). */
const CREATE_SQL = prepared(
  'SELECT * FROM opspad_create_operation($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)',
);

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
  /** OPSPAD_MAX_STORED_ITEMS and OPSPAD_MAX_OPEN_OPERATIONS; unset: items counted, not checked. */
  quota?: QuotaDefaults;
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
  if (params.itemIds.length <= INLINE_ITEMS) {
    // One statement, committed on its own: a deadlock broken by Postgres runs it again.
    return withRetries(() =>
      insertCreatedOperation(db, scope, params, { count: params.itemIds.length, ids: params.itemIds }, extraState),
    );
  }
  const created = await db.transaction(async (tx) => {
    const result = await insertCreatedOperation(tx, scope, params, { count: params.itemIds.length }, extraState);
    await insertItems(tx, result.operation.id, params.itemIds);
    return result;
  });
  await analyzeAfterLargeCreate(db, params.itemIds.length);
  return created;
}

type CreatedRow = OperationRecord & { paused_operation_id: string | null };

function createdFrom(rows: CreatedRow[]): CreatedOperation {
  const { paused_operation_id, ...operation } = rows[0] as CreatedRow;
  return { operation, pausedOperationId: paused_operation_id };
}

/** The parameters of CREATE_SQL. */
function createValues(
  scope: ConversationScope,
  params: Omit<CreateOperationParams, 'itemIds'>,
  items: { count: number; operationId?: string; ids?: readonly string[] },
  extraState: Partial<OperationState>,
): unknown[] {
  const state: OperationState = { ...initialState(params), ...extraState };
  const background = params.execution === 'background';
  return [
    scope.conversationId,
    scope.organizationId,
    items.operationId ?? timeOrderedUuid(),
    params.operationType,
    items.count,
    JSON.stringify(state),
    items.ids ?? null,
    background,
    CREATE_PAUSE_REASON,
    params.actor,
    JSON.stringify({ total_items: items.count, batch_size: params.batchSize, execution: params.execution }),
    params.quota?.maxStoredItems ?? null,
    params.quota?.maxOpenOperations ?? null,
    background ? (params.maxActiveBackground ?? null) : null,
  ];
}

/**
 * A create but the items written by COPY, in one call (sql/opspad_create_operation.sql): the
 * conversation's lock, the organization's quota, the pause of its active operation, the
 * background limit, the operation row (with `items.operationId` when the caller wrote the items
 * first, see item-copy.ts; held for approval when its organization's policy says so), its
 * `created` event and, given `items.ids`, its items. A refusal throws its answer
 * (admission-refusals.ts) and the call has written nothing.
 */
export async function insertCreatedOperation(
  tx: Queryable,
  scope: ConversationScope,
  params: Omit<CreateOperationParams, 'itemIds'>,
  items: { count: number; operationId?: string; ids?: readonly string[] },
  extraState: Partial<OperationState> = {},
): Promise<CreatedOperation> {
  const rows = await tx
    .query<CreatedRow>(CREATE_SQL, createValues(scope, params, items, extraState))
    .catch(rethrowAdmissionRefusal);
  return createdFrom(rows);
}

/**
 * The sample of the refresh below (analyzeAfterLargeCreate), for its transaction. ANALYZE reads
 * 300 rows per unit of `default_statistics_target`, and keeps as many of a column's most common
 * values as that target. The target is the largest of: rows / (10 × items), so that about 30 of
 * the sample's rows are the new operation's; one more than the active operations of at least
 * ANALYZE_AFTER_ITEMS items, so that each of them can stay among `operation_id`'s most common
 * values (one left out would be planned as a small operation again); and 10. It is never above
 * the server's own setting. `reltuples` is the count of the last refresh (-1 when there was
 * none); the new rows are added to it.
 */
const ANALYZE_SAMPLE_SQL = `SELECT set_config('default_statistics_target', least(
    current_setting('default_statistics_target')::int,
    greatest(10,
      ceil((greatest(c.reltuples, 0) + $1::bigint) / ($1::bigint * 10.0))::int,
      (SELECT count(*) + 1 FROM assistant_operation
       WHERE status = 'active' AND total_items >= $2::int)::int))::text, true)
  FROM pg_class c WHERE c.oid = 'assistant_operation_item'::regclass`;

/**
 * After a create of many items: until the table's statistics count the new operation's rows, the
 * planner takes it for a small one and reads all of its rows for every lease, renewal and record
 * (it walks the `(operation, item)` index for the operation and filters): O(N) per batch. The
 * create waits for the refresh, so no worker or assistant gets the operation before the planner
 * knows its size (run in the background, the pass lost the race to the first leases). A failed
 * pass is not the create's failure (autovacuum's analyze comes round later).
 *
 * The pass reads a sample sized to the create (ANALYZE_SAMPLE_SQL), at most the server's default.
 * Cost: the sample's pages, read at random from a table that grows with every operation kept, so
 * a smaller sample for a smaller create. Every column is refreshed: with `operation_id` alone, a
 * lease right after a large create still read many pages per item (test/integration/scale.test.ts).
 */
export async function analyzeAfterLargeCreate(db: Database, items: number): Promise<void> {
  if (items < ANALYZE_AFTER_ITEMS || db.engine !== 'postgres') {
    return;
  }
  await db
    .transaction(async (tx) => {
      await tx.query(ANALYZE_SAMPLE_SQL, [items, ANALYZE_AFTER_ITEMS]);
      await tx.query('ANALYZE assistant_operation_item');
    })
    .catch(() => undefined);
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
     VALUES ($6::uuid, $1, $2, $3, 'active', $4, $5::jsonb)
     RETURNING ${OPERATION_COLUMNS}`,
    [
      scope.conversationId,
      scope.organizationId,
      operationType,
      totalItems,
      JSON.stringify(state),
      operationId ?? timeOrderedUuid(),
    ],
  );
  return rows[0] as OperationRecord;
}
