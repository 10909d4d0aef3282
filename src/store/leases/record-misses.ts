/**
 * Why a report's ids were not recorded: unknown (the whole report is refused), already recorded
 * (ignored, counted once), or leased to another owner whose lease is live (left to that owner).
 *
 * Lock order: runs inside recordResults, after its item updates; reads only.
 * Cost: one index lookup per id not recorded — none on the usual path, where every id of the
 * report was recorded and this is never called.
 */
import { AppError } from '../../domain/errors.ts';
import type { ItemStatus } from '../../domain/operation.ts';
import { ITEM_DONE } from '../../domain/operation-lifecycle.ts';
import { MAX_NAMED_IDS, namedIds } from '../../domain/record-report.ts';
import type { Queryable } from '../db/db.ts';
import { findItems } from './item-sql.ts';

export interface RecordMisses {
  /** Ids that were already recorded before this call: ignored, counted once. */
  alreadyRecorded: string[];
  /** Ids leased to someone else whose lease is still live: not recorded by this call. */
  leaseConflicts: string[];
}

/** Sorts the ids not recorded by why; throws unknown_item_ids (rolling the call back) for ids the operation lacks. */
export async function explainMisses(
  tx: Queryable,
  operationId: string,
  missed: readonly string[],
): Promise<RecordMisses> {
  const misses: RecordMisses = { alreadyRecorded: [], leaseConflicts: [] };
  if (missed.length === 0) {
    return misses;
  }
  const found = await findItems(tx, operationId, missed);
  if (found.length < missed.length) {
    const known = new Set(found.map((f) => f.item_id));
    const unknown = missed.filter((id) => !known.has(id));
    throw new AppError(
      'unknown_item_ids',
      `Operation ${operationId} has no item ${namedIds(unknown)}; nothing was recorded. Report only ids returned by progress.`,
      { operation_id: operationId, unknown_ids: unknown.slice(0, MAX_NAMED_IDS), unknown_count: unknown.length },
    );
  }
  for (const item of found) {
    if ((ITEM_DONE as readonly ItemStatus[]).includes(item.status)) {
      misses.alreadyRecorded.push(item.item_id);
    } else {
      // Not recordable and not recorded: leased to someone else, and that lease is live.
      misses.leaseConflicts.push(item.item_id);
    }
  }
  return misses;
}
