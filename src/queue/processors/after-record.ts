/**
 * What a lane does once its batch is recorded and the record's call leased no next batch
 * (run-step.ts): the operation as the record left it, and the counts it read, decide.
 */
import type { OperationCounts, OperationRecord } from '../../domain/operation.ts';

/**
 * `completed_operation`: the record's call completed it (opspad_record_step); `stopped`: paused,
 * cancelled, a newer lane generation runs, or what is left is in other lanes' hands;
 * `complete_if_done`: nothing is left but the operation is still active (the worker completes it);
 * `go_on`: items are pending, the lane goes on.
 */
export type AfterRecord = 'completed_operation' | 'stopped' | 'complete_if_done' | 'go_on';

export function afterRecord(
  after: Pick<OperationRecord, 'status' | 'state_json'>,
  counts: OperationCounts,
  /** The lane generation the step runs in. */
  epoch: number,
  /** Items this step gave back after the counts were read: pending now. */
  released: number,
): AfterRecord {
  if (after.status === 'completed' && counts.remaining_count === 0) {
    return 'completed_operation';
  }
  if (after.status !== 'active' || after.state_json.dispatch_epoch !== epoch) {
    return 'stopped';
  }
  if (counts.remaining_count === 0) {
    return 'complete_if_done';
  }
  // A lane that finds nothing to lease ends itself, so going on needlessly costs one empty lease.
  return counts.remaining_count - (counts.in_flight_count - released) > 0 ? 'go_on' : 'stopped';
}
