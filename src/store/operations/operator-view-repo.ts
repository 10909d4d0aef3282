/**
 * What the operator view (`/admin/operations`) reads: every organization's operations. Operators
 * see everything; tenants never reach these functions (the API scopes by organization).
 *
 * Each function is one statement, whatever the number of rows it returns: a page of the list is
 * one query, its in-flight counts, pace and last failure included (correlated subqueries on the
 * small partial indexes), never one query per row. Each statement opens with a comment naming
 * it, so it can be told apart in pg_stat_activity.
 *
 * Costs:
 * - The list filters and ranks every matching operation (a scan of assistant_operation, one
 *   probe of the (operation_id, item_id) index per operation when searching by item id), then
 *   reads the page's rows: O(operations) for the ranking, O(page) for the rest. The ranking is
 *   by creation (created_at, id), which never changes, so rows keep their place as they run.
 * - The pace reads the newest {@link PACE_EVENTS} audit-trail entries of each active operation
 *   on the page (the (operation_id, id) index, backwards).
 * - Failure groups read the operation's failed items once (the failed-items partial index);
 *   the example ids of each group on the page come from that index again, at most
 *   {@link GROUP_EXAMPLES} per group.
 */
import type { OperationStatus } from '../../domain/operation.ts';
import type { PrunedFailures } from '../../domain/retention.ts';
import type { Queryable } from '../db/db.ts';
import { IN_FLIGHT_COLUMN } from '../leases/item-sql.ts';
import type { OperationEvent } from './event-repo.ts';
import { allFailures, orderedFailures } from './failure-sql.ts';
import { filterClause, type OperatorListFilter } from './operator-filter.ts';

/** How far back the pace looks. */
export const PACE_WINDOW_SECONDS = 60;
/** At most this many recent audit-trail entries per operation feed its pace. */
export const PACE_EVENTS = 200;
/** Example item ids shown per failure reason. */
export const GROUP_EXAMPLES = 3;
/** Audit-trail kinds the operator view leaves out of the trail: one per batch, the pace counts them. */
export const BATCH_EVENT_KINDS = ['batch_leased', 'batch_recorded'] as const;

/** One operation as a row of the operator view. */
export interface OperatorOperationRow {
  id: string;
  organization_id: string;
  organization_name: string;
  conversation_id: string;
  operation_type: string;
  status: OperationStatus;
  execution: string | null;
  total_items: number;
  completed_count: number;
  failed_count: number;
  abandoned_count: number;
  in_flight_count: number;
  paused_reason: string | null;
  paused_by: string | null;
  retry_of: string | null;
  created_at: Date;
  updated_at: Date;
  /** Items recorded within the last `pace_seconds` (active operations; 0 otherwise). */
  pace_items: number;
  pace_seconds: number;
  last_failure_item: string | null;
  last_failure_reason: string | null;
}

export interface OperatorOperationDetail extends OperatorOperationRow {
  notes: string | null;
  batch_size: number | null;
  max_parallel_batches: number | null;
  max_failure_rate: number | null;
  /** Retention's part of the state (when item rows were deleted, the deleted failures by reason). */
  pruned: { items_pruned_at?: string; items_pruned_through?: number; pruned_failures?: PrunedFailures };
}

/** Every row's columns; `o` is the operation, `g` its organization, joined with {@link ROW_LATERALS}. */
const ROW_COLUMNS = `o.id, o.organization_id, g.name AS organization_name, o.conversation_id, o.operation_type,
  o.status, o.state_json->>'execution' AS execution, o.total_items, o.completed_count, o.failed_count,
  coalesce((o.state_json->>'abandoned_count')::int, 0) AS abandoned_count,
  ${IN_FLIGHT_COLUMN},
  o.state_json->>'paused_reason' AS paused_reason, o.state_json->>'paused_by' AS paused_by,
  o.state_json->>'retry_of' AS retry_of, o.created_at, o.updated_at,
  coalesce(pace.items, 0)::int AS pace_items,
  coalesce(extract(epoch FROM now() - pace.since), ${PACE_WINDOW_SECONDS})::float8 AS pace_seconds,
  last_failure.item_id AS last_failure_item, last_failure.reason AS last_failure_reason`;

/**
 * The pace of an active operation: the items its newest batches recorded within the window,
 * and since when they count — the window's start, or later if the operation was created or
 * resumed within it, or if the newest entries read do not reach back that far.
 */
const ROW_LATERALS = `LEFT JOIN LATERAL (
    SELECT sum((e.data->>'completed')::int + (e.data->>'failed')::int)
             FILTER (WHERE e.kind = 'batch_recorded' AND e.created_at > now() - interval '${PACE_WINDOW_SECONDS} seconds') AS items,
           greatest(now() - interval '${PACE_WINDOW_SECONDS} seconds',
                    CASE WHEN count(*) = ${PACE_EVENTS} THEN min(e.created_at) END,
                    max(e.created_at) FILTER (WHERE e.kind IN ('created', 'resumed'))) AS since
    FROM (SELECT ev.kind, ev.data, ev.created_at FROM operation_event ev
          WHERE ev.operation_id = o.id AND o.status = 'active'
          ORDER BY ev.id DESC LIMIT ${PACE_EVENTS}) e
  ) pace ON true
  LEFT JOIN LATERAL (
    SELECT f.item_id, f.reason
    FROM ${orderedFailures({ operation: 'o.id', limit: '1', descending: true, onlyIf: 'o.failed_count > 0' })} f
  ) last_failure ON true`;

export interface OperatorListPage {
  rows: (OperatorOperationRow & { position: number })[];
  /** Operations matching the filter, on every page. */
  total: number;
}

/**
 * A page of operations, newest first, with each row's position among all that match. `from`
 * pages by key: the operations created before (`older`) or after (`newer`) the named one, so a
 * page stays put while new operations arrive; without it, the newest page.
 *
 * One pass over the matching operations counts them (and those newer than the page's anchor,
 * which gives the positions) and keeps the page's few rows (a top-N sort, not a sort of all);
 * then only those rows are read in full.
 */
export async function listOperatorOperations(
  db: Queryable,
  filter: OperatorListFilter,
  page: { limit: number; from?: { operationId: string; direction: 'older' | 'newer' } },
): Promise<OperatorListPage> {
  const where = filterClause(filter, 4);
  const newer = page.from?.direction === 'newer';
  const rows = await db.query<
    Omit<OperatorOperationRow, 'id'> & {
      id: string | null;
      total: string | number;
      newer_than_anchor: string | number;
      from_anchor: string | number;
    }
  >(
    `/* operator view: operations page */
     WITH matching AS MATERIALIZED (
       SELECT o.id, o.created_at FROM assistant_operation o JOIN organization g ON g.id = o.organization_id
       WHERE ${where.sql}
     ), anchor AS (SELECT created_at, id FROM assistant_operation WHERE id = $2::uuid),
     counted AS (
       SELECT count(*) AS total,
              count(*) FILTER (WHERE (m.created_at, m.id) > (SELECT created_at, id FROM anchor)) AS newer_than_anchor,
              count(*) FILTER (WHERE (m.created_at, m.id) >= (SELECT created_at, id FROM anchor)) AS from_anchor
       FROM matching m
     ), page AS (
       SELECT m.id, m.created_at FROM matching m
       WHERE $2::uuid IS NULL
          OR ($3 AND (m.created_at, m.id) > (SELECT created_at, id FROM anchor))
          OR (NOT $3 AND (m.created_at, m.id) < (SELECT created_at, id FROM anchor))
       ORDER BY CASE WHEN $3 THEN m.created_at END, CASE WHEN $3 THEN m.id END,
                m.created_at DESC, m.id DESC
       LIMIT $1
     )
     SELECT ${ROW_COLUMNS}, c.total, c.newer_than_anchor, c.from_anchor
     -- One row even when the page is empty (past the end, or its anchor is gone): the counts.
     FROM counted c
     LEFT JOIN page p ON true
     LEFT JOIN assistant_operation o ON o.id = p.id
     LEFT JOIN organization g ON g.id = o.organization_id
     ${ROW_LATERALS}
     ORDER BY p.created_at DESC, p.id DESC`,
    [page.limit, page.from?.operationId ?? null, newer, ...where.params],
  );
  const total = Number(rows[0]?.total ?? 0);
  const found = rows.flatMap(({ id, total: _, newer_than_anchor: __, from_anchor: ___, ...row }) =>
    id === null ? [] : [{ ...row, id }],
  );
  // Where the page starts: after the anchor and everything newer (older: the anchor counts only
  // if it still matches), or as many rows before the anchor as it shows (newer).
  const first = !page.from
    ? 1
    : newer
      ? Number(rows[0]?.newer_than_anchor ?? 0) - found.length + 1
      : Number(rows[0]?.from_anchor ?? 0) + 1;
  return { rows: found.map((row, i) => ({ ...row, position: first + i })), total };
}

/** The operations with these ids, any organization, as rows of the view (the live updates). */
export async function operatorRowsByIds(db: Queryable, ids: readonly string[]): Promise<OperatorOperationRow[]> {
  if (ids.length === 0) {
    return [];
  }
  return db.query<OperatorOperationRow>(
    `/* operator view: live rows */
     SELECT ${ROW_COLUMNS} FROM assistant_operation o JOIN organization g ON g.id = o.organization_id ${ROW_LATERALS}
     WHERE o.id = ANY($1::uuid[])`,
    [ids],
  );
}

/** Operations matching the filter that were created after the named one (new since a page loaded). */
export async function countNewerOperations(
  db: Queryable,
  filter: OperatorListFilter,
  newestShown: string | null,
): Promise<number> {
  const where = filterClause(filter, 2);
  const rows = await db.query<{ n: number }>(
    `/* operator view: new operations */
     SELECT count(*)::int AS n FROM assistant_operation o JOIN organization g ON g.id = o.organization_id
     WHERE ${where.sql}
       AND ($1::uuid IS NULL OR (o.created_at, o.id) > (SELECT created_at, id FROM assistant_operation WHERE id = $1::uuid))`,
    [newestShown, ...where.params],
  );
  return rows[0]?.n ?? 0;
}

/** One operation with what its detail page shows, any organization. */
export async function getOperatorOperation(
  db: Queryable,
  operationId: string,
): Promise<OperatorOperationDetail | null> {
  const rows = await db.query<OperatorOperationDetail>(
    `/* operator view: operation */
     SELECT ${ROW_COLUMNS}, o.state_json->>'notes' AS notes,
       (o.state_json->>'batch_size')::int AS batch_size,
       (o.state_json->>'max_parallel_batches')::int AS max_parallel_batches,
       (o.state_json->>'max_failure_rate')::float8 AS max_failure_rate,
       jsonb_strip_nulls(jsonb_build_object('items_pruned_at', o.state_json->'items_pruned_at',
         'items_pruned_through', o.state_json->'items_pruned_through',
         'pruned_failures', o.state_json->'pruned_failures')) AS pruned
     FROM assistant_operation o JOIN organization g ON g.id = o.organization_id ${ROW_LATERALS}
     WHERE o.id = $1`,
    [operationId],
  );
  return rows[0] ?? null;
}

export interface FailureGroup {
  reason: string | null;
  count: number;
  /** The first item ids that failed with this reason, in item order. */
  examples: string[];
}

/** An operation's failures grouped by reason, most frequent first, a page of groups at a time. */
export async function failureGroups(
  db: Queryable,
  operationId: string,
  page: { limit: number; offset: number },
): Promise<{ groups: FailureGroup[]; totalGroups: number }> {
  const rows = await db.query<FailureGroup & { total_groups: number }>(
    `/* operator view: failure reasons */
     WITH grouped AS (
       SELECT reason, count(*)::int AS count, min(ordinal) AS first_ordinal
       FROM ${allFailures('$1')} failure
       GROUP BY reason
     ), page AS (
       SELECT g.*, count(*) OVER ()::int AS total_groups FROM grouped g
       ORDER BY g.count DESC, g.first_ordinal LIMIT $2 OFFSET $3
     )
     SELECT p.reason, p.count, p.total_groups, ex.examples
     FROM page p CROSS JOIN LATERAL (
       SELECT coalesce(array_agg(x.item_id ORDER BY x.ordinal), '{}') AS examples FROM (
         SELECT f.item_id, f.ordinal FROM ${allFailures('$1')} f
         WHERE f.ordinal >= p.first_ordinal AND f.reason = p.reason
         ORDER BY f.ordinal LIMIT ${GROUP_EXAMPLES}) x
     ) ex
     ORDER BY p.count DESC, p.first_ordinal`,
    [operationId, page.limit, page.offset],
  );
  if (rows.length === 0 && page.offset > 0) {
    // Past the last page: say how many groups there are all the same.
    const counted = await db.query<{ n: number }>(
      `/* operator view: failure reason count */
       SELECT count(*)::int AS n FROM (SELECT DISTINCT reason FROM ${allFailures('$1')} failure) d`,
      [operationId],
    );
    return { groups: [], totalGroups: Number(counted[0]?.n ?? 0) };
  }
  return {
    groups: rows.map(({ total_groups: _, ...group }) => group),
    totalGroups: rows[0]?.total_groups ?? 0,
  };
}

/** An operation's audit trail without the per-batch entries, newest first, older than `beforeId`. */
export async function auditTrailPage(
  db: Queryable,
  operationId: string,
  page: { limit: number; beforeId?: number },
): Promise<OperationEvent[]> {
  return db.query<OperationEvent>(
    `/* operator view: audit trail */
     SELECT id::int AS id, kind, actor, data, created_at FROM operation_event
     WHERE operation_id = $1 AND kind <> ALL($2::text[]) AND ($3::bigint IS NULL OR id < $3)
     ORDER BY id DESC LIMIT $4`,
    [operationId, BATCH_EVENT_KINDS, page.beforeId ?? null, page.limit],
  );
}

/** Audit-trail entries (without the per-batch ones) of these operations after `afterId`, oldest first. */
export async function auditTrailSince(
  db: Queryable,
  operationIds: readonly string[],
  afterId: number,
  limit: number,
): Promise<(OperationEvent & { operation_id: string })[]> {
  if (operationIds.length === 0) {
    return [];
  }
  return db.query<OperationEvent & { operation_id: string }>(
    `/* operator view: new audit entries */
     SELECT id::int AS id, operation_id, kind, actor, data, created_at FROM operation_event
     WHERE operation_id = ANY($1::uuid[]) AND id > $2 AND kind <> ALL($3::text[])
     ORDER BY id LIMIT $4`,
    [operationIds, afterId, BATCH_EVENT_KINDS, limit],
  );
}

export interface OperatorItem {
  item_id: string;
  ordinal: number;
  status: string;
  attempts: number;
  reason: string | null;
  updated_at: Date | null;
}

/**
 * One item of an operation by its id (the detail page of a search by item id). A pending item
 * that a lease holds shows as leased, its attempts counting that lease.
 */
export async function getOperatorItem(
  db: Queryable,
  operationId: string,
  itemId: string,
): Promise<OperatorItem | null> {
  const rows = await db.query<OperatorItem>(
    `/* operator view: item */
     SELECT i.item_id, i.ordinal, CASE WHEN l.owner IS NULL THEN i.status ELSE 'leased' END AS status,
            i.attempts + (l.owner IS NOT NULL)::int AS attempts, i.reason, i.updated_at
     FROM assistant_operation_item i
     LEFT JOIN assistant_operation_lease l ON l.operation_id = i.operation_id AND l.remaining > 0
       AND i.status = 'pending' AND i.ordinal = ANY(l.ordinals)
     WHERE i.operation_id = $1 AND i.item_id = $2
     UNION ALL
     SELECT item_id, ordinal, 'failed', attempts, reason, updated_at FROM assistant_operation_kept_failure
     WHERE operation_id = $1 AND item_id = $2`,
    [operationId, itemId],
  );
  return rows[0] ?? null;
}

/** Items failed per operation type, in operations updated within the last `days` (Bull Board). */
export async function failedItemsByType(
  db: Queryable,
  days: number,
): Promise<Map<string, { items: number; operations: number }>> {
  const rows = await db.query<{ operation_type: string; items: number; operations: number }>(
    `/* operator view: failed items per operation type */
     SELECT operation_type, sum(failed_count)::int AS items, count(*)::int AS operations
     FROM assistant_operation
     WHERE failed_count > 0 AND updated_at > now() - make_interval(days => $1)
     GROUP BY operation_type`,
    [days],
  );
  return new Map(rows.map((r) => [r.operation_type, { items: r.items, operations: r.operations }]));
}
