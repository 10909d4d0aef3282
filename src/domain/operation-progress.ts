/**
 * How far an operation is, built once for every surface that shows it: the HTTP status and the
 * event stream (`OperationProgress`), the context fragment's entries, `opspad ops watch` and the
 * tests, so the numbers and the pause's reason read the same everywhere.
 */
import { type ListedOperation, type OperationCounts, remainingOf } from './operation.ts';
import type { OperationProgress } from './operation-output.ts';
import { type PausedBy, parsePausedBy } from './paused-by.ts';

/** The fields every view of an operation's progress shares (not its id: views name it their way). */
export interface ProgressFields extends OperationCounts {
  operation_type: string;
  status: ListedOperation['status'];
  execution: ListedOperation['state_json']['execution'];
  /** Why it is paused; null unless it is. */
  paused_reason: string | null;
  /** Who paused it; null unless it is paused. */
  paused_by: PausedBy | null;
}

/**
 * The shared fields of `op`, with `inFlight` leased items. `pausedBy` overrides the stored
 * pauser (operations paused before it was stored have it from their audit trail).
 */
export function progressFields(op: ListedOperation, inFlight: number, pausedBy?: string): ProgressFields {
  const paused = op.status === 'paused';
  return {
    operation_type: op.operation_type,
    status: op.status,
    execution: op.state_json.execution,
    total_items: op.total_items,
    completed_count: op.completed_count,
    failed_count: op.failed_count,
    remaining_count: remainingOf(op),
    in_flight_count: inFlight,
    paused_reason: paused ? (op.state_json.paused_reason ?? null) : null,
    paused_by: paused ? (parsePausedBy(pausedBy ?? op.state_json.paused_by) ?? null) : null,
  };
}

/** `GET /v1/operations/:id` and the data of the stream's `progress` and `end` events. */
export function operationProgressOf(op: ListedOperation, counts: OperationCounts): OperationProgress {
  return {
    operation_id: op.id,
    conversation_id: op.conversation_id,
    ...progressFields(op, counts.in_flight_count),
  };
}
