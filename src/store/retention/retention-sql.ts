/**
 * The SQL retention runs, one function per statement (the runner is retention.ts).
 *
 * Cost: every statement reads or deletes at most `limit` rows through an index range that
 * starts where the last one stopped — a key range of the item table's primary key, an event id
 * after the operation's progress, an id after a table's watermark — so it costs O(limit)
 * whatever the table holds, and never walks the index entries of rows deleted before (they stay
 * until vacuum). Finding what is due reads partial indexes that hold only what retention has
 * yet to visit (retention/schema.ts). `test/integration/retention-plans.test.ts` checks the
 * plans and their buffer counts.
 *
 * Scope: retention is global (all organizations), and so is every statement here; each is keyed
 * by one operation, execution or pad, or by ids it just read. Only finished operations
 * (completed, cancelled: terminal states) and ended executions are touched: each deleting
 * transaction first locks the operation's row `FOR NO KEY UPDATE` with the status in its
 * condition, so a live operation's rows are never deleted. No live work waits on that lock:
 * leases and records lock live operations only, and event inserts take key-share locks, which
 * it does not block; only an action on that same finished operation (a `retry_failed`) may wait
 * for it, for one step. Pad versions are deleted below the newest ones kept, never the pad.
 *
 * The SQL names the item table's columns in one place only (deleteItemRange; firstPrunedFailure
 * reads operations/failure-sql.ts), so a change of the item table's layout changes that one.
 */
import type { OperationState } from '../../domain/operation.ts';
import type { PrunedFailures } from '../../domain/retention.ts';
import type { Queryable } from '../db/db.ts';
import { orderedFailures } from '../operations/failure-sql.ts';
import { FINISHED_STATUSES_SQL } from '../operations/status-sql.ts';

const FINISHED = `status IN (${FINISHED_STATUSES_SQL})`;
/** The largest bigint: the upper end of "every id" in a row comparison. */
const MAX_ID = '9223372036854775807';

/** `now()` minus $n milliseconds, as SQL. */
const before = (param: string) => `now() - make_interval(secs => ${param}::float8 / 1000)`;

export type OperationStage = 'items' | 'events';

export interface FinishedOperation {
  id: string;
  total_items: number;
  /** Progress of an earlier run that ran out of time: the ordinal or event id reached. */
  through: number | null;
}

/**
 * Finished operations whose item rows (or batch events) are due: finished more than `afterMs`
 * ago and not pruned yet, the longest finished first. Reads the stage's partial index (only
 * operations not pruned yet are in it), never state_json's query_params.
 */
export async function finishedOperationsDue(
  db: Queryable,
  stage: OperationStage,
  afterMs: number,
  limit: number,
): Promise<FinishedOperation[]> {
  return db.query<FinishedOperation>(
    `SELECT id, total_items, (state_json->>'${stage}_pruned_through')::float8 AS through
     FROM assistant_operation
     WHERE ${FINISHED} AND NOT (state_json ? '${stage}_pruned_at') AND updated_at < ${before('$1')}
     ORDER BY updated_at LIMIT $2`,
    [afterMs, limit],
  );
}

/**
 * Locks a finished operation's row for this transaction and returns its failure summary so
 * far, or null when it is not (or no longer) a finished operation: then nothing is deleted.
 */
export async function lockFinishedOperation(
  tx: Queryable,
  operationId: string,
): Promise<{ pruned_failures: PrunedFailures | null } | null> {
  const rows = await tx.query<{ pruned_failures: PrunedFailures | null }>(
    `SELECT state_json->'pruned_failures' AS pruned_failures FROM assistant_operation
     WHERE id = $1 AND ${FINISHED} FOR NO KEY UPDATE`,
    [operationId],
  );
  return rows[0] ?? null;
}

/**
 * The ordinal of the first failure past the `keep` kept ones (null when there are no more):
 * failure rows from it on are deleted, the ones before it kept. O(keep) (store/operations/failure-sql.ts).
 * On a run that resumes, the failures kept so far have moved to the kept table, which this reads
 * too, so the answer is the same.
 */
export async function firstPrunedFailure(db: Queryable, operationId: string, keep: number): Promise<number | null> {
  const rows = await db.query<{ ordinal: number }>(
    `SELECT ordinal FROM ${orderedFailures({ operation: '$1', offset: '$2::int', limit: '1' })} past`,
    [operationId, keep],
  );
  return rows[0]?.ordinal ?? null;
}

export interface DeletedItems {
  status: string;
  reason: string | null;
  n: number;
}

/**
 * Deletes the items with ordinals in [from, to), moves the kept failures among them (those
 * before `firstPrunedFailure`) into assistant_operation_kept_failure, and says what went for
 * good, by status and reason. A range of the primary key (operation_id, ordinal): O(to - from).
 * Every row of the range leaves the item table, so its index pages empty out and are freed.
 */
export async function deleteItemRange(
  tx: Queryable,
  operationId: string,
  from: number,
  to: number,
  firstPrunedFailureOrdinal: number | null,
): Promise<DeletedItems[]> {
  return tx.query<DeletedItems>(
    `WITH gone AS (
       DELETE FROM assistant_operation_item
       WHERE operation_id = $1 AND ordinal >= $2 AND ordinal < $3
       RETURNING ordinal, item_id, status, attempts, reason, updated_at,
                 status = 'failed' AND reason IS NOT NULL AND ordinal < $4 AS kept),
     moved AS (
       INSERT INTO assistant_operation_kept_failure (operation_id, ordinal, item_id, attempts, reason, updated_at)
       SELECT $1, ordinal, item_id, attempts, reason, updated_at FROM gone WHERE kept)
     SELECT status, reason, count(*)::int AS n FROM gone WHERE NOT kept GROUP BY status, reason`,
    [operationId, from, to, firstPrunedFailureOrdinal ?? 2_147_483_647],
  );
}

/**
 * Records a stage's progress on the operation (its lock held): `through` while it runs, or the
 * time it ended (`done`), in state_json. updated_at stays the finish time.
 */
export async function saveOperationProgress(
  tx: Queryable,
  operationId: string,
  stage: OperationStage,
  progress: { through: number; done: boolean; prunedFailures?: PrunedFailures },
): Promise<void> {
  const set: Partial<OperationState> = progress.prunedFailures ? { pruned_failures: progress.prunedFailures } : {};
  await tx.query(
    `UPDATE assistant_operation
     SET state_json = CASE WHEN $3
       THEN (state_json || $4::jsonb || jsonb_build_object('${stage}_pruned_at', now())) - '${stage}_pruned_through'
       ELSE state_json || $4::jsonb || jsonb_build_object('${stage}_pruned_through', $2::float8) END
     WHERE id = $1`,
    [operationId, progress.through, progress.done, JSON.stringify(set)],
  );
}

/**
 * Deletes, of the next `limit` events of the operation after event id `afterId`, those whose
 * kind is one of `kinds` (the others stay), and says where the scan stopped and how many it read.
 * A range of the (operation_id, id) index, then the primary key: O(limit). The range is written
 * as row comparisons, which only that index can serve: with `operation_id = $1 AND id > $2
 * ORDER BY id`, the planner walked the primary key from `$2` and filtered on the operation —
 * through every other operation's events — whenever this one held a large share of the table
 * (test/integration/retention-plans.test.ts).
 */
export async function deleteEventRange(
  tx: Queryable,
  operationId: string,
  afterId: number,
  limit: number,
  kinds: readonly string[],
): Promise<{ last_id: number | null; scanned: number; deleted: number }> {
  const rows = await tx.query<{ last_id: number | null; scanned: number; deleted: number }>(
    `WITH scanned AS (
       SELECT id, kind FROM operation_event
       WHERE (operation_id, id) > ($1::uuid, $2::bigint) AND (operation_id, id) <= ($1::uuid, ${MAX_ID})
       ORDER BY operation_id, id LIMIT $3),
     gone AS (
       DELETE FROM operation_event
       WHERE id = ANY(ARRAY(SELECT id FROM scanned WHERE kind = ANY($4::text[])))
       RETURNING 1)
     SELECT (SELECT max(id) FROM scanned)::float8 AS last_id, (SELECT count(*) FROM scanned)::int AS scanned,
            (SELECT count(*) FROM gone)::int AS deleted`,
    [operationId, afterId, limit, kinds],
  );
  return rows[0] ?? { last_id: null, scanned: 0, deleted: 0 };
}

/** Ended executions whose traces are due (ended more than `afterMs` ago), the oldest first. */
export async function endedExecutionsDue(db: Queryable, afterMs: number, limit: number): Promise<string[]> {
  const rows = await db.query<{ id: string }>(
    `SELECT id FROM assistant_execution
     WHERE status = 'ended' AND traces_pruned_at IS NULL AND ended_at < ${before('$1')}
     ORDER BY ended_at LIMIT $2`,
    [afterMs, limit],
  );
  return rows.map((r) => r.id);
}

/**
 * Deletes the next `limit` traces of an ended execution after trace id `afterId`. A range of
 * the (execution_id, id) index (row comparisons, as above): O(limit). An execution's traces go all together (its `seq`
 * numbers count from its first trace, so they never change for the ones a client still sees).
 */
export async function deleteExecutionTraces(
  tx: Queryable,
  executionId: string,
  afterId: number,
  limit: number,
): Promise<{ last_id: number | null; deleted: number }> {
  const rows = await tx.query<{ last_id: number | null; deleted: number }>(
    `WITH gone AS (
       DELETE FROM scratchpad_trace
       WHERE id = ANY(ARRAY(
         SELECT id FROM scratchpad_trace
         WHERE (execution_id, id) > ($1::uuid, $2::bigint) AND (execution_id, id) <= ($1::uuid, ${MAX_ID})
         ORDER BY execution_id, id LIMIT $3))
       RETURNING id)
     SELECT max(id)::float8 AS last_id, count(*)::int AS deleted FROM gone`,
    [executionId, afterId, limit],
  );
  return rows[0] ?? { last_id: null, deleted: 0 };
}

/** Marks an ended execution's traces as deleted (an execution still running is never marked). */
export async function markTracesPruned(tx: Queryable, executionId: string): Promise<void> {
  await tx.query(`UPDATE assistant_execution SET traces_pruned_at = now() WHERE id = $1 AND status = 'ended'`, [
    executionId,
  ]);
}

/** An append-only table retention prunes by the age of its rows, past a watermark. */
export interface AgedTable {
  table: 'context_render' | 'scratchpad_event' | 'scratchpad_trace';
  /** Its time column. */
  at: string;
  /** Which of its rows this path deletes (others are left to another path). */
  deletable: string;
}

export const AGED_TABLES = {
  contextRenders: { table: 'context_render', at: 'created_at', deletable: 'true' },
  scratchpadEvents: { table: 'scratchpad_event', at: 'created_at', deletable: 'true' },
  /** Traces of no execution (the conversation's own scope); an execution's go with it. */
  conversationTraces: { table: 'scratchpad_trace', at: 'at', deletable: 'execution_id IS NULL' },
} as const satisfies Record<string, AgedTable>;

/** Where the last scan of `table` stopped (0: from the start). */
export async function readWatermark(db: Queryable, table: string): Promise<number> {
  const rows = await db.query<{ last_id: number }>(
    'SELECT last_id::float8 AS last_id FROM retention_watermark WHERE table_name = $1',
    [table],
  );
  return rows[0]?.last_id ?? 0;
}

export interface ScannedRow {
  id: number;
  /** Older than the period: rows are in id order, and ids follow time closely but not exactly. */
  due: boolean;
  deletable: boolean;
}

/** The next `limit` rows of `table` after `afterId`, by primary key: O(limit). */
export async function scanAfter(
  db: Queryable,
  aged: AgedTable,
  afterId: number,
  afterMs: number,
  limit: number,
): Promise<ScannedRow[]> {
  return db.query<ScannedRow>(
    `SELECT id::float8 AS id, ${aged.at} < ${before('$2')} AS due, ${aged.deletable} AS deletable
     FROM ${aged.table} WHERE id > $1 ORDER BY id LIMIT $3`,
    [afterId, afterMs, limit],
  );
}

/** Deletes rows of `table` by id (the primary key): O(ids). */
export async function deleteByIds(tx: Queryable, table: AgedTable['table'], ids: readonly number[]): Promise<number> {
  if (ids.length === 0) {
    return 0;
  }
  const rows = await tx.query<{ n: number }>(
    `WITH gone AS (DELETE FROM ${table} WHERE id = ANY($1::bigint[]) RETURNING 1) SELECT count(*)::int AS n FROM gone`,
    [ids],
  );
  return rows[0]?.n ?? 0;
}

/** Moves `table`'s watermark forward to `lastId` (never back). */
export async function saveWatermark(tx: Queryable, table: string, lastId: number): Promise<void> {
  await tx.query(
    `INSERT INTO retention_watermark (table_name, last_id) VALUES ($1, $2)
     ON CONFLICT (table_name) DO UPDATE
       SET last_id = GREATEST(retention_watermark.last_id, excluded.last_id), updated_at = now()`,
    [table, lastId],
  );
}

export interface PadDue {
  organization_id: string;
  conversation_id: string;
  version: number;
  versions_pruned_through: number;
}

/**
 * Pads with more than `keep` versions not pruned yet, those with the most first. A range of the
 * expression index on (version - versions_pruned_through): only pads over the limit are read.
 */
export async function padsOverVersionLimit(db: Queryable, keep: number, limit: number): Promise<PadDue[]> {
  return db.query<PadDue>(
    `SELECT organization_id, conversation_id, version, versions_pruned_through FROM scratchpad
     WHERE (version - versions_pruned_through) > $1
     ORDER BY (version - versions_pruned_through) DESC LIMIT $2`,
    [keep, limit],
  );
}

/**
 * Deletes the pad's versions in (fromVersion, throughVersion] — never the newest ones, which
 * the caller keeps — and records how far versions are pruned. A range of the versions' primary
 * key. The pad's row is updated last, so a concurrent write of the pad waits (if at all) only
 * for this transaction's commit.
 */
export async function deletePadVersions(tx: Queryable, pad: PadDue, throughVersion: number): Promise<number> {
  const rows = await tx.query<{ n: number }>(
    `WITH gone AS (
       DELETE FROM scratchpad_version
       WHERE organization_id = $1 AND conversation_id = $2 AND version > $3 AND version <= $4
       RETURNING 1)
     SELECT count(*)::int AS n FROM gone`,
    [pad.organization_id, pad.conversation_id, pad.versions_pruned_through, throughVersion],
  );
  await tx.query(
    `UPDATE scratchpad SET versions_pruned_through = $3
     WHERE organization_id = $1 AND conversation_id = $2 AND versions_pruned_through < $3`,
    [pad.organization_id, pad.conversation_id, throughVersion],
  );
  return rows[0]?.n ?? 0;
}

/**
 * Operator bulk actions done and older than the period, oldest first (by creation: the index
 * they have; an action runs for seconds).
 */
export async function finishedBulkActionsDue(db: Queryable, afterMs: number, limit: number): Promise<string[]> {
  const rows = await db.query<{ id: string }>(
    `SELECT id FROM operator_bulk_action WHERE status = 'done' AND created_at < ${before('$1')}
     ORDER BY created_at LIMIT $2`,
    [afterMs, limit],
  );
  return rows.map((row) => row.id);
}

/** Deletes a bulk action and its targets; returns the targets deleted. */
export async function deleteBulkAction(tx: Queryable, id: string): Promise<number> {
  const rows = await tx.query<{ n: number }>(
    `WITH gone AS (DELETE FROM operator_bulk_action_target WHERE bulk_action_id = $1 RETURNING 1),
          action AS (DELETE FROM operator_bulk_action WHERE id = $1)
     SELECT count(*)::int AS n FROM gone`,
    [id],
  );
  return rows[0]?.n ?? 0;
}
