/**
 * The SQL that touches assistant_operation_item rows, one function per statement. Every
 * statement is bounded by the batch it works on (or by the operation's in-flight rows), never by
 * the operation's size: that is what keeps recording O(batch) at a million items.
 *
 * Callers hold a lock of the operation row (operation-repo.ts) before calling any of these:
 * exclusive for whatever changes the operation's state, shared for leases and records, which
 * only ever touch their own rows (`SKIP LOCKED`, conditions on each row's status and owner).
 */
import type { ItemStatus } from '../domain/operation.ts';
import type { Queryable, Transaction } from './db.ts';

/** Rows per INSERT when COPY is not available: large enough to amortise, small enough for RSS. */
const INSERT_CHUNK = 10_000;
/** Characters per COPY write: a few rows per chunk would cost a syscall each. */
const COPY_CHUNK_CHARS = 256 * 1024;

/** Escapes a value for Postgres' COPY text format. */
function copyText(value: string): string {
  return value.replace(/[\\\t\n\r]/g, (c) => (c === '\\' ? '\\\\' : c === '\t' ? '\\t' : c === '\n' ? '\\n' : '\\r'));
}

function* copyChunks(operationId: string, itemIds: readonly string[], firstOrdinal: number) {
  let chunk = '';
  for (let i = 0; i < itemIds.length; i++) {
    chunk += `${operationId}\t${firstOrdinal + i}\t${copyText(itemIds[i] as string)}\n`;
    if (chunk.length >= COPY_CHUNK_CHARS) {
      yield chunk;
      chunk = '';
    }
  }
  if (chunk.length > 0) {
    yield chunk;
  }
}

/**
 * Inserts the items of a new operation as pending rows, ordinals from `firstOrdinal`.
 * Streams with COPY where the engine has it; otherwise INSERT … SELECT FROM unnest in chunks.
 */
export async function insertItems(
  tx: Transaction,
  operationId: string,
  itemIds: readonly string[],
  firstOrdinal = 0,
): Promise<void> {
  if (tx.copyIn) {
    await tx.copyIn(
      'COPY assistant_operation_item (operation_id, ordinal, item_id) FROM STDIN',
      copyChunks(operationId, itemIds, firstOrdinal),
    );
    return;
  }
  for (let start = 0; start < itemIds.length; start += INSERT_CHUNK) {
    await tx.query(
      `INSERT INTO assistant_operation_item (operation_id, ordinal, item_id)
       SELECT $1, ($3::int + u.o - 1)::int, u.v FROM unnest($2::text[]) WITH ORDINALITY AS u(v, o)`,
      [operationId, itemIds.slice(start, start + INSERT_CHUNK), firstOrdinal + start],
    );
  }
}

/** Copies the failed items of `sourceId` into `targetId` as pending rows, in order. */
export async function copyFailedItems(tx: Queryable, sourceId: string, targetId: string): Promise<number> {
  const rows = await tx.query<{ n: number }>(
    `WITH inserted AS (
       INSERT INTO assistant_operation_item (operation_id, ordinal, item_id)
       SELECT $2, (row_number() OVER (ORDER BY ordinal) - 1)::int, item_id
       FROM assistant_operation_item WHERE operation_id = $1 AND status = 'failed'
       RETURNING 1)
     SELECT count(*)::int AS n FROM inserted`,
    [sourceId, targetId],
  );
  return rows[0]?.n ?? 0;
}

export interface LeasedItem {
  ordinal: number;
  item_id: string;
}

/** The batch currently leased to `owner`, with its lease extended (asking again = heartbeat). */
export async function renewOwnLease(
  tx: Queryable,
  operationId: string,
  owner: string,
  leaseSeconds: number,
): Promise<LeasedItem[]> {
  const rows = await tx.query<LeasedItem>(
    `UPDATE assistant_operation_item
     SET lease_expires_at = now() + make_interval(secs => $3)
     WHERE operation_id = $1 AND status = 'leased' AND lease_owner = $2
     RETURNING ordinal, item_id`,
    [operationId, owner, leaseSeconds],
  );
  return rows.sort((a, b) => a.ordinal - b.ordinal);
}

/** Returns expired leases to pending; reports how many and the lowest ordinal among them. */
export async function releaseExpiredLeases(
  tx: Queryable,
  operationId: string,
): Promise<{ released: number; lowestOrdinal: number | null }> {
  const rows = await tx.query<{ released: number; lowest: number | null }>(
    `WITH released AS (
       UPDATE assistant_operation_item
       SET status = 'pending', lease_owner = NULL, lease_expires_at = NULL, updated_at = now()
       WHERE operation_id = $1 AND status = 'leased' AND lease_expires_at < now()
       RETURNING ordinal)
     SELECT count(*)::int AS released, min(ordinal)::int AS lowest FROM released`,
    [operationId],
  );
  return { released: rows[0]?.released ?? 0, lowestOrdinal: rows[0]?.lowest ?? null };
}

/** Whether any of the operation's leases has expired (the partial index of leased items). */
export async function hasExpiredLeases(tx: Queryable, operationId: string): Promise<boolean> {
  const rows = await tx.query(
    `SELECT 1 FROM assistant_operation_item
     WHERE operation_id = $1 AND status = 'leased' AND lease_expires_at < now() LIMIT 1`,
    [operationId],
  );
  return rows.length > 0;
}

/** Returns the named items still leased to `owner` to pending. */
export async function releaseOwnedItems(
  tx: Queryable,
  operationId: string,
  owner: string,
  itemIds: readonly string[],
): Promise<{ released: number; lowestOrdinal: number | null }> {
  const rows = await tx.query<{ released: number; lowest: number | null }>(
    `WITH released AS (
       UPDATE assistant_operation_item
       SET status = 'pending', lease_owner = NULL, lease_expires_at = NULL, updated_at = now()
       WHERE operation_id = $1 AND status = 'leased' AND lease_owner = $2 AND item_id = ANY($3::text[])
       RETURNING ordinal)
     SELECT count(*)::int AS released, min(ordinal)::int AS lowest FROM released`,
    [operationId, owner, itemIds],
  );
  return { released: rows[0]?.released ?? 0, lowestOrdinal: rows[0]?.lowest ?? null };
}

/**
 * $1 operation id, $2 owner, $3 lease seconds, $4 cursor, $5 batch size → leased (ordinal,
 * item_id). Exported for the plan checks in the scale tests.
 */
export const LEASE_NEXT_SQL = `UPDATE assistant_operation_item
     SET status = 'leased', lease_owner = $2, lease_expires_at = now() + make_interval(secs => $3),
         attempts = attempts + 1, updated_at = now()
     WHERE operation_id = $1 AND ordinal = ANY(ARRAY(
       SELECT ordinal FROM assistant_operation_item
       WHERE operation_id = $1 AND status = 'pending' AND ordinal >= $4
       ORDER BY ordinal LIMIT $5
       FOR UPDATE SKIP LOCKED))
     RETURNING ordinal, item_id`;

/**
 * Leases the next `limit` pending items at or after `cursor` to `owner`. The scan starts at
 * the cursor so it never walks the rows already finished (which would make it O(N)).
 */
export async function leaseNext(
  tx: Queryable,
  operationId: string,
  owner: string,
  leaseSeconds: number,
  cursor: number,
  limit: number,
): Promise<LeasedItem[]> {
  const rows = await tx.query<LeasedItem>(LEASE_NEXT_SQL, [operationId, owner, leaseSeconds, cursor, limit]);
  return rows.sort((a, b) => a.ordinal - b.ordinal);
}

export async function countInFlight(tx: Queryable, operationId: string): Promise<number> {
  const rows = await tx.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM assistant_operation_item
     WHERE operation_id = $1 AND status = 'leased'`,
    [operationId],
  );
  return rows[0]?.n ?? 0;
}

export interface ItemState {
  ordinal: number;
  item_id: string;
  status: ItemStatus;
  lease_owner: string | null;
  lease_expired: boolean;
}

/** The current state of the named items (unknown ids are simply absent). */
export async function findItems(tx: Queryable, operationId: string, itemIds: readonly string[]): Promise<ItemState[]> {
  return tx.query<ItemState>(
    `SELECT ordinal, item_id, status, lease_owner,
            coalesce(lease_expires_at < now(), false) AS lease_expired
     FROM assistant_operation_item
     WHERE operation_id = $1 AND item_id = ANY($2::text[])`,
    [operationId, itemIds],
  );
}

/**
 * Which items a report may record: pending ones, those leased to the reporter ($3), and those
 * whose lease has expired. An item leased to someone else whose lease is live is left alone (a
 * late worker never overwrites the one that took its lease over), and so is one already recorded.
 */
const RECORDABLE = `(i.status = 'pending'
         OR (i.status = 'leased' AND (i.lease_owner = $3 OR i.lease_expires_at < now())))`;

/**
 * $1 operation id, $2 item ids, $3 reporter → (ordinal, item_id) of the items this statement
 * completed. Matching by item id and recording in one statement is what keeps a report to one
 * pass over the batch's index entries; the ids it did not record are looked up afterwards, only
 * when there are any (see recordResults).
 */
export const RECORD_COMPLETED_SQL = `UPDATE assistant_operation_item AS i
     SET status = 'completed', lease_owner = NULL, lease_expires_at = NULL, reason = NULL, updated_at = now()
     WHERE i.operation_id = $1 AND i.item_id = ANY($2::text[]) AND ${RECORDABLE}
     RETURNING i.ordinal, i.item_id`;

/**
 * $1 operation id, $2 item ids, $3 reporter, $4 reasons (same order as $2) → (ordinal, item_id)
 * of the items this statement failed. The `item_id = ANY($2)` condition gives the planner the
 * index path; joining the unnest alone can pick a nested loop over the whole array.
 */
export const RECORD_FAILED_SQL = `UPDATE assistant_operation_item AS i
     SET status = 'failed', reason = f.reason, lease_owner = NULL, lease_expires_at = NULL, updated_at = now()
     FROM unnest($2::text[], $4::text[]) AS f(item_id, reason)
     WHERE i.operation_id = $1 AND i.item_id = ANY($2::text[]) AND i.item_id = f.item_id AND ${RECORDABLE}
     RETURNING i.ordinal, i.item_id`;

export interface RecordedItem {
  ordinal: number;
  item_id: string;
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

/** Marks every item not yet recorded as abandoned (cancel, forced complete). */
export async function abandonUnrecorded(tx: Queryable, operationId: string): Promise<number> {
  const rows = await tx.query<{ n: number }>(
    `WITH abandoned AS (
       UPDATE assistant_operation_item
       SET status = 'abandoned', lease_owner = NULL, lease_expires_at = NULL, updated_at = now()
       WHERE operation_id = $1 AND status IN ('pending', 'leased')
       RETURNING 1)
     SELECT count(*)::int AS n FROM abandoned`,
    [operationId],
  );
  return rows[0]?.n ?? 0;
}

export interface FailureRow {
  ordinal: number;
  item_id: string;
  reason: string | null;
}

/** A page of failed items after `afterOrdinal`, in order (keyset pagination). */
export async function failuresPage(
  tx: Queryable,
  operationId: string,
  afterOrdinal: number,
  limit: number,
): Promise<FailureRow[]> {
  return tx.query<FailureRow>(
    `SELECT ordinal, item_id, reason FROM assistant_operation_item
     WHERE operation_id = $1 AND status = 'failed' AND ordinal > $2
     ORDER BY ordinal LIMIT $3`,
    [operationId, afterOrdinal, limit],
  );
}
