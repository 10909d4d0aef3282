/**
 * The SQL that touches assistant_operation_item rows, one function per statement. Every
 * statement is bounded by the batch it works on (or by the operation's in-flight rows), never by
 * the operation's size: that is what keeps recording O(batch) at a million items.
 *
 * Callers hold a lock of the operation row (operations/operation-row.ts lockOperation) before
 * calling any of these: exclusive for whatever changes the operation's state, the update lock for
 * leases and for records before they write (records lock their items under a shared lock
 * first), which only ever touch their own rows (`SKIP LOCKED`, conditions on each row's status
 * and owner).
 *
 * Leases are kept per batch in assistant_operation_lease (one row per owner: its ordinals, how
 * many of them it still holds, until when), and only there: a lease does not write its items.
 * An item is leased exactly when it is pending and its
 * ordinal is in a lease row with items remaining; it is written once per lease cycle, when it is
 * recorded (or released), and that write adds the ended lease to `attempts`. No index of the
 * item table names a column a record changes, so a completion is a HOT update. Every statement that takes an item out of a lease keeps `remaining` equal to
 * the number of the lease's ordinals still pending. Lock order within a statement: item rows,
 * then the lease row.
 */
import type { ItemStatus, OperationRecord } from '../../domain/operation.ts';
import {
  ITEM_ABANDONED,
  ITEM_COMPLETED,
  ITEM_FAILED,
  ITEM_LEASABLE,
  ITEM_SHOWN_LEASED,
} from '../../domain/operation-lifecycle.ts';
import type { Queryable } from '../db/db.ts';
import { sqlLiteral } from '../db/sql-literal.ts';

// The item statuses, from the lifecycle's one list (domain/operation-lifecycle.ts).
const PENDING = sqlLiteral(ITEM_LEASABLE);
const LEASED = sqlLiteral(ITEM_SHOWN_LEASED);
const COMPLETED = sqlLiteral(ITEM_COMPLETED);
const FAILED = sqlLiteral(ITEM_FAILED);
const ABANDONED = sqlLiteral(ITEM_ABANDONED);

export interface LeasedItem {
  ordinal: number;
  item_id: string;
}

/**
 * $1 operation id, $2 owner, $3 lease seconds → the (ordinal, item_id) still leased to the owner,
 * the lease row extended. The owner's lease row names the batch's ordinals, so this reads the
 * batch's rows by primary key and nothing else; an owner without a lease row (a worker's new
 * job) costs one primary-key probe.
 */
export const RENEW_LEASE_SQL = `WITH lease AS (
       UPDATE assistant_operation_lease SET expires_at = now() + make_interval(secs => $3)
       WHERE operation_id = $1 AND owner = $2 AND remaining > 0
       RETURNING ordinals)
     SELECT ordinal, item_id FROM assistant_operation_item
     WHERE operation_id = $1 AND ordinal = ANY(ARRAY(SELECT unnest(ordinals) FROM lease)) AND status = ${PENDING}`;

/** The batch currently leased to `owner`, with its lease extended (asking again = heartbeat). */
export async function renewOwnLease(
  tx: Queryable,
  operationId: string,
  owner: string,
  leaseSeconds: number,
): Promise<LeasedItem[]> {
  const rows = await tx.query<LeasedItem>(RENEW_LEASE_SQL, [operationId, owner, leaseSeconds]);
  return rows.sort((a, b) => a.ordinal - b.ordinal);
}

/**
 * Drops expired lease rows, which returns their pending items to the pool, and counts the ended
 * lease in those items' `attempts`; reports how many items and the lowest ordinal among them.
 * One statement under the caller's exclusive lock.
 */
export async function releaseExpiredLeases(
  tx: Queryable,
  operationId: string,
): Promise<{ released: number; lowestOrdinal: number | null }> {
  const rows = await tx.query<{ released: number; lowest: number | null }>(
    `WITH expired AS (
       DELETE FROM assistant_operation_lease WHERE operation_id = $1 AND expires_at < now()
       RETURNING ordinals),
     released AS (
       UPDATE assistant_operation_item SET attempts = attempts + 1, updated_at = now()
       WHERE operation_id = $1 AND ordinal = ANY(ARRAY(SELECT unnest(ordinals) FROM expired))
         AND status = ${PENDING}
       RETURNING ordinal)
     SELECT count(*)::int AS released, min(ordinal)::int AS lowest FROM released`,
    [operationId],
  );
  return { released: rows[0]?.released ?? 0, lowestOrdinal: rows[0]?.lowest ?? null };
}

/**
 * Returns the named items still leased to `owner` to the pool: out of its lease row (a pending
 * item in a lease row is leased), the ended lease counted in their `attempts`.
 */
export async function releaseOwnedItems(
  tx: Queryable,
  operationId: string,
  owner: string,
  itemIds: readonly string[],
): Promise<{ released: number; lowestOrdinal: number | null }> {
  const rows = await tx.query<{ released: number; lowest: number | null }>(
    `WITH released AS (
       UPDATE assistant_operation_item SET attempts = attempts + 1, updated_at = now()
       WHERE operation_id = $1 AND item_id = ANY($3::text[]) AND status = ${PENDING}
         AND ordinal IN (SELECT unnest(ordinals) FROM assistant_operation_lease WHERE operation_id = $1 AND owner = $2)
       RETURNING ordinal),
     counted AS (
       UPDATE assistant_operation_lease
       SET remaining = remaining - (SELECT count(*)::int FROM released),
           ordinals = ARRAY(SELECT o FROM unnest(ordinals) AS o WHERE o NOT IN (SELECT ordinal FROM released))
       WHERE operation_id = $1 AND owner = $2)
     SELECT count(*)::int AS released, min(ordinal)::int AS lowest FROM released`,
    [operationId, owner, itemIds],
  );
  return { released: rows[0]?.released ?? 0, lowestOrdinal: rows[0]?.lowest ?? null };
}

/**
 * $1 operation id, $2 owner, $3 lease seconds, $4 cursor, $5 batch size, $6 whether the caller
 * holds the operation row's update lock rather than exclusively → leased (ordinal, item_id), the
 * owner's lease row written (or, if it had one, extended by the batch): one round trip. The
 * statement is the function opspad_lease_items (sql/opspad_lease_items.sql), which the step
 * functions call too when a live lease reaches past the cursor:
 * its lock order (the candidates' item rows, SKIP LOCKED, then the lease row), how a lease is
 * kept from rows another lease took under its scan, and its cost are said there. Exported for
 * the plan checks in the scale tests.
 */
export const LEASE_NEXT_SQL = `SELECT leased_ordinal AS ordinal, leased_item_id AS item_id
     FROM opspad_lease_items($1, $2, $3, $4, $5, $6)`;

/**
 * Leases the next `limit` pending items at or after `cursor` to `owner`. The scan starts at
 * the cursor so it never walks the rows already finished (which would make it O(N)). `shared`:
 * the caller holds the operation row's update lock, not alone on it (records go on beside it);
 * otherwise exclusively, and the scan starts exactly at `cursor`.
 */
export async function leaseNext(
  tx: Queryable,
  operationId: string,
  owner: string,
  leaseSeconds: number,
  cursor: number,
  limit: number,
  shared: boolean,
): Promise<LeasedItem[]> {
  const rows = await tx.query<LeasedItem>(LEASE_NEXT_SQL, [operationId, owner, leaseSeconds, cursor, limit, shared]);
  return rows.sort((a, b) => a.ordinal - b.ordinal);
}

/**
 * Items neither recorded, abandoned nor leased, by the step functions' own count
 * (sql/opspad_pending_items.sql): the operation's counters less its lease rows' items.
 */
export async function countPending(tx: Queryable, op: OperationRecord): Promise<number> {
  const rows = await tx.query<{ pending: number }>('SELECT pending FROM opspad_pending_items($1, $2, $3, $4::jsonb)', [
    op.id,
    op.total_items,
    op.completed_count + op.failed_count,
    JSON.stringify(op.state_json),
  ]);
  return rows[0]?.pending ?? 0;
}

/** Items leased and not recorded: the sum over the operation's lease rows (a handful). */
export async function countInFlight(tx: Queryable, operationId: string): Promise<number> {
  const rows = await tx.query<{ n: number }>(
    'SELECT coalesce(sum(remaining), 0)::int AS n FROM assistant_operation_lease WHERE operation_id = $1',
    [operationId],
  );
  return rows[0]?.n ?? 0;
}

/**
 * {@link countInFlight}, dropping the lease rows whose batch is all recorded (in a lease or
 * record transaction, where it costs no extra round trip): the lease table keeps only the
 * leases in force, so reading it stays O(lanes) over the whole operation.
 */
export async function countInFlightDroppingSpent(tx: Queryable, operationId: string): Promise<number> {
  const rows = await tx.query<{ n: number }>(
    `WITH spent AS (DELETE FROM assistant_operation_lease WHERE operation_id = $1 AND remaining <= 0)
     SELECT coalesce(sum(remaining), 0)::int AS n FROM assistant_operation_lease
     WHERE operation_id = $1 AND remaining > 0`,
    [operationId],
  );
  return rows[0]?.n ?? 0;
}

/** The in-flight count of the operation aliased `o`, as a column of a list of operations. */
export const IN_FLIGHT_COLUMN = `(SELECT coalesce(sum(l.remaining), 0)::int FROM assistant_operation_lease l
        WHERE l.operation_id = o.id) AS in_flight_count`;

export interface ItemState {
  ordinal: number;
  item_id: string;
  status: ItemStatus;
  lease_owner: string | null;
  lease_expired: boolean;
}

/**
 * The operation's ($1) items held by a lease with items remaining, with its owner and whether it
 * has expired: a pending item among them is leased. One row per leased ordinal (a handful of
 * lease rows, a batch each), materialized once per statement and hashed where it is read.
 */
const HELD = `held AS MATERIALIZED (
       SELECT h.ordinal, l.owner, l.expires_at < now() AS expired
       FROM assistant_operation_lease l, unnest(l.ordinals) AS h(ordinal)
       WHERE l.operation_id = $1 AND l.remaining > 0)`;

/** The current state of the named items (unknown ids are simply absent). */
export async function findItems(tx: Queryable, operationId: string, itemIds: readonly string[]): Promise<ItemState[]> {
  return tx.query<ItemState>(
    `WITH ${HELD}
     SELECT i.ordinal, i.item_id, CASE WHEN h.owner IS NULL THEN i.status ELSE ${LEASED} END AS status,
            h.owner AS lease_owner, coalesce(h.expired, false) AS lease_expired
     FROM assistant_operation_item i LEFT JOIN held h ON h.ordinal = i.ordinal AND i.status = ${PENDING}
     WHERE i.operation_id = $1 AND i.item_id = ANY($2::text[])`,
    [operationId, itemIds],
  );
}

/**
 * Which items a report may record: pending ones that no lease holds, those leased to the
 * reporter ($3), and those whose lease has expired. An item leased to someone else whose lease
 * is live is left alone (a late worker never overwrites the one that took its lease over), and
 * so is one already recorded.
 */
const RECORDABLE = `i.status = ${PENDING} AND i.ordinal NOT IN (SELECT ordinal FROM held WHERE owner <> $3 AND NOT expired)`;

/** A recorded item's attempts: one more when a lease held it (that lease has now ended). */
const ATTEMPTS_ENDED = 'attempts = i.attempts + (i.ordinal IN (SELECT ordinal FROM held))::int';

/**
 * Counts down the leases that held the items a record statement (`recorded`) took out of them.
 * Commutes (`remaining - n`), so records running side by side may apply it in any order.
 */
const COUNT_DOWN_LEASES = `counted AS (
       UPDATE assistant_operation_lease AS l SET remaining = l.remaining - c.n
       FROM (SELECT h.owner, count(*)::int AS n FROM recorded r JOIN held h ON h.ordinal = r.ordinal GROUP BY h.owner) c
       WHERE l.operation_id = $1 AND l.owner = c.owner)`;

/**
 * $1 operation id, $2 item ids, $3 reporter → (ordinal, item_id) of the items this statement
 * completed. Matching by item id and recording in one statement is what keeps a report to one
 * pass over the batch's index entries; the ids it did not record are looked up afterwards, only
 * when there are any (see recordResults). Only unindexed columns change: a HOT update.
 */
export const RECORD_COMPLETED_SQL = `WITH ${HELD},
     recorded AS (
       UPDATE assistant_operation_item AS i
       SET status = ${COMPLETED}, reason = NULL, updated_at = now(), ${ATTEMPTS_ENDED}
       WHERE i.operation_id = $1 AND i.item_id = ANY($2::text[]) AND ${RECORDABLE}
       RETURNING i.ordinal, i.item_id),
     ${COUNT_DOWN_LEASES}
     SELECT ordinal, item_id FROM recorded`;

/**
 * $1 operation id, $2 item ids, $3 reporter, $4 reasons (same order as $2) → (ordinal, item_id)
 * of the items this statement failed. The `item_id = ANY($2)` condition gives the planner the
 * index path; joining the unnest alone can pick a nested loop over the whole array. Setting
 * the reason enters the row in the failures' index: the one record change that is not HOT.
 */
export const RECORD_FAILED_SQL = `WITH ${HELD},
     recorded AS (
       UPDATE assistant_operation_item AS i
       SET status = ${FAILED}, reason = f.reason, updated_at = now(), ${ATTEMPTS_ENDED}
       FROM unnest($2::text[], $4::text[]) AS f(item_id, reason)
       WHERE i.operation_id = $1 AND i.item_id = ANY($2::text[]) AND i.item_id = f.item_id AND ${RECORDABLE}
       RETURNING i.ordinal, i.item_id),
     ${COUNT_DOWN_LEASES}
     SELECT ordinal, item_id FROM recorded`;

/**
 * A report with both kinds, in one statement instead of one per kind (one round trip fewer for
 * the usual `update` of an assistant): $1 operation id, $2 item ids, $3 reporter, $4 reasons in
 * $2's order, null for a completion → (ordinal, item_id, status) of the items it recorded. The
 * kinds are disjoint (record-report.ts refuses an id in both). A completion sets no reason, so
 * its update stays HOT, as in RECORD_COMPLETED_SQL.
 */
export const RECORD_MIXED_SQL = `WITH ${HELD},
     recorded AS (
       UPDATE assistant_operation_item AS i
       SET status = CASE WHEN f.reason IS NULL THEN ${COMPLETED} ELSE ${FAILED} END,
           reason = f.reason, updated_at = now(), ${ATTEMPTS_ENDED}
       FROM unnest($2::text[], $4::text[]) AS f(item_id, reason)
       WHERE i.operation_id = $1 AND i.item_id = ANY($2::text[]) AND i.item_id = f.item_id AND ${RECORDABLE}
       RETURNING i.ordinal, i.item_id, i.status),
     ${COUNT_DOWN_LEASES}
     SELECT ordinal, item_id, status FROM recorded`;

export interface RecordedItem {
  ordinal: number;
  item_id: string;
}

/**
 * Locks the named items' rows, waiting for a record that holds any of them (a step function's
 * record of its own lease runs beside this one), before a record statement (RECORD_*_SQL) runs
 * in the same transaction; that statement takes its snapshot after these locks. A lease does not
 * run beside this record: both take the operation row's update lock, because a lease reads its
 * batch without locking the rows. Ordinal order, as records take them. The one-call record
 * (opspad_record_owned) does not need this: it records only items of the caller's own live
 * lease, which no other lease can take.
 */
export async function lockItems(tx: Queryable, operationId: string, itemIds: readonly string[]): Promise<void> {
  if (itemIds.length === 0) {
    return;
  }
  await tx.query(
    `SELECT 1 FROM assistant_operation_item WHERE operation_id = $1 AND item_id = ANY($2::text[])
     ORDER BY ordinal FOR UPDATE`,
    [operationId, itemIds],
  );
}

/** Completes the recordable items among `itemIds` (see RECORD_COMPLETED_SQL). */
export async function recordCompleted(
  tx: Queryable,
  operationId: string,
  itemIds: readonly string[],
  owner: string,
): Promise<RecordedItem[]> {
  if (itemIds.length === 0) {
    return [];
  }
  return tx.query<RecordedItem>(RECORD_COMPLETED_SQL, [operationId, itemIds, owner]);
}

/** Fails the recordable items among `itemIds` with their reasons (see RECORD_FAILED_SQL). */
export async function recordFailed(
  tx: Queryable,
  operationId: string,
  itemIds: readonly string[],
  reasons: readonly string[],
  owner: string,
): Promise<RecordedItem[]> {
  if (itemIds.length === 0) {
    return [];
  }
  return tx.query<RecordedItem>(RECORD_FAILED_SQL, [operationId, itemIds, owner, reasons]);
}

/** Completes `completedIds` and fails `failedIds` (with `reasons`) in one statement (RECORD_MIXED_SQL). */
export async function recordMixed(
  tx: Queryable,
  operationId: string,
  completedIds: readonly string[],
  failedIds: readonly string[],
  reasons: readonly string[],
  owner: string,
): Promise<{ completed: RecordedItem[]; failed: RecordedItem[] }> {
  const rows = await tx.query<RecordedItem & { status: string }>(RECORD_MIXED_SQL, [
    operationId,
    [...completedIds, ...failedIds],
    owner,
    [...completedIds.map(() => null), ...reasons],
  ]);
  const completed: RecordedItem[] = [];
  const failed: RecordedItem[] = [];
  for (const { ordinal, item_id, status } of rows) {
    (status === ITEM_COMPLETED ? completed : failed).push({ ordinal, item_id });
  }
  return { completed, failed };
}

/** Marks every item not yet recorded as abandoned (cancel, forced complete); no lease stays. */
export async function abandonUnrecorded(tx: Queryable, operationId: string): Promise<number> {
  const rows = await tx.query<{ n: number }>(
    `WITH ${HELD},
     abandoned AS (
       UPDATE assistant_operation_item AS i SET status = ${ABANDONED}, updated_at = now(), ${ATTEMPTS_ENDED}
       WHERE i.operation_id = $1 AND i.status = ${PENDING}
       RETURNING 1),
     leases AS (DELETE FROM assistant_operation_lease WHERE operation_id = $1 AND (SELECT count(*) FROM abandoned) >= 0)
     SELECT count(*)::int AS n FROM abandoned`,
    [operationId],
  );
  return rows[0]?.n ?? 0;
}
