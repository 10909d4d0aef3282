/**
 * An operation's failures: the failed rows of assistant_operation_item, and the failures
 * retention kept of a pruned operation, moved to assistant_operation_kept_failure
 * (retention/retention-sql.ts says why). Every read of an operation's failures goes through one
 * of the two fragments below (the reads of `get` and `retry_failed` are here too), so it sees
 * the same failures whatever retention has reached, even halfway through an operation. Only the
 * operator view's lookups of one item by id name both tables themselves (operator-view-repo.ts).
 *
 * Why fragments and not a view: Postgres cannot flatten a UNION ALL branch that has a WHERE clause
 * into its parent, so through a view `ORDER BY ordinal LIMIT n` read every failure of the
 * operation and sorted them: O(failures) for one page, where the merge here is O(page).
 * Here each branch is ordered and limited on its own index — the item table's partial failure
 * index and the kept table's primary key — and the outer query merges at most twice the limit.
 */
import type { Queryable } from '../db/db.ts';

/** The columns both tables have, in the order every fragment returns them. */
const COLUMNS = 'ordinal, item_id, attempts, reason, updated_at';
/** Only a failure sets reason: the item table's partial failure index is on `reason IS NOT NULL`. */
const FAILED_ITEM = `status = 'failed' AND reason IS NOT NULL`;

/**
 * Every failure of the operation `operation` (a parameter or a column, as SQL), unordered: for
 * aggregates that read them all (counts by reason, a retry's copy). O(failures of the operation).
 */
export function allFailures(operation: string): string {
  return `(SELECT ${COLUMNS} FROM assistant_operation_item WHERE operation_id = ${operation} AND ${FAILED_ITEM}
           UNION ALL
           SELECT ${COLUMNS} FROM assistant_operation_kept_failure WHERE operation_id = ${operation})`;
}

export interface OrderedFailures {
  /** The operation's id, as SQL (a parameter such as `$1`, or a column of an outer query). */
  operation: string;
  /** Only ordinals past this one (ascending) or before it (descending), as SQL; none: from the end. */
  after?: string;
  /** Rows returned at most, as SQL. */
  limit: string;
  /** Rows skipped first, as SQL; each branch then reads `offset + limit`. */
  offset?: string;
  descending?: boolean;
  /**
   * A condition on the outer query (SQL) without which neither table is read: as a lateral join's
   * gate, a constant per outer row, so operations without failures cost no index lookups.
   */
  onlyIf?: string;
}

/**
 * The operation's failures in item order (or the reverse), `limit` of them after `offset`, as a
 * subquery with the columns of {@link allFailures}. O(offset + limit) through the two indexes.
 */
export function orderedFailures({
  operation,
  after,
  limit,
  offset,
  descending = false,
  onlyIf,
}: OrderedFailures): string {
  const direction = descending ? 'DESC' : 'ASC';
  const from = `${after === undefined ? '' : ` AND ordinal ${descending ? '<' : '>'} ${after}`}${onlyIf === undefined ? '' : ` AND ${onlyIf}`}`;
  const reach = offset === undefined ? limit : `(${offset}) + (${limit})`;
  const branch = (table: string, condition: string) =>
    `(SELECT ${COLUMNS} FROM ${table} WHERE operation_id = ${operation}${condition}${from}
      ORDER BY ordinal ${direction} LIMIT ${reach})`;
  return `(SELECT * FROM (${branch('assistant_operation_item', ` AND ${FAILED_ITEM}`)}
            UNION ALL ${branch('assistant_operation_kept_failure', '')}) merged
           ORDER BY ordinal ${direction}${offset === undefined ? '' : ` OFFSET ${offset}`} LIMIT ${limit})`;
}

export interface FailureRow {
  ordinal: number;
  item_id: string;
  reason: string | null;
}

/**
 * A page of failed items after `afterOrdinal`, in order (keyset pagination), kept failures of a
 * pruned operation included.
 */
export async function failuresPage(
  tx: Queryable,
  operationId: string,
  afterOrdinal: number,
  limit: number,
): Promise<FailureRow[]> {
  return tx.query<FailureRow>(
    `SELECT ordinal, item_id, reason FROM ${orderedFailures({ operation: '$1', after: '$2', limit: '$3' })} page`,
    [operationId, afterOrdinal, limit],
  );
}

/**
 * Copies the failed items of `sourceId` into `targetId` as pending rows, in order, kept failures
 * included: a pruned operation whose failures were all kept is retried whole.
 */
export async function copyFailedItems(tx: Queryable, sourceId: string, targetId: string): Promise<number> {
  const rows = await tx.query<{ n: number }>(
    `WITH inserted AS (
       INSERT INTO assistant_operation_item (operation_id, ordinal, item_id)
       SELECT $2, (row_number() OVER (ORDER BY ordinal) - 1)::int, item_id
       FROM ${allFailures('$1')} failure
       RETURNING 1)
     SELECT count(*)::int AS n FROM inserted`,
    [sourceId, targetId],
  );
  return rows[0]?.n ?? 0;
}
