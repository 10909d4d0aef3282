/**
 * A lease and a record in one round trip: the usual case of each, run as a server-side call
 * (`opspad_lease_step`, `opspad_record_step`, each in its file under sql/) that commits
 * where it runs. The general transactions (operation-lease.ts, operation-record.ts) take five
 * round trips each (begin, lock, statement, tail, commit) and hold the operation row's lock
 * across them; a call holds it only while the server runs it.
 *
 * Lock order: the same as the general path's — the operation row (FOR KEY SHARE; a lease alone
 * takes its update lock at once) → the report's item rows and the owner's lease row → the row's
 * update lock, held to the commit, so leases take turns → the spent lease rows → the next lease
 * row → the events and the operation row's update, last (one statement).
 * Cost: O(batch), one round trip; the lease reads the batch's rows from the cursor
 * (opspad_lease_from_cursor, or the general path's statement when a live lease reaches past
 * the cursor) and the record writes each item once (opspad_record_owned), each planned once
 * per connection (plan_cache_mode: re-planned on every call, those taking the report's arrays
 * would spend a good part of the call in the planner). The functions call their helpers as
 * expressions (`taken := opspad_lease_from_cursor(...)`) and write their events in their last
 * statement: a statement starts and ends an executor, an expression does not, and those starts
 * and ends were a fifth of a step's time on the server.
 *
 * Each returns null, having changed nothing, when the case is not the usual one — the
 * conditions are opspad_lease_usual and opspad_record_usual, which the general path reads too —
 * or when pending items are not found from the cursor, an id was not a pending item of the
 * caller's own lease, or a deadlock: the caller then runs the general transaction, which
 * decides it. A lease that finds nothing because no item
 * is pending at all answers "no batch" itself. A worker going on with its lane records and
 * leases its next batch in one call (recordLeaseStep, opspad_record_lease_step).
 */
import type { OperationCounts, OperationRecord } from '../../domain/operation.ts';
import { countsOf } from '../../domain/operation.ts';
import type { Queryable } from '../db/db.ts';
import { isRetryableConflict, NOT_ALL_RECORDABLE, sqlStateOf } from '../db/pg-errors.ts';
import { prepared } from '../db/prepared.ts';
import type { ConversationScope } from '../tenants/conversation-repo.ts';

/** An id the step could not record, or a conflict (which the general path retries). */
function tryTheGeneralPath(error: unknown): boolean {
  return sqlStateOf(error) === NOT_ALL_RECORDABLE || isRetryableConflict(error);
}

/** A step function's row: the operation as the call left it, and its items in flight. */
export type StepRow = OperationRecord & { in_flight: number };

const LEASE_STEP_SQL = prepared('SELECT * FROM opspad_lease_step($1, $2, $3, $4, $5, $6, $7)');
const RECORD_STEP_SQL = prepared('SELECT * FROM opspad_record_step($1, $2, $3, $4, $5, $6, $7)');
const RECORD_LEASE_STEP_SQL = prepared(
  'SELECT * FROM opspad_record_lease_step($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)',
);

export interface RecordReportParams {
  operationId: string;
  owner: string;
  ids: readonly string[];
  /** In `ids`' order, null for a completion; the whole list null when all completed. */
  reasons: readonly (string | null)[] | null;
  /** A worker's record: one that leaves nothing to record completes the active operation too. */
  completeWhenDone?: boolean;
  /**
   * The report is the whole of the owner's lease, this many items, all completed: `ids` holds
   * only the lease's first id (opspad_record_owned's p_whole). Only {@link recordLeaseStep}.
   */
  whole?: number;
}

export interface NextLeaseParams {
  leaseSeconds: number;
  batchSize?: number;
  epoch?: number;
}

export interface LeasedStep {
  operation: OperationRecord;
  counts: OperationCounts;
  batch: string[];
}

/** One call: the operation's next batch from its cursor, leased to `owner`; null: see above. */
export async function leaseStep(
  db: Queryable,
  scope: ConversationScope,
  params: { operationId: string; owner: string } & NextLeaseParams,
): Promise<LeasedStep | null> {
  const rows = await callStep<StepRow & { item_ids: string[] }>(db, LEASE_STEP_SQL, [
    params.operationId,
    scope.organizationId,
    scope.conversationId,
    params.owner,
    params.leaseSeconds,
    params.batchSize ?? null,
    params.epoch ?? null,
  ]);
  const row = rows?.[0];
  if (!row) {
    return null;
  }
  const { in_flight, item_ids, ...operation } = row;
  return { operation, counts: countsOf(operation, in_flight), batch: item_ids };
}

/**
 * One call: records every id of the report (`reasons` in `ids`' order, null for a completion;
 * the whole list null when all completed); null: see above.
 */
export async function recordStep(
  db: Queryable,
  scope: ConversationScope,
  params: RecordReportParams,
): Promise<{ operation: OperationRecord; counts: OperationCounts } | null> {
  const rows = await callStep<StepRow>(db, RECORD_STEP_SQL, [
    params.operationId,
    scope.organizationId,
    scope.conversationId,
    params.owner,
    params.ids,
    params.reasons,
    params.completeWhenDone === true,
  ]);
  const row = rows?.[0];
  if (!row) {
    return null;
  }
  const { in_flight, ...operation } = row;
  return { operation, counts: countsOf(operation, in_flight) };
}

/**
 * What the lease half of {@link recordLeaseStep} did: `leased` (the batch in `batch`), `none`
 * (no item is pending at all), or `declined` (not the usual case: the caller leases on its own).
 */
export type NextLease = { kind: 'leased'; batch: string[] } | { kind: 'none' } | { kind: 'declined' };

/**
 * One call, one commit (opspad_record_lease_step): records the report as
 * {@link recordStep} does, then leases `owner`'s next batch as {@link leaseStep} does, and updates
 * the operation row once. Null, having changed nothing, when the record is not the usual case.
 */
export async function recordLeaseStep(
  db: Queryable,
  scope: ConversationScope,
  params: RecordReportParams & NextLeaseParams,
): Promise<{ operation: OperationRecord; counts: OperationCounts; next: NextLease } | null> {
  const rows = await callStep<StepRow & { item_ids: string[]; lease: 'leased' | 'none' | 'declined' }>(
    db,
    RECORD_LEASE_STEP_SQL,
    [
      params.operationId,
      scope.organizationId,
      scope.conversationId,
      params.owner,
      params.ids,
      params.reasons,
      params.leaseSeconds,
      params.batchSize ?? null,
      params.epoch ?? null,
      params.whole ?? null,
    ],
  );
  const row = rows?.[0];
  if (!row) {
    return null;
  }
  const { in_flight, item_ids, lease, ...operation } = row;
  const next: NextLease = lease === 'leased' ? { kind: 'leased', batch: item_ids } : { kind: lease };
  return { operation, counts: countsOf(operation, in_flight), next };
}

/** Runs the call; null when it refused the case (see tryTheGeneralPath). */
export async function callStep<R extends object>(db: Queryable, sql: string, params: unknown[]): Promise<R[] | null> {
  try {
    return await db.query<R>(sql, params);
  } catch (error) {
    if (tryTheGeneralPath(error)) {
      return null;
    }
    throw error;
  }
}
