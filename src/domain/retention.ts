/**
 * Retention rules, without I/O: what each setting means once resolved, which audit events are
 * bulk (deleted with the item rows' age) and which tell who did what (kept with the operation),
 * and the bounded summary that replaces the failure rows deleted past the cap.
 */

/** The retention settings, resolved (src/config/retention.ts). `null`: kept for good. */
export interface RetentionPolicy {
  /** Item rows of finished operations, this long after the finish (OPSPAD_RETENTION). */
  itemsAfterMs: number | null;
  /** Batch events of finished operations after their finish; reorganization events by age. */
  eventsAfterMs: number | null;
  /** Traces of ended executions after their end; conversation-scope traces by age. */
  tracesAfterMs: number | null;
  /** Context renders, by age. */
  rendersAfterMs: number | null;
  /** Newest versions kept per structured pad. */
  padVersionsKept: number | null;
  /** Failure rows kept per pruned operation, the first ones by item order. */
  failuresKept: number;
  /** Rows one statement deletes at most. */
  batchRows: number;
  /** Time one run may take. */
  budgetMs: number;
}

/**
 * Events written per batch: an operation of a million items at batch 5 has 400,000 of them.
 * They go with the operation's other per-item data. Every other kind (created, paused, resumed,
 * completed, cancelled, expired, retried) says who did what to the operation and is kept with
 * its row.
 */
export const BULK_EVENT_KINDS = ['batch_leased', 'batch_recorded', 'lease_expired'] as const;

/** Distinct reasons a summary lists; failures with further reasons are counted in `other`. */
export const MAX_SUMMARY_REASONS = 20;
/** Characters of a reason a summary keeps (reasons may be 2,000 characters long). */
export const SUMMARY_REASON_CHARS = 160;
/** What a failure recorded without a reason is listed as. */
export const NO_REASON = '(no reason)';

/** The failure rows retention deleted past the cap, counted by reason. */
export interface PrunedFailures {
  /** Failure rows deleted. */
  count: number;
  /** Their reasons, in the order first met, each with how many failures had it. */
  reasons: { reason: string; count: number }[];
  /** Deleted failures whose reason is not listed (past {@link MAX_SUMMARY_REASONS} reasons). */
  other: number;
}

export const EMPTY_PRUNED_FAILURES: PrunedFailures = { count: 0, reasons: [], other: 0 };

function summaryReason(reason: string | null): string {
  if (reason === null || reason === '') {
    return NO_REASON;
  }
  return reason.length > SUMMARY_REASON_CHARS ? `${reason.slice(0, SUMMARY_REASON_CHARS - 1)}…` : reason;
}

/**
 * Adds the failures one statement deleted to the summary. A listed reason's count is exact: a
 * reason is listed from the first failure with it, or never (then its failures count in `other`),
 * so however many statements a large operation takes, no count is an estimate. The summary stays
 * bounded (≤ 20 reasons of ≤ 160 characters: about 3 KiB in the operation's state, which lists
 * read) whatever a tenant put in its reasons.
 */
export function mergePrunedFailures(
  summary: PrunedFailures | undefined,
  deleted: readonly { reason: string | null; count: number }[],
): PrunedFailures {
  const merged = new Map((summary ?? EMPTY_PRUNED_FAILURES).reasons.map((r) => [r.reason, r.count]));
  let other = summary?.other ?? 0;
  let count = summary?.count ?? 0;
  for (const { reason, count: n } of deleted) {
    count += n;
    const key = summaryReason(reason);
    const listed = merged.get(key);
    if (listed !== undefined) {
      merged.set(key, listed + n);
    } else if (merged.size < MAX_SUMMARY_REASONS) {
      merged.set(key, n);
    } else {
      other += n;
    }
  }
  return { count, reasons: [...merged].map(([reason, n]) => ({ reason, count: n })), other };
}

/** The reasons of a summary, the most frequent first (ties in the order first met). */
export function reasonsByCount(summary: PrunedFailures): { reason: string; count: number }[] {
  return summary.reasons
    .map((r, index) => ({ ...r, index }))
    .sort((a, b) => b.count - a.count || a.index - b.index)
    .map(({ reason, count }) => ({ reason, count }));
}

/** The part of an operation's state retention writes (see OperationState). */
interface PrunedState {
  items_pruned_at?: string;
  items_pruned_through?: number;
  pruned_failures?: PrunedFailures;
}

/** Whether retention has deleted (or is deleting) the operation's item rows. */
export function itemsArePruned(state: PrunedState): boolean {
  return state.items_pruned_at !== undefined || state.items_pruned_through !== undefined;
}

/**
 * What `get` says about a finished operation whose item rows retention deleted (undefined when
 * it did not): the failures kept, and those deleted counted by reason.
 */
export function itemsPrunedOutput(
  state: PrunedState,
  failedCount: number,
):
  | {
      at: string | null;
      failures_kept: number;
      failures_pruned: number;
      pruned_failure_reasons: { reason: string; count: number }[];
      other_pruned_failures: number;
    }
  | undefined {
  if (!itemsArePruned(state)) {
    return undefined;
  }
  const pruned = state.pruned_failures ?? EMPTY_PRUNED_FAILURES;
  return {
    at: state.items_pruned_at === undefined ? null : new Date(state.items_pruned_at).toISOString(),
    failures_kept: Math.max(0, failedCount - pruned.count),
    failures_pruned: pruned.count,
    pruned_failure_reasons: reasonsByCount(pruned),
    other_pruned_failures: pruned.other,
  };
}

/** Said after "The operation is completed." when its item rows are gone. */
export const ITEMS_PRUNED_NOTE =
  'Items pruned: its item rows were deleted after the retention period (OPSPAD_RETENTION); the counts are exact, and get lists the failures kept.';
