/**
 * Operations: their states, the small state kept in `state_json`, and the count arithmetic
 * every surface (tool, context fragment, workers) shares so the numbers mean the same
 * everywhere.
 */

import type { PrunedFailures } from './retention.ts';

/** `awaiting_approval`: a background operation above its organization's threshold, leasing nothing until a person approves it. */
export const OPERATION_STATUS = ['active', 'paused', 'completed', 'cancelled', 'awaiting_approval'] as const;
export type OperationStatus = (typeof OPERATION_STATUS)[number];

export const ITEM_STATUS = ['pending', 'leased', 'completed', 'failed', 'abandoned'] as const;
export type ItemStatus = (typeof ITEM_STATUS)[number];

export type ExecutionMode = 'assistant' | 'background';

/** The lease owner used when the conversation's assistant processes items itself. */
export const ASSISTANT_OWNER = 'assistant';

/** The small, bounded state kept in `assistant_operation.state_json`; never item lists. */
export interface OperationState {
  /** Every item with a lower ordinal is leased or recorded: leasing scans from here. */
  cursor: number;
  batch_size: number;
  execution: ExecutionMode;
  query_params: Record<string, unknown> | null;
  notes: string | null;
  abandoned_count: number;
  /** Set on operations made by `retry_failed`. */
  retry_of?: string;
  /** Why the operation was last paused, shown to the assistant. */
  paused_reason?: string;
  /** Who paused it (see {@link PausedBy}); absent on operations paused before it was recorded. */
  paused_by?: string;
  /** Background: how many batches may run at once. */
  max_parallel_batches?: number;
  /** Pause when more than this share of the last {@link BREAKER_WINDOW} outcomes failed. */
  max_failure_rate?: number | null;
  /** The last outcomes, oldest first: `c` completed, `f` failed (the circuit breaker's window). */
  recent_outcomes?: string;
  /**
   * Background: the generation of worker lanes allowed to run. Resume and the reconciler start
   * a new generation; jobs of an older one stop at their next step, so lanes never pile up.
   */
  dispatch_epoch?: number;
  /**
   * Background: the BullMQ key prefix of the deployment that dispatches it. Deployments sharing
   * one database (staging and production, test runs) each reconcile only their own operations.
   */
  queue_prefix?: string;
  /**
   * Retention (store/retention/retention-sql.ts), on finished operations only. When the item rows were
   * deleted (ISO time); while it runs, the ordinal below which they are gone.
   */
  items_pruned_at?: string;
  items_pruned_through?: number;
  /** The failure rows deleted past OPSPAD_RETENTION_FAILURES, counted by reason. */
  pruned_failures?: PrunedFailures;
  /** When the batch events were deleted; while it runs, the event id up to which they are gone. */
  events_pruned_at?: string;
  events_pruned_through?: number;
}

export interface OperationRecord {
  id: string;
  conversation_id: string;
  organization_id: string;
  operation_type: string;
  status: OperationStatus;
  total_items: number;
  completed_count: number;
  failed_count: number;
  state_json: OperationState;
  created_at: Date;
  updated_at: Date;
}

/**
 * An operation as lists read it (the context fragment, the operator page, the reconciler): all
 * but `query_params`, which a tenant may fill with up to OPSPAD_MAX_QUERY_PARAMS_BYTES and which
 * only the operation's own reads (get, a worker's batch) need.
 */
export type ListedOperation = Omit<OperationRecord, 'state_json'> & {
  state_json: Omit<OperationState, 'query_params'>;
};

/** The statuses an operation ends in: it changes no more. */
export const FINISHED_STATUSES = ['completed', 'cancelled'] as const satisfies readonly OperationStatus[];

export function isFinished(status: OperationStatus): boolean {
  return (FINISHED_STATUSES as readonly OperationStatus[]).includes(status);
}

/** The statuses of an operation that is not finished, in OPERATION_STATUS's order. */
export const OPEN_STATUSES: readonly OperationStatus[] = OPERATION_STATUS.filter((status) => !isFinished(status));

export interface OperationCounts {
  total_items: number;
  completed_count: number;
  failed_count: number;
  /** Items not yet recorded: pending plus in flight. */
  remaining_count: number;
  /** Items leased to a worker or the assistant and not yet recorded. */
  in_flight_count: number;
}

export function countsOf(op: OperationRecord, inFlight: number): OperationCounts {
  return {
    total_items: op.total_items,
    completed_count: op.completed_count,
    failed_count: op.failed_count,
    remaining_count: remainingOf(op),
    in_flight_count: inFlight,
  };
}

export function remainingOf(op: ListedOperation): number {
  return op.total_items - op.completed_count - op.failed_count - op.state_json.abandoned_count;
}

/** How many recent outcomes the circuit breaker looks at. */
export const BREAKER_WINDOW = 50;

/** Appends outcomes to the breaker window, keeping the last {@link BREAKER_WINDOW}. */
export function pushOutcomes(window: string, outcomes: string): string {
  const joined = window + outcomes;
  return joined.length > BREAKER_WINDOW ? joined.slice(joined.length - BREAKER_WINDOW) : joined;
}

/**
 * The breaker opens only on a full window, so an operation is not paused for its first
 * failure; it then pauses when failures exceed `maxRate` of the window.
 */
export function breakerTrips(window: string, maxRate: number | null | undefined): boolean {
  if (maxRate === null || maxRate === undefined || window.length < BREAKER_WINDOW) {
    return false;
  }
  let failed = 0;
  for (const outcome of window) {
    if (outcome === 'f') {
      failed++;
    }
  }
  return failed / window.length > maxRate;
}

export function breakerReason(window: string, maxRate: number): string {
  const failed = [...window].filter((o) => o === 'f').length;
  return `circuit breaker: ${failed} of the last ${window.length} items failed (max_failure_rate ${maxRate}); check the failures with {"action":"get"}, fix the cause, then resume`;
}
