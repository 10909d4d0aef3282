/**
 * What a lane does after its batch's record (after-record.ts), case by case: the record's own
 * completion, a status or lane generation that stops it, nothing left on an active operation,
 * and items pending (counting the ones this step gave back).
 */
import { describe, expect, it } from 'vitest';
import type { OperationCounts, OperationRecord } from '../../domain/operation.ts';
import { afterRecord } from './after-record.ts';

const op = (status: OperationRecord['status'], epoch = 2) =>
  ({ status, state_json: { dispatch_epoch: epoch } }) as Pick<OperationRecord, 'status' | 'state_json'>;
const counts = (remaining: number, inFlight: number): OperationCounts => ({
  total_items: 100,
  completed_count: 100 - remaining,
  failed_count: 0,
  remaining_count: remaining,
  in_flight_count: inFlight,
});

describe('after a batch’s record', () => {
  it('reports the completion the record made, and stops for any other status or generation', () => {
    expect(afterRecord(op('completed'), counts(0, 0), 2, 0)).toBe('completed_operation');
    expect(afterRecord(op('completed'), counts(3, 0), 2, 0)).toBe('stopped'); // a forced complete
    for (const status of ['paused', 'cancelled', 'awaiting_approval'] as const) {
      expect(afterRecord(op(status), counts(5, 0), 2, 0)).toBe('stopped');
    }
    expect(afterRecord(op('active', 3), counts(5, 0), 2, 0)).toBe('stopped');
  });

  it('completes an active operation with nothing left, and goes on only while items are pending', () => {
    expect(afterRecord(op('active'), counts(0, 0), 2, 0)).toBe('complete_if_done');
    expect(afterRecord(op('active'), counts(10, 4), 2, 0)).toBe('go_on');
    expect(afterRecord(op('active'), counts(4, 4), 2, 0)).toBe('stopped'); // all in other lanes' hands
    expect(afterRecord(op('active'), counts(4, 4), 2, 1)).toBe('go_on'); // one given back: pending now
  });
});
