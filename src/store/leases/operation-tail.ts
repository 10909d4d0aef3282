/**
 * The last statement of a lease or a record, in one round trip: its audit events, the lease
 * rows its batch used up dropped, the operation row's update (the cursor forward, or the
 * counters and the breaker's state) and the in-flight count after it.
 *
 * Lock order: last in its transaction — the operation row's update lock, taken just before
 * commit unless the transaction took it first (a lease, the general record), is what the records
 * of one operation wait for (the lease rows it drops are used up: no other statement changes
 * them).
 * Cost: one statement: an insert per event, a primary-key range of the operation's lease rows (a
 * handful), one primary-key update: one round trip where three or four would cost a busy
 * machine more than the batch's rows.
 */
import type { OperationRecord, OperationState, OperationStatus } from '../../domain/operation.ts';
import type { Queryable } from '../db/db.ts';
import type { NewOperationEvent } from '../operations/event-repo.ts';
import { OPERATION_COLUMNS } from '../operations/operation-row.ts';

export type TailChange =
  /** A lease: the cursor moves forward to `cursor`, never back (sql/opspad_cursor_forward.sql). */
  | { kind: 'cursor_forward'; cursor: number }
  /** A lease alone on the operation: the cursor is set, back as well as forward. */
  | { kind: 'cursor_set'; cursor: number }
  /**
   * A record: counters added (they commute), the breaker's state merged, and `status` set when
   * the breaker tripped (the lifecycle's breaker_trip target), else null.
   */
  | {
      kind: 'counts';
      completed: number;
      failed: number;
      statePatch: Partial<OperationState>;
      status: OperationStatus | null;
    };

const SET: Record<TailChange['kind'], string> = {
  cursor_forward: `state_json = opspad_cursor_forward(state_json, ($3::jsonb->>'cursor')::int), updated_at = now()`,
  cursor_set: `state_json = jsonb_set(state_json, '{cursor}', to_jsonb(($3::jsonb->>'cursor')::int)), updated_at = now()`,
  counts: `completed_count = completed_count + ($3::jsonb->>'completed')::int,
         failed_count = failed_count + ($3::jsonb->>'failed')::int, updated_at = now(),
         state_json = state_json || ($3::jsonb->'statePatch'),
         status = coalesce($3::jsonb->>'status', status)`,
};

/** Runs the tail; returns the operation as it now is and the items in flight. */
export async function closeStep(
  tx: Queryable,
  operationId: string,
  events: readonly Omit<NewOperationEvent, 'operationId'>[],
  change: TailChange,
): Promise<{ operation: OperationRecord; inFlight: number }> {
  const rows = await tx.query<OperationRecord & { in_flight: number }>(
    `WITH events AS (
       INSERT INTO operation_event (operation_id, organization_id, kind, actor, data)
       SELECT $1, e.organization_id, e.kind, e.actor, e.data
       FROM jsonb_to_recordset($2::jsonb) AS e(organization_id uuid, kind text, actor text, data jsonb)),
     spent AS (DELETE FROM assistant_operation_lease WHERE operation_id = $1 AND remaining <= 0)
     UPDATE assistant_operation SET ${SET[change.kind]}
     WHERE id = $1
     RETURNING ${OPERATION_COLUMNS},
       (SELECT coalesce(sum(remaining), 0)::int FROM assistant_operation_lease
        WHERE operation_id = $1 AND remaining > 0) AS in_flight`,
    [
      operationId,
      JSON.stringify(
        events.map((e) => ({ organization_id: e.organizationId, kind: e.kind, actor: e.actor, data: e.data })),
      ),
      JSON.stringify(change),
    ],
  );
  const { in_flight, ...operation } = rows[0] as OperationRecord & { in_flight: number };
  return { operation, inFlight: in_flight };
}
