/**
 * The `update` action: records outcomes idempotently, in one transaction with the counters. An
 * item is recorded only if it is pending, leased to the reporter, or its lease has expired — a
 * late worker never overwrites the result of the one that took its lease over.
 *
 * Lock order, the step functions' own: the operation row (FOR KEY SHARE) → the report's item rows
 * (in ordinal order: item-sql.ts lockItems) → the operation row's update lock, before anything is
 * written (leases hold it while they read their batches without locking the rows, so this record,
 * which may record items no live lease holds, never writes beside a lease) → the breaker's
 * advisory lock (only operations with max_failure_rate) → the lease rows holding the items (the
 * record statement) → the events, the spent lease rows and the operation row's counters, last,
 * in one statement just before commit (operation-tail.ts).
 * Cost: O(batch) — one lock of the report's rows and one UPDATE by item id, whatever its kinds
 * (the unique (operation, item) index; HOT for completions), the operation's lease rows read once,
 * a lookup of the ids not recorded only when there are any, and the tail: six round trips
 * (begin, lock, lock the rows, record, tail, commit).
 */
import { breakerStep } from '../../domain/circuit-breaker.ts';
import { AppError } from '../../domain/errors.ts';
import type { OperationCounts, OperationRecord } from '../../domain/operation.ts';
import { countsOf } from '../../domain/operation.ts';
import { transition } from '../../domain/operation-lifecycle.ts';
import { parseRecordReport, type RecordReport } from '../../domain/record-report.ts';
import type { Database, Queryable } from '../db/db.ts';
import { XACT_LOCK_CLASS } from '../db/lock-keys.ts';
import type { NewOperationEvent } from '../operations/event-repo.ts';
import { lockOperation, readOperation } from '../operations/operation-row.ts';
import type { ConversationScope } from '../tenants/conversation-repo.ts';
import { countInFlight, lockItems, type RecordedItem, recordCompleted, recordFailed, recordMixed } from './item-sql.ts';
import { closeStep } from './operation-tail.ts';
import { explainMisses, type RecordMisses } from './record-misses.ts';
import { type NextLease, type NextLeaseParams, recordStep } from './step-calls.ts';
import { recordLeaseGrouped } from './step-groups.ts';

export interface RecordParams {
  operationId: string;
  completedIds: readonly string[];
  failed: readonly { id: string; reason: string }[];
  owner: string;
  /**
   * A worker going on with its lane: lease `owner`'s next batch in the same call when the record
   * is the usual case (step-calls.ts recordLeaseStep), with the operation's other lanes in this
   * process that record meanwhile (step-groups.ts).
   */
  leaseNext?: NextLeaseParams;
  /**
   * A worker's record without `leaseNext`: when it leaves nothing to record, the same call
   * completes the active operation (its status then says so); the general path never does.
   */
  completeWhenDone?: boolean;
  /**
   * A worker whose report is every item of its lease, completed (it checked its outcome against
   * the batch it leased), gives the batch's first id: with `leaseNext`, the call names the lease
   * by it and the report's size instead of sending every id (opspad_record_owned). The server
   * still records only if the lease's rows are exactly those; the general path gets every id.
   */
  wholeLease?: { firstId: string };
}

export interface RecordResult extends RecordMisses {
  operation: OperationRecord;
  counts: OperationCounts;
  /** With `leaseNext`: what the call leased; absent when the record took the general path. */
  next?: NextLease;
}

export async function recordResults(
  db: Database,
  scope: ConversationScope,
  params: RecordParams,
): Promise<RecordResult> {
  const report = parseRecordReport(params.completedIds, params.failed);
  // The usual case first, in one round trip (step-calls.ts); it changes nothing when it is not.
  const call = {
    operationId: params.operationId,
    owner: params.owner,
    ids: [...report.completedIds, ...report.failedIds],
    reasons: report.failedIds.length === 0 ? null : [...report.completedIds.map(() => null), ...report.failedReasons],
    completeWhenDone: params.completeWhenDone,
  };
  const whole =
    params.wholeLease && report.failedIds.length === 0
      ? { ids: [params.wholeLease.firstId], whole: report.completedIds.length }
      : undefined;
  const step =
    report.requested.length > 0 &&
    (params.leaseNext
      ? await recordLeaseGrouped(db, scope, { ...call, ...whole, ...params.leaseNext })
      : await recordStep(db, scope, call));
  if (step) {
    return { ...step, alreadyRecorded: [], leaseConflicts: [] };
  }
  return db.transaction(async (tx) => {
    // The step functions' order: the row shared, the report's rows, then the row's update lock
    // (which leases hold while they read their batches unlocked) before anything is written.
    refuseFinished(await lockOperation(tx, scope, params.operationId, 'shared'));
    await lockItems(tx, params.operationId, report.requested);
    let op = refuseFinished(await lockOperation(tx, scope, params.operationId, 'update'));
    if (op.state_json.max_failure_rate) {
      // The circuit breaker's window is read, extended and written back: records of an
      // operation that has one take turns, and each reads the window its predecessor wrote.
      await tx.query('SELECT pg_advisory_xact_lock($1::int, hashtext($2::text))', [
        XACT_LOCK_CLASS.circuitBreaker,
        op.id,
      ]);
      op = await readOperation(tx, op.id);
    }
    const recorded = await recordOutcomes(tx, op.id, report, params.owner);
    const done = new Set([...recorded.completed, ...recorded.failed].map((item) => item.item_id));
    const misses = await explainMisses(
      tx,
      op.id,
      done.size < report.requested.length ? report.requested.filter((id) => !done.has(id)) : [],
    );
    const completed = recorded.completed.length;
    const failed = recorded.failed.length;
    if (completed + failed === 0) {
      return { operation: op, counts: countsOf(op, await countInFlight(tx, op.id)), ...misses };
    }
    const breaker = breakerStep(op.state_json, op.status, [
      ...recorded.completed.map((item) => ({ ordinal: item.ordinal, outcome: 'c' as const })),
      ...recorded.failed.map((item) => ({ ordinal: item.ordinal, outcome: 'f' as const })),
    ]);
    const events: Omit<NewOperationEvent, 'operationId'>[] = [];
    if (breaker.trips) {
      events.push({
        organizationId: scope.organizationId,
        kind: 'paused',
        actor: 'circuit_breaker',
        data: { reason: breaker.statePatch.paused_reason, window: breaker.window },
      });
    }
    events.push({
      organizationId: scope.organizationId,
      kind: 'batch_recorded',
      actor: params.owner,
      data: {
        completed,
        failed,
        already_recorded: misses.alreadyRecorded.length,
        lease_conflicts: misses.leaseConflicts.length,
      },
    });
    // The operation row's update comes last, just before commit (operation-tail.ts).
    const trip = transition('breaker_trip', op.status);
    const closed = await closeStep(tx, op.id, events, {
      kind: 'counts',
      completed,
      failed,
      statePatch: breaker.statePatch,
      status: breaker.trips && trip.kind === 'change' ? trip.to : null,
    });
    return { operation: closed.operation, counts: countsOf(closed.operation, closed.inFlight), ...misses };
  });
}

/** The operation, unless its status no longer lets results change (the lifecycle's record rule). */
function refuseFinished(op: OperationRecord): OperationRecord {
  if (transition('record', op.status).kind === 'refused') {
    throw new AppError('operation_finished', `Operation ${op.id} is ${op.status}; its results can no longer change.`, {
      operation_id: op.id,
      status: op.status,
    });
  }
  return op;
}

/**
 * Records the reported rows, locked by the caller (item-sql.ts lockItems), in one statement (one per outcome kind when only one kind
 * is reported: their plans are the tuned ones of a worker's batch); the ids not recorded are looked up
 * afterwards, only when there are any (record-misses.ts). A separate lookup of every id before
 * recording cost a second pass over the batch's index entries, about a quarter of a worker's
 * time per batch (npm run bench). An id not recorded here is unknown, already recorded, or
 * leased to another whose lease is live; only the latter can change meanwhile (its owner records
 * it), and either way this call did not record it.
 */
async function recordOutcomes(
  tx: Queryable,
  operationId: string,
  report: RecordReport,
  owner: string,
): Promise<{ completed: RecordedItem[]; failed: RecordedItem[] }> {
  if (report.completedIds.length > 0 && report.failedIds.length > 0) {
    return recordMixed(tx, operationId, report.completedIds, report.failedIds, report.failedReasons, owner);
  }
  const completed = await recordCompleted(tx, operationId, report.completedIds, owner);
  const failed = await recordFailed(tx, operationId, report.failedIds, report.failedReasons, owner);
  return { completed, failed };
}
