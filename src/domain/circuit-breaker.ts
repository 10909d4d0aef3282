/**
 * The circuit breaker's step after a record: the outcomes it recorded join the window, and the
 * operation pauses when too many of the window failed.
 */
import type { OperationState, OperationStatus } from './operation.ts';
import { breakerReason, breakerTrips, pushOutcomes } from './operation.ts';
import { transition } from './operation-lifecycle.ts';
import { CIRCUIT_BREAKER } from './paused-by.ts';

/** One recorded item: its place in the operation decides its place in the window. */
export interface RecordedOutcome {
  ordinal: number;
  outcome: 'c' | 'f';
}

export interface BreakerStep {
  /** What to merge into the operation's state (empty when the operation has no breaker). */
  statePatch: Partial<OperationState>;
  /** The breaker opened: pause the operation. */
  trips: boolean;
  window: string;
}

/** The outcomes in item order, `c` or `f` each. */
export function outcomesInOrder(outcomes: readonly RecordedOutcome[]): string {
  return [...outcomes]
    .sort((a, b) => a.ordinal - b.ordinal)
    .map((o) => o.outcome)
    .join('');
}

export function breakerStep(
  state: OperationState,
  status: OperationStatus,
  outcomes: readonly RecordedOutcome[],
): BreakerStep {
  const maxRate = state.max_failure_rate;
  if (!maxRate) {
    return { statePatch: {}, trips: false, window: '' };
  }
  const window = pushOutcomes(state.recent_outcomes ?? '', outcomesInOrder(outcomes));
  const trips = transition('breaker_trip', status).kind === 'change' && breakerTrips(window, maxRate);
  const statePatch: Partial<OperationState> = { recent_outcomes: window };
  if (trips) {
    statePatch.paused_reason = breakerReason(window, maxRate);
    statePatch.paused_by = CIRCUIT_BREAKER;
  }
  return { statePatch, trips, window };
}
