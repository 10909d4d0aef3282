/**
 * A worker's or the assistant's report of outcomes (`update`), checked before any statement
 * runs: duplicates collapse, and an id reported both completed and failed is refused.
 */
import { AppError } from './errors.ts';

/** At most this many offending ids are named in an error; the count says how many in all. */
export const MAX_NAMED_IDS = 20;

export interface RecordReport {
  completedIds: string[];
  failedIds: string[];
  /** The reason of each failed id, in failedIds' order. */
  failedReasons: string[];
  /** Every id reported, completed ones first. */
  requested: string[];
}

/** Up to MAX_NAMED_IDS ids, quoted, and how many more. */
export function namedIds(ids: readonly string[]): string {
  const shown = ids
    .slice(0, MAX_NAMED_IDS)
    .map((id) => JSON.stringify(id))
    .join(', ');
  return ids.length > MAX_NAMED_IDS ? `${shown} and ${ids.length - MAX_NAMED_IDS} more` : shown;
}

/** The report without duplicates (the last reason of a failed id wins); throws validation_failed. */
export function parseRecordReport(
  completed: readonly string[],
  failed: readonly { id: string; reason: string }[],
): RecordReport {
  const completedIds = [...new Set(completed)];
  const failedById = new Map(failed.map((f) => [f.id, f.reason]));
  const both = completedIds.filter((id) => failedById.has(id));
  if (both.length > 0) {
    throw new AppError(
      'validation_failed',
      `Invalid input: completed_ids and failed both name ${namedIds(both)}; report each item once, as completed or as failed.`,
      { issues: [{ field: 'failed', message: 'ids also listed in completed_ids' }], ids: both.slice(0, MAX_NAMED_IDS) },
    );
  }
  const failedIds = [...failedById.keys()];
  return {
    completedIds,
    failedIds,
    failedReasons: [...failedById.values()],
    requested: [...completedIds, ...failedIds],
  };
}
