/**
 * Operator bulk actions (operator_bulk_action, operator_bulk_action_target): the preview of a
 * filter, the action created with its targets fixed in one transaction (INSERT … SELECT, so an
 * operation created afterwards is not caught), and the runner's claims and outcomes.
 *
 * A target is claimed by a conditional update (pending → applying, FOR UPDATE SKIP LOCKED), so
 * two servers running the same action never take the same operation. The tool call that follows
 * commits its change and its audit event (whose data names the bulk action) in its own
 * transaction; a claim left `applying` by a server that stopped is settled by that event: there,
 * applied; absent, pending again ({@link releaseStaleBulkTargets}), unless a transaction holds the
 * operation's row (a long cancel or retry still running). So each operation is changed at most
 * once by an action. While applying, the target's detail holds the claim: its time and a random
 * token (`<time> claim <uuid>`). The outcome and the release of a claim match that token, so a
 * server whose claim was settled and taken by another cannot record or release the other's.
 *
 * Costs: the preview and the creation scan the matching operations once (the operator view's
 * filter, operator-view-repo.ts); a claim and an outcome are O(1) statements on the targets'
 * primary key (bulk_action_id, operation_id). The sweep reads the running actions (a scan of
 * operator_bulk_action, one row per action) and their targets by that key.
 */
import { randomUUID } from 'node:crypto';
import type { BulkActionName, BulkActionStatus, BulkFilter, BulkTargetState } from '../../domain/bulk-action.ts';
import { AppError } from '../../domain/errors.ts';
import type { OperationStatus } from '../../domain/operation.ts';
import type { Database, Queryable } from '../db/db.ts';
import { filterClause } from './operator-filter.ts';

/** Example operations a preview shows. */
export const PREVIEW_SAMPLE = 5;
/** A claim older than this, whose server said nothing since, is settled by another server. */
export const STALE_CLAIM_SECONDS = 60;

/** The matching statement's FROM and WHERE, on `o` (the operation) and `g` (its organization). */
function matching(filter: BulkFilter, first: number): { sql: string; params: unknown[] } {
  const where = filterClause(
    {
      search: filter.q,
      organizationName: filter.org,
      status: filter.status,
      operationType: filter.type,
      createdBefore: filter.created_before,
      createdAfter: filter.created_after,
    },
    first,
  );
  return {
    sql: `assistant_operation o JOIN organization g ON g.id = o.organization_id WHERE ${where.sql}`,
    params: where.params,
  };
}

export interface BulkPreview {
  matched: number;
  /** How many of them are in each status. */
  by_status: Partial<Record<OperationStatus, number>>;
  /** The newest few. */
  sample: { operation_id: string; organization: string; operation_type: string; status: string; created_at: string }[];
}

/** How many operations `filter` matches now, by status, and the newest few: one statement. */
export async function previewBulkAction(db: Queryable, filter: BulkFilter): Promise<BulkPreview> {
  const m = matching(filter, 1);
  const [row] = await db.query<BulkPreview>(
    `/* bulk action: preview */
     WITH m AS MATERIALIZED (
       SELECT o.id, g.name, o.operation_type, o.status, o.created_at FROM ${m.sql}
     )
     SELECT (SELECT count(*)::int FROM m) AS matched,
       coalesce((SELECT json_object_agg(status, n) FROM (SELECT status, count(*)::int AS n FROM m GROUP BY status) s),
                '{}'::json) AS by_status,
       coalesce((SELECT json_agg(s) FROM (
         SELECT id AS operation_id, name AS organization, operation_type, status, created_at FROM m
         ORDER BY created_at DESC, id DESC LIMIT ${PREVIEW_SAMPLE}) s), '[]'::json) AS sample`,
    m.params,
  );
  return row as BulkPreview;
}

export interface NewBulkAction {
  action: BulkActionName;
  filter: BulkFilter;
  actor: string;
  /** OPSPAD_MAX_BULK_OPERATIONS */
  maxOperations: number;
  /** The count the operator saw in the preview: a different one now refuses the action. */
  expectedMatched?: number;
}

export interface BulkActionRecord {
  id: string;
  action: BulkActionName;
  filter: BulkFilter;
  actor: string;
  status: BulkActionStatus;
  matched: number;
  applied: number;
  skipped: number;
  pending: number;
  created_at: Date;
  finished_at: Date | null;
}

const RECORD_COLUMNS = `a.id, a.action, a.filter, a.actor, a.status, a.matched, a.applied, a.skipped,
  greatest(a.matched - a.applied - a.skipped, 0) AS pending, a.created_at, a.finished_at`;

/**
 * Creates the action and fixes its targets, in one transaction: what matches at this moment,
 * at most `maxOperations` of them (more refuses the action and changes nothing). An action that
 * matches nothing is created done.
 */
export async function createBulkAction(db: Database, input: NewBulkAction): Promise<BulkActionRecord> {
  const id = randomUUID();
  return db.transaction(async (tx) => {
    await tx.query(
      `INSERT INTO operator_bulk_action (id, action, filter, actor, matched) VALUES ($1, $2, $3::jsonb, $4, 0)`,
      [id, input.action, JSON.stringify(input.filter), input.actor],
    );
    const m = matching(input.filter, 3);
    const [inserted] = await tx.query<{ n: number }>(
      `/* bulk action: fix its targets */
       WITH t AS (
         INSERT INTO operator_bulk_action_target (bulk_action_id, operation_id, organization_id)
         SELECT $1, o.id, o.organization_id FROM ${m.sql}
         LIMIT $2::int + 1
         RETURNING 1)
       SELECT count(*)::int AS n FROM t`,
      [id, input.maxOperations, ...m.params],
    );
    let matched = inserted?.n ?? 0;
    if (matched > input.maxOperations) {
      // Refused (the transaction rolls back): the whole count, for the message.
      const all = matching(input.filter, 1);
      const [counted] = await tx.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${all.sql}`, all.params);
      matched = counted?.n ?? matched;
      throw new AppError(
        'validation_failed',
        `Invalid input: filter: matches ${matched} operations, more than the ${input.maxOperations} one bulk action takes (OPSPAD_MAX_BULK_OPERATIONS). Narrow the filter (an organization, a type, a status, created_before/created_after) and run it in parts.`,
        {
          issues: [{ field: 'filter', message: `matches ${matched} operations, more than ${input.maxOperations}` }],
          total_issues: 1,
          matched,
          max_operations: input.maxOperations,
        },
      );
    }
    if (input.expectedMatched !== undefined && input.expectedMatched !== matched) {
      throw new AppError(
        'conflict',
        `The filter matches ${matched} operations now, not the ${input.expectedMatched} of the preview: preview it again and confirm the new count.`,
        { matched, expected_matched: input.expectedMatched },
      );
    }
    const [record] = await tx.query<BulkActionRecord>(
      `UPDATE operator_bulk_action a SET matched = $2,
         status = CASE WHEN $2 = 0 THEN 'done' ELSE a.status END,
         finished_at = CASE WHEN $2 = 0 THEN now() END
       WHERE a.id = $1 RETURNING ${RECORD_COLUMNS}`,
      [id, matched],
    );
    return record as BulkActionRecord;
  });
}

export async function getBulkAction(db: Queryable, id: string): Promise<BulkActionRecord | null> {
  const [row] = await db.query<BulkActionRecord>(
    `SELECT ${RECORD_COLUMNS} FROM operator_bulk_action a WHERE a.id = $1`,
    [id],
  );
  return row ?? null;
}

/** The newest actions first (the created_at index). */
export async function listBulkActions(db: Queryable, limit: number): Promise<BulkActionRecord[]> {
  return db.query<BulkActionRecord>(
    `SELECT ${RECORD_COLUMNS} FROM operator_bulk_action a ORDER BY a.created_at DESC, a.id DESC LIMIT $1`,
    [limit],
  );
}

export interface BulkTargetOutcome {
  operation_id: string;
  organization_id: string;
  state: BulkTargetState;
  detail: string | null;
}

/** An action's targets in one state, by operation id, after `afterId` (a keyset page). */
export async function bulkActionTargets(
  db: Queryable,
  id: string,
  state: BulkTargetState,
  page: { limit: number; afterId?: string },
): Promise<BulkTargetOutcome[]> {
  return db.query<BulkTargetOutcome>(
    `SELECT operation_id, organization_id, state, detail FROM operator_bulk_action_target
     WHERE bulk_action_id = $1 AND state = $2 AND ($3::uuid IS NULL OR operation_id > $3::uuid)
     ORDER BY operation_id LIMIT $4`,
    [id, state, page.afterId ?? null, page.limit],
  );
}

/** A target a runner claimed. */
export interface ClaimedTarget {
  action: BulkActionName;
  actor: string;
  operation_id: string;
  organization_id: string;
  /** The claim's token (the target's detail while it is applying): its outcome and release name it. */
  claim: string;
}

/** The time in a claim's detail (`<time> claim <uuid>`; a claim of older servers is the time alone). */
const CLAIMED_AT = `split_part(t.detail, ' claim ', 1)::timestamptz`;

/**
 * Claims up to `limit` pending targets of a running action (pending → applying), the first by
 * operation id after `afterId` (the runner's last), in that order; none when none is left. A
 * claim reads the action's targets from `afterId` on in the primary key, so claiming a few at a
 * time keeps running an action far from O(targets²) whatever plan the statement gets.
 */
export async function claimBulkTargets(
  db: Queryable,
  id: string,
  afterId: string | null,
  limit: number,
): Promise<ClaimedTarget[]> {
  return db.query<ClaimedTarget>(
    `/* bulk action: claim targets */
     WITH next AS (
       SELECT t.bulk_action_id, t.operation_id FROM operator_bulk_action_target t
       WHERE t.bulk_action_id = $1 AND t.operation_id > $2::uuid AND t.state = 'pending'
         AND EXISTS (SELECT 1 FROM operator_bulk_action a WHERE a.id = $1 AND a.status = 'running')
       ORDER BY t.operation_id LIMIT $3
       FOR UPDATE OF t SKIP LOCKED),
     claimed AS (
       UPDATE operator_bulk_action_target t
       SET state = 'applying', detail = now()::text || ' claim ' || gen_random_uuid()::text
       FROM next WHERE t.bulk_action_id = next.bulk_action_id AND t.operation_id = next.operation_id
       RETURNING t.operation_id, t.organization_id, t.detail AS claim)
     SELECT a.action, a.actor, c.operation_id, c.organization_id, c.claim
     FROM claimed c JOIN operator_bulk_action a ON a.id = $1
     ORDER BY c.operation_id`,
    // The nil UUID sorts first: a range of the primary key either way.
    [id, afterId ?? '00000000-0000-0000-0000-000000000000', limit],
  );
}

/** Puts claimed targets a stopping runner did not apply back to pending, while the claims are its own. */
export async function releaseBulkClaims(db: Queryable, id: string, claimed: readonly ClaimedTarget[]): Promise<void> {
  if (claimed.length === 0) {
    return;
  }
  await db.query(
    `UPDATE operator_bulk_action_target t SET state = 'pending', detail = NULL
     FROM unnest($2::uuid[], $3::text[]) AS c(operation_id, claim)
     WHERE t.bulk_action_id = $1 AND t.operation_id = c.operation_id AND t.state = 'applying'
       AND t.detail = c.claim`,
    [id, claimed.map((t) => t.operation_id), claimed.map((t) => t.claim)],
  );
}

/** A target's operation as it is now, just before it is applied. */
export interface TargetOperation {
  conversation_id: string;
  status: OperationStatus;
}

/** The target's operation now (null when it is gone): its primary key. */
export async function targetOperation(db: Queryable, target: ClaimedTarget): Promise<TargetOperation | null> {
  const [row] = await db.query<TargetOperation>(
    `SELECT o.conversation_id, o.status FROM assistant_operation o WHERE o.id = $1 AND o.organization_id = $2`,
    [target.operation_id, target.organization_id],
  );
  return row ?? null;
}

/**
 * Records a claimed target's outcome (its detail replaces the claim's) and counts it on the
 * action, while the claim is still this runner's: nothing once another server settled it.
 */
export async function finishBulkTarget(
  db: Queryable,
  id: string,
  target: ClaimedTarget,
  outcome: { state: 'applied' | 'skipped'; detail: string | null },
): Promise<void> {
  await db.query(
    `/* bulk action: a target's outcome */
     WITH t AS (
       UPDATE operator_bulk_action_target SET state = $3, detail = $4
       WHERE bulk_action_id = $1 AND operation_id = $2 AND state = 'applying' AND detail = $5
       RETURNING state)
     UPDATE operator_bulk_action a
     SET applied = a.applied + (SELECT count(*) FROM t WHERE state = 'applied'),
         skipped = a.skipped + (SELECT count(*) FROM t WHERE state = 'skipped')
     WHERE a.id = $1`,
    [id, target.operation_id, outcome.state, outcome.detail, target.claim],
  );
}

/** Marks the action done when no target is left pending or applying; true when it is done. */
export async function finishBulkActionIfDone(db: Queryable, id: string): Promise<boolean> {
  const rows = await db.query<{ id: string }>(
    `UPDATE operator_bulk_action SET status = 'done', finished_at = now()
     WHERE id = $1 AND status = 'running'
       AND NOT EXISTS (SELECT 1 FROM operator_bulk_action_target
                       WHERE bulk_action_id = $1 AND state IN ('pending', 'applying'))
     RETURNING id`,
    [id],
  );
  return rows.length > 0;
}

/** The actions still running (a server that stopped left them; or another server runs them). */
export async function runningBulkActions(db: Queryable): Promise<string[]> {
  const rows = await db.query<{ id: string }>(
    `SELECT id FROM operator_bulk_action WHERE status = 'running' ORDER BY created_at`,
  );
  return rows.map((r) => r.id);
}

/**
 * Settles the claims of running actions older than {@link STALE_CLAIM_SECONDS} (their server
 * stopped between the claim and the outcome): applied when the operation's audit trail has an
 * event naming the action, pending again otherwise. Returns how many were settled.
 */
export async function releaseStaleBulkTargets(db: Database, staleSeconds = STALE_CLAIM_SECONDS): Promise<number> {
  return db.transaction(async (tx) => {
    const rows = await tx.query<{ bulk_action_id: string; applied: boolean }>(
      `/* bulk action: settle stale claims */
       WITH stale AS (
         SELECT t.bulk_action_id, t.operation_id,
           EXISTS (SELECT 1 FROM operation_event e
                   WHERE e.operation_id = t.operation_id AND e.data->>'bulk_action_id' = t.bulk_action_id::text) AS applied
         FROM operator_bulk_action a
         JOIN operator_bulk_action_target t ON t.bulk_action_id = a.id
         WHERE a.status = 'running' AND t.state = 'applying'
           AND CASE WHEN t.state = 'applying' THEN ${CLAIMED_AT} END < now() - make_interval(secs => $1)
           -- Not while a transaction changes the operation (a long cancel or retry of a live server).
           AND NOT (EXISTS (SELECT 1 FROM assistant_operation o WHERE o.id = t.operation_id)
                    AND NOT EXISTS (SELECT 1 FROM assistant_operation o WHERE o.id = t.operation_id
                                    FOR UPDATE SKIP LOCKED))
         FOR UPDATE OF t SKIP LOCKED)
       UPDATE operator_bulk_action_target t
       SET state = CASE WHEN s.applied THEN 'applied' ELSE 'pending' END,
           detail = CASE WHEN s.applied THEN 'applied (settled after its server stopped)' END
       FROM stale s WHERE t.bulk_action_id = s.bulk_action_id AND t.operation_id = s.operation_id
       RETURNING t.bulk_action_id, s.applied`,
      [staleSeconds],
    );
    const applied = new Map<string, number>();
    for (const row of rows.filter((r) => r.applied)) {
      applied.set(row.bulk_action_id, (applied.get(row.bulk_action_id) ?? 0) + 1);
    }
    for (const [actionId, n] of applied) {
      await tx.query(`UPDATE operator_bulk_action SET applied = applied + $2 WHERE id = $1`, [actionId, n]);
    }
    return rows.length;
  });
}
