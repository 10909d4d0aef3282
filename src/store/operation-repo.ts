/**
 * Operations: every action of the operation tool as one transaction. Each action that changes
 * an operation's state locks its row first (`FOR UPDATE`), so pauses, cancels and completes of
 * one operation are serialized by Postgres — correct across any number of API and worker
 * processes — while different operations never wait for each other. Leases and records, the hot
 * path, take a shared lock instead and run side by side (see lockOperation).
 */
import { AppError } from '../domain/errors.ts';
import {
  breakerReason,
  breakerTrips,
  countsOf,
  type ExecutionMode,
  isFinished,
  type ListedOperation,
  type OperationCounts,
  type OperationRecord,
  type OperationState,
  pushOutcomes,
  remainingOf,
} from '../domain/operation.ts';
import { OPERATION_DEFAULTS } from '../domain/operation-input.ts';
import { CIRCUIT_BREAKER, NEWER_OPERATION } from '../domain/paused-by.ts';
import { type ConversationScope, ensureConversation } from './conversation-repo.ts';
import type { Database, Queryable } from './db.ts';
import { appendEvent } from './event-repo.ts';
import {
  abandonUnrecorded,
  copyFailedItems,
  countInFlight,
  type FailureRow,
  failuresPage,
  findItems,
  hasExpiredLeases,
  insertItems,
  leaseNext,
  type RecordedItem,
  recordCompleted,
  recordFailed,
  releaseExpiredLeases,
  releaseOwnedItems,
  renewOwnLease,
} from './item-sql.ts';

/** A create of at least this many items refreshes the item table's statistics (see createOperation). */
const ANALYZE_AFTER_ITEMS = 10_000;

/** At most this many offending ids are named in an error; the count says how many in all. */
const MAX_NAMED_IDS = 20;

const OPERATION_COLUMNS = `id, conversation_id, organization_id, operation_type, status, total_items,
  completed_count, failed_count, state_json, created_at, updated_at`;

/**
 * The columns of {@link ListedOperation}: lists never carry query_params out of the database
 * (200 operations on the operator page, every 5 s, at up to OPSPAD_MAX_QUERY_PARAMS_BYTES each).
 */
const LISTED_COLUMNS = (alias: string) =>
  OPERATION_COLUMNS.split(',')
    .map((c) => c.trim())
    .map((c) => (c === 'state_json' ? `${alias}state_json - 'query_params' AS state_json` : `${alias}${c}`))
    .join(', ');

/** The operation is completed or cancelled: `what` (e.g. "paused") can no longer happen to it. */
function operationFinished(op: OperationRecord, what: string): AppError {
  return new AppError('operation_finished', `Operation ${op.id} is ${op.status}; it cannot be ${what}.`, {
    operation_id: op.id,
    status: op.status,
  });
}

function operationNotFound(operationId: string): AppError {
  return new AppError('not_found', `Operation ${operationId} was not found in this conversation.`, {
    operation_id: operationId,
  });
}

/**
 * Locks and returns the operation, scoped to the organization and conversation.
 *
 * `exclusive` (FOR UPDATE) is what every action that changes the operation's state takes
 * (pause, cancel, complete, resume, maintenance): it waits for every other lock on the row and
 * holds them all off. `shared` (FOR KEY SHARE) is the hot path's: leases and records of one
 * operation's lanes run side by side under it, while a state change still waits for all of them
 * and they for it. Their own updates of the row (counters, cursor) take the row's update lock only
 * for the few statements before commit, and every one is written to commute (`count + n`,
 * GREATEST for the cursor). Before this, the lanes of an operation took turns on an exclusive
 * lock for their whole transaction: 4 lanes ran one at a time, and at batch 1,000 most of a
 * lease's or record's time was the wait for that lock (README, "Performance").
 */
async function lockOperation(
  tx: Queryable,
  scope: ConversationScope,
  operationId: string,
  mode: 'exclusive' | 'shared' = 'exclusive',
): Promise<OperationRecord> {
  const rows = await tx.query<OperationRecord>(
    `SELECT ${OPERATION_COLUMNS} FROM assistant_operation
     WHERE id = $1 AND organization_id = $2 AND conversation_id = $3
     FOR ${mode === 'exclusive' ? 'UPDATE' : 'KEY SHARE'}`,
    [operationId, scope.organizationId, scope.conversationId],
  );
  const op = rows[0];
  if (!op) {
    throw operationNotFound(operationId);
  }
  return op;
}

/** The operation's row as it is now (its lock already held). */
async function readOperation(tx: Queryable, operationId: string): Promise<OperationRecord> {
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

async function resolveOperationId(tx: Queryable, scope: ConversationScope, operationId: string | null | undefined) {
  return operationId ?? (await activeOperationId(tx, scope));
}

/**
 * Refuses a new active background operation when the organization already has `limit` of them.
 * An advisory lock per organization serializes the check, so concurrent creates cannot both pass.
 */
async function assertBackgroundCapacity(
  tx: Queryable,
  organizationId: string,
  limit: number | undefined,
): Promise<void> {
  if (limit === undefined) {
    return;
  }
  await tx.query('SELECT pg_advisory_xact_lock(73031, hashtext($1))', [organizationId]);
  const rows = await tx.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM assistant_operation
     WHERE organization_id = $1 AND status = 'active' AND state_json->>'execution' = 'background'`,
    [organizationId],
  );
  const active = rows[0]?.n ?? 0;
  if (active >= limit) {
    throw new AppError(
      'too_many_active_operations',
      `This organization already has ${active} active background operations, the most allowed (OPSPAD_MAX_ACTIVE_BACKGROUND = ${limit}). Wait for one to finish, or pause or cancel one.`,
      { active, limit },
    );
  }
}

/** Pauses the conversation's active operation, if any, other than `exceptId`. */
async function pauseActive(
  tx: Queryable,
  scope: ConversationScope,
  actor: string,
  reason: string,
  exceptId?: string,
): Promise<string | null> {
  const rows = await tx.query<{ id: string }>(
    `UPDATE assistant_operation
     SET status = 'paused', updated_at = now(),
         state_json = state_json || jsonb_build_object('paused_reason', $4::text, 'paused_by', '${NEWER_OPERATION}')
     WHERE organization_id = $1 AND conversation_id = $2 AND status = 'active'
       AND id IS DISTINCT FROM $3::uuid
     RETURNING id`,
    [scope.organizationId, scope.conversationId, exceptId ?? null, reason],
  );
  const paused = rows[0]?.id ?? null;
  if (paused) {
    await appendEvent(tx, {
      operationId: paused,
      organizationId: scope.organizationId,
      kind: 'paused',
      actor,
      data: { reason },
    });
  }
  return paused;
}

async function setStatus(
  tx: Queryable,
  operationId: string,
  status: OperationRecord['status'],
  statePatch: Partial<OperationState> = {},
): Promise<OperationRecord> {
  const rows = await tx.query<OperationRecord>(
    `UPDATE assistant_operation
     SET status = $2, updated_at = now(), state_json = (state_json || $3::jsonb) - $4::text[]
     WHERE id = $1
     RETURNING ${OPERATION_COLUMNS}`,
    [operationId, status, JSON.stringify(statePatch), status === 'paused' ? [] : ['paused_reason', 'paused_by']],
  );
  return rows[0] as OperationRecord;
}

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
    await ensureConversation(tx, scope, { lock: true });
    const pausedOperationId = await pauseActive(tx, scope, params.actor, 'a new operation was created');
    if (params.execution === 'background') {
      await assertBackgroundCapacity(tx, scope.organizationId, params.maxActiveBackground);
    }
    const state: OperationState = {
      cursor: 0,
      batch_size: params.batchSize,
      execution: params.execution,
      query_params: params.queryParams,
      notes: params.notes,
      abandoned_count: 0,
      max_parallel_batches: params.maxParallelBatches ?? OPERATION_DEFAULTS.maxParallelBatches,
      max_failure_rate: params.maxFailureRate ?? null,
      ...(params.execution === 'background' ? { dispatch_epoch: 1, queue_prefix: params.queuePrefix } : {}),
      ...extraState,
    };
    const operation = await insertOperation(tx, scope, params.operationType, params.itemIds.length, state);
    await insertItems(tx, operation.id, params.itemIds);
    await appendEvent(tx, {
      operationId: operation.id,
      organizationId: scope.organizationId,
      kind: 'created',
      actor: params.actor,
      data: { total_items: operation.total_items, batch_size: params.batchSize, execution: params.execution },
    });
    return { operation, pausedOperationId };
  });
  if (params.itemIds.length >= ANALYZE_AFTER_ITEMS && db.engine === 'postgres') {
    // Until the table's statistics count the new operation's rows, the planner takes it for a
    // small one and picks plans that read all of its rows for every lease and record (a bitmap
    // scan of the operation, then a sort or a filter): O(N) per batch, 10 ms at 30,000 items,
    // far more at 1,000,000, until autovacuum's analyze comes round. Refreshing them at once
    // costs one sampled pass (~0.1-0.3 s), in the background: the create does not wait for it.
    db.query('ANALYZE assistant_operation_item').catch(() => {
      // Autovacuum analyzes the table later anyway.
    });
  }
  return created;
}

async function insertOperation(
  tx: Queryable,
  scope: ConversationScope,
  operationType: string,
  totalItems: number,
  state: OperationState,
): Promise<OperationRecord> {
  const rows = await tx.query<OperationRecord>(
    `INSERT INTO assistant_operation
       (conversation_id, organization_id, operation_type, status, total_items, state_json)
     VALUES ($1, $2, $3, 'active', $4, $5::jsonb)
     RETURNING ${OPERATION_COLUMNS}`,
    [scope.conversationId, scope.organizationId, operationType, totalItems, JSON.stringify(state)],
  );
  return rows[0] as OperationRecord;
}

export interface LeaseParams {
  operationId?: string | null;
  owner: string;
  leaseSeconds: number;
  /** Overrides the operation's batch size (a handler's own batch size). */
  batchSize?: number;
  /** Workers: lease nothing new unless this is still the operation's dispatch epoch. */
  epoch?: number;
}

/**
 * Returns expired leases of the locked operation to pending, lowering the cursor to the first
 * of them so the next lease scan finds them. Returns the cursor to scan from.
 */
async function reclaimExpired(
  tx: Queryable,
  scope: ConversationScope,
  op: OperationRecord,
  actor: string,
): Promise<{ cursor: number; released: number }> {
  const expired = await releaseExpiredLeases(tx, op.id);
  if (expired.released === 0 || expired.lowestOrdinal === null) {
    return { cursor: op.state_json.cursor, released: 0 };
  }
  await appendEvent(tx, {
    operationId: op.id,
    organizationId: scope.organizationId,
    kind: 'lease_expired',
    actor,
    data: { released: expired.released },
  });
  return { cursor: Math.min(op.state_json.cursor, expired.lowestOrdinal), released: expired.released };
}

async function setCursor(tx: Queryable, operationId: string, cursor: number): Promise<OperationRecord> {
  const rows = await tx.query<OperationRecord>(
    `UPDATE assistant_operation SET state_json = jsonb_set(state_json, '{cursor}', to_jsonb($2::int)),
       updated_at = now()
     WHERE id = $1 RETURNING ${OPERATION_COLUMNS}`,
    [operationId, cursor],
  );
  return rows[0] as OperationRecord;
}

export interface LeaseResult {
  operation: OperationRecord;
  batch: string[];
  counts: OperationCounts;
  /** Items of expired leases this call returned to pending. */
  reclaimed: number;
}

/**
 * Moves the cursor forward to `cursor`, never back: leases running side by side may finish in
 * any order, and the cursor must stay at or below the lowest pending item.
 */
async function advanceCursor(tx: Queryable, operationId: string, cursor: number): Promise<OperationRecord> {
  const rows = await tx.query<OperationRecord>(
    `UPDATE assistant_operation
     SET state_json = jsonb_set(state_json, '{cursor}', to_jsonb(GREATEST((state_json->>'cursor')::int, $2::int))),
       updated_at = now()
     WHERE id = $1 RETURNING ${OPERATION_COLUMNS}`,
    [operationId, cursor],
  );
  return rows[0] as OperationRecord;
}

/**
 * The `progress` action: the caller's current batch if it holds one (its lease renewed),
 * otherwise the next batch from the cursor, leased to the caller. Expired leases go back to
 * pending first. Paused and finished operations hand out no new batch.
 *
 * Two paths. The usual one leases under a shared lock of the operation, so the lanes of one
 * operation lease (and record) at the same time: `FOR UPDATE SKIP LOCKED` gives each a batch
 * of its own, and the cursor only moves forward. Whatever can move the cursor back or needs an
 * exact view — expired leases to reclaim, or nothing found from the cursor (the operation's end,
 * every remaining item in flight, or items a failed concurrent lease left behind it) — goes to
 * the exclusive path, which runs alone: the rules are then those of a single leaser.
 */
export async function leaseBatch(db: Database, scope: ConversationScope, params: LeaseParams): Promise<LeaseResult> {
  const shared = await db.transaction((tx) => leaseShared(tx, scope, params));
  return shared ?? db.transaction((tx) => leaseExclusive(tx, scope, params));
}

/** The shared path of {@link leaseBatch}; null when the exclusive path must decide. */
async function leaseShared(tx: Queryable, scope: ConversationScope, params: LeaseParams): Promise<LeaseResult | null> {
  const operationId = await resolveOperationId(tx, scope, params.operationId);
  let op = await lockOperation(tx, scope, operationId, 'shared');
  let batch = isFinished(op.status) ? [] : await renewOwnLease(tx, op.id, params.owner, params.leaseSeconds);
  const epochMatches = params.epoch === undefined || params.epoch === op.state_json.dispatch_epoch;
  if (batch.length === 0 && op.status === 'active' && epochMatches) {
    if (await hasExpiredLeases(tx, op.id)) {
      return null;
    }
    batch = await leaseNext(
      tx,
      op.id,
      params.owner,
      params.leaseSeconds,
      op.state_json.cursor,
      params.batchSize ?? op.state_json.batch_size,
    );
    const first = batch[0];
    const last = batch.at(-1);
    if (!first || !last) {
      return null; // nothing changed yet: the exclusive path looks again, exactly
    }
    await appendEvent(tx, {
      operationId: op.id,
      organizationId: scope.organizationId,
      kind: 'batch_leased',
      actor: params.owner,
      data: { count: batch.length, first_ordinal: first.ordinal, last_ordinal: last.ordinal },
    });
    const inFlight = await countInFlight(tx, op.id);
    // Last, just before commit: concurrent leases wait for each other only on this update.
    op = await advanceCursor(tx, op.id, last.ordinal + 1);
    return { operation: op, batch: batch.map((b) => b.item_id), counts: countsOf(op, inFlight), reclaimed: 0 };
  }
  const inFlight = await countInFlight(tx, op.id);
  return { operation: op, batch: batch.map((b) => b.item_id), counts: countsOf(op, inFlight), reclaimed: 0 };
}

/** The exclusive path of {@link leaseBatch}: alone on the operation, so its view is exact. */
async function leaseExclusive(tx: Queryable, scope: ConversationScope, params: LeaseParams): Promise<LeaseResult> {
  const operationId = await resolveOperationId(tx, scope, params.operationId);
  let op = await lockOperation(tx, scope, operationId);
  let batch = isFinished(op.status) ? [] : await renewOwnLease(tx, op.id, params.owner, params.leaseSeconds);
  let reclaimed = 0;
  const epochMatches = params.epoch === undefined || params.epoch === op.state_json.dispatch_epoch;
  if (batch.length === 0 && op.status === 'active' && epochMatches) {
    const { cursor, released } = await reclaimExpired(tx, scope, op, params.owner);
    reclaimed = released;
    const limit = params.batchSize ?? op.state_json.batch_size;
    batch = await leaseNext(tx, op.id, params.owner, params.leaseSeconds, cursor, limit);
    if (batch.length === 0 && cursor > 0) {
      // Pending items behind the cursor can only be left by a concurrent lease that rolled back
      // after another moved the cursor past its rows. Rare: look from the start once.
      const pending = remainingOf(op) - (await countInFlight(tx, op.id));
      if (pending > 0) {
        batch = await leaseNext(tx, op.id, params.owner, params.leaseSeconds, 0, limit);
      }
    }
    const last = batch.at(-1);
    // Nothing pending at or after the cursor: jump it to the end so later scans are empty.
    const nextCursor = last ? last.ordinal + 1 : op.total_items;
    if (nextCursor !== op.state_json.cursor) {
      op = await setCursor(tx, op.id, nextCursor);
    }
    if (batch.length > 0) {
      await appendEvent(tx, {
        operationId: op.id,
        organizationId: scope.organizationId,
        kind: 'batch_leased',
        actor: params.owner,
        data: { count: batch.length, first_ordinal: batch[0]?.ordinal, last_ordinal: last?.ordinal },
      });
    }
  }
  const inFlight = await countInFlight(tx, op.id);
  return { operation: op, batch: batch.map((b) => b.item_id), counts: countsOf(op, inFlight), reclaimed };
}

export interface RecordParams {
  operationId: string;
  completedIds: readonly string[];
  failed: readonly { id: string; reason: string }[];
  owner: string;
}

export interface RecordResult {
  operation: OperationRecord;
  counts: OperationCounts;
  /** Ids that were already recorded before this call: ignored, counted once. */
  alreadyRecorded: string[];
  /** Ids leased to someone else whose lease is still live: not recorded by this call. */
  leaseConflicts: string[];
}

/** The outcomes of the items this call recorded, in item order: `c` or `f` each. */
function outcomesInOrder(completed: readonly RecordedItem[], failed: readonly RecordedItem[]): string {
  return [
    ...completed.map((item) => ({ ordinal: item.ordinal, outcome: 'c' })),
    ...failed.map((item) => ({ ordinal: item.ordinal, outcome: 'f' })),
  ]
    .sort((a, b) => a.ordinal - b.ordinal)
    .map((item) => item.outcome)
    .join('');
}

function namedIds(ids: readonly string[]): string {
  const shown = ids
    .slice(0, MAX_NAMED_IDS)
    .map((id) => JSON.stringify(id))
    .join(', ');
  return ids.length > MAX_NAMED_IDS ? `${shown} and ${ids.length - MAX_NAMED_IDS} more` : shown;
}

/**
 * The `update` action: records outcomes idempotently, in one transaction with the counters. An
 * item is recorded only if it is pending, leased to the reporter, or its lease has expired — a
 * late worker never overwrites the result of the one that took its lease over.
 */
export async function recordResults(
  db: Database,
  scope: ConversationScope,
  params: RecordParams,
): Promise<RecordResult> {
  const completedIds = [...new Set(params.completedIds)];
  const failedById = new Map(params.failed.map((f) => [f.id, f.reason]));
  const both = completedIds.filter((id) => failedById.has(id));
  if (both.length > 0) {
    throw new AppError(
      'validation_failed',
      `Invalid input: completed_ids and failed both name ${namedIds(both)}; report each item once, as completed or as failed.`,
      { issues: [{ field: 'failed', message: 'ids also listed in completed_ids' }], ids: both.slice(0, MAX_NAMED_IDS) },
    );
  }
  const requested = [...completedIds, ...failedById.keys()];

  return db.transaction(async (tx) => {
    // Shared: records of one operation's lanes run side by side; each touches only its own
    // items, and its counter update commutes (see lockOperation).
    let op = await lockOperation(tx, scope, params.operationId, 'shared');
    if (isFinished(op.status)) {
      throw new AppError(
        'operation_finished',
        `Operation ${op.id} is ${op.status}; its results can no longer change.`,
        { operation_id: op.id, status: op.status },
      );
    }
    if (op.state_json.max_failure_rate) {
      // The circuit breaker's window is read, extended and written back: records of an
      // operation that has one take turns, and each reads the window its predecessor wrote.
      await tx.query('SELECT pg_advisory_xact_lock(73032, hashtext($1))', [op.id]);
      op = await readOperation(tx, op.id);
    }
    // Record first, in one statement per outcome kind, then look up only the ids that were not
    // recorded (usually none) to say why: a separate lookup of every id before recording cost a
    // second pass over the batch's index entries, about a quarter of a worker's time per batch
    // (npm run bench). Unknown ids throw, which rolls the whole call back: nothing of it is
    // recorded. An id not recorded here is unknown, already recorded, or leased to another whose
    // lease is live; only the latter can change meanwhile (its owner records it), and either way
    // this call did not record it.
    const failedIds = [...failedById.keys()];
    const completedItems = await recordCompleted(tx, op.id, completedIds, params.owner);
    const failedItems = await recordFailed(
      tx,
      op.id,
      failedIds,
      failedIds.map((id) => failedById.get(id) as string),
      params.owner,
    );
    const completed = completedItems.length;
    const failed = failedItems.length;

    const alreadyRecorded: string[] = [];
    const leaseConflicts: string[] = [];
    if (completed + failed < requested.length) {
      const recorded = new Set([...completedItems, ...failedItems].map((item) => item.item_id));
      const rest = requested.filter((id) => !recorded.has(id));
      const found = await findItems(tx, op.id, rest);
      if (found.length < rest.length) {
        const known = new Set(found.map((f) => f.item_id));
        const unknown = rest.filter((id) => !known.has(id));
        throw new AppError(
          'unknown_item_ids',
          `Operation ${op.id} has no item ${namedIds(unknown)}; nothing was recorded. Report only ids returned by progress.`,
          { operation_id: op.id, unknown_ids: unknown.slice(0, MAX_NAMED_IDS), unknown_count: unknown.length },
        );
      }
      for (const item of found) {
        if (item.status === 'completed' || item.status === 'failed' || item.status === 'abandoned') {
          alreadyRecorded.push(item.item_id);
        } else {
          // Not recordable and not recorded: leased to someone else, and that lease is live.
          leaseConflicts.push(item.item_id);
        }
      }
    }

    if (completed + failed > 0) {
      const maxRate = op.state_json.max_failure_rate;
      const window = maxRate
        ? pushOutcomes(op.state_json.recent_outcomes ?? '', outcomesInOrder(completedItems, failedItems))
        : '';
      const trips = op.status === 'active' && breakerTrips(window, maxRate);
      const statePatch: Partial<OperationState> = maxRate ? { recent_outcomes: window } : {};
      if (trips && maxRate) {
        statePatch.paused_reason = breakerReason(window, maxRate);
        statePatch.paused_by = CIRCUIT_BREAKER;
      }
      // The operation row's update comes last, just before commit: concurrent records of the
      // operation's lanes wait for each other only there (the audit trail and the in-flight
      // count do not need it).
      if (trips) {
        await appendEvent(tx, {
          operationId: op.id,
          organizationId: scope.organizationId,
          kind: 'paused',
          actor: 'circuit_breaker',
          data: { reason: statePatch.paused_reason, window },
        });
      }
      await appendEvent(tx, {
        operationId: op.id,
        organizationId: scope.organizationId,
        kind: 'batch_recorded',
        actor: params.owner,
        data: { completed, failed, already_recorded: alreadyRecorded.length, lease_conflicts: leaseConflicts.length },
      });
      const inFlight = await countInFlight(tx, op.id);
      const rows = await tx.query<OperationRecord>(
        `UPDATE assistant_operation
         SET completed_count = completed_count + $2, failed_count = failed_count + $3, updated_at = now(),
             state_json = state_json || $4::jsonb, status = CASE WHEN $5 THEN 'paused' ELSE status END
         WHERE id = $1 RETURNING ${OPERATION_COLUMNS}`,
        [op.id, completed, failed, JSON.stringify(statePatch), trips],
      );
      op = rows[0] as OperationRecord;
      return { operation: op, counts: countsOf(op, inFlight), alreadyRecorded, leaseConflicts };
    }
    const inFlight = await countInFlight(tx, op.id);
    return { operation: op, counts: countsOf(op, inFlight), alreadyRecorded, leaseConflicts };
  });
}

export interface FinishResult {
  operation: OperationRecord;
  counts: OperationCounts;
  abandoned: number;
}

/** The `complete` action. Refuses while items remain unless `force` (they become abandoned). */
export async function completeOperation(
  db: Database,
  scope: ConversationScope,
  operationId: string,
  { force, actor }: { force: boolean; actor: string },
): Promise<FinishResult> {
  return db.transaction(async (tx) => {
    const op = await lockOperation(tx, scope, operationId);
    if (op.status === 'completed') {
      return { operation: op, counts: countsOf(op, 0), abandoned: op.state_json.abandoned_count };
    }
    if (op.status === 'cancelled') {
      throw operationFinished(op, 'completed');
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
 */
export async function completeIfDone(
  db: Database,
  scope: ConversationScope,
  operationId: string,
  actor: string,
): Promise<boolean> {
  return db.transaction(async (tx) => {
    const op = await lockOperation(tx, scope, operationId);
    if (op.status !== 'active' || remainingOf(op) > 0) {
      return false;
    }
    await markCompleted(tx, scope, op, 0, actor);
    return true;
  });
}

/** The `cancel` action: every item not yet recorded, pending or leased, becomes abandoned. */
export async function cancelOperation(
  db: Database,
  scope: ConversationScope,
  operationId: string,
  {
    actor,
    expiredReason,
  }: { actor: string /** Set when maintenance expires the operation. */; expiredReason?: string },
): Promise<FinishResult> {
  return db.transaction(async (tx) => {
    let op = await lockOperation(tx, scope, operationId);
    if (op.status === 'cancelled') {
      return { operation: op, counts: countsOf(op, 0), abandoned: op.state_json.abandoned_count };
    }
    if (op.status === 'completed') {
      throw operationFinished(op, 'cancelled');
    }
    const abandoned = await abandonUnrecorded(tx, op.id);
    op = await setStatus(tx, op.id, 'cancelled', { abandoned_count: op.state_json.abandoned_count + abandoned });
    await appendEvent(tx, {
      operationId: op.id,
      organizationId: scope.organizationId,
      kind: expiredReason ? 'expired' : 'cancelled',
      actor,
      data: expiredReason ? { abandoned, reason: expiredReason } : { abandoned },
    });
    return { operation: op, counts: countsOf(op, 0), abandoned: op.state_json.abandoned_count };
  });
}

export interface StatusChange {
  operation: OperationRecord;
  counts: OperationCounts;
  pausedOperationId: string | null;
}

/** The `pause` action. Leased batches may still be recorded; no new batch is handed out. */
export async function pauseOperation(
  db: Database,
  scope: ConversationScope,
  operationId: string | null | undefined,
  { actor, reason, pausedBy }: { actor: string; reason: string; pausedBy: string },
): Promise<StatusChange> {
  return db.transaction(async (tx) => {
    const id = await resolveOperationId(tx, scope, operationId);
    let op = await lockOperation(tx, scope, id);
    if (isFinished(op.status)) {
      throw operationFinished(op, 'paused');
    }
    if (op.status === 'active') {
      op = await setStatus(tx, op.id, 'paused', { paused_reason: reason, paused_by: pausedBy });
      await appendEvent(tx, {
        operationId: op.id,
        organizationId: scope.organizationId,
        kind: 'paused',
        actor,
        data: { reason },
      });
    }
    return { operation: op, counts: countsOf(op, await countInFlight(tx, op.id)), pausedOperationId: op.id };
  });
}

/** The `resume` action: makes the operation active, pausing the one that was. */
export async function resumeOperation(
  db: Database,
  scope: ConversationScope,
  operationId: string,
  { actor, maxActiveBackground }: { actor: string; maxActiveBackground?: number },
): Promise<StatusChange> {
  return db.transaction(async (tx) => {
    await ensureConversation(tx, scope, { lock: true });
    let op = await lockOperation(tx, scope, operationId);
    if (isFinished(op.status)) {
      throw operationFinished(op, 'resumed');
    }
    let pausedOperationId: string | null = null;
    if (op.status === 'paused') {
      pausedOperationId = await pauseActive(tx, scope, actor, `operation ${op.id} was resumed`, op.id);
      if (op.state_json.execution === 'background') {
        await assertBackgroundCapacity(tx, scope.organizationId, maxActiveBackground);
      }
      // A new lane generation for background work; the breaker starts from a clean window.
      op = await setStatus(tx, op.id, 'active', {
        recent_outcomes: '',
        ...(op.state_json.execution === 'background'
          ? { dispatch_epoch: (op.state_json.dispatch_epoch ?? 0) + 1 }
          : {}),
      });
      await appendEvent(tx, {
        operationId: op.id,
        organizationId: scope.organizationId,
        kind: 'resumed',
        actor,
        data: {},
      });
    }
    return { operation: op, counts: countsOf(op, await countInFlight(tx, op.id)), pausedOperationId };
  });
}

/**
 * Gives back items leased to `owner` that it will not handle (a worker stopping mid-batch on
 * pause, cancel or shutdown), so they are handed out again without waiting for the lease to
 * expire. Returns how many were released.
 */
export async function releaseLeasedItems(
  db: Database,
  scope: ConversationScope,
  operationId: string,
  owner: string,
  itemIds: readonly string[],
): Promise<number> {
  if (itemIds.length === 0) {
    return 0;
  }
  return db.transaction(async (tx) => {
    const op = await lockOperation(tx, scope, operationId);
    const released = await releaseOwnedItems(tx, op.id, owner, itemIds);
    if (released.released > 0 && released.lowestOrdinal !== null && released.lowestOrdinal < op.state_json.cursor) {
      await setCursor(tx, op.id, released.lowestOrdinal);
    }
    return released.released;
  });
}

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

/**
 * The `retry_failed` action: a new active operation (same type, query_params) over the failed
 * items of `operationId`, copied inside Postgres without passing through this process.
 */
export async function retryFailed(
  db: Database,
  scope: ConversationScope,
  operationId: string,
  { batchSize, actor, maxActiveBackground }: { batchSize: number | null; actor: string; maxActiveBackground?: number },
): Promise<CreatedOperation> {
  return db.transaction(async (tx) => {
    await ensureConversation(tx, scope, { lock: true });
    const source = await lockOperation(tx, scope, operationId);
    if (source.failed_count === 0) {
      throw new AppError('nothing_to_retry', `Operation ${source.id} has no failed items to retry.`, {
        operation_id: source.id,
      });
    }
    const pausedOperationId = await pauseActive(tx, scope, actor, 'a retry operation was created');
    if (source.state_json.execution === 'background') {
      await assertBackgroundCapacity(tx, scope.organizationId, maxActiveBackground);
    }
    const state: OperationState = {
      cursor: 0,
      batch_size: batchSize ?? source.state_json.batch_size,
      execution: source.state_json.execution,
      query_params: source.state_json.query_params,
      notes: source.state_json.notes,
      abandoned_count: 0,
      retry_of: source.id,
      max_parallel_batches: source.state_json.max_parallel_batches,
      max_failure_rate: source.state_json.max_failure_rate ?? null,
      // A background retry starts its own lane generation, dispatched by the same deployment.
      ...(source.state_json.execution === 'background'
        ? { dispatch_epoch: 1, queue_prefix: source.state_json.queue_prefix }
        : {}),
    };
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
    await appendEvent(tx, {
      operationId: operation.id,
      organizationId: scope.organizationId,
      kind: 'created',
      actor,
      data: { total_items: copied, retry_of: source.id },
    });
    await appendEvent(tx, {
      operationId: source.id,
      organizationId: scope.organizationId,
      kind: 'retried',
      actor,
      data: { retry_operation_id: operation.id, items: copied },
    });
    return { operation, pausedOperationId };
  });
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
    `SELECT ${LISTED_COLUMNS('o.')},
       (SELECT count(*)::int FROM assistant_operation_item i
        WHERE i.operation_id = o.id AND i.status = 'leased') AS in_flight_count
     FROM assistant_operation o
     WHERE organization_id = $1 AND conversation_id = $2 AND status IN ('active', 'paused')
     ORDER BY (status = 'active') DESC, updated_at DESC, id
     LIMIT $3`,
    [scope.organizationId, scope.conversationId, limit],
  );
  const total =
    operations.length < limit
      ? operations.length
      : ((
          await db.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM assistant_operation
             WHERE organization_id = $1 AND conversation_id = $2 AND status IN ('active', 'paused')`,
            [scope.organizationId, scope.conversationId],
          )
        )[0]?.n ?? 0);
  return { operations, total };
}

// ─── Maintenance ──────────────────────────────────────────────────────────────────────────────
// The reconciler works across organizations by nature; these functions say so in their names and
// return each operation's scope so that every change after them is scoped again.

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
    const rows = await tx.query<OperationRecord>(
      `UPDATE assistant_operation
       SET state_json = jsonb_set(state_json, '{dispatch_epoch}', to_jsonb($2::int)), updated_at = now()
       WHERE id = $1 RETURNING ${OPERATION_COLUMNS}`,
      [op.id, (op.state_json.dispatch_epoch ?? 0) + 1],
    );
    return rows[0] ?? null;
  });
}

/** Returns the operation's expired leases to pending (and its cursor to the first of them). */
export async function reclaimExpiredLeases(
  db: Database,
  scope: ConversationScope,
  operationId: string,
  actor: string,
): Promise<OperationRecord> {
  return db.transaction(async (tx) => {
    const op = await lockOperation(tx, scope, operationId);
    const { cursor } = await reclaimExpired(tx, scope, op, actor);
    return cursor === op.state_json.cursor ? op : setCursor(tx, op.id, cursor);
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

export type AdminOperationRow = ListedOperation & {
  organization_name: string;
  in_flight_count: number;
};

/**
 * Operations across organizations for the operator view, newest first, optionally filtered by
 * organization name and status. Operators see everything; tenants never reach this.
 */
export async function listOperationsAllOrganizations(
  db: Queryable,
  filter: { organizationName?: string; status?: OperationRecord['status']; limit: number },
): Promise<AdminOperationRow[]> {
  return db.query<AdminOperationRow>(
    `SELECT ${LISTED_COLUMNS('o.')}, g.name AS organization_name,
       (SELECT count(*)::int FROM assistant_operation_item i
        WHERE i.operation_id = o.id AND i.status = 'leased') AS in_flight_count
     FROM assistant_operation o JOIN organization g ON g.id = o.organization_id
     WHERE ($1::text IS NULL OR g.name = $1) AND ($2::text IS NULL OR o.status = $2)
     ORDER BY (o.status = 'active') DESC, o.updated_at DESC
     LIMIT $3`,
    [filter.organizationName ?? null, filter.status ?? null, filter.limit],
  );
}

/** One operation by id, any organization, with its organization's name (operator view). */
export async function getOperationAnyOrganization(
  db: Queryable,
  operationId: string,
): Promise<AdminOperationRow | null> {
  const rows = await db.query<AdminOperationRow>(
    `SELECT ${OPERATION_COLUMNS.split(',')
      .map((c) => `o.${c.trim()}`)
      .join(', ')}, g.name AS organization_name,
       (SELECT count(*)::int FROM assistant_operation_item i
        WHERE i.operation_id = o.id AND i.status = 'leased') AS in_flight_count
     FROM assistant_operation o JOIN organization g ON g.id = o.organization_id
     WHERE o.id = $1`,
    [operationId],
  );
  return rows[0] ?? null;
}

/**
 * Extends the leases `owner` holds on the operation's items (a worker's heartbeat while its
 * handler runs), so a slow batch is not handed to another worker while it is still being done.
 */
export async function extendLeases(
  db: Queryable,
  scope: ConversationScope,
  operationId: string,
  owner: string,
  leaseSeconds: number,
): Promise<number> {
  const rows = await db.query<{ n: number }>(
    `WITH extended AS (
       UPDATE assistant_operation_item i
       SET lease_expires_at = now() + make_interval(secs => $3)
       FROM assistant_operation o
       WHERE i.operation_id = $1 AND i.status = 'leased' AND i.lease_owner = $2
         AND o.id = i.operation_id AND o.organization_id = $4
       RETURNING 1)
     SELECT count(*)::int AS n FROM extended`,
    [operationId, owner, leaseSeconds, scope.organizationId],
  );
  return rows[0]?.n ?? 0;
}
