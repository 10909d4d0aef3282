/**
 * An operation's items with their outcomes, a keyset page at a time by ordinal, for the results
 * file (api/results-export.ts). Each page is one statement on the item table's primary key (and
 * the kept failures', for an operation retention has pruned): O(page) whatever the operation's
 * size, so a million-item file costs a thousand short reads and never holds a transaction open.
 *
 * Every page is scoped by organization: the operation must belong to it, or the page is empty.
 */
import type { Queryable } from '../db/db.ts';
import { orderedFailures } from './failure-sql.ts';

export interface ItemResultRow {
  ordinal: number;
  item_id: string;
  status: 'pending' | 'leased' | 'completed' | 'failed' | 'abandoned';
  attempts: number;
  reason: string | null;
  updated_at: Date | null;
}

export interface ResultsPage {
  organizationId: string;
  operationId: string;
  /** Only ordinals after this one (-1: from the first). */
  afterOrdinal: number;
  limit: number;
  /** Only the failed items. */
  onlyFailed: boolean;
}

const OWNED = 'EXISTS (SELECT 1 FROM assistant_operation WHERE id = $1 AND organization_id = $4)';

/**
 * Every item: the item table's rows and the kept failures of a pruned operation, merged by
 * ordinal (an ordinal is in one of the two, never both). A pending item that a live lease holds
 * reads `leased`, as everywhere it is shown.
 */
const ALL_ITEMS = `WITH held AS MATERIALIZED (
       SELECT h.ordinal FROM assistant_operation_lease l, unnest(l.ordinals) AS h(ordinal)
       WHERE l.operation_id = $1 AND l.remaining > 0)
     SELECT ordinal, item_id, status, attempts, reason, updated_at FROM (
       (SELECT i.ordinal, i.item_id,
               CASE WHEN i.status = 'pending' AND i.ordinal IN (SELECT ordinal FROM held) THEN 'leased' ELSE i.status END AS status,
               i.attempts, i.reason, i.updated_at
        FROM assistant_operation_item i
        WHERE i.operation_id = $1 AND i.ordinal > $2 AND ${OWNED}
        ORDER BY i.ordinal LIMIT $3)
       UNION ALL
       (SELECT ordinal, item_id, 'failed', attempts, reason, updated_at
        FROM assistant_operation_kept_failure
        WHERE operation_id = $1 AND ordinal > $2 AND ${OWNED}
        ORDER BY ordinal LIMIT $3)) merged
     ORDER BY ordinal LIMIT $3`;

const FAILED_ITEMS = `SELECT ordinal, item_id, 'failed' AS status, attempts, reason, updated_at
     FROM ${orderedFailures({ operation: '$1', after: '$2', limit: '$3', onlyIf: OWNED })} page`;

/** Up to `limit` items after `afterOrdinal`, in item order. */
export async function itemResultsPage(db: Queryable, page: ResultsPage): Promise<ItemResultRow[]> {
  return db.query<ItemResultRow>(page.onlyFailed ? FAILED_ITEMS : ALL_ITEMS, [
    page.operationId,
    page.afterOrdinal,
    page.limit,
    page.organizationId,
  ]);
}
